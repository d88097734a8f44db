//! Stage 5 against hostile input. Every case runs `s5_gpt` in-process and must end in one of two ways: an
//! error of one line, or, when the input happens to be harmless, a normal run. No case may panic, run
//! for long, or leave a damaged or half-written checkpoint behind.
//!
//! | test | hostile input |
//! |---|---|
//! | [`damaged_checkpoints_are_refused_cleanly`] | a trained checkpoint, damaged hundreds of ways: `config.json` with extreme values, wrong types, missing and extra fields, broken text; tensor files with wrong header lengths, shapes, types and offsets, cut short or lengthened, holding NaN; each tensor file once with its stale checksum and once with the checksum rewritten, so that the checks behind the checksum are reached |
//! | [`checkpoint_files_that_are_not_files_are_refused`] | a checkpoint whose files are folders or endless devices |
//! | [`odd_corpora_are_refused_cleanly`] | empty, one character, binary, not UTF-8, a folder, a device, shorter than one window |
//! | [`hostile_prompts_and_flags_are_refused_cleanly`] | prompts outside the vocabulary, and every number at, past and far past its limit |
//!
//! The damage is drawn from a fixed seed, so a failing case repeats; a failure lists every faulty case by
//! name. The runs use a small corpus and a tiny model, so that the whole file takes seconds.

mod common;

use std::collections::BTreeMap;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::Duration;

use attention_from_scratch::s5_gpt::app::args::Cli;
use attention_from_scratch::s5_gpt::app::checkpoint::{CONFIG_FILE, MODEL_FILE, OPTIMIZER_FILE};
use attention_from_scratch::s5_gpt::app::files::default_data_path;
use attention_from_scratch::s5_gpt::app::files::sha256_hex;
use common::Scratch;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------------
// Running a case.
// ---------------------------------------------------------------------------------------------------

/// How a run of `s5_gpt` ended.
#[derive(Clone, Debug, PartialEq)]
enum Ending {
    /// It ran to the end: the input was harmless.
    Done,
    /// It returned this one-line error.
    Failed(String),
    /// clap refused the command line before anything ran (a word where a number goes).
    Refused,
}

/// Far longer than any case takes; a run still going then is taken to hang.
const DEADLINE: Duration = Duration::from_secs(20);

/// Runs `s5_gpt ARGS…` in-process on a thread of its own and says how it ended. A panic, a run past the
/// deadline, or an error message that is empty or longer than one line comes back as `Err(fault)`.
fn run(args: &[String]) -> Result<Ending, String> {
    let argv: Vec<String> = std::iter::once("s5_gpt".to_string())
        .chain(args.iter().cloned())
        .collect();
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let ending = panic::catch_unwind(AssertUnwindSafe(|| {
            let Ok(cli) = Cli::try_parse_args(argv) else {
                return Ending::Refused;
            };
            match cli.run(&mut std::io::sink(), &AtomicBool::new(false)) {
                Ok(_) => Ending::Done,
                Err(e) => Ending::Failed(e.to_string()),
            }
        }));
        let _ = sender.send(ending);
    });
    match receiver.recv_timeout(DEADLINE) {
        Ok(Ok(Ending::Failed(msg))) if msg.is_empty() || msg.contains('\n') => {
            Err(format!("an error that is not one line: {msg:?}"))
        }
        Ok(Ok(ending)) => Ok(ending),
        Ok(Err(payload)) => {
            let why = (payload.downcast_ref::<String>().map(String::as_str))
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("?");
            Err(format!("panicked: {why}"))
        }
        Err(_) => Err(format!("still running after {DEADLINE:?}")),
    }
}

/// What a case may end in.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// An error whose message contains this.
    Fails(&'static str),
    /// A normal run.
    Runs,
    /// An error from clap, or from the tool.
    Rejected,
    /// Anything but a fault: an error or a normal run.
    Survives,
}

/// The faults found so far, each naming its case; [`Faults::none`] fails the test with all of them.
#[derive(Default)]
struct Faults(Vec<String>);

impl Faults {
    /// Runs `args` as case `case`; the ending, or `None` after recording a fault.
    fn run(&mut self, case: &str, args: &[String], expect: Expect) -> Option<Ending> {
        let ending = match run(args) {
            Ok(ending) => ending,
            Err(fault) => return self.add(case, args, fault),
        };
        let fits = match (expect, &ending) {
            (Expect::Fails(part), Ending::Failed(msg)) => msg.contains(part),
            (Expect::Runs, Ending::Done) => true,
            (Expect::Rejected, Ending::Failed(_) | Ending::Refused) => true,
            (Expect::Survives, _) => true,
            _ => false,
        };
        if !fits {
            return self.add(case, args, format!("expected {expect:?}, got {ending:?}"));
        }
        Some(ending)
    }

    fn add(&mut self, case: &str, args: &[String], fault: String) -> Option<Ending> {
        self.0
            .push(format!("{case}: s5_gpt {}: {fault}", args.join(" ")));
        None
    }

    fn none(self, cases: usize) {
        let Faults(faults) = self;
        assert!(
            faults.is_empty(),
            "{} faults in {cases} cases:\n{}",
            faults.len(),
            faults.join("\n")
        );
    }
}

/// Owned arguments from string slices.
fn args(items: &[&str]) -> Vec<String> {
    items.iter().map(ToString::to_string).collect()
}

// ---------------------------------------------------------------------------------------------------
// A small corpus and a tiny checkpoint trained on it.
// ---------------------------------------------------------------------------------------------------

