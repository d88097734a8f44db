//! Stage 5's inputs that the fuzz targets (`fuzz/`, issue 30) showed to be faults, each kept here so
//! that `cargo test` keeps it fixed without a fuzzer. Each test names the target, the input, what
//! happened, and the error that the input gets now: one line that names the problem and the fix.
//!
//! | test | target | input | what happened |
//! |---|---|---|---|
//! | [`a_vocabulary_out_of_order_is_refused`] | `checkpoint` | `config.json` whose `vocab` has its first and last characters swapped | it loaded, and then refused its own characters as a prompt: a prompt's tokens are found by a binary search of `vocab` |
//! | [`a_vocabulary_that_repeats_a_character_is_refused`] | `checkpoint` | `vocab` with one character written twice | it loaded, with two tokens for one character |
//! | [`a_corpus_of_every_character_is_refused`] | `corpus` | a 4.4 MB text holding every Unicode character once | a model of 143 million parameters: 3.9 GB and 7 s for one training step |
//! | [`a_checkpoint_vocabulary_over_the_limit_is_refused`] | `checkpoint` | `vocab_size` 65,537 | the limit of the corpus holds for a checkpoint too |
//! | [`a_header_longer_than_any_checkpoint_is_refused`] | `checkpoint` | a 98 MB `model.safetensors` whose header is one tensor with a shape of 49 million zeros | safetensors read the header (it takes up to 100 MB) into memory at about 20 bytes a byte: 2 GB and 6 s, before the checksum was compared |
//! | [`tensor_offsets_past_the_file_are_refused`] | `checkpoint`, `optimizer_state` | a safetensors file of a header alone, whose nine tensors claim 2⁶⁴ − 1 bytes | safetensors 0.8 added the claimed size to the header's length and overflowed: a panic in `cargo test` and `cargo run` (overflow checks on), before the checksum was looked at |

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use attention_from_scratch::s5_gpt::app::args::{Cli, Command};
use attention_from_scratch::s5_gpt::app::checkpoint::{
    self, CONFIG_FILE, MAX_HEADER_BYTES, MODEL_FILE, OPTIMIZER_FILE,
};
use attention_from_scratch::s5_gpt::app::config::{Config, MAX_VOCABULARY};
use attention_from_scratch::s5_gpt::app::error::ToolError;
use attention_from_scratch::s5_gpt::error::GptError;
use serde_json::Value;

/// The committed fixture checkpoint: the chapter's vocabulary of 65 symbols, T 8, C 8.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/checkpoint_v1")
}

/// A fresh folder for this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("s5_fuzz_{}_{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixture's `config.json` with `edit` applied, and its weights, as the page hands them to
/// `checkpoint::from_bytes`.
fn edited_fixture(edit: impl Fn(&mut Value)) -> (Vec<u8>, Vec<u8>) {
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(fixture().join(CONFIG_FILE)).unwrap()).unwrap();
    edit(&mut config);
    let model = std::fs::read(fixture().join(MODEL_FILE)).unwrap();
    (serde_json::to_vec_pretty(&config).unwrap(), model)
}

/// The error, which must be one line, of loading these bytes as a checkpoint; and the same for a
/// folder of them through `s5_gpt generate`.
fn refusal(config: &[u8], model: &[u8], name: &str) -> String {
    let bytes = checkpoint::from_bytes(&fixture(), config, model).unwrap_err();
    let dir = scratch(name);
    std::fs::write(dir.join(CONFIG_FILE), config).unwrap();
    std::fs::write(dir.join(MODEL_FILE), model).unwrap();
    let argv = ["s5_gpt", "generate", "--checkpoint", dir.to_str().unwrap()];
    let cli = Cli::try_parse_args(argv).unwrap();
    let command = cli
        .run(&mut std::io::sink(), &AtomicBool::new(false))
        .unwrap_err()
        .to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    let message = bytes.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(command.contains("config.json does not match"), "{command}");
    message
}

