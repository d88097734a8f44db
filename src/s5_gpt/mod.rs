//! Stage 5: a hand-written autograd, a tiny GPT, and its Tiny Shakespeare training run.
//!
//! This stage follows the second seed text, the NumPy chapter "因果注意力" (causal attention) of the
//! GPTmini book "从零开始大模型". It trains a character-level GPT on Tiny Shakespeare for two epochs and
//! prints the test loss and a 512-character sample that starts with `ROMEO:`. Every number comes from a
//! replay of the tutorial's float32 NumPy arithmetic, seeded like it with `np.random.seed(42)`.
//!
//! | module | the tutorial's part |
//! |---|---|
//! | [`tape`] | `Tensor`, `attach` and `backward()`: the autograd |
//! | [`ops`] | tensor operators and the layers `Embedding`, `Linear`, `Softmax`, `Tril`, `GELU`, `GPTLoss` |
//! | [`model`] | `GPTEmbedding`, `GPTAttention`, `GPTFeedForward`, `GPTTransformer`, `GPTOutput`, `GPT` |
//! | [`data`] | `CharDataset` |
//! | [`optim`] | `AdamWOptimizer`, `clip_grad_norm`, `WarmupCosineScheduler` |
//! | [`train`] | `GPTTrainer.train` and `.test` |
//! | [`generate`](mod@generate) | `GPTTrainer.generate` |
//! | [`kernels`] | what NumPy and OpenBLAS do underneath: the matrix product and `np.sum` |
//! | [`team`] | OpenBLAS's threads: the helpers that share out each product's rows |
//!
//! Expected figures with the default [`Config`] (the tutorial's: batch 4, context 32, width 64, 2 blocks,
//! lr 1e-3, 2 epochs = 31,368 steps, seed 42):
//!
//! | figure | this crate | the NumPy tutorial |
//! |---|---|---|
//! | loss at step 0 | 4.1720004 | 4.1720009 (ln 65 ≈ 4.174) |
//! | losses of steps 0–299 | within 7e-7 of a NumPy float32 re-run | |
//! | mean test loss after 31,368 steps | **2.040761** | 2.0406120 (seed text), 2.0406033 (a re-run) |
//! | the sample | `ROMEO:\nFamtany at yow,…` | `ROMEO:\nFamtany at!--will…` |
//! | time per training step | about 1.2–1.6 ms (2-core x86-64, AVX2, 2 threads) | 9.8 ms |
//!
//! The losses drift apart slowly because OpenBLAS adds up a matrix product in another order; the sample
//! follows NumPy's for as long as the probabilities agree closely enough to pick the same characters.
//!
//! The stored chapter prints a test "loss" of 0.2266… because its `test()` divides by the number of
//! *train* batches; [`run`] prints the true mean and, on a line of its own, the chapter's figure.
//!
//! Everything is deterministic: the same bits on every machine and at every thread count (see
//! [`kernels`]).

pub mod app;
pub mod bench;
pub mod checkpoint;
pub mod cli;
pub mod data;
pub mod error;
pub mod generate;
pub mod kernels;
pub mod model;
pub mod ops;
pub mod optim;
pub mod progress;
pub mod tape;
pub mod team;
pub mod train;

use std::io::Write;
use std::path::{Path, PathBuf};

pub use data::{CharDataset, Split};
pub use error::Error;
pub use generate::{Sampling, generate};
pub use model::{Gpt, GptConfig};
pub use optim::{AdamW, WarmupCosine};
pub use progress::Progress;
pub use tape::{NodeId, Tape, Tensor};
pub use train::{TestResult, Trainer};