/// A fresh folder for one test of this file.
fn scratch(name: &str) -> Scratch {
    common::scratch("s5_hostile", name)
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// The tiny model every run here trains: 8-wide, one block, windows of 8, batches of 2.
const TINY: [&str; 8] = [
    "--embedding-size",
    "8",
    "--blocks",
    "1",
    "--context-size",
    "8",
    "--batch-size",
    "2",
];

/// Steps in the tiny checkpoint; resuming it trains two more.
const TRAINED: usize = 5;

/// A prompt whose characters are all in the small corpus.
const PROMPT: &str = "First";

/// A scratch folder holding `corpus.txt`, the first 3,000 characters of Tiny Shakespeare (336 batches
/// an epoch for the tiny model), and `good/`, a checkpoint of the tiny model after [`TRAINED`] steps.
struct Fixture {
    dir: Scratch,
    corpus: String,
    good: PathBuf,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = scratch(name);
        let text = std::fs::read_to_string(default_data_path()).unwrap();
        let corpus = dir.join("corpus.txt");
        std::fs::write(&corpus, &text[..3000]).unwrap();
        let corpus = path(&corpus);
        let good = dir.join("good");
        let (save, steps) = (path(&good), TRAINED.to_string());
        let train = [
            &["train", "--data", &corpus, "--save", &save][..],
            &TINY,
            &["--max-steps", &steps, "--quiet"],
        ];
        let ending = run(&args(&train.concat()));
        assert_eq!(ending, Ok(Ending::Done), "the tiny checkpoint trains");
        Fixture { dir, corpus, good }
    }

    /// `eval`, `generate` and `train --resume` of the checkpoint in `dir`, each kept short.
    fn commands(&self, dir: &Path) -> [Vec<String>; 3] {
        let (dir, corpus) = (path(dir), self.corpus.as_str());
        let steps = (TRAINED + 2).to_string();
        [
            args(&["eval", "--checkpoint", &dir, "--data", corpus, "--quiet"]),
            args(&[
                "generate",
                "--checkpoint",
                &dir,
                "--prompt",
                PROMPT,
                "--sample-len",
                "20",
            ]),
            args(&[
                "train",
                "--resume",
                &dir,
                "--data",
                corpus,
                "--max-steps",
                &steps,
                "--quiet",
            ]),
        ]
    }
}

/// The files of a checkpoint folder, by name.
type Files = BTreeMap<String, Vec<u8>>;

fn read_files(dir: &Path) -> Files {
    let mut files = Files::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            let name = entry.file_name().into_string().unwrap();
            files.insert(name, std::fs::read(entry.path()).unwrap());
        }
    }
    files
}

/// Replaces the contents of `dir` with `files`.
fn write_files(dir: &Path, files: &Files) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

