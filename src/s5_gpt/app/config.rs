//! Tool layer. Every setting of a run in one [`Config`], and the one table of limits that both the
//! checks and `--help` read.

use std::path::{Path, PathBuf};

#[cfg(not(target_arch = "wasm32"))]
use super::fetch::{corpus_url, fetch};
#[cfg(not(target_arch = "wasm32"))]
use super::files::DATA_SHA256;
use super::files::default_data_path;
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::backend::{Backend, Lesson};
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::data::CharDataset;
#[cfg(not(target_arch = "wasm32"))]
use crate::s5_gpt::data::DATA_FILE;
use crate::s5_gpt::error::shown;
use crate::s5_gpt::fast::{Fast, team};
use crate::s5_gpt::train::{Recipe, Trainer};

/// The range a number typed on the command line must fall in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    pub flag: &'static str,
    pub min: usize,
    pub max: usize,
}

impl Limit {
    /// `what`, followed by the range, for `--help`.
    pub fn help(&self, what: &str) -> String {
        format!("{what}; {} to {}", self.min, self.max)
    }

    /// `value` if it is in range, else a one-line error that names the flag and the range.
    pub fn check(&self, value: usize) -> Result<usize, ToolError> {
        if (self.min..=self.max).contains(&value) {
            return Ok(value);
        }
        let range = match (self.flag, self.min) {
            ("--threads", 0) => format!("0 (one per core) to {}", self.max),
            _ => format!("{} to {}", self.min, self.max),
        };
        Err(ToolError::Config(format!(
            "{} {value} is out of range; use {range}",
            self.flag
        )))
    }
}

// The limits are far above the tutorial's sizes and keep a step's memory within a few GiB and a run
// within hours, so that a typo cannot start a run that never ends.
pub const EPOCHS: Limit = Limit {
    flag: "--epochs",
    min: 1,
    max: 1000,
};
pub const BATCH_SIZE: Limit = Limit {
    flag: "--batch-size",
    min: 1,
    max: 1024,
};
pub const CONTEXT_SIZE: Limit = Limit {
    flag: "--context-size",
    min: 1,
    max: 1024,
};
pub const EMBEDDING_SIZE: Limit = Limit {
    flag: "--embedding-size",
    min: 1,
    max: 1024,
};
pub const BLOCKS: Limit = Limit {
    flag: "--blocks",
    min: 1,
    max: 64,
};
pub const HEADS: Limit = Limit {
    flag: "--heads",
    min: 1,
    max: 1024,
};
pub const THREADS: Limit = Limit {
    flag: "--threads",
    min: 0,
    max: 256,
};
pub const MAX_STEPS: Limit = Limit {
    flag: "--max-steps",
    min: 0,
    max: 100_000_000,
};
pub const LOG_EVERY: Limit = Limit {
    flag: "--log-every",
    min: 0,
    max: 100_000_000,
};
pub const SAVE_EVERY: Limit = Limit {
    flag: "--save-every",
    min: 0,
    max: 100_000_000,
};
pub const EVAL_EVERY: Limit = Limit {
    flag: "--eval-every",
    min: 0,
    max: 100_000_000,
};
pub const EVAL_BATCHES: Limit = Limit {
    flag: "--eval-batches",
    min: 1,
    max: 100_000,
};
pub const SAMPLE_LEN: Limit = Limit {
    flag: "--sample-len",
    min: 0,
    max: 100_000,
};
pub const TOP_K: Limit = Limit {
    flag: "--top-k",
    min: 1,
    max: 1_000_000,
};
pub const BENCH: Limit = Limit {
    flag: "--bench",
    min: 1,
    max: 1_000_000,
};

/// The most distinct characters a corpus, and so a model's vocabulary, may have. The token table and
/// the output layer grow with it: Tiny Shakespeare has 65 and a long Chinese text some thousands,
/// but a 4.4 MB file of every Unicode character has 1,112,063, which at the chapter's sizes would
/// make a model of 143 million parameters that needs 4 GB to train.
pub const MAX_VOCABULARY: usize = 65_536;

/// Every setting of a run. `Config::default()` is the tutorial's chapter.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub recipe: Recipe,
    /// The corpus; `None` looks in the usual places (see [`default_data_path`]).
    pub data: Option<PathBuf>,
    /// Stop training after this many steps (then evaluate and sample as usual).
    pub max_steps: Option<usize>,
    /// Write `step,lr,loss` for every step to this CSV file.
    pub loss_csv: Option<PathBuf>,
    /// Draw the loss curve into this SVG file.
    pub plot: Option<PathBuf>,
    /// Print a training-loss line every this many steps (0: never).
    pub log_every: usize,
    /// Estimate the loss on fixed train and held-out batches every this many steps (0: never).
    pub eval_every: usize,
    /// Batches of each split one estimate averages.
    pub eval_batches: usize,
    pub prompt: String,
    /// Characters to generate after the prompt.
    pub sample_len: usize,
    /// Training threads; 0 means one per available core. The results do not depend on it.
    pub threads: usize,
    /// Show a progress bar on stderr (when it is a terminal) while training and testing.
    pub progress: bool,
    /// Compute with the lesson's plain code instead of the fast layer (the same bits, slower).
    pub reference: bool,
    /// Download Tiny Shakespeare when no `data` is given and no copy is found. The command line
    /// turns it on (`--no-download` off again); a program or test that builds a `Config` asks for
    /// it.
    pub download: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            recipe: Recipe::default(),
            data: None,
            max_steps: None,
            loss_csv: None,
            plot: None,
            log_every: 1000,
            eval_every: 0,
            eval_batches: 50,
            prompt: "ROMEO:".to_string(),
            sample_len: 512,
            threads: 0,
            progress: false,
            reference: false,
            download: false,
        }
    }
}

