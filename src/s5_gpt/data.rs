//! Lesson layer. The chapter's `CharDataset`: characters as tokens, a 90/10 split, overlapping
//! windows, batches in order.
//!
//! Expected figures for Tiny Shakespeare (`data/tinyshakespeare.txt`, sha256 `86c4e6aa…65ed`), with
//! the tutorial's batch size 4, context 32 and stride 16:
//!
//! | figure | value |
//! |---|---|
//! | characters | 1,115,394 (all ASCII) |
//! | vocabulary | 65 symbols, in code-point order: `\n`, space, `!$&',-.3:;?`, A–Z, a–z |
//! | split at | character 1,003,854 (`int(0.9·n)`) |
//! | train windows → batches | 62,739 → **15,684** per epoch |
//! | test windows → batches | 6,970 → **1,742** |
//!
//! Nothing is shuffled, so epoch after epoch sees the batches in the same order, and the last
//! partial batch is dropped.

use std::collections::BTreeSet;
use std::path::Path;

use super::error::GptError;

/// The file the tutorial reads, where `data/fetch.sh` puts it.
pub const DATA_FILE: &str = "data/tinyshakespeare.txt";

/// Which half of the text a batch comes from (`dataset.train()` / `dataset.eval()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Test,
}

/// One batch: inputs and next-token targets, each (B, T) row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// B, the number of windows.
    pub rows: usize,
    pub x: Vec<usize>,
    pub y: Vec<usize>,
}

// ANCHOR: dataset
/// A text as character tokens, cut into windows of T tokens every `stride` tokens.
#[derive(Clone, Debug)]
pub struct CharDataset {
    /// The distinct characters, sorted: token i is `vocab[i]`.
    pub vocab: Vec<char>,
    /// The whole text, encoded.
    pub tokens: Vec<usize>,
    pub batch_size: usize,
    pub context_size: usize,
    pub stride: usize,
    /// Where the test part starts: `int(len · 0.9)`.
    pub split_at: usize,
    train_windows: Vec<usize>,
    test_windows: Vec<usize>,
}

impl CharDataset {
    /// The dataset of an in-memory text (the tutorial's `load`, `encode` and `_pack`).
    pub fn from_text(text: &str, batch_size: usize, context_size: usize) -> Self {
        assert!(batch_size > 0 && context_size > 0, "sizes must be positive");
        let vocab: Vec<char> = text.chars().collect::<BTreeSet<_>>().into_iter().collect();
        let token_id = |ch| {
            vocab
                .binary_search(&ch)
                .expect("every character is in vocab")
        };
        let tokens: Vec<usize> = text.chars().map(token_id).collect();
        let stride = (context_size / 2).max(1);
        let split_at = (tokens.len() as f64 * 0.9) as usize;
        let train_windows = windows(0..split_at, context_size, stride);
        let test_windows = windows(split_at..tokens.len(), context_size, stride);
        CharDataset {
            vocab,
            tokens,
            batch_size,
            context_size,
            stride,
            split_at,
            train_windows,
            test_windows,
        }
    }
}
// ANCHOR_END: dataset

// ANCHOR: batch
impl CharDataset {
    /// `ds[i]`: windows i·B .. (i+1)·B, as x (B, T) and y = x shifted by one token (B, T).
    pub fn batch(&self, split: Split, i: usize) -> Batch {
        let t = self.context_size;
        let starts = &self.windows(split)[i * self.batch_size..(i + 1) * self.batch_size];
        let x = starts
            .iter()
            .flat_map(|&s| &self.tokens[s..s + t])
            .copied()
            .collect();
        let y = starts
            .iter()
            .flat_map(|&s| &self.tokens[s + 1..s + t + 1])
            .copied()
            .collect();
        Batch {
            rows: self.batch_size,
            x,
            y,
        }
    }
}

/// `range(0, len(part) − T − 1, stride)`, counted from the part's start: where each window of T
/// inputs plus one target starts.
fn windows(part: std::ops::Range<usize>, context_size: usize, stride: usize) -> Vec<usize> {
    let end = part.end.saturating_sub(context_size + 1);
    (part.start..end).step_by(stride).collect()
}
// ANCHOR_END: batch

/// Reading a corpus, counting and coding.
impl CharDataset {
    /// Reads a UTF-8 text file and builds the dataset with stride T/2 and a 90/10 split.
    pub fn load(path: &Path, batch_size: usize, context_size: usize) -> Result<Self, GptError> {
        Self::from_corpus(&read_text(path)?, path, batch_size, context_size)
    }