/// Runs eval, generate and `train --resume` on the checkpoint in `dir` and checks what they leave: eval
/// and generate change nothing, a failed resume leaves every file as it was, a resume that succeeds
/// leaves a checkpoint that loads, and no `*.tmp` file remains. A command that reads one of the `broken`
/// files must fail; eval and generate read all but the optimiser's.
fn try_checkpoint(faults: &mut Faults, fixture: &Fixture, case: &str, dir: &Path, broken: &[&str]) {
    let before = read_files(dir);
    for command in fixture.commands(dir) {
        let reads_broken = broken
            .iter()
            .any(|file| command[0] == "train" || *file != OPTIMIZER_FILE);
        let expect = if reads_broken {
            Expect::Fails("")
        } else {
            Expect::Survives
        };
        let ending = faults.run(case, &command, expect);
        let after = read_files(dir);
        let resumed = command[0] == "train" && ending == Some(Ending::Done);
        if after != before && !resumed {
            let changed: Vec<&String> = (before.keys().chain(after.keys()))
                .filter(|name| before.get(*name) != after.get(*name))
                .collect();
            faults.add(case, &command, format!("it changed {changed:?}"));
        }
        if after.keys().any(|name| name.ends_with(".tmp")) {
            faults.add(case, &command, "it left a .tmp file".into());
        }
        if resumed {
            let [eval, ..] = fixture.commands(dir);
            faults.run(&format!("{case}, once resumed"), &eval, Expect::Runs);
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Damage, drawn from a fixed seed.
// ---------------------------------------------------------------------------------------------------

/// SplitMix64: a tiny generator, enough to pick damage repeatably.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// One way to damage a checkpoint: a name for the report, and the change to its files.
struct Damage {
    name: String,
    apply: Box<dyn Fn(&mut Files)>,
}

impl Damage {
    fn new(name: impl Into<String>, apply: impl Fn(&mut Files) + 'static) -> Damage {
        Damage {
            name: name.into(),
            apply: Box::new(apply),
        }
    }
}

/// Every field of `config.json`.
const CONFIG_FIELDS: [&str; 15] = [
    "format",
    "vocab",
    "vocab_size",
    "epochs",
    "batch_size",
    "context_size",
    "embedding_size",
    "blocks",
    "lr",
    "seed",
    "warmup_steps",
    "max_grad_norm",
    "step",
    "total_steps",
    "sha256",
];

/// Values no field of `config.json` expects, or expects only within limits: zero, one, the limits and
/// just past them, negatives, the largest integers and floats, NaN and infinity as strings, and every
/// other JSON type.
fn extreme_values() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(2),
        json!(64),
        json!(65),
        json!(1024),
        json!(1025),
        json!(-1),
        json!(i64::MIN),
        json!(u32::MAX),
        json!(u64::MAX),
        json!(0.5),
        json!(-0.0),
        json!(5e-324),
        json!(1e308),
        json!(-1e308),
        json!("NaN"),
        json!("inf"),
        json!("5"),
        json!(""),
        json!("a\nb"),
        json!("x".repeat(10_000)),
        json!(null),
        json!(true),
        json!([]),
        json!([1, 2]),
        json!({}),
        json!({ "model.safetensors": 1 }),
    ]
}

/// Edits `config.json` as JSON; a config that another damage has already broken is left as it is.
fn edit_config(files: &mut Files, edit: impl Fn(&mut Value)) {
    let config = files.get(CONFIG_FILE).map(|b| serde_json::from_slice(b));
    let Some(Ok(mut config @ Value::Object(_))) = config else {
        return;
    };
    edit(&mut config);
    let text = serde_json::to_string_pretty(&config).unwrap();
    files.insert(CONFIG_FILE.into(), text.into_bytes());
}

/// Damage to `config.json`: each field set to each extreme value, each field missing, junk added, the
/// vocabulary scrambled, and the text itself broken.
fn config_damage() -> Vec<Damage> {
    let mut all = vec![];
    for field in CONFIG_FIELDS {
        for value in extreme_values() {
            let name = format!("config.json {field} = {}", short(&value));
            all.push(Damage::new(name, move |files| {
                edit_config(files, |c| c[field] = value.clone())
            }));
        }
        all.push(Damage::new(
            format!("config.json without {field}"),
            move |files| edit_config(files, |c| drop(c.as_object_mut().unwrap().remove(field))),
        ));
    }
    let edit =
        |name: &str, edit: fn(&mut Value)| Damage::new(name, move |files| edit_config(files, edit));
    fn vocab(c: &Value) -> Vec<char> {
        c["vocab"].as_str().unwrap_or_default().chars().collect()
    }
    all.extend([
        edit("config.json with a junk field", |c| {
            c["junk"] = json!([1, { "a": null }])
        }),
        edit("config.json with a junk checksum", |c| {
            if let Some(sums) = c["sha256"].as_object_mut() {
                sums.insert("junk.safetensors".into(), json!("00"));
            }
        }),
        edit("config.json with checksums swapped", |c| {
            if let Some(sums) = c["sha256"].as_object_mut() {
                let optimizer = sums.get(OPTIMIZER_FILE).cloned().unwrap_or_default();
                let model = sums.insert(MODEL_FILE.into(), optimizer);
                sums.insert(OPTIMIZER_FILE.into(), model.unwrap_or_default());
            }
        }),
        edit("config.json with upper-case checksums", |c| {
            for sum in c["sha256"]
                .as_object_mut()
                .into_iter()
                .flat_map(|s| s.values_mut())
            {
                *sum = json!(sum.as_str().unwrap_or_default().to_uppercase());
            }
        }),
        edit("config.json with the vocabulary reversed", |c| {
            let v: String = vocab(c).into_iter().rev().collect();
            c["vocab"] = json!(v);
        }),
        edit("config.json with a character doubled", |c| {
            let mut v = vocab(c);
            if v.len() > 1 {
                v[1] = v[0];
            }
            c["vocab"] = json!(v.into_iter().collect::<String>());
        }),
        edit("config.json with a character not in the text", |c| {
            let mut v = vocab(c);
            if let Some(first) = v.first_mut() {
                *first = 'é';
            }
            c["vocab"] = json!(v.into_iter().collect::<String>());
        }),
        edit("config.json with a character more", |c| {
            c["vocab"] = json!(format!("{}€", c["vocab"].as_str().unwrap_or_default()));
            c["vocab_size"] = json!(c["vocab_size"].as_u64().unwrap_or(0) + 1);
        }),
        edit("config.json with a character less", |c| {
            let v = vocab(c);
            c["vocab"] = json!(v.iter().skip(1).collect::<String>());
            c["vocab_size"] = json!(v.len().saturating_sub(1));
        }),
        edit("config.json with one step more than the run", |c| {
            c["step"] = json!(c["total_steps"].as_u64().unwrap_or(0) + 1)
        }),
        edit("config.json at the last step of the run", |c| {
            c["step"] = c["total_steps"].clone()
        }),
        edit("config.json with every size at its limit", |c| {
            for (field, max) in [
                ("epochs", 1000),
                ("batch_size", 1024),
                ("context_size", 1024),
                ("embedding_size", 1024),
                ("blocks", 64),
            ] {
                c[field] = json!(max);
            }
        }),
        edit("config.json with the model at its limit", |c| {
            c["embedding_size"] = json!(1024);
            c["blocks"] = json!(64);
        }),
        edit("config.json with a vocabulary of 200,000 characters", |c| {
            let v: String = (0x4E00u32..0x4E00 + 200_000)
                .filter_map(char::from_u32)
                .collect();
            c["vocab_size"] = json!(v.chars().count());
            c["vocab"] = json!(v);
            c["embedding_size"] = json!(1024);
        }),
        edit("config.json as an array", |c| *c = json!([c.clone()])),
        edit("config.json as null", |c| *c = json!(null)),
    ]);
    let text = |name: &str, make: fn(&[u8]) -> Vec<u8>| {
        Damage::new(name, move |files| {
            if let Some(bytes) = files.get_mut(CONFIG_FILE) {
                *bytes = make(bytes);
            }
        })
    };
    all.extend([
        text("config.json empty", |_| vec![]),
        text("config.json cut in half", |b| b[..b.len() / 2].to_vec()),
        text("config.json without its last two bytes", |b| {
            b[..b.len().saturating_sub(2)].to_vec()
        }),
        text("config.json with junk after it", |b| [b, b"}{"].concat()),
        text("config.json with a duplicate step", |b| {
            [b"{\"step\": 1,", b.get(1..).unwrap_or_default()].concat()
        }),
        text("config.json not UTF-8", |b| {
            [
                b"{\"format\": \"\xff\xfe\",",
                b.get(1..).unwrap_or_default(),
            ]
            .concat()
        }),
        text("config.json with a zero byte", |b| {
            let (head, tail) = b.split_at(b.len().min(10));
            [head, b"\0", tail].concat()
        }),
        text("config.json nested 100,000 deep", |_| {
            ["[".repeat(100_000), "]".repeat(100_000)]
                .concat()
                .into_bytes()
        }),
        text("config.json with 10 MB of spaces", |b| {
            [b" ".repeat(10_000_000).as_slice(), b].concat()
        }),
    ]);
    all.push(Damage::new("config.json missing", |files| {
        files.remove(CONFIG_FILE);
    }));
    all
}

/// A value as the report names it, at most 20 characters long.
fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(20) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// A safetensors file taken apart: the JSON header, and the data after it.
fn split(bytes: &[u8]) -> (Header, Vec<u8>) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = serde_json::from_slice::<Value>(&bytes[8..8 + n]).unwrap();
    let Value::Object(header) = header else {
        unreachable!("a safetensors header is an object")
    };
    (header, bytes[8 + n..].to_vec())
}

/// The file of `header` (any JSON, or raw bytes) and `data`, with the header's length in front.
fn join(header: &[u8], data: &[u8]) -> Vec<u8> {
    let n = header.len() as u64;
    [&n.to_le_bytes()[..], header, data].concat()
}

