//! Each target's seed corpus, from real inputs made with the crate: checkpoints it saves, slices of
//! Tiny Shakespeare, the chapter's prompts, and the README's and the book's page's command lines.
//!
//! A target's binary writes its seeds when it starts with `FUZZ_WRITE_SEEDS=DIR` set: into
//! `DIR/<target>/seed-NN`, each run once through the target (so that a seed which no longer
//! reaches the deep end of its target is noticed), and then it exits. `bash fuzz/seeds.sh` does
//! that for every target, with the binaries `cargo fuzz` builds anyway. The seeds are small (under
//! 100 kB in all) and never committed.

use std::path::Path;

use attention_from_scratch::s5_gpt::app::files::default_data_path;

use crate::{CHAPTER_CONFIG, CHAPTER_MODEL, TINY_TEXT, TinyRun, args_input, checkpoint_input};

/// The environment variable that asks a target's binary for its seeds.
pub const WRITE_SEEDS: &str = "FUZZ_WRITE_SEEDS";

/// The init of every target: with [`WRITE_SEEDS`] set, writes `target`'s seeds and exits.
pub fn on_start(target: &str) {
    let Some(dir) = std::env::var_os(WRITE_SEEDS) else {
        return;
    };
    let dir = Path::new(&dir).join(target);
    std::fs::create_dir_all(&dir).expect("the corpus folder");
    let (run, seeds): (fn(&[u8]), _) = match target {
        "checkpoint" => (crate::checkpoint, checkpoint()),
        "optimizer_state" => (crate::optimizer_state, optimizer_state()),
        "corpus" => (crate::corpus, corpus()),
        "prompt" => (crate::prompt, prompt()),
        "args" => (crate::args, args()),
        _ => panic!("no seeds for target {target:?}"),
    };
    let mut bytes = 0;
    for (i, seed) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), seed).expect("a seed file");
        run(seed);
        bytes += seed.len();
    }
    println!(
        "{target}: {} seeds, {bytes} bytes, in {}",
        seeds.len(),
        dir.display()
    );
    std::process::exit(0);
}

/// Checkpoints saved by the crate, each whole, with and without the checksum rewritten and with
/// either backend; one of every architecture, the chapter's fixture, and two broken ones.
pub fn checkpoint() -> Vec<Vec<u8>> {
    let full = TinyRun::new("seeds-full", true);
    let plain = TinyRun::new("seeds-plain", false);
    let mut seeds: Vec<Vec<u8>> = (0..4)
        .map(|flags| checkpoint_input(flags, &full.config, &full.model))
        .collect();
    seeds.push(checkpoint_input(0, &plain.config, &plain.model));
    seeds.push(checkpoint_input(0, CHAPTER_CONFIG, CHAPTER_MODEL));
    seeds.push(checkpoint_input(1, b"{}", &plain.model));
    seeds.push(checkpoint_input(1, &plain.config, b""));
    seeds
}

/// AdamW's state as the crate saves it after three steps, with each flag.
pub fn optimizer_state() -> Vec<Vec<u8>> {
    let full = TinyRun::new("seeds-full", true);
    let plain = TinyRun::new("seeds-plain", false);
    let mut seeds: Vec<Vec<u8>> = (0..4)
        .map(|flags| [&[flags][..], &full.optimizer].concat())
        .collect();
    seeds.push([&[1][..], &plain.optimizer].concat());
    seeds
}

