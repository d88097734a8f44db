//! Lesson layer. What can go wrong in stage 5's lesson that a user can fix. Each message is one
//! line: the problem, then the fix.

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

/// What can go wrong in the lesson: the corpus, the prompt, a diverging run. The command line
/// words the fix in its own flags ([`crate::s5_gpt::app::error::ToolError`]).
#[derive(Debug, thiserror::Error)]
pub enum GptError {
    #[error(
        "data file {} not found: run data/fetch.sh to download it",
        shown(path)
    )]
    DataMissing { path: PathBuf },

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
        "data file {} is too short: its {split} part gives no batch of {batch_size}×{context_size} tokens; use a longer text or a smaller batch or context",
        shown(path)
    )]
    DataTooShort {
        path: PathBuf,
        split: &'static str,
        batch_size: usize,
        context_size: usize,
    },

    #[error(
        "the prompt has characters that are not in the vocabulary: {}; use only characters that occur in the training text",
        quoted(chars)
    )]
    PromptCharacters { chars: Vec<char> },

    #[error("the prompt is empty; give at least one character")]
    EmptyPrompt,

    #[error(
        "the loss became {loss} at step {step}: training diverged; lower the learning rate (it is {lr:e}) and train again"
    )]
    LossNotFinite { step: usize, loss: f32, lr: f64 },

    #[error(
        "a sliding window is masked on the naive graph, and the {form} FlashAttention node masks only the future; use the naive graph or no window"
    )]
    WindowInFlashNode { form: &'static str },

    #[error(
        "a window of 0 keys leaves a character nothing to attend to; use a window of 1 or more"
    )]
    EmptyWindow,
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
