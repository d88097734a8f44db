//! What can go wrong in stage 5 that a user can fix. Each message is one line: the problem, then the fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("data file {} not found: run data/fetch.sh to download Tiny Shakespeare, or pass --data PATH", path.display())]
    DataMissing { path: PathBuf },

    #[error("cannot read data file {}: {source}; check the path and its permissions, or run data/fetch.sh", path.display())]
    DataUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("data file {} is not UTF-8 text ({why}); run data/fetch.sh to download a clean copy", path.display())]
    DataNotText { path: PathBuf, why: String },

    #[error("data file {} is too short: its {split} part gives no batch of {batch_size}×{context_size} tokens; use a longer text or smaller --batch-size/--context-size", path.display())]
    DataTooShort {
        path: PathBuf,
        split: &'static str,
        batch_size: usize,
        context_size: usize,
    },

    #[error(
        "prompt character {ch:?} is not in the training text's vocabulary; use only characters that occur in the data file"
    )]
    PromptCharacter { ch: char },

    #[error("the prompt is empty; give at least one character with --prompt")]
    EmptyPrompt,

    #[error("invalid setting: {0}")]
    Config(String),

    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot write the report: {0}")]
    Output(#[from] std::io::Error),
}