fn join_json(header: &Value, data: &[u8]) -> Vec<u8> {
    join(&serde_json::to_vec(header).unwrap(), data)
}

/// A safetensors header: tensor name (or `__metadata__`) to its entry.
type Header = serde_json::Map<String, Value>;

/// The names of the tensors in a file's header, in offset order.
fn tensor_names(header: &Header) -> Vec<String> {
    let mut names: Vec<(u64, String)> = header
        .iter()
        .filter(|(name, _)| *name != "__metadata__")
        .map(|(name, info)| (info["data_offsets"][0].as_u64().unwrap(), name.clone()))
        .collect();
    names.sort();
    names.into_iter().map(|(_, name)| name).collect()
}

/// The tensors a damage to a header names: the first and last by offset, and two others drawn at random.
#[derive(Clone)]
struct Picked {
    first: String,
    last: String,
    some: String,
    other: String,
}

impl Picked {
    fn draw(names: &[String], rng: &mut SplitMix64) -> Picked {
        let some = rng.pick(names).clone();
        let others: Vec<String> = names.iter().filter(|n| **n != some).cloned().collect();
        Picked {
            first: names[0].clone(),
            last: names[names.len() - 1].clone(),
            other: rng.pick(&others).clone(),
            some,
        }
    }
}

/// Every float of `data` set to `x`.
fn fill_floats(data: &mut [u8], x: f32) {
    for float in data.chunks_exact_mut(4) {
        float.copy_from_slice(&x.to_le_bytes());
    }
}

