//! Tool layer. What can go wrong in the `s5_gpt` tool: the lesson's errors ([`GptError`]) in the
//! command line's words, and what only the tool does (settings, the download, checkpoints, files).
//! Each message is one line: the problem, then the fix, naming the flag that fixes it.

use std::path::PathBuf;

use crate::s5_gpt::error::{GptError, shown};

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The lesson's error, its fix worded with the tool's flags.
    #[error("{}", with_flags(.0))]
    Lesson(#[from] GptError),

    /// The corpus could not be downloaded; the message names the address, the reason and the way
    /// out.
    #[error("{0}")]
    Download(String),

    #[error(
        "data file {} has {symbols} distinct characters, more than the {max} a model's vocabulary may have; use a text with fewer distinct characters",
        shown(path)
    )]
    VocabularyTooLarge {
        path: PathBuf,
        symbols: usize,
        max: usize,
    },

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

/// A lesson error whose fix is a setting, worded with the flag that changes it; the others as the
/// lesson words them.
fn with_flags(error: &GptError) -> String {
    match error {
        GptError::DataMissing { path } => format!(
            "data file {} not found: run data/fetch.sh (or `cargo run --release --example s5_gpt`, which downloads it on first use), or pass --data PATH",
            shown(path)
        ),
        GptError::DataTooShort {
            path,
            split,
            batch_size,
            context_size,
        } => format!(
            "data file {} is too short: its {split} part gives no batch of {batch_size}×{context_size} tokens; use a longer text or smaller --batch-size/--context-size",
            shown(path)
        ),
        GptError::EmptyPrompt => {
            "the prompt is empty; give at least one character with --prompt".to_string()
        }
        GptError::LossNotFinite { step, loss, lr } => format!(
            "the loss became {loss} at step {step}: training diverged; lower --lr (it is {lr:e}) and train again"
        ),
        other => other.to_string(),
    }
}
