//! How fast a training step is, and where its time goes.
//!
//! [`run`] times training steps of the chapter's model twice: first plainly, for the median time per
//! step and the achieved GFLOP/s, then with the per-part timers on, for the breakdown. The timers are
//! off unless a breakdown is being measured; then the tape charges each node the time since the node
//! before it was pushed (its forward pass) and the time of its gradient, and the training step charges
//! the clip and the update to the optimizer. Off, they cost one relaxed atomic load per node.

use super::model::GptConfig;
use super::train::Trainer;
use super::{Config, Error, with_threads};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The parts of a training step that the breakdown reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Every matrix product: attention's two, and the Linear layers with their bias.
    Products,
    /// Attention's scale, causal mask and softmax.
    Softmax,
    Gelu,
    /// The output softmax and cross-entropy.
    Loss,
    /// Gradient clipping and the AdamW update.
    Optimizer,
    /// Embeddings, the position add, the transpose, and everything not timed on its own.
    Rest,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Products,
        Part::Softmax,
        Part::Gelu,
        Part::Loss,
        Part::Optimizer,
        Part::Rest,
    ];

    fn name(self) -> &'static str {
        match self {
            Part::Products => "matrix products",
            Part::Softmax => "scale, mask, softmax",
            Part::Gelu => "GELU",
            Part::Loss => "loss",
            Part::Optimizer => "clip, AdamW",
            Part::Rest => "the rest",
        }
    }
}

static TIMING: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

/// Whether the per-part timers are on.
#[inline]
pub(super) fn timing() -> bool {
    TIMING.load(Relaxed)
}

/// Adds `time` to `part` (the caller checks [`timing`] first).
pub(super) fn charge(part: Part, time: Duration) {
    NANOS[part as usize].fetch_add(time.as_nanos() as u64, Relaxed);
}

/// Runs `f`, charging its time to `part` when the timers are on.
#[inline]
pub(super) fn timed<R>(part: Part, f: impl FnOnce() -> R) -> R {
    if !timing() {
        return f();
    }
    let started = Instant::now();
    let result = f();
    charge(part, started.elapsed());
    result
}

/// Multiply-adds × 2 of one training step's matrix products: the forward pass's, and twice as many
/// backward (each product's gradient is two products of the same size).
pub fn flops_per_step(model: &GptConfig, batch: usize) -> u64 {
    let (t, c, v) = (model.context_size, model.embedding_size, model.vocab_size);
    let n = batch * t; // N = B·T rows
    let attention = 2 * batch * t * t * c; // x·xᵀ and weights·x
    let linears = n * c * c + 2 * n * c * 4 * c; // attention's output, feed-forward in and out
    let forward = model.blocks * (attention + linears) + n * c * v;
    (3 * 2 * forward) as u64
}

/// What [`run`] measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub threads: usize,
    /// Timed steps (after the untimed warm-up).
    pub steps: usize,
    /// The median time of a training step, timers off.
    pub median: Duration,
    pub flops_per_step: u64,
    /// Each part's median time per step, timers on, in [`Part::ALL`]'s order.
    pub parts: Vec<(Part, Duration)>,
}

impl BenchReport {
    /// Floating-point operations of the matrix products per second, at the median step time.
    pub fn gflops(&self) -> f64 {
        self.flops_per_step as f64 / self.median.as_secs_f64() / 1e9
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        writeln!(
            f,
            "median {:.3} ms per training step over {} steps, {} thread(s)",
            ms(self.median),
            self.steps,
            self.threads
        )?;
        writeln!(
            f,
            "matrix products: {:.1} MFLOP per step, {:.1} GFLOP/s",
            self.flops_per_step as f64 / 1e6,
            self.gflops()
        )?;
        writeln!(f, "per part, median ms per step (timers on):")?;
        for (part, time) in &self.parts {
            writeln!(f, "  {:<22}{:>7.3}", part.name(), ms(*time))?;
        }
        Ok(())
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Times `steps` training steps after `warmup` untimed ones, then as many again with the per-part
/// timers on.
pub fn run(cfg: &Config, warmup: usize, steps: usize) -> Result<BenchReport, Error> {
    let steps = steps.max(1);
    with_threads(cfg.threads, || {
        let mut trainer = Trainer::new(cfg)?;
        let mut s = 0;
        let mut step = |trainer: &mut Trainer| {
            let started = Instant::now();
            trainer.train_step(s % trainer.steps.max(1));
            s += 1;
            started.elapsed()
        };
        for _ in 0..warmup {
            step(&mut trainer);
        }
        let mut times: Vec<Duration> = (0..steps).map(|_| step(&mut trainer)).collect();

        TIMING.store(true, Relaxed);
        let mut per_part = vec![Vec::with_capacity(steps); Part::ALL.len()];
        for _ in 0..steps {
            NANOS.iter().for_each(|n| n.store(0, Relaxed));
            let total = step(&mut trainer);
            let mut timed = Duration::ZERO;
            for part in Part::ALL {
                // The rest is what the other parts leave of the step.
                let time = match part {
                    Part::Rest => total.saturating_sub(timed),
                    _ => Duration::from_nanos(NANOS[part as usize].load(Relaxed)),
                };
                timed += time;
                per_part[part as usize].push(time);
            }
        }
        TIMING.store(false, Relaxed);

        Ok(BenchReport {
            threads: super::team::threads(),
            steps,
            median: median(&mut times),
            flops_per_step: flops_per_step(&trainer.model.config, cfg.batch_size),
            parts: Part::ALL
                .iter()
                .map(|&p| (p, median(&mut per_part[p as usize])))
                .collect(),
        })
    })?
}