/// Damage to the tensor file `file`, each drawn with `rng`: its header's length, its header's entries
/// (shape, dtype, data_offsets, names, metadata), the header as a whole, the file's length, and the
/// numbers in it.
fn tensor_damage(file: &'static str, pristine: &[u8], rng: &mut SplitMix64) -> Vec<Damage> {
    let (header, data) = split(pristine);
    let names = tensor_names(&header);
    let header_len = pristine.len() - data.len() - 8;
    let mut all = vec![];

    // The first 8 bytes: the header's length, little-endian.
    let lengths = [
        0,
        1,
        7,
        header_len as u64 - 1,
        header_len as u64 + 1,
        pristine.len() as u64 - 8,
        pristine.len() as u64,
        99_999_999,
        100_000_001,
        u32::MAX.into(),
        1 << 63,
        u64::MAX,
        rng.next(),
    ];
    for n in lengths {
        all.push(Damage::new(
            format!("{file} header length {n}"),
            move |files| {
                if let Some(length) = files.get_mut(file).and_then(|b| b.get_mut(..8)) {
                    length.copy_from_slice(&n.to_le_bytes());
                }
            },
        ));
    }

    // One entry of the header, in the JSON; `edit` is also given the length of the data.
    type Edit = fn(&mut Value, usize);
    let entry = |what: &str, name: String, edit: Edit| {
        let (header, data) = (header.clone(), data.clone());
        Damage::new(format!("{file} {name}: {what}"), move |files| {
            let mut header = Value::Object(header.clone());
            edit(&mut header[&name], data.len());
            files.insert(file.into(), join_json(&header, &data));
        })
    };
    let edits: [(&str, Edit); 26] = [
        ("shape []", |t, _| t["shape"] = json!([])),
        ("shape [0]", |t, _| t["shape"] = json!([0])),
        ("shape reversed", |t, _| {
            let mut shape = t["shape"].as_array().unwrap().clone();
            shape.reverse();
            t["shape"] = json!(shape);
        }),
        ("shape flattened", |t, _| {
            let dims = t["shape"].as_array().unwrap().iter();
            let n: u64 = dims.map(|d| d.as_u64().unwrap()).product();
            t["shape"] = json!([n]);
        }),
        ("shape with a dimension more", |t, _| {
            t["shape"].as_array_mut().unwrap().push(json!(1))
        }),
        ("shape [2^32, 2^32], which overflows", |t, _| {
            t["shape"] = json!([1u64 << 32, 1u64 << 32])
        }),
        ("shape [u64::MAX, 2]", |t, _| {
            t["shape"] = json!([u64::MAX, 2])
        }),
        ("shape [-1]", |t, _| t["shape"] = json!([-1])),
        ("shape \"8\"", |t, _| t["shape"] = json!("8")),
        ("dtype F64", |t, _| t["dtype"] = json!("F64")),
        ("dtype F16", |t, _| t["dtype"] = json!("F16")),
        ("dtype I32", |t, _| t["dtype"] = json!("I32")),
        ("dtype U8", |t, _| t["dtype"] = json!("U8")),
        ("dtype BOOL", |t, _| t["dtype"] = json!("BOOL")),
        ("dtype F4", |t, _| t["dtype"] = json!("F4")),
        ("dtype NOPE", |t, _| t["dtype"] = json!("NOPE")),
        ("dtype null", |t, _| t["dtype"] = json!(null)),
        ("data_offsets [0, 0]", |t, _| {
            t["data_offsets"] = json!([0, 0])
        }),
        ("data_offsets reversed", |t, _| {
            let mut offsets = t["data_offsets"].as_array().unwrap().clone();
            offsets.reverse();
            t["data_offsets"] = json!(offsets);
        }),
        ("data_offsets one float longer", |t, _| {
            let end = t["data_offsets"][1].as_u64().unwrap();
            t["data_offsets"][1] = json!(end + 4);
        }),
        ("data_offsets past the end", |t, len| {
            t["data_offsets"] = json!([len, len + 4])
        }),
        ("data_offsets [u64::MAX, u64::MAX]", |t, _| {
            t["data_offsets"] = json!([u64::MAX, u64::MAX])
        }),
        ("data_offsets [\"0\", \"4\"]", |t, _| {
            t["data_offsets"] = json!(["0", "4"])
        }),
        ("data_offsets with one number", |t, _| {
            t["data_offsets"] = json!([0])
        }),
        ("entry null", |t, _| *t = json!(null)),
        ("entry without data_offsets", |t, _| {
            t.as_object_mut().unwrap().remove("data_offsets");
        }),
    ];
    for (what, edit) in edits {
        all.push(entry(what, rng.pick(&names).clone(), edit));
    }

    // The header's tensors and metadata, and the data they describe.
    type Rewrite = fn(&mut Header, &mut Vec<u8>, &Picked);
    let picked = Picked::draw(&names, rng);
    let rewrite = |what: &str, rewrite: Rewrite| {
        let (header, data, picked) = (header.clone(), data.clone(), picked.clone());
        Damage::new(format!("{file} {what}"), move |files| {
            let (mut header, mut data) = (header.clone(), data.clone());
            rewrite(&mut header, &mut data, &picked);
            files.insert(file.into(), join_json(&Value::Object(header), &data));
        })
    };
    let rewrites: [(&str, Rewrite); 15] = [
        ("without its last tensor", |h, d, p| {
            let offsets = h.remove(&p.last).unwrap()["data_offsets"].clone();
            let size = offsets[1].as_u64().unwrap() - offsets[0].as_u64().unwrap();
            d.truncate(d.len() - size as usize);
        }),
        ("with a tensor more", |h, d, _| {
            let offsets = [d.len(), d.len() + 4];
            let junk = json!({ "dtype": "F32", "shape": [1], "data_offsets": offsets });
            h.insert("junk".into(), junk);
            d.extend(1f32.to_le_bytes());
        }),
        ("with a tensor renamed", |h, _, p| {
            let info = h.remove(&p.some).unwrap();
            h.insert(format!("{}.renamed", p.some), info);
        }),
        (
            "with its first tensor renamed across a line break and cut loose",
            |h, _, p| {
                let mut info = h.remove(&p.first).unwrap();
                info["data_offsets"] = json!([4, 8]);
                h.insert(format!("{}\nsecond line", p.first), info);
            },
        ),
        ("with two tensors swapped", |h, _, p| {
            let some = h.remove(&p.some).unwrap();
            let other = h.insert(p.other.clone(), some).unwrap();
            h.insert(p.some.clone(), other);
        }),
        ("without metadata", |h, _, _| drop(h.remove("__metadata__"))),
        ("from step 0", |h, _, _| {
            h["__metadata__"]["step"] = json!("0")
        }),
        ("with the step a number", |h, _, _| {
            h["__metadata__"]["step"] = json!(TRAINED)
        }),
        ("with step 99999999999999999999999", |h, _, _| {
            h["__metadata__"]["step"] = json!("99999999999999999999999")
        }),
        ("with more metadata", |h, _, _| {
            h["__metadata__"]["junk"] = json!("x\ny")
        }),
        ("with every float NaN", |_, d, _| fill_floats(d, f32::NAN)),
        ("with every float +inf", |_, d, _| {
            fill_floats(d, f32::INFINITY)
        }),
        ("with every float 3e38", |_, d, _| fill_floats(d, 3e38)),
        ("with data of bytes 0xff", |_, d, _| d.fill(0xff)),
        ("with data of zeros", |_, d, _| d.fill(0)),
    ];
    for (what, edit) in rewrites {
        all.push(rewrite(what, edit));
    }

    // The header replaced as a whole.
    let raw = |what: &str, header: Vec<u8>| {
        let data = data.clone();
        Damage::new(format!("{file} header {what}"), move |files| {
            files.insert(file.into(), join(&header, &data));
        })
    };
    let padded = [serde_json::to_vec(&header).unwrap(), vec![b' '; 1000]].concat();
    all.extend([
        raw("[]", b"[]".to_vec()),
        raw("null", b"null".to_vec()),
        raw("{}", b"{}".to_vec()),
        raw("cut short", b"{\"a\":".to_vec()),
        raw("not UTF-8", b"{\"\xff\":1}".to_vec()),
        raw("padded with spaces", padded),
        raw("nested 100,000 deep", "[".repeat(100_000).into_bytes()),
    ]);

    // The file cut short or lengthened.
    let cut = pristine.len() - data.len();
    let cuts = [
        0,
        4,
        8,
        9,
        cut - 1,
        cut,
        cut + 1,
        pristine.len() - 1,
        pristine.len() / 2,
        rng.below(pristine.len()),
    ];
    for at in cuts {
        all.push(Damage::new(
            format!("{file} cut to {at} bytes"),
            move |files| {
                files.entry(file.into()).and_modify(|b| b.truncate(at));
            },
        ));
    }
    for more in [1, 3, 4, 4096] {
        all.push(Damage::new(
            format!("{file} with {more} bytes more"),
            move |files| {
                files
                    .entry(file.into())
                    .and_modify(|b| b.extend(vec![0x42; more]));
            },
        ));
    }
    for _ in 0..4 {
        let at = rng.below(pristine.len());
        let bit = 1u8 << rng.below(8);
        all.push(Damage::new(
            format!("{file} with bit {bit:#x} of byte {at} flipped"),
            move |files| {
                if let Some(byte) = files.get_mut(file).and_then(|b| b.get_mut(at)) {
                    *byte ^= bit;
                }
            },
        ));
    }
    all.push(Damage::new(format!("{file} missing"), move |files| {
        files.remove(file);
    }));
    all
}

/// Writes the sha256 of each tensor file into `config.json`, as a save would, so that the damage to them
/// reaches the checks behind the checksum. A config that is not a JSON object is left as it is.
fn rewrite_checksums(files: &mut Files) {
    let mut sums = serde_json::Map::new();
    for file in [MODEL_FILE, OPTIMIZER_FILE] {
        if let Some(bytes) = files.get(file) {
            sums.insert(file.into(), json!(sha256_hex(bytes)));
        }
    }
    edit_config(files, |c| c["sha256"] = Value::Object(sums.clone()));
}

// ---------------------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------------------

