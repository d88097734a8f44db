//! What the fuzz targets share: how each target reads its input bytes, the small valid runs they
//! test against, and the one check every target makes of an error (one line, naming the problem).
//!
//! Each target is a function here, `fn(&[u8])`, that panics on a fault; `fuzz_targets/*.rs` hands
//! it to libFuzzer, and [`seeds`] makes its seed corpus. A fault is a panic, an error that is empty
//! or longer than one line, an input that is accepted and then cannot be used (a checkpoint that
//! loads but cannot sample, a state or a corpus that loads but cannot train), or a run that
//! `-timeout` or `-rss_limit_mb` stops.
//!
//! | target | input bytes | what runs |
//! |---|---|---|
//! | [`checkpoint`] | a flags byte, `config.json`, a zero byte, `model.safetensors` | `checkpoint::from_bytes`, then the model built and `generate`'s forward passes |
//! | [`optimizer_state`] | a flags byte, `optimizer.safetensors` | a resume of [`TinyRun`]'s checkpoint from those bytes, then one training step |
//! | [`corpus`] | a sizes byte, an architecture byte, the corpus | `Config::trainer` on that text as a file (`CharDataset::load`), then one training step |
//! | [`prompt`] | a knobs byte, the prompt | `s5_gpt generate`'s `sample` on the chapter's vocabulary (`tests/fixtures/checkpoint_v1`), and the page's attention maps |
//! | [`args`] | argument strings, separated by zero bytes | `Cli::try_parse_args` and each command's checks; the stage examples' `--seed` parse |
//!
//! Flag bit 0 of [`checkpoint`] and [`optimizer_state`] rewrites the checksum that `config.json`
//! records for the tensor file, so that the checks behind it are reached.

pub mod seeds;

use std::ffi::OsString;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use attention_from_scratch::cli::SeedArgs;
use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::app::args::{
    Cli, Command, ComputeArgs, GenerateArgs, SampleArgs,
};
use attention_from_scratch::s5_gpt::app::checkpoint::{
    self, CONFIG_FILE, Checkpoint, MODEL_FILE, OPTIMIZER_FILE,
};
use attention_from_scratch::s5_gpt::app::command::train::same_run;
use attention_from_scratch::s5_gpt::app::config::{BENCH, Config, SAVE_EVERY, THREADS};
use attention_from_scratch::s5_gpt::app::files::sha256_hex;
use attention_from_scratch::s5_gpt::app::sample::{sample, sampling};
use attention_from_scratch::s5_gpt::backend::Lesson;
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::data::CharDataset;
use attention_from_scratch::s5_gpt::model::Model;
use attention_from_scratch::s5_gpt::tape::Tape;
use attention_from_scratch::s5_gpt::train::Recipe;

/// A fault unless `result` is fine or an error of one non-empty line.
pub fn one_line<T, E: std::fmt::Display>(result: Result<T, E>) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                !msg.is_empty() && !msg.contains('\n'),
                "an error that is not one line: {msg:?}"
            );
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The valid runs the targets start from.
// ---------------------------------------------------------------------------------------------------

/// A few lines of Hamlet: the text of [`TinyRun`], so that a target needs no corpus file.
pub const TINY_TEXT: &str = "HAMLET:\nTo be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\nThe slings and arrows of outrageous fortune,\nOr to take arms against a sea of troubles\nAnd by opposing end them. To die: to sleep;\nNo more; and by a sleep to say we end\nThe heart-ache and the thousand natural shocks\nThat flesh is heir to, 'tis a consummation\nDevoutly to be wish'd. To die, to sleep;\n";

/// A folder of this process's own, for the files a target must write.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("attention-fuzz-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// A tiny model trained for three steps on [`TINY_TEXT`] and saved: its files' bytes, the
/// checkpoint read back, and the settings that resume it.
pub struct TinyRun {
    pub config: Vec<u8>,
    pub model: Vec<u8>,
    pub optimizer: Vec<u8>,
    pub checkpoint: Checkpoint,
    /// The settings of `s5_gpt train --resume DIR --data TEXT`.
    pub cfg: Config,
}

/// The recipe of [`TinyRun`]: B 2, T 8, C 4, one block, and every part the tutorial leaves out, so
/// that its files hold every kind of tensor.
pub fn tiny_recipe(full: bool) -> Recipe {
    let architecture = if full {
        Architecture {
            qkv: true,
            heads: 2,
            residual: true,
            layer_norm: true,
            dropout: 0.1,
            ..Architecture::default()
        }
    } else {
        Architecture::default()
    };
    Recipe {
        epochs: 1,
        batch_size: 2,
        context_size: 8,
        embedding_size: 4,
        blocks: 1,
        architecture,
        ..Recipe::default()
    }
}