impl Config {
    /// Rejects settings that cannot train, before anything is loaded.
    pub fn check(&self) -> Result<(), ToolError> {
        check_recipe(&self.recipe)?;
        THREADS.check(self.threads)?;
        SAMPLE_LEN.check(self.sample_len)?;
        LOG_EVERY.check(self.log_every)?;
        EVAL_EVERY.check(self.eval_every)?;
        EVAL_BATCHES.check(self.eval_batches)?;
        self.max_steps.map(|s| MAX_STEPS.check(s)).transpose()?;
        // Found out now, not a minute later when the file is written.
        for (flag, path) in [("--loss-csv", &self.loss_csv), ("--plot", &self.plot)] {
            if let Some(dir) = path.as_deref().and_then(Path::parent)
                && !(dir.as_os_str().is_empty() || dir.is_dir())
            {
                let dir = shown(dir);
                let why = format!(
                    "{flag}: the folder {dir} does not exist; create it or choose another path"
                );
                return Err(ToolError::Config(why));
            }
        }
        Ok(())
    }

    /// The corpus this run reads.
    pub fn data_path(&self) -> PathBuf {
        self.data.clone().unwrap_or_else(default_data_path)
    }

    /// The corpus to read: `--data`, else the first copy found, else (with `download`) a fresh
    /// download into this crate's `data/` folder.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn corpus(&self) -> Result<PathBuf, ToolError> {
        let path = self.data_path();
        if self.data.is_some() || !self.download {
            return Ok(path);
        }
        let dest = Path::new(env!("CARGO_MANIFEST_DIR")).join(DATA_FILE);
        find_or_fetch(&path, &dest, &corpus_url(), self.progress)
    }

    /// The backend `--reference` asks for: the lesson's, or the fast layer's.
    pub fn backend(&self) -> Box<dyn Backend> {
        if self.reference {
            Box::new(Lesson)
        } else {
            Box::new(Fast::new())
        }
    }

    /// Checks the settings, finds (or downloads) the corpus, loads it and builds the trainer, in
    /// the tutorial's order.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn trainer(&self) -> Result<Trainer, ToolError> {
        self.check()?;
        let (b, t) = (self.recipe.batch_size, self.recipe.context_size);
        let path = self.corpus()?;
        let dataset = CharDataset::load(&path, b, t)?;
        check_vocabulary(&dataset, &path)?;
        Ok(self.trainer_on(dataset))
    }

    /// The trainer of these settings on `dataset`, loaded with this recipe's batch and context
    /// sizes; [`Config::check`] comes first.
    pub fn trainer_on(&self, dataset: CharDataset) -> Trainer {
        Trainer::new(self.recipe, dataset, self.backend(), self.max_steps)
    }

    /// Runs `f` with this run's training threads; the results are the same bits for any number.
    pub fn with_threads<T>(
        &self,
        f: impl FnOnce() -> Result<T, ToolError>,
    ) -> Result<T, ToolError> {
        THREADS.check(self.threads)?;
        let threads = self.threads;
        team::with_team(threads, f)
            .map_err(|e| ToolError::Config(format!("cannot start {threads} threads: {e}")))?
    }
}

/// `found` if it is a file, else Tiny Shakespeare downloaded from `url` into `dest`.
#[cfg(not(target_arch = "wasm32"))]
pub fn find_or_fetch(
    found: &Path,
    dest: &Path,
    url: &str,
    progress: bool,
) -> Result<PathBuf, ToolError> {
    if found.is_file() {
        return Ok(found.to_path_buf());
    }
    fetch(url, dest, DATA_SHA256, progress).map_err(|e| ToolError::Download(e.to_string()))?;
    Ok(dest.to_path_buf())
}

/// A corpus read from `path` whose vocabulary is small enough for a model ([`MAX_VOCABULARY`]),
/// checked before the model is built.
pub fn check_vocabulary(dataset: &CharDataset, path: &Path) -> Result<(), ToolError> {
    if dataset.vocab_size() <= MAX_VOCABULARY {
        return Ok(());
    }
    Err(ToolError::VocabularyTooLarge {
        path: path.to_path_buf(),
        symbols: dataset.vocab_size(),
        max: MAX_VOCABULARY,
    })
}

