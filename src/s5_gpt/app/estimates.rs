//! Tool layer. `--eval-every N`: the loss on fixed train and held-out batches every N steps, as
//! nanoGPT reports it every `eval_interval`, so that a run shows whether the model learns what
//! generalises or only its training text. The estimates change nothing else: they draw no random
//! numbers and update no parameter.

use super::config::Config;
use crate::s5_gpt::train::{Estimate, Trainer};

/// The estimates of one run so far.
#[derive(Clone, Debug, Default)]
pub struct Estimates {
    every: usize,
    batches: usize,
    pub points: Vec<Estimate>,
}

impl Estimates {
    /// Estimates every `cfg.eval_every` steps on `cfg.eval_batches` batches; none when it is 0.
    pub fn new(cfg: &Config) -> Self {
        Estimates {
            every: cfg.eval_every,
            batches: cfg.eval_batches,
            points: vec![],
        }
    }

    /// Estimates the loss now, if the trainer has trained a multiple of N steps (0 included) that
    /// has no estimate yet, and returns the line to print.
    pub fn due(&mut self, trainer: &mut Trainer) -> Option<String> {
        let step = trainer.losses.len();
        let done = self.points.last().is_some_and(|e| e.step == step);
        if self.every == 0 || !step.is_multiple_of(self.every) || done {
            return None;
        }
        let estimate = trainer.estimate(self.batches);
        self.points.push(estimate);
        Some(line(&estimate))
    }
}

/// The log line of an estimate.
pub fn line(e: &Estimate) -> String {
    format!(
        "estimate after {} steps: train {:.4}, held-out {:.4}",
        e.step, e.train, e.test
    )
}