impl TinyRun {
    /// Trains and saves the run in a scratch folder called `name`.
    pub fn new(name: &str, full: bool) -> TinyRun {
        let dir = scratch(name);
        let text_path = dir.join("text.txt");
        std::fs::write(&text_path, TINY_TEXT).expect("the text");
        let cfg = Config {
            recipe: tiny_recipe(full),
            data: Some(text_path),
            reference: true,
            ..Config::default()
        };
        let mut trainer = cfg.trainer().expect("the tiny run's trainer");
        trainer.steps = 3;
        trainer
            .train(|_| ControlFlow::Continue(()))
            .expect("three steps");
        let saved = dir.join("checkpoint");
        checkpoint::save(&saved, &checkpoint::TrainState::of(&trainer))
            .expect("a saved checkpoint");
        let read = |file: &str| std::fs::read(saved.join(file)).expect("a saved file");
        TinyRun {
            config: read(CONFIG_FILE),
            model: read(MODEL_FILE),
            optimizer: read(OPTIMIZER_FILE),
            checkpoint: checkpoint::load(&saved).expect("the saved checkpoint loads"),
            cfg,
        }
    }
}

/// The fixture `tests/fixtures/checkpoint_v1`: a model of the chapter's vocabulary (65 symbols)
/// with T 8 and C 8, as the crate's tests read it.
pub const CHAPTER_CONFIG: &[u8] = include_bytes!("../../tests/fixtures/checkpoint_v1/config.json");
pub const CHAPTER_MODEL: &[u8] =
    include_bytes!("../../tests/fixtures/checkpoint_v1/model.safetensors");

static CHAPTER: LazyLock<Checkpoint> = LazyLock::new(|| {
    let dir = Path::new("tests/fixtures/checkpoint_v1");
    checkpoint::from_bytes(dir, CHAPTER_CONFIG, CHAPTER_MODEL).expect("the fixture loads")
});

static TINY: LazyLock<TinyRun> = LazyLock::new(|| TinyRun::new("tiny", true));

// ---------------------------------------------------------------------------------------------------
// checkpoint
// ---------------------------------------------------------------------------------------------------

/// `flags`, then `config.json`, a zero byte and `model.safetensors`. JSON text never holds a zero
/// byte, so every config worth trying can be written this way.
pub fn checkpoint_input(flags: u8, config: &[u8], model: &[u8]) -> Vec<u8> {
    [&[flags][..], config, &[0], model].concat()
}

/// `config` with `sha256[file]` set to the checksum of `bytes`, if `config` is a JSON object.
pub fn with_checksum(config: &[u8], file: &str, bytes: &[u8]) -> Vec<u8> {
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_slice(config) else {
        return config.to_vec();
    };
    let sums = object
        .entry("sha256")
        .or_insert_with(|| serde_json::json!({}));
    if let serde_json::Value::Object(sums) = sums {
        sums.insert(file.into(), sha256_hex(bytes).into());
    }
    serde_json::to_vec(&object).expect("JSON serialises")
}

/// The `checkpoint` target: `checkpoint::from_bytes` as the book's page calls it, then, when it
/// loads, the model built and a short sample (a forward pass per character) as `s5_gpt generate`
/// draws it. Flag bit 1 computes with the lesson's backend (`--reference`).
pub fn checkpoint(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let split = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let (config, model) = (&rest[..split], rest.get(split + 1..).unwrap_or_default());
    let config = match flags & 1 {
        1 => with_checksum(config, MODEL_FILE, model),
        _ => config.to_vec(),
    };
    let dir = Path::new("fuzz-checkpoint");
    let Some(saved) = one_line(checkpoint::from_bytes(dir, &config, model)) else {
        return;
    };
    // A checkpoint that loads knows each character of its vocabulary as its own token, and samples
    // from a prompt of all of them.
    let vocab = saved.config.vocab();
    let tokens = CharDataset::from_vocab(vocab.clone()).encode(&saved.config.vocab);
    assert_eq!(tokens.ok(), Some((0..vocab.len()).collect()), "{vocab:?}");
    let args = generate_args(&saved.config.vocab, 3, flags & 2 != 0);
    let text = sample(&saved, &args).unwrap_or_else(|e| panic!("a checkpoint that loads: {e}"));
    assert_eq!(text.chars().count(), vocab.len() + 3, "{text:?}");
}