/// Every setting of a run. `Config::default()` is the tutorial's chapter.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The corpus; `None` looks in the usual places (see [`data::default_data_path`]).
    pub data: Option<PathBuf>,
    pub epochs: usize,
    pub batch_size: usize,
    pub context_size: usize,
    pub embedding_size: usize,
    pub blocks: usize,
    /// The peak learning rate; the schedule ends at a tenth of it.
    pub lr: f64,
    /// `np.random.seed(seed)`: weights and sampling.
    pub seed: u32,
    /// Stop training after this many steps (then evaluate and sample as usual).
    pub max_steps: Option<usize>,
    /// Write `step,lr,loss` for every step to this CSV file.
    pub loss_csv: Option<PathBuf>,
    /// Draw the loss curve into this SVG file.
    pub plot: Option<PathBuf>,
    /// Print a training-loss line to the report every this many steps (0: never).
    pub log_every: usize,
    pub prompt: String,
    /// Characters to generate after the prompt.
    pub sample_len: usize,
    /// Worker threads; 0 means one per available core. The results do not depend on it.
    pub threads: usize,
    /// Show a progress bar on stderr (when it is a terminal) while training and testing.
    pub progress: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data: None,
            epochs: 2,
            batch_size: 4,
            context_size: 32,
            embedding_size: 64,
            blocks: 2,
            lr: 1e-3,
            seed: 42,
            max_steps: None,
            loss_csv: None,
            plot: None,
            log_every: 1000,
            prompt: "ROMEO:".to_string(),
            sample_len: 512,
            threads: 0,
            progress: false,
        }
    }
}

/// What a run produced, for readers of the numbers (a loss curve, the book).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The loss of each step's batch, before that step's update.
    pub losses: Vec<f32>,
    /// The learning rate of each step.
    pub lrs: Vec<f64>,
    /// The mean loss over the test batches.
    pub test_loss: f64,
    /// The stored chapter's figure: the summed test losses over the number of train batches.
    pub test_loss_chapter: f64,
    pub test_batches: usize,
    /// The prompt followed by the generated characters.
    pub sample: String,
}

/// Runs the chapter: load, train, test, generate; writes the report to `out` and returns the figures.
pub fn run<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, Error> {
    with_threads(cfg.threads, || run_chapter(out, cfg))?
}

fn run_chapter<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, Error> {
    let mut trainer = Trainer::new(cfg)?;
    check_prompt(&trainer.dataset, &cfg.prompt)?; // now, not after a minute of training
    describe(out, &mut trainer)?;

    let mut progress = Progress::new("train", "steps", (0, trainer.steps), cfg.progress);
    while trainer.losses.len() < trainer.steps {
        let s = trainer.losses.len();
        let loss = trainer.step()?;
        progress.step(Some(loss));
        if cfg.log_every > 0 && s % cfg.log_every == 0 {
            let lr = trainer.lrs[s];
            progress.suspend(|| writeln!(out, "step {s}: lr {lr}, loss {loss}"))?;
        }
    }
    progress.finish();

    let result = evaluate(&mut trainer, cfg.progress);
    let shape: Vec<String> = result.logits_shape.iter().map(|d| d.to_string()).collect();
    writeln!(
        out,
        "prediction: {} steps, each ({})",
        result.batches,
        shape.join(", ")
    )?;
    writeln!(out, "loss: {}", result.mean())?;
    let train_batches = trainer.dataset.len(Split::Train);
    let chapter = result.loss_sum / train_batches as f64;
    writeln!(
        out,
        "(the stored chapter divides by the {train_batches} train batches and prints {chapter})"
    )?;
    write_curves(cfg, &trainer, Some(result.mean()))?;

    let sample = trainer.generate(&cfg.prompt, cfg.sample_len)?;
    writeln!(out)?;
    writeln!(out, "{sample}")?;
    Ok(Report {
        losses: trainer.losses,
        lrs: trainer.lrs,
        test_loss: result.mean(),
        test_loss_chapter: chapter,
        test_batches: result.batches,
        sample,
    })
}

/// The data and model lines that open a run's report.
pub(crate) fn describe(out: &mut impl Write, trainer: &mut Trainer) -> Result<(), Error> {
    let ds = &trainer.dataset;
    let (chars, symbols) = (ds.tokens.len(), ds.vocab_size());
    let (train, test) = (ds.len(Split::Train), ds.len(Split::Test));
    writeln!(
        out,
        "data: {chars} characters, {symbols} symbols, {train} train batches, {test} test batches"
    )?;
    writeln!(out, "model: {} parameters", trainer.parameter_count())?;
    Ok(())
}