/// The `checkpoint` target: it checks that every character of a loaded checkpoint's vocabulary is
/// its own token. With the first and last characters of `vocab` swapped (`"z !$&…xy\n"`), the
/// checkpoint loaded, and `generate --prompt` then refused characters of that very vocabulary,
/// since a prompt's tokens are found by a binary search of it.
#[test]
fn a_vocabulary_out_of_order_is_refused() {
    let (config, model) = edited_fixture(|c| {
        let mut vocab: Vec<char> = c["vocab"].as_str().unwrap().chars().collect();
        let last = vocab.len() - 1;
        vocab.swap(0, last);
        c["vocab"] = Value::String(vocab.into_iter().collect());
    });
    let message = refusal(&config, &model, "swapped");
    assert!(
        message.contains("vocab is not in code-point order"),
        "{message}"
    );
}

/// The same check: `vocab` with its second character (a space) replaced by the first (a line
/// break), so that the 65 characters hold one twice and lack another.
#[test]
fn a_vocabulary_that_repeats_a_character_is_refused() {
    let (config, model) = edited_fixture(|c| {
        let vocab = c["vocab"].as_str().unwrap().replacen(' ', "\n", 1);
        c["vocab"] = Value::String(vocab);
    });
    let message = refusal(&config, &model, "repeated");
    assert!(message.contains("or repeats a character"), "{message}");
}

/// Every Unicode scalar value but NUL, once each, in code-point order: 1,112,063 characters.
fn every_character() -> String {
    (1..=u32::from(char::MAX))
        .filter_map(char::from_u32)
        .collect()
}

/// The `corpus` target's inputs are small; this one is the large case of what it showed, that a
/// model's vocabulary is as large as the corpus has distinct characters. A 4.4 MB text of every
/// Unicode character made a model of 143,532,671 parameters at the chapter's sizes, and its first
/// training step took 3.9 GB and 7 s. The corpus is now refused after it is read, before any model
/// is built.
#[test]
fn a_corpus_of_every_character_is_refused() {
    let dir = scratch("every_character");
    let path = dir.join("every_character.txt");
    std::fs::write(&path, every_character()).unwrap();
    let cfg = Config {
        data: Some(path.clone()),
        ..Config::default()
    };
    let start = Instant::now();
    let error = cfg.trainer().unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(
        matches!(
            error,
            ToolError::VocabularyTooLarge {
                symbols: 1_112_063,
                max: MAX_VOCABULARY,
                ..
            }
        ),
        "{error}"
    );
    let message = error.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains("1112063 distinct characters"), "{message}");

    // A text of as many characters as the limit allows, twice over so that both parts have
    // batches, trains.
    let text: String = every_character().chars().take(MAX_VOCABULARY).collect();
    std::fs::write(&path, text.repeat(2)).unwrap();
    let small = Config {
        data: Some(path),
        recipe: attention_from_scratch::s5_gpt::Recipe {
            embedding_size: 4,
            blocks: 1,
            ..Default::default()
        },
        ..Config::default()
    };
    let trainer = small.trainer().unwrap();
    assert_eq!(trainer.dataset.vocab_size(), MAX_VOCABULARY);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A checkpoint's vocabulary has the corpus's limit: `vocab_size` 65,537 (with a `vocab` of as many
/// characters) is refused from `config.json` alone, before the weights are looked at.
#[test]
fn a_checkpoint_vocabulary_over_the_limit_is_refused() {
    let vocab: String = every_character().chars().take(MAX_VOCABULARY + 1).collect();
    let (config, _) = edited_fixture(|c| {
        c["vocab"] = Value::String(vocab.clone());
        c["vocab_size"] = Value::from(MAX_VOCABULARY + 1);
    });
    let message = checkpoint::from_bytes(&fixture(), &config, b"")
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("vocab_size 65537 is more than 65536"),
        "{message}"
    );
    assert!(!message.contains('\n'), "{message}");
}

/// A safetensors file of nine `U8` tensors, eight of 2⁶¹ − 1 bytes and one of 7, whose
/// `data_offsets` follow one another up to 2⁶⁴ − 1, and no data.
fn offsets_to_2_pow_64() -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut start = 0u64;
    for i in 0..9 {
        let size = if i < 8 {
            (1 << 61) - 1
        } else {
            u64::MAX - start
        };
        let entry = serde_json::json!({"dtype": "U8", "shape": [size], "data_offsets": [start, start + size]});
        header.insert(format!("t{i}"), entry);
        start += size;
    }
    let header = serde_json::to_vec(&header).unwrap();
    [&(header.len() as u64).to_le_bytes()[..], &header].concat()
}