/// `s5_gpt generate --checkpoint fuzz --prompt PROMPT --sample-len LEN [--reference]`.
pub fn generate_args(prompt: &str, sample_len: usize, reference: bool) -> GenerateArgs {
    GenerateArgs {
        checkpoint: PathBuf::from("fuzz"),
        sample: SampleArgs {
            prompt: prompt.to_string(),
            sample_len,
        },
        seed: 42,
        temperature: 1.0,
        top_k: None,
        probs: false,
        no_cache: false,
        compute: ComputeArgs {
            threads: 1,
            reference,
        },
    }
}

// ---------------------------------------------------------------------------------------------------
// optimizer_state
// ---------------------------------------------------------------------------------------------------

/// The `optimizer_state` target: `s5_gpt train --resume` of [`TinyRun`] with these bytes as its
/// `optimizer.safetensors`: the state read and checked, restored into the trainer, and one more
/// training step. Flag bit 1 trains with the fast layer instead of the lesson's backend.
pub fn optimizer_state(data: &[u8]) {
    let Some((&flags, bytes)) = data.split_first() else {
        return;
    };
    let run = &*TINY;
    let mut saved = run.checkpoint.clone();
    if flags & 1 == 1 {
        let sum = sha256_hex(bytes);
        saved.config.sha256.insert(OPTIMIZER_FILE.into(), sum);
    }
    let Some(state) = one_line(saved.train_state_from_bytes(bytes)) else {
        return;
    };
    let cfg = Config {
        reference: flags & 2 == 0,
        ..run.cfg.clone()
    };
    let mut trainer = cfg.trainer().expect("the tiny run's trainer");
    same_run(&trainer, &cfg, &saved).expect("the tiny run's own text");
    state.restore(&mut trainer);
    // The next step's loss comes from the checkpoint's own weights, before AdamW's update.
    let before = trainer.losses.len();
    let trained = trainer.train(|_| ControlFlow::Break(()));
    trained.unwrap_or_else(|e| panic!("a state that loads trains: {e}"));
    assert!(trainer.losses.len() <= before + 1);
}

// ---------------------------------------------------------------------------------------------------
// corpus
// ---------------------------------------------------------------------------------------------------

/// The recipe a `corpus` input's first two bytes ask for: B 1–4 and T 1–8; C 4 or 8; and, bit by
/// bit, Q/K/V, 2 heads, residual connections, LayerNorm and dropout.
pub fn corpus_recipe(sizes: u8, arch: u8) -> Recipe {
    let architecture = Architecture {
        qkv: arch & 1 != 0,
        heads: if arch & 2 != 0 { 2 } else { 1 },
        residual: arch & 4 != 0,
        layer_norm: arch & 8 != 0,
        dropout: if arch & 16 != 0 { 0.25 } else { 0.0 },
        ..Architecture::default()
    };
    Recipe {
        epochs: 1,
        batch_size: 1 + usize::from(sizes & 3),
        context_size: 1 + usize::from((sizes >> 2) & 7),
        embedding_size: if sizes & 32 != 0 { 8 } else { 4 },
        blocks: 1,
        architecture,
        ..Recipe::default()
    }
}

static CORPUS_FILE: LazyLock<PathBuf> = LazyLock::new(|| scratch("corpus").join("corpus.txt"));

/// The `corpus` target: the bytes written to a file and read as `s5_gpt --data FILE` reads it
/// (`Config::trainer`: the checks, then `CharDataset::load`), then one training step. Bit 6 of the
/// sizes byte trains with the fast layer instead of the lesson's backend.
pub fn corpus(data: &[u8]) {
    let [sizes, arch, text @ ..] = data else {
        return;
    };
    let path = &*CORPUS_FILE;
    std::fs::write(path, text).expect("the scratch file");
    let cfg = Config {
        recipe: corpus_recipe(*sizes, *arch),
        data: Some(path.clone()),
        max_steps: Some(1),
        threads: 1,
        reference: sizes & 64 == 0,
        ..Config::default()
    };
    let Some(mut trainer) = one_line(cfg.trainer()) else {
        return;
    };
    let trained = trainer.train(|_| ControlFlow::Continue(()));
    trained.unwrap_or_else(|e| panic!("a corpus that loads trains: {e}"));
    assert_eq!(trainer.losses.len(), 1, "one step");
}

// ---------------------------------------------------------------------------------------------------
// prompt
// ---------------------------------------------------------------------------------------------------