/// Architecture settings no model can be built or trained with, for width `c`, as a one-line error.
pub fn check_architecture(arch: &Architecture, c: usize) -> Result<(), ToolError> {
    arch.head_dim(c).map_err(ToolError::HeadsDontDivide)?;
    if !(0.0..1.0).contains(&arch.dropout) {
        let p = arch.dropout;
        let why = format!(
            "--dropout {p} is out of range; use a probability from 0 up to (not including) 1"
        );
        return Err(ToolError::Config(why));
    }
    if arch.mask_value.is_nan() || arch.mask_value == f32::INFINITY {
        let why = format!(
            "--mask-value {} is not a score; use a number such as -1e9 or 0",
            arch.mask_value
        );
        return Err(ToolError::Config(why));
    }
    check_variants(arch, c)
}

/// Stage 7's flags: key/value heads that divide the heads, a window of at least one key on the
/// naive graph, and pairs for RoPE to turn.
fn check_variants(arch: &Architecture, c: usize) -> Result<(), ToolError> {
    let h = arch.heads;
    let k = arch.kv_heads();
    if k == 0 || !h.is_multiple_of(k) {
        let why = format!(
            "--kv-heads {k} does not divide --heads {h}; use a divisor of {h}, such as 1 (multi-query) or {h}"
        );
        return Err(ToolError::Config(why));
    }
    if let Some(w) = arch.window {
        if w == 0 {
            let why = "--window 0 leaves a character no key to attend to; use 1 or more";
            return Err(ToolError::Config(why.to_string()));
        }
        if !arch.attention.is_naive() {
            let why = format!(
                "--window is masked on the naive graph, not in the FlashAttention node; drop --attention {} or --window",
                arch.attention.name()
            );
            return Err(ToolError::Config(why));
        }
    }
    let d = c / h;
    if arch.rope && d % 2 == 1 {
        let why = format!(
            "--rope turns pairs of coordinates, but a head is {d} wide (--embedding-size {c} / --heads {h}); make C/H even"
        );
        return Err(ToolError::Config(why));
    }
    check_latent(arch, c).map_err(ToolError::Config)?;
    check_key_offset(arch, d).map_err(ToolError::Config)
}

/// Stage 8's key offset: whole pairs of each head to move (D at least 4), on keys projected from
/// x.
fn check_key_offset(arch: &Architecture, d: usize) -> Result<(), String> {
    if !arch.key_offset {
        return Ok(());
    }
    if d < 4 {
        return Err(format!(
            "--key-offset moves half of each head's coordinates in whole pairs, but a head is {d} wide; make --embedding-size / --heads at least 4"
        ));
    }
    if arch.latent.is_some() {
        return Err("--key-offset moves keys projected from x, and --latent unfolds them from the latent; use one of them".into());
    }
    Ok(())
}

/// Latent attention's flags: a latent from 1 to C wide, with the projections, its own cache in
/// place of grouped heads, and with RoPE a rotary part of pairs on the naive graph.
fn check_latent(arch: &Architecture, c: usize) -> Result<(), String> {
    let Some(l) = arch.latent else {
        return Ok(());
    };
    let d = c / arch.heads;
    if l == 0 || l > c {
        return Err(format!(
            "--latent {l} is out of range; the latent must be from 1 to --embedding-size ({c}) wide"
        ));
    }
    if !arch.qkv {
        return Err("--latent unfolds keys and values with W_key and W_value; add --qkv".into());
    }
    if arch.kv_heads() != arch.heads {
        let k = arch.kv_heads();
        return Err(format!(
            "--latent and --kv-heads {k} both shrink the cache; use one of them"
        ));
    }
    if arch.rope && !d.is_multiple_of(4) {
        let h = arch.heads;
        return Err(format!(
            "--latent with --rope turns pairs of a rotary part D/2 wide, but a head is {d} wide (--embedding-size {c} / --heads {h}); make C/H a multiple of 4"
        ));
    }
    if arch.rope && !arch.attention.is_naive() {
        let form = arch.attention.name();
        return Err(format!(
            "--latent with --rope gives queries and keys wider than the values, which the FlashAttention node does not take; drop --attention {form} or --rope"
        ));
    }
    Ok(())
}

/// The model's sizes, its architecture and the training recipe, each in its range.
pub fn check_recipe(recipe: &Recipe) -> Result<(), ToolError> {
    EPOCHS.check(recipe.epochs)?;
    BATCH_SIZE.check(recipe.batch_size)?;
    CONTEXT_SIZE.check(recipe.context_size)?;
    EMBEDDING_SIZE.check(recipe.embedding_size)?;
    BLOCKS.check(recipe.blocks)?;
    HEADS.check(recipe.architecture.heads)?;
    check_architecture(&recipe.architecture, recipe.embedding_size)?;
    if !(recipe.lr.is_finite() && recipe.lr > 0.0) {
        return Err(ToolError::Config(format!(
            "--lr must be a positive number, got {}",
            recipe.lr
        )));
    }
    Ok(())
}