/// Found by hand while fuzzing, and confirmed with the `checkpoint` target: safetensors 0.8 checks
/// each tensor's offsets against its shape, and then adds the last offset to the header's length,
/// unchecked. Offsets that run up to 2⁶⁴ − 1 overflowed that sum, a panic wherever overflow checks
/// are on (`cargo test`, `cargo run` without `--release`), and it came before the file's checksum was
/// compared. The crate now checks every offset against the bytes the file holds first.
#[test]
fn tensor_offsets_past_the_file_are_refused() {
    let bad = offsets_to_2_pow_64();
    let config = std::fs::read(fixture().join(CONFIG_FILE)).unwrap();
    let message = checkpoint::from_bytes(&fixture(), &config, &bad)
        .unwrap_err()
        .to_string();
    assert!(message.contains("model.safetensors cannot be used (not a complete safetensors file: tensor \"t0\" ends at byte 2305843009213693951 of the data, but the file holds 0 bytes of data)"), "{message}");
    assert!(!message.contains('\n'), "{message}");

    // The same file as AdamW's state of a resume.
    let saved = checkpoint::load(&fixture()).unwrap();
    let message = saved.train_state_from_bytes(&bad).unwrap_err().to_string();
    assert!(message.contains(OPTIMIZER_FILE), "{message}");
    assert!(message.contains("ends at byte"), "{message}");
}

/// Found while checking the sizes the checkpoint reader trusts, beside the `checkpoint` target
/// (whose inputs are a few kB): the safetensors crate accepts a header of up to 100 MB and holds all
/// of it in memory as it parses. A 98 MB `model.safetensors` whose header is one tensor with a
/// shape of 49 million zeros took 2.0 GB and 6 s to be refused by `s5_gpt generate`. A header
/// longer than any this crate writes is now refused from its first 8 bytes.
#[test]
fn a_header_longer_than_any_checkpoint_is_refused() {
    let zeros = vec!["0"; 49_000_000].join(",");
    let header =
        format!(r#"{{"a":{{"dtype":"F32","shape":[{zeros}],"data_offsets":[0,0]}}}}"#).into_bytes();
    let model = [&(header.len() as u64).to_le_bytes()[..], &header].concat();
    assert_eq!(model.len(), 98_000_060);
    let config = std::fs::read(fixture().join(CONFIG_FILE)).unwrap();
    let start = Instant::now();
    let message = checkpoint::from_bytes(&fixture(), &config, &model)
        .unwrap_err()
        .to_string();
    assert!(start.elapsed() < Duration::from_secs(1));
    assert!(
        message.contains(
            "its header is 98000052 bytes long, more than the 1048576 of any this crate writes"
        ),
        "{message}"
    );
    assert!(!message.contains('\n'), "{message}");

    // One byte over the limit is refused; the limit itself goes on to the other checks.
    for (length, refused) in [(MAX_HEADER_BYTES + 1, true), (MAX_HEADER_BYTES, false)] {
        let mut model = model.clone();
        model[..8].copy_from_slice(&length.to_le_bytes());
        let message = checkpoint::from_bytes(&fixture(), &config, &model)
            .unwrap_err()
            .to_string();
        assert_eq!(
            message.contains("bytes long, more than"),
            refused,
            "{message}"
        );
    }
}

/// The `args` target: `train --save run0 --plot "run⏎/tiny.svg"`. A path with a line break made the
/// missing folder's message two lines; paths in messages are now quoted, with escapes, when they hold a
/// control character.
#[test]
fn a_path_with_a_line_break_stays_on_one_line() {
    let argv = [
        "s5_gpt",
        "train",
        "--save",
        "run0",
        "--plot",
        "run\n/tiny.svg",
    ];
    let Some(Command::Train(train)) = Cli::try_parse_args(argv).unwrap().command else {
        panic!("a train command");
    };
    let message = train
        .run
        .config(train.recipe.recipe())
        .check()
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "invalid setting: --plot: the folder \"run\\n\" does not exist; create it or choose another path"
    );
    let missing = GptError::DataMissing {
        path: "a\rb.txt".into(),
    };
    assert!(
        missing
            .to_string()
            .starts_with("data file \"a\\rb.txt\" not found")
    );
}
