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
//! | time per training step | about 2.0–2.8 ms (2-core x86-64, AVX2) | 9.8 ms |
//!
//! The losses drift apart slowly because OpenBLAS adds up a matrix product in another order; the sample
//! follows NumPy's for as long as the probabilities agree closely enough to pick the same characters.
//!
//! The stored chapter prints a test "loss" of 0.2266… because its `test()` divides by the number of
//! *train* batches; [`run`] prints the true mean and, on a line of its own, the chapter's figure.
//!
//! Everything is deterministic: the same bits on every machine and at every thread count (see
//! [`kernels`]).

pub mod bench;
pub mod data;
pub mod error;
pub mod generate;
pub mod kernels;
pub mod model;
pub mod ops;
pub mod optim;
pub mod tape;
pub mod train;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use data::{CharDataset, Split};
pub use error::Error;
pub use generate::generate;
pub use model::{Gpt, GptConfig};
pub use optim::{AdamW, WarmupCosine};
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
    /// Print a training-loss line to the report every this many steps (0: never).
    pub log_every: usize,
    pub prompt: String,
    /// Characters to generate after the prompt.
    pub sample_len: usize,
    /// Worker threads; 0 means one per available core. The results do not depend on it.
    pub threads: usize,
    /// Show progress (step, loss, elapsed time) on stderr while training.
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
///
/// `out` must be `Send` because the run happens on the worker pool (`std::io::stdout()` and `Vec<u8>` are).
pub fn run<W: Write + Send>(out: &mut W, cfg: &Config) -> Result<Report, Error> {
    with_threads(cfg.threads, || run_in_pool(out, cfg))?
}

fn run_in_pool<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, Error> {
    let mut trainer = Trainer::new(cfg)?;
    let ds = &trainer.dataset;
    let train_batches = ds.len(Split::Train);
    let (chars, symbols, test_batches) = (ds.tokens.len(), ds.vocab_size(), ds.len(Split::Test));
    writeln!(
        out,
        "data: {chars} characters, {symbols} symbols, {train_batches} train batches, {test_batches} test batches"
    )?;
    writeln!(out, "model: {} parameters", trainer.parameter_count())?;

    let started = Instant::now();
    let steps = trainer.steps;
    let (mut losses, mut lrs) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
    for s in 0..steps {
        let (lr, loss) = trainer.train_step(s);
        losses.push(loss);
        lrs.push(lr);
        if cfg.log_every > 0 && s % cfg.log_every == 0 {
            writeln!(out, "step {s}: lr {lr}, loss {loss}")?;
        }
        if cfg.progress && (s % 500 == 0 || s + 1 == steps) {
            let secs = started.elapsed().as_secs_f64();
            eprintln!("step {}/{steps}  loss {loss:.4}  {secs:.1} s", s + 1);
        }
    }
    if let Some(path) = &cfg.loss_csv {
        write_loss_csv(path, &losses, &lrs)?;
    }

    let result = trainer.test();
    let shape: Vec<String> = result.logits_shape.iter().map(|d| d.to_string()).collect();
    writeln!(
        out,
        "prediction: {} steps, each ({})",
        result.batches,
        shape.join(", ")
    )?;
    writeln!(out, "loss: {}", result.mean())?;
    let chapter = result.loss_sum / train_batches as f64;
    writeln!(
        out,
        "(the stored chapter divides by the {train_batches} train batches and prints {chapter})"
    )?;

    let sample = trainer.generate(&cfg.prompt, cfg.sample_len)?;
    writeln!(out)?;
    writeln!(out, "{sample}")?;
    Ok(Report {
        losses,
        lrs,
        test_loss: result.mean(),
        test_loss_chapter: chapter,
        test_batches: result.batches,
        sample,
    })
}

/// Times `steps` training steps after `warmup` untimed ones; returns each timed step's duration.
pub fn bench(cfg: &Config, warmup: usize, steps: usize) -> Result<Vec<Duration>, Error> {
    with_threads(cfg.threads, || {
        let mut trainer = Trainer::new(cfg)?;
        let mut times = Vec::with_capacity(steps);
        for s in 0..warmup + steps {
            let started = Instant::now();
            trainer.train_step(s);
            if s >= warmup {
                times.push(started.elapsed());
            }
        }
        Ok(times)
    })?
}

/// Runs `f` on a pool of `threads` workers (0: one per core); the kernels share their rows among them.
///
/// The results are the same bits for every `threads`; only the speed changes.
pub fn with_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T, Error> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::Config(format!("cannot start {threads} threads: {e}")))?;
    Ok(pool.install(f))
}

pub(crate) fn check(cfg: &Config) -> Result<(), Error> {
    let positive = [
        ("--batch-size", cfg.batch_size),
        ("--context-size", cfg.context_size),
        ("--embedding-size", cfg.embedding_size),
    ];
    for (flag, value) in positive {
        if value == 0 {
            return Err(Error::Config(format!("{flag} must be at least 1")));
        }
    }
    // Found out before training, not two minutes later when the file is written.
    if let Some(dir) = cfg.loss_csv.as_deref().and_then(Path::parent)
        && !(dir.as_os_str().is_empty() || dir.is_dir())
    {
        return Err(Error::Config(format!(
            "--loss-csv: the folder {} does not exist; create it or choose another path",
            dir.display()
        )));
    }
    if !(cfg.lr.is_finite() && cfg.lr > 0.0) {
        return Err(Error::Config(format!(
            "--lr must be a positive number, got {}",
            cfg.lr
        )));
    }
    Ok(())
}

/// A header, then `step,lr,loss` per step; written next to the target and renamed into place.
fn write_loss_csv(path: &Path, losses: &[f32], lrs: &[f64]) -> Result<(), Error> {
    let mut text = String::from("step,lr,loss\n");
    for (s, (loss, lr)) in losses.iter().zip(lrs).enumerate() {
        text.push_str(&format!("{s},{lr},{loss}\n"));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(&tmp, text).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}