/// The test loss, with a progress bar over the test batches.
pub(crate) fn evaluate(trainer: &mut Trainer, progress: bool) -> TestResult {
    let batches = trainer.dataset.len(Split::Test);
    let mut bar = Progress::new("test", "batches", (0, batches), progress);
    let result = trainer.test(|| bar.step(None));
    bar.finish();
    result
}

/// Writes the loss CSV and the loss-curve SVG that `cfg` asks for.
pub(crate) fn write_curves(
    cfg: &Config,
    trainer: &Trainer,
    test_loss: Option<f64>,
) -> Result<(), Error> {
    if let Some(path) = &cfg.loss_csv {
        let mut text = String::from("step,lr,loss\n");
        for (s, (loss, lr)) in trainer.losses.iter().zip(&trainer.lrs).enumerate() {
            text.push_str(&format!("{s},{lr},{loss}\n"));
        }
        checkpoint::write_atomic(path, text.as_bytes())?;
    }
    if let Some(path) = &cfg.plot {
        let figure = crate::figures::loss_curve(&trainer.losses, test_loss);
        checkpoint::write_atomic(path, figure.svg.as_bytes())?;
    }
    Ok(())
}

/// An empty prompt, or one with a character the model has never seen, cannot start a sample.
pub fn check_prompt(dataset: &CharDataset, prompt: &str) -> Result<(), Error> {
    if prompt.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    dataset.encode(prompt).map(drop)
}

/// More worker threads than any machine this crate runs on has cores.
pub const MAX_THREADS: usize = 256;

/// Runs `f` with `threads` training threads (0: one per core); the kernels share their rows among them.
///
/// The results are the same bits for every `threads`; only the speed changes.
pub fn with_threads<T>(threads: usize, f: impl FnOnce() -> T) -> Result<T, Error> {
    if threads > MAX_THREADS {
        return Err(Error::Config(format!(
            "--threads {threads} is out of range; use 0 (one per core) to {MAX_THREADS}"
        )));
    }
    team::with_team(threads, f)
        .map_err(|e| Error::Config(format!("cannot start {threads} threads: {e}")))
}

/// The sizes a run accepts: flag, value, the largest allowed, the tutorial's. The limits are far above the
/// tutorial's sizes and keep a step's memory within a few GiB.
fn sizes(cfg: &Config) -> [(&'static str, usize, usize, usize); 5] {
    let tutorial = Config::default();
    [
        ("--epochs", cfg.epochs, 1000, tutorial.epochs),
        ("--batch-size", cfg.batch_size, 1024, tutorial.batch_size),
        (
            "--context-size",
            cfg.context_size,
            1024,
            tutorial.context_size,
        ),
        (
            "--embedding-size",
            cfg.embedding_size,
            1024,
            tutorial.embedding_size,
        ),
        ("--blocks", cfg.blocks, 64, tutorial.blocks),
    ]
}

/// Rejects settings that cannot train, before anything is loaded.
pub(crate) fn check(cfg: &Config) -> Result<(), Error> {
    for (flag, value, max, tutorial) in sizes(cfg) {
        if value == 0 || value > max {
            return Err(Error::Config(format!(
                "{flag} {value} is out of range; use 1 to {max} (the tutorial uses {tutorial})"
            )));
        }
    }
    // Found out before training, not a minute later when the file is written.
    for (flag, path) in [("--loss-csv", &cfg.loss_csv), ("--plot", &cfg.plot)] {
        if let Some(dir) = path.as_deref().and_then(Path::parent)
            && !(dir.as_os_str().is_empty() || dir.is_dir())
        {
            return Err(Error::Config(format!(
                "{flag}: the folder {} does not exist; create it or choose another path",
                dir.display()
            )));
        }
    }
    if !(cfg.lr.is_finite() && cfg.lr > 0.0) {
        return Err(Error::Config(format!(
            "--lr must be a positive number, got {}",
            cfg.lr
        )));
    }
    Ok(())
}