/// Slices of Tiny Shakespeare (if it is here; else lines of Hamlet) and odd texts, with sizes and
/// architectures that cover every bit of the two leading bytes.
pub fn corpus() -> Vec<Vec<u8>> {
    let shakespeare = std::fs::read_to_string(default_data_path()).unwrap_or_else(|_| {
        eprintln!("no Tiny Shakespeare (data/fetch.sh): the corpus seeds use lines of Hamlet");
        TINY_TEXT.repeat(10)
    });
    let slice = |start: usize, len: usize| -> Vec<u8> {
        let start = start.min(shakespeare.len().saturating_sub(len));
        let text: String = shakespeare[start..].chars().take(len).collect();
        text.into_bytes()
    };
    let texts = [
        slice(0, 300),
        slice(10_000, 1000),
        slice(500_000, 3000),
        slice(1_100_000, 800),
        TINY_TEXT.as_bytes().to_vec(),
        b"ab".repeat(20),
        "\u{e9}t\u{e9} \u{20ac} \u{1f600}\n".repeat(8).into_bytes(),
        b"a".to_vec(),
        vec![],
        b"binary\0\xff\xfe".to_vec(),
    ];
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let sizes = [0x0f, 0x23, 0x7f, 0x00, 0x45][i % 5];
            let arch = [0x00, 0x1f, 0x0b, 0x04, 0x13][(i + 2) % 5];
            [&[sizes, arch][..], text].concat()
        })
        .collect()
}

/// The chapter's prompts and a few that are not in its vocabulary, with each knob.
pub fn prompt() -> Vec<Vec<u8>> {
    let prompts = [
        (0x03, "ROMEO:"),
        (0x0f, "JULIET:"),
        (
            0x2b,
            "First Citizen:\nBefore we proceed any further, hear me speak.",
        ),
        (0x66, "To be, or not to be"),
        (0x01, "\u{e9}t\u{e9}"),
        (0x03, ""),
        (0x7f, "~"),
    ];
    prompts
        .iter()
        .map(|(knobs, text)| [&[*knobs][..], text.as_bytes()].concat())
        .collect()
}

/// The README's command lines, the book's page's, and some the limits refuse.
pub fn args() -> Vec<Vec<u8>> {
    let lines: &[&[&str]] = &[
        &[],
        &["--seed", "7"],
        &["--seed", "-3"],
        &[
            "train",
            "--save",
            "runs/tiny",
            "--max-steps",
            "5000",
            "--plot",
            "runs/tiny.svg",
        ],
        &["train", "--resume", "runs/tiny"],
        &["eval", "--checkpoint", "runs/tiny"],
        &[
            "generate",
            "--checkpoint",
            "runs/tiny",
            "--prompt",
            "JULIET:",
            "--top-k",
            "10",
        ],
        &[
            "generate",
            "--checkpoint",
            "runs/tiny",
            "--prompt",
            "HAMLET:",
            "--top-k",
            "10",
            "--sample-len",
            "8",
        ],
        &[
            "--batch-size",
            "12",
            "--context-size",
            "64",
            "--embedding-size",
            "128",
            "--blocks",
            "4",
            "--heads",
            "4",
            "--residual",
            "--layer-norm",
            "--bench",
            "100",
            "--threads",
            "2",
        ],
        &["--bench", "1000"],
        &["--bench"],
        &["train", "--max-steps", "10", "--quiet", "--threads", "2"],
        &[
            "--qkv",
            "--heads",
            "4",
            "--residual",
            "--layer-norm",
            "--dropout",
            "0.1",
            "--mask-value",
            "0",
        ],
        &[
            "generate",
            "--checkpoint",
            "data/checkpoint",
            "--prompt=To be",
            "--temperature=0.8",
            "--top-k=10",
            "--seed=1",
            "--sample-len=12",
        ],
        &["--help"],
        &["train", "--help"],
        &["--version"],
        &["--epochs", "0", "--lr", "-1"],
        &[
            "train",
            "--save-every",
            "100",
            "--loss-csv",
            "runs/loss.csv",
            "--overwrite",
            "--no-download",
            "--data",
            "x.txt",
            "--log-every",
            "0",
            "--reference",
        ],
        &[
            "eval",
            "--checkpoint",
            "runs/tiny",
            "--threads",
            "0",
            "--quiet",
            "--data",
            "x.txt",
        ],
    ];
    lines.iter().map(|words| args_input(words)).collect()
}