    /// [`CharDataset::from_text`] of a corpus read from `path`, refused (naming `path`) if its
    /// train or test part gives no batch.
    pub fn from_corpus(
        text: &str,
        path: &Path,
        batch_size: usize,
        context_size: usize,
    ) -> Result<Self, GptError> {
        let ds = Self::from_text(text, batch_size, context_size);
        for (split, name) in [(Split::Train, "train"), (Split::Test, "test")] {
            if ds.len(split) == 0 {
                let path = path.to_path_buf();
                return Err(GptError::DataTooShort {
                    path,
                    split: name,
                    batch_size,
                    context_size,
                });
            }
        }
        Ok(ds)
    }

    /// A vocabulary without a text: enough to encode a prompt and decode a sample of a saved
    /// model.
    pub fn from_vocab(vocab: Vec<char>) -> Self {
        CharDataset {
            vocab,
            tokens: vec![],
            batch_size: 1,
            context_size: 1,
            stride: 1,
            split_at: 0,
            train_windows: vec![],
            test_windows: vec![],
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Whole batches in a split; the partial last batch is dropped.
    pub fn len(&self, split: Split) -> usize {
        self.windows(split).len() / self.batch_size
    }

    /// True when a split has no whole batch.
    pub fn is_empty(&self, split: Split) -> bool {
        self.len(split) == 0
    }

    /// Windows (not batches) in a split.
    pub fn window_count(&self, split: Split) -> usize {
        self.windows(split).len()
    }

    /// Token ids of a text, or an error holding every character outside the vocabulary, each once.
    pub fn encode(&self, text: &str) -> Result<Vec<usize>, GptError> {
        // Each unknown character once, in the order it first appears.
        let mut seen = std::collections::HashSet::new();
        let unknown: Vec<char> = text
            .chars()
            .filter(|ch| self.vocab.binary_search(ch).is_err() && seen.insert(*ch))
            .collect();
        if !unknown.is_empty() {
            return Err(GptError::PromptCharacters { chars: unknown });
        }
        Ok(text
            .chars()
            .map(|ch| self.vocab.binary_search(&ch).unwrap())
            .collect())
    }

    pub fn decode(&self, tokens: &[usize]) -> String {
        tokens.iter().map(|&t| self.vocab[t]).collect()
    }

    fn windows(&self, split: Split) -> &[usize] {
        match split {
            Split::Train => &self.train_windows,
            Split::Test => &self.test_windows,
        }
    }
}

/// Reads the corpus, turning each way it can fail into an [`Error`] that says what to do.
fn read_text(path: &Path) -> Result<String, GptError> {
    // A folder, a pipe or a device such as /dev/zero: reading it would fail, block or never end.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let why = "it is not a regular file";
        return Err(GptError::DataUnreadable {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, why),
        });
    }
    let bytes = std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => GptError::DataMissing {
            path: path.to_path_buf(),
        },
        _ => GptError::DataUnreadable {
            path: path.to_path_buf(),
            source,
        },
    })?;
    let not_text = |why: String| GptError::DataNotText {
        path: path.to_path_buf(),
        why,
    };
    if let Some(at) = bytes.iter().position(|&b| b == 0) {
        return Err(not_text(format!(
            "a zero byte at offset {at}, so it looks binary"
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        not_text(format!(
            "invalid byte at offset {}",
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_follow_python_range() {
        // range(0, 100 - 32 - 1, 16) = 0, 16, 32, 48, 64
        assert_eq!(windows(0..100, 32, 16), [0, 16, 32, 48, 64]);
        assert_eq!(windows(50..150, 32, 16), [50, 66, 82, 98, 114]);
        assert!(windows(0..33, 32, 16).is_empty());
        assert!(windows(0..5, 32, 16).is_empty());
        assert!(windows(40..45, 32, 16).is_empty());
    }

    #[test]
    fn small_text_round_trips() {
        let ds = CharDataset::from_text("hello world, hello moon", 2, 4);
        assert_eq!(ds.decode(&ds.encode("hello").unwrap()), "hello");
        assert!(matches!(
            ds.encode("hexaxq"),
            Err(GptError::PromptCharacters { chars }) if chars == ['x', 'a', 'q']
        ));
        let b = ds.batch(Split::Train, 0);
        assert_eq!(ds.decode(&b.x[..4]), "hell");
        assert_eq!(ds.decode(&b.y[..4]), "ello");
        assert_eq!(ds.decode(&b.x[4..]), "llo ");
    }

    /// A prompt of many unknown characters gets a one-line error naming the first ten, at once.
    #[test]
    fn many_unknown_characters_are_counted_not_listed() {
        let ds = CharDataset::from_text("hello world", 1, 4);
        let prompt: String = ('\u{4e00}'..'\u{9fff}').chain("hello".chars()).collect();
        let message = ds.encode(&prompt).unwrap_err().to_string();
        assert!(message.contains("'一', '丁', '丂'"), "{message}");
        assert!(message.contains(" and 20981 more;"), "{message}");
        assert_eq!(message.lines().count(), 1);
    }
}