#[test]
fn damaged_checkpoints_are_refused_cleanly() {
    let fixture = Fixture::new("checkpoints");
    let pristine = read_files(&fixture.good);
    let mut rng = SplitMix64(0x5EED_CAFE);

    let configs = config_damage();
    let mut tensors = tensor_damage(MODEL_FILE, &pristine[MODEL_FILE], &mut rng);
    tensors.extend(tensor_damage(
        OPTIMIZER_FILE,
        &pristine[OPTIMIZER_FILE],
        &mut rng,
    ));
    tensors.extend(mixed_saves(&fixture));

    // Each damage alone; each damage to a tensor file also with its checksum rewritten; then random
    // pairs and triples of them, with checksums rewritten.
    let mut cases: Vec<(String, Vec<&Damage>, bool)> = vec![];
    for d in configs.iter().chain(&tensors) {
        cases.push((d.name.clone(), vec![d], false));
    }
    for d in &tensors {
        cases.push((format!("{}, checksum rewritten", d.name), vec![d], true));
    }
    let everything: Vec<&Damage> = configs.iter().chain(&tensors).collect();
    for _ in 0..60 {
        let picked: Vec<&Damage> = (0..2 + rng.below(2))
            .map(|_| *rng.pick(&everything))
            .collect();
        let names: Vec<&str> = picked.iter().map(|d| d.name.as_str()).collect();
        cases.push((
            format!("{}, checksums rewritten", names.join(" + ")),
            picked,
            true,
        ));
    }

    let mut faults = Faults::default();
    let dir = fixture.dir.join("case");
    for (name, damage, rewrite) in &cases {
        let mut files = pristine.clone();
        for d in damage {
            (d.apply)(&mut files);
        }
        if *rewrite {
            rewrite_checksums(&mut files);
        }
        // A changed tensor file whose checksum is stale is always caught.
        let stale: Vec<&str> = [MODEL_FILE, OPTIMIZER_FILE]
            .into_iter()
            .filter(|f| !rewrite && files.get(*f) != pristine.get(*f))
            .collect();
        write_files(&dir, &files);
        try_checkpoint(&mut faults, &fixture, name, &dir, &stale);
    }
    eprintln!("{} damaged checkpoints, 3 commands each", cases.len());
    faults.none(cases.len());
}

/// Files from two saves of one run mixed in one folder: each file of a save after step 3 among the
/// others of step 5; and the two tensor files swapped.
fn mixed_saves(fixture: &Fixture) -> Vec<Damage> {
    let earlier = fixture.dir.join("earlier");
    let save = path(&earlier);
    let train = [
        &["train", "--data", &fixture.corpus, "--save", &save][..],
        &TINY,
        &["--max-steps", "3", "--quiet"],
    ];
    assert_eq!(run(&args(&train.concat())), Ok(Ending::Done));
    let earlier = read_files(&earlier);
    let mut all = vec![];
    for file in [MODEL_FILE, OPTIMIZER_FILE, CONFIG_FILE] {
        let bytes = earlier[file].clone();
        all.push(Damage::new(format!("{file} from step 3"), move |files| {
            files.insert(file.into(), bytes.clone());
        }));
    }
    all.push(Damage::new("the two tensor files swapped", |files| {
        let model = files.get(MODEL_FILE).cloned();
        if let (Some(model), Some(optimizer)) = (model, files.get(OPTIMIZER_FILE).cloned()) {
            files.insert(MODEL_FILE.into(), optimizer);
            files.insert(OPTIMIZER_FILE.into(), model);
        }
    }));
    all
}

#[test]
fn checkpoint_files_that_are_not_files_are_refused() {
    let fixture = Fixture::new("not_files");
    let pristine = read_files(&fixture.good);
    let mut faults = Faults::default();
    let mut cases = 0;
    for file in [MODEL_FILE, OPTIMIZER_FILE, CONFIG_FILE] {
        let dir = fixture.dir.join(format!("folder_{file}"));
        write_files(&dir, &pristine);
        std::fs::remove_file(dir.join(file)).unwrap();
        std::fs::create_dir(dir.join(file)).unwrap();
        let case = format!("{file} is a folder");
        try_checkpoint(&mut faults, &fixture, &case, &dir, &[file]);
        cases += 1;

        // An endless file: reading it whole would never end.
        #[cfg(unix)]
        {
            let dir = fixture.dir.join(format!("device_{file}"));
            write_files(&dir, &pristine);
            std::fs::remove_file(dir.join(file)).unwrap();
            std::os::unix::fs::symlink("/dev/zero", dir.join(file)).unwrap();
            let case = format!("{file} is /dev/zero");
            try_checkpoint(&mut faults, &fixture, &case, &dir, &[file]);
            cases += 1;
        }
    }
    for command in fixture.commands(&fixture.dir.join("nowhere")) {
        faults.run("no checkpoint folder", &command, Expect::Fails("not found"));
        cases += 1;
    }
    let not_a_folder = fixture.dir.join("corpus.txt");
    for command in fixture.commands(&not_a_folder) {
        faults.run(
            "a file as the checkpoint folder",
            &command,
            Expect::Fails(""),
        );
        cases += 1;
    }
    faults.none(cases);
}

