//! Lesson layer. What can go wrong in stage 5 that a user can fix. Each message is one line: the
//! problem, then the fix.

use std::path::{Path, PathBuf};

/// A path as a message shows it: as it is, or quoted with escapes when it holds a line break or
/// another control character, so that the message stays one line.
pub fn shown(path: &Path) -> String {
    let text = path.to_string_lossy();
    if text.chars().any(char::is_control) {
        format!("{text:?}")
    } else {
        text.into_owned()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GptError {
    #[error(
        "data file {} not found: run data/fetch.sh (or `cargo run --release --example s5_gpt`, which downloads it on first use), or pass --data PATH",
        shown(path)
    )]
    DataMissing { path: PathBuf },

    /// The corpus could not be downloaded; the message names the address, the reason and the way
    /// out.
    #[error("{0}")]
    Download(String),

    #[error(
        "cannot read data file {}: {source}; check the path and its permissions, or run data/fetch.sh",
        shown(path)
    )]
    DataUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(
        "data file {} is not UTF-8 text ({why}); run data/fetch.sh to download a clean copy",
        shown(path)
    )]
    DataNotText { path: PathBuf, why: String },

    #[error(
        "data file {} is too short: its {split} part gives no batch of {batch_size}×{context_size} tokens; use a longer text or smaller --batch-size/--context-size",
        shown(path)
    )]
    DataTooShort {
        path: PathBuf,
        split: &'static str,
        batch_size: usize,
        context_size: usize,
    },

    #[error(
        "data file {} has {symbols} distinct characters, more than the {max} a model's vocabulary may have; use a text with fewer distinct characters",
        shown(path)
    )]
    VocabularyTooLarge {
        path: PathBuf,
        symbols: usize,
        max: usize,
    },

    #[error(
        "the prompt has characters that are not in the vocabulary: {}; use only characters that occur in the training text",
        quoted(chars)
    )]
    PromptCharacters { chars: Vec<char> },

    #[error("the prompt is empty; give at least one character with --prompt")]
    EmptyPrompt,

    /// Stage 4's error: the heads must share the embedding size evenly.
    #[error("--heads: {0} (d_out is --embedding-size here)")]
    HeadsDontDivide(crate::Error),

    #[error("invalid setting: {0}")]
    Config(String),

    #[error(
        "checkpoint folder {} not found; train one with `s5_gpt train --save {}`, or check the path",
        shown(dir),
        shown(dir)
    )]
    CheckpointMissing { dir: PathBuf },

    #[error(
        "{} already holds a checkpoint; continue it with --resume {}, add --overwrite to replace it, or choose another --save folder",
        shown(dir),
        shown(dir)
    )]
    CheckpointExists { dir: PathBuf },

    #[error(
        "checkpoint file {} cannot be used ({why}); save the checkpoint again with `s5_gpt train --save`",
        shown(path)
    )]
    CheckpointFile { path: PathBuf, why: String },

    #[error(
        "checkpoint {}: config.json does not match the saved tensors ({why}); its files come from different runs, so save the checkpoint again",
        shown(dir)
    )]
    CheckpointMismatch { dir: PathBuf, why: String },

    #[error(
        "the vocabulary of {} ({data} symbols) is not the one checkpoint {} was trained on ({saved} symbols); pass that text with --data",
        shown(data_path),
        shown(dir)
    )]
    VocabularyMismatch {
        data_path: PathBuf,
        dir: PathBuf,
        data: usize,
        saved: usize,
    },

    #[error(
        "{flag} {given} differs from the checkpoint's {saved}; leave {flag} out when resuming, or start a new run"
    )]
    ResumeMismatch {
        flag: &'static str,
        given: String,
        saved: String,
    },

    #[error(
        "the loss became {loss} at step {step}: training diverged; lower --lr (it is {lr:e}) and train again"
    )]
    LossNotFinite { step: usize, loss: f32, lr: f64 },

    #[error(
        "cannot write {}: {source}; check that its folder exists and is writable, or choose another path",
        shown(path)
    )]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
}

/// `'é', '€'`: characters as a reader would type them, in order of first appearance; past ten, the
/// first ten and how many more, so that the message stays one line.
fn quoted(chars: &[char]) -> String {
    const SHOWN: usize = 10;
    let quoted: Vec<String> = chars.iter().take(SHOWN).map(|c| format!("{c:?}")).collect();
    match chars.len() {
        n if n > SHOWN => format!("{} and {} more", quoted.join(", "), n - SHOWN),
        _ => quoted.join(", "),
    }
}