/// The `prompt` target: `s5_gpt generate --checkpoint tests/fixtures/checkpoint_v1 --prompt TEXT`
/// (the bytes after the first, as UTF-8 with U+FFFD for each invalid byte), with the first byte
/// choosing `--sample-len` 0–3, `--temperature`, `--top-k` and `--reference`; then the attention
/// maps that the book's page draws for a prompt.
pub fn prompt(data: &[u8]) {
    let Some((&knobs, text)) = data.split_first() else {
        return;
    };
    let prompt = String::from_utf8_lossy(text);
    let saved = &*CHAPTER;
    let mut args = generate_args(&prompt, usize::from(knobs & 3), knobs & 4 != 0);
    args.temperature = [1.0, 0.001, 1000.0, 0.7][usize::from((knobs >> 3) & 3)];
    args.top_k = [None, Some(1), Some(10), Some(1_000_000)][usize::from((knobs >> 5) & 3)];
    if let Some(text) = one_line(sample(saved, &args)) {
        let wanted = prompt.chars().count() + args.sample.sample_len;
        assert!(text.starts_with(&*prompt), "{text:?}");
        assert_eq!(text.chars().count(), wanted, "{text:?}");
    }
    // The page's attention maps: the prompt's last T characters through the model.
    let vocabulary = CharDataset::from_vocab(saved.config.vocab());
    let Some(ids) = one_line(vocabulary.encode(&prompt)) else {
        return;
    };
    if ids.is_empty() {
        return;
    }
    let mut tape = Tape::with_backend(Box::new(Lesson));
    let model = saved.model(&mut tape, &mut NumpyRandom::seed(0));
    let window = &ids[ids.len().saturating_sub(model.context_size())..];
    let maps =
        attention_from_scratch::s5_gpt::beyond::attention_maps(&model, &mut tape, window);
    assert_eq!(maps.len(), model.blocks.len());
}

// ---------------------------------------------------------------------------------------------------
// args
// ---------------------------------------------------------------------------------------------------

/// The argument vector of an `args` input: the program's name, then each run of bytes between zero
/// bytes, as the operating system hands them over (not necessarily UTF-8).
pub fn argv(data: &[u8]) -> Vec<OsString> {
    let words = data
        .split(|&b| b == 0)
        .map(|w| OsString::from_vec(w.to_vec()));
    std::iter::once(OsString::from("s5_gpt"))
        .chain(words)
        .collect()
}

/// An `args` input: the words joined by zero bytes.
pub fn args_input(words: &[&str]) -> Vec<u8> {
    words.join("\0").into_bytes()
}

/// The most characters the `args` target samples; a longer `--sample-len` is only checked, since a
/// long sample is slow by design, not by fault.
const MAX_SAMPLED: usize = 16;

/// The `args` target: the command line read by `Cli::try_parse_args` (as `s5_gpt` and the book's
/// page read it), a refusal rendered as clap prints it, and each command's checks of its flags,
/// those that need no corpus: the settings' limits (`Config::check`, `--bench`, `--save-every`),
/// and for `generate` the sample itself, from [`TinyRun`]'s checkpoint. The same words also go
/// through the stage examples' `--seed` parse.
pub fn args(data: &[u8]) {
    let argv = argv(data);
    match Cli::try_parse_args(argv.clone()) {
        Err(e) => {
            let rendered = e.render().to_string();
            assert!(!rendered.is_empty());
        }
        Ok(cli) => command_checks(cli),
    }
    let mut stage = argv;
    stage[0] = OsString::from("s1_simple");
    if let Err(e) = SeedArgs::try_parse_for("s1_simple", "", stage) {
        let _ = e.render().to_string();
    }
}

fn command_checks(cli: Cli) {
    match cli.command {
        None => {
            let chapter = cli.chapter;
            one_line(chapter.config().check());
            one_line(chapter.bench.map(|n| BENCH.check(n)).transpose());
        }
        Some(Command::Train(train)) => {
            one_line(train.run.config(train.recipe.recipe()).check());
            one_line(SAVE_EVERY.check(train.save_every));
        }
        Some(Command::Generate(generate)) => {
            let saved = &TINY.checkpoint;
            let checked = one_line(sampling(saved, &generate)).is_some();
            let small = generate.sample.sample_len <= MAX_SAMPLED && generate.compute.threads <= 2;
            if checked && small {
                let text = sample(saved, &generate).expect("checked flags sample");
                let wanted = generate.sample.prompt.chars().count() + generate.sample.sample_len;
                assert_eq!(text.chars().count(), wanted);
            }
        }
        Some(Command::Eval(eval)) => {
            one_line(eval.config(Recipe::default()).check());
            one_line(THREADS.check(eval.compute.threads));
        }
    }
}