#[test]
fn odd_corpora_are_refused_cleanly() {
    let fixture = Fixture::new("corpora");
    let text = |bytes: &[u8]| Some(bytes.to_vec());
    let binary: Vec<u8> = (0..=255).cycle().take(5000).collect();
    let one_letter = "a".repeat(3000);
    let corpora: [(&str, Option<Vec<u8>>, Expect); 14] = [
        ("an empty file", text(b""), Expect::Fails("too short")),
        ("one character", text(b"a"), Expect::Fails("too short")),
        ("one line break", text(b"\n"), Expect::Fails("too short")),
        ("binary", Some(binary), Expect::Fails("not UTF-8")),
        (
            "text with a zero byte",
            text(b"First\0Citizen"),
            Expect::Fails("binary"),
        ),
        (
            "invalid UTF-8",
            text(b"First \xff\xfe Citizen"),
            Expect::Fails("not UTF-8"),
        ),
        (
            "a cut-off UTF-8 character",
            text(b"caf\xc3"),
            Expect::Fails("not UTF-8"),
        ),
        (
            "UTF-16",
            text(b"\xff\xfeF\0i\0r\0s\0t\0"),
            Expect::Fails("not UTF-8"),
        ),
        (
            "shorter than one window",
            text(b"hello"),
            Expect::Fails("too short"),
        ),
        (
            "one window of 9 characters",
            text(b"abcdefghi"),
            Expect::Fails("too short"),
        ),
        (
            "a text with no test part",
            text(&[b"a".repeat(60), b"b".repeat(2)].concat()),
            Expect::Fails("test part"),
        ),
        (
            "one letter 3,000 times",
            Some(one_letter.into_bytes()),
            Expect::Survives,
        ),
        ("a folder", None, Expect::Fails("")),
        ("a missing file", None, Expect::Fails("not found")),
    ];
    let mut faults = Faults::default();
    let mut cases = 0;
    let good = path(&fixture.good);
    let resumed = fixture.dir.join("resumed");
    let resumed_dir = path(&resumed);
    let mut try_corpus = |faults: &mut Faults, name: &str, corpus: &str, expect: Expect| {
        write_files(&resumed, &read_files(&fixture.good));
        let train = [
            &["train", "--data", corpus][..],
            &TINY,
            &["--max-steps", "2"],
        ];
        let chapter = [&["--data", corpus][..], &TINY, &["--max-steps", "2"]];
        let sample = ["--sample-len", "5", "--prompt", "a", "--quiet"];
        let runs = [
            ([&train[..], &[&["--quiet"][..]]].concat().concat(), expect),
            (
                [&chapter[..], &[&sample[..]]].concat().concat(),
                Expect::Survives,
            ),
            (
                vec!["eval", "--checkpoint", &good, "--data", corpus, "--quiet"],
                Expect::Fails(""),
            ),
            (
                vec![
                    "train",
                    "--resume",
                    &resumed_dir,
                    "--data",
                    corpus,
                    "--max-steps",
                    "7",
                    "--quiet",
                ],
                Expect::Fails(""),
            ),
        ];
        for (command, expect) in runs {
            faults.run(name, &args(&command), expect);
            cases += 1;
        }
        if read_files(&resumed) != read_files(&fixture.good) {
            faults.add(name, &[], "a refused resume changed the checkpoint".into());
        }
    };
    for (name, bytes, expect) in corpora {
        let corpus = fixture.dir.join(name.replace(' ', "_"));
        match (bytes, name) {
            (Some(bytes), _) => std::fs::write(&corpus, bytes).unwrap(),
            (None, "a folder") => std::fs::create_dir(&corpus).unwrap(),
            (None, _) => {}
        }
        try_corpus(&mut faults, name, &path(&corpus), expect);
    }
    #[cfg(unix)]
    for (name, device, expect) in [
        ("/dev/null", "/dev/null", Expect::Fails("")),
        (
            "/dev/zero, which never ends",
            "/dev/zero",
            Expect::Fails(""),
        ),
    ] {
        try_corpus(&mut faults, name, device, expect);
    }
    faults.none(cases);
}

#[test]
fn hostile_prompts_and_flags_are_refused_cleanly() {
    use Expect::{Fails, Rejected, Runs, Survives};
    let fixture = Fixture::new("flags");
    let (good, corpus) = (path(&fixture.good), fixture.corpus.as_str());
    let mut faults = Faults::default();
    let mut cases = 0;

    // generate: prompts outside the vocabulary, then the sample's length, the sampling and the threads.
    let long_prompt = "First ".repeat(2000);
    let prompts = [
        ("", Fails("the prompt is empty")),
        ("é", Fails("'é'")),
        ("First é", Fails("not in the vocabulary")),
        ("\0", Fails("not in the vocabulary")),
        ("\u{feff}First", Fails("not in the vocabulary")),
        ("🦀", Fails("not in the vocabulary")),
        ("e\u{301}", Fails("not in the vocabulary")),
        ("\r\n", Fails("not in the vocabulary")),
        (&long_prompt, Runs), // longer than the context: the window slides
    ];
    for (prompt, expect) in prompts {
        let command = [
            "generate",
            "--checkpoint",
            &good,
            "--sample-len",
            "5",
            "--prompt",
            prompt,
        ];
        let case = format!("generate --prompt {}", short(&json!(prompt)));
        faults.run(&case, &args(&command), expect);
        cases += 1;
    }
    let generate = [
        ("--sample-len 0", Runs),
        (
            "--sample-len 100001",
            Fails("--sample-len 100001 is out of range"),
        ),
        (
            "--sample-len 99999999999999",
            Fails("--sample-len 99999999999999 is out of range"),
        ),
        ("--sample-len 18446744073709551615", Fails("out of range")),
        ("--sample-len 18446744073709551616", Rejected),
        ("--sample-len -1", Rejected),
        ("--sample-len many", Rejected),
        ("--top-k 0", Fails("--top-k 0 is out of range")),
        ("--top-k 1", Runs),
        ("--top-k 1000000", Runs),
        ("--top-k 1000001", Fails("--top-k 1000001 is out of range")),
        ("--top-k -1", Rejected),
        (
            "--temperature 0",
            Fails("--temperature must be a number from 0.001 to 1000"),
        ),
        ("--temperature -0", Fails("--temperature")),
        ("--temperature -1", Fails("--temperature")),
        ("--temperature NaN", Fails("--temperature")),
        ("--temperature inf", Fails("--temperature")),
        ("--temperature -inf", Rejected), // clap takes it for a flag
        ("--temperature 1e39", Fails("--temperature")), // inf as a float32
        ("--temperature 1e-45", Fails("--temperature")), // the logits would overflow
        ("--temperature 1e-30", Fails("--temperature")),
        ("--temperature 0.001", Runs),
        ("--temperature 1000", Runs),
        ("--temperature 3e38", Fails("--temperature")),
        ("--temperature warm", Rejected),
        ("--seed 4294967295", Runs),
        ("--seed 4294967296", Rejected),
        ("--threads 256", Runs),
        ("--threads 257", Fails("--threads 257 is out of range")),
        ("--threads 18446744073709551615", Fails("--threads")),
    ];
    for (flag, expect) in generate {
        let mut command = vec!["generate", "--checkpoint", &good, "--prompt", PROMPT];
        if !flag.starts_with("--sample-len") {
            command.extend(["--sample-len", "5"]);
        }
        command.extend(flag.split(' '));
        faults.run(&format!("generate {flag}"), &args(&command), expect);
        cases += 1;
    }

    // train and the chapter run, which share these flags: every number at and past its limit, on the
    // tiny model for two steps.
    let train = [
        ("--max-steps 0", Runs),
        ("--max-steps 100000000", Runs), // the whole schedule: 672 steps
        (
            "--max-steps 100000001",
            Fails("--max-steps 100000001 is out of range"),
        ),
        ("--max-steps 99999999999999999999", Rejected),
        ("--threads 1", Runs),
        ("--threads 257", Fails("--threads 257 is out of range")),
        ("--threads 99999999999", Fails("--threads")),
        ("--log-every 1", Runs),
        ("--log-every 100000000", Runs),
        (
            "--log-every 100000001",
            Fails("--log-every 100000001 is out of range"),
        ),
        ("--batch-size 0", Fails("--batch-size 0 is out of range")),
        ("--batch-size 1", Runs),
        ("--batch-size 1024", Fails("too short")),
        (
            "--batch-size 1025",
            Fails("--batch-size 1025 is out of range"),
        ),
        (
            "--context-size 0",
            Fails("--context-size 0 is out of range"),
        ),
        ("--context-size 1", Runs),
        ("--context-size 1024", Fails("too short")),
        (
            "--context-size 1025",
            Fails("--context-size 1025 is out of range"),
        ),
        (
            "--embedding-size 0",
            Fails("--embedding-size 0 is out of range"),
        ),
        ("--embedding-size 1", Runs),
        ("--embedding-size 1024", Runs),
        (
            "--embedding-size 1025",
            Fails("--embedding-size 1025 is out of range"),
        ),
        ("--blocks 0", Fails("--blocks 0 is out of range")),
        ("--blocks 64", Survives), // so deep without residual connections, it may diverge
        ("--blocks 65", Fails("--blocks 65 is out of range")),
        ("--epochs 0", Fails("--epochs 0 is out of range")),
        ("--epochs 1000", Runs),
        ("--epochs 1001", Fails("--epochs 1001 is out of range")),
        ("--lr 0", Fails("--lr must be a positive number")),
        ("--lr -0", Fails("--lr")),
        ("--lr -1", Fails("--lr")),
        ("--lr NaN", Fails("--lr")),
        ("--lr inf", Fails("--lr")),
        ("--lr -inf", Rejected),
        ("--lr 1e309", Fails("--lr")),
        ("--lr 1e308", Fails("training diverged")),
        ("--lr 1e30", Fails("training diverged")),
        ("--lr 5e-324", Runs),
        ("--lr fast", Rejected),
        ("--seed 4294967295", Runs),
        ("--seed -1", Rejected),
    ];
    for (flag_value, expect) in train {
        let flag = flag_value.split(' ').next().unwrap();
        let mut command = vec!["--data", corpus, "--quiet"];
        let defaults = [&TINY[..], &["--max-steps", "2"]].concat();
        for pair in defaults.chunks(2).filter(|pair| pair[0] != flag) {
            command.extend(pair);
        }
        command.extend(flag_value.split(' '));
        let train = [&["train"][..], &command].concat();
        faults.run(&format!("train {flag_value}"), &args(&train), expect);
        let chapter = [&command[..], &["--sample-len", "5", "--prompt", PROMPT]].concat();
        let expect = match expect {
            Runs => Survives, // the chapter also tests and samples
            other => other,
        };
        faults.run(
            &format!("the chapter with {flag_value}"),
            &args(&chapter),
            expect,
        );
        cases += 2;
    }

    // Flags of train, the chapter and eval alone.
    let saved = path(&fixture.dir.join("saved"));
    let tiny = [
        &TINY[..],
        &["--max-steps", "2", "--data", corpus, "--quiet"],
    ]
    .concat();
    let data = vec!["--data", corpus, "--quiet"];
    let only = [
        (
            vec!["train", "--save", &saved, "--save-every", "1"],
            &tiny,
            Runs,
        ),
        (
            vec![
                "train",
                "--save",
                &saved,
                "--save-every",
                "100000000",
                "--overwrite",
            ],
            &tiny,
            Runs,
        ),
        (
            vec![
                "train",
                "--save",
                &saved,
                "--save-every",
                "100000001",
                "--overwrite",
            ],
            &tiny,
            Fails("--save-every 100000001 is out of range"),
        ),
        (
            vec!["train", "--save", &saved],
            &tiny,
            Fails("already holds a checkpoint"),
        ),
        (
            vec!["train", "--save", corpus],
            &tiny,
            Fails("cannot write"),
        ),
        (
            vec!["train", "--resume", &good, "--batch-size", "3"],
            &data,
            Fails("--batch-size 3 differs"),
        ),
        (
            vec!["train", "--resume", &good, "--lr", "NaN"],
            &data,
            Fails("--lr NaN differs"),
        ),
        (
            vec!["--bench", "0"],
            &tiny,
            Fails("--bench 0 is out of range"),
        ),
        (
            vec!["--bench", "1000001"],
            &tiny,
            Fails("--bench 1000001 is out of range"),
        ),
        (vec!["--bench", "1"], &tiny, Runs),
        (vec!["--peak", "--bench", "1"], &tiny, Rejected),
        (
            vec!["--peak", "--threads", "257"],
            &tiny,
            Fails("--threads 257"),
        ),
        (vec!["--peak", "--threads", "1"], &tiny, Runs),
        (
            vec!["eval", "--checkpoint", &good, "--threads", "257"],
            &data,
            Fails("--threads 257"),
        ),
    ];
    for (command, rest, expect) in only {
        faults.run(
            &command.join(" "),
            &args(&[&command[..], rest].concat()),
            expect,
        );
        cases += 1;
    }
    faults.none(cases);
}
