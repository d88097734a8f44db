//! The chapter's `GPTTrainer`: `train` (one optimiser step per batch) and `test` (the mean test loss).

use super::bench::{self, Part};
use super::checkpoint::Checkpoint;
use super::data::{Batch, CharDataset, Split, default_data_path};
use super::error::Error;
use super::generate::{Sampling, generate};
use super::model::{Gpt, GptConfig};
use super::optim::{AdamW, WarmupCosine, clip_grad_norm};
use super::tape::{Tape, Tensor};
use super::{Config, check};
use crate::rng::numpy::NumpyRandom;

/// Linear warm-up steps of the tutorial's scheduler.
pub const WARMUP_STEPS: usize = 100;

/// The largest global gradient norm the tutorial lets through (`clip_grad_norm()`'s default).
pub const MAX_GRAD_NORM: f64 = 1.0;

// ANCHOR: train_step
/// One training step, in the tutorial's order: zero the gradients, forward, loss, backward, clip, update.
/// Returns the loss of this batch before the update.
pub fn train_step(
    tape: &mut Tape,
    model: &Gpt,
    optimizer: &mut AdamW,
    batch: &Batch,
    lr: f64,
) -> f32 {
    optimizer.lr = lr;
    tape.reset();
    tape.zero_grad();
    let logits = model.forward(tape, &batch.x, batch.rows); // (B, T, V)
    let loss = tape.cross_entropy(logits, &batch.y); // ()
    let value = tape.value(loss).data[0];
    tape.backward(loss);
    let (params, grads) = tape.params_mut();
    bench::timed(Part::Optimizer, || {
        clip_grad_norm(grads, MAX_GRAD_NORM);
        optimizer.step(params, grads);
    });
    value
}
// ANCHOR_END: train_step

/// What `test()` computes over the test split.
#[derive(Clone, Debug, PartialEq)]
pub struct TestResult {
    /// Test batches evaluated (the chapter's "1742 steps").
    pub batches: usize,
    /// The logits' shape of one batch, (B, T, V).
    pub logits_shape: Vec<usize>,
    /// Σ of the per-batch mean losses, in double precision.
    pub loss_sum: f64,
}

impl TestResult {
    /// The true mean loss per test batch: Σ / 1,742 for Tiny Shakespeare (2.0406 after two epochs).
    pub fn mean(&self) -> f64 {
        self.loss_sum / self.batches as f64
    }
}

// ANCHOR: test
/// Runs every test batch through the model (no gradients) and sums the per-batch mean cross-entropies;
/// `each` is called after every batch (for a progress bar).
///
/// The stored NumPy chapter divides this sum by `len(dataset)` *after* switching the dataset back to
/// training mode, i.e. by the 15,684 train batches instead of the 1,742 test batches, and prints
/// 0.2266… instead of 2.0406…. [`TestResult::mean`] divides by the number of test batches.
pub fn test(
    tape: &mut Tape,
    model: &Gpt,
    dataset: &CharDataset,
    mut each: impl FnMut(),
) -> TestResult {
    let mut loss_sum = 0.0f64;
    let mut logits_shape = vec![];
    let batches = dataset.len(Split::Test);
    for i in 0..batches {
        let batch = dataset.batch(Split::Test, i);
        tape.reset();
        let logits = model.forward(tape, &batch.x, dataset.batch_size); // (B, T, V)
        logits_shape.clone_from(&tape.value(logits).shape);
        let loss = tape.cross_entropy(logits, &batch.y);
        loss_sum += f64::from(tape.value(loss).data[0]);
        each();
    }
    tape.reset();
    TestResult {
        batches,
        logits_shape,
        loss_sum,
    }
}
// ANCHOR_END: test

// ANCHOR: trainer
/// The chapter's set-up and `GPTTrainer` in one place: dataset, model, optimiser, schedule and generator.
#[derive(Debug)]
pub struct Trainer {
    pub dataset: CharDataset,
    /// Holds the parameters (its first nodes) and, during a step, the graph.
    pub tape: Tape,
    pub model: Gpt,
    /// The `np.random.seed` stream: initial weights, then sampling.
    pub rng: NumpyRandom,
    pub optimizer: AdamW,
    pub schedule: WarmupCosine,
    /// Steps this run trains: epochs × train batches, or fewer with `max_steps`.
    pub steps: usize,
    /// The settings it was made with.
    pub config: Config,
    /// The loss of every step trained so far, before its update; the next step is `losses.len()`.
    pub losses: Vec<f32>,
    /// The learning rate of every step trained so far.
    pub lrs: Vec<f64>,
}

impl Trainer {
    /// Loads the data, seeds the generator and builds the model, in the tutorial's order.
    pub fn new(cfg: &Config) -> Result<Self, Error> {
        check(cfg)?;
        let path = cfg.data.clone().unwrap_or_else(default_data_path);
        let dataset = CharDataset::load(&path, cfg.batch_size, cfg.context_size)?;
        let mut rng = NumpyRandom::seed(cfg.seed);
        let mut tape = Tape::new();
        let config = GptConfig {
            vocab_size: dataset.vocab_size(),
            context_size: cfg.context_size,
            embedding_size: cfg.embedding_size,
            blocks: cfg.blocks,
        };
        let model = Gpt::new(&mut tape, &mut rng, config);
        let total = cfg.epochs * dataset.len(Split::Train);
        let schedule = WarmupCosine::new(cfg.lr, total, WARMUP_STEPS, cfg.lr / 10.0);
        let steps = cfg.max_steps.map_or(total, |m| m.min(total));
        let optimizer = AdamW::new(cfg.lr);
        Ok(Trainer {
            dataset,
            tape,
            model,
            rng,
            optimizer,
            schedule,
            steps,
            config: cfg.clone(),
            losses: Vec::with_capacity(steps),
            lrs: Vec::with_capacity(steps),
        })
    }

    /// Trains the next step and records its loss and learning rate. A loss that is not a finite number
    /// ends the run: every later step would be NaN too.
    pub fn step(&mut self) -> Result<f32, Error> {
        let s = self.losses.len();
        let (lr, loss) = self.train_step(s);
        if !loss.is_finite() {
            let lr = self.config.lr;
            return Err(Error::LossNotFinite { step: s, loss, lr });
        }
        self.losses.push(loss);
        self.lrs.push(lr);
        Ok(loss)
    }

    /// Continues from a checkpoint of this same run: its weights, AdamW's state and the history.
    pub fn restore(&mut self, checkpoint: &Checkpoint) -> Result<(), Error> {
        let state = checkpoint.train_state()?;
        self.restore_weights(checkpoint);
        self.optimizer.restore(state.adam_t, state.m, state.v);
        (self.losses, self.lrs) = (state.losses, state.lrs);
        Ok(())
    }

    /// Global step `s`: batch `s mod 15,684` (no shuffling), at the scheduled learning rate.
    /// Returns the learning rate and the batch's loss before the update.
    pub fn train_step(&mut self, s: usize) -> (f64, f32) {
        let lr = self.schedule.lr(s);
        let batch = self
            .dataset
            .batch(Split::Train, s % self.dataset.len(Split::Train));
        (
            lr,
            train_step(&mut self.tape, &self.model, &mut self.optimizer, &batch, lr),
        )
    }

    /// The mean loss over the test split; `each` is called after every batch.
    pub fn test(&mut self, each: impl FnMut()) -> TestResult {
        test(&mut self.tape, &self.model, &self.dataset, each)
    }

    /// Takes the checkpoint's weights (and nothing else: enough to test or sample).
    pub fn restore_weights(&mut self, checkpoint: &Checkpoint) {
        let (params, _) = self.tape.params_mut();
        for (p, (_, _, values)) in params.iter_mut().zip(&checkpoint.weights) {
            p.data.clone_from(values);
        }
    }

    /// `prompt` and `steps` sampled characters, continuing the generator's stream.
    pub fn generate(&mut self, prompt: &str, steps: usize) -> Result<String, Error> {
        generate(
            &mut self.tape,
            &self.model,
            &self.dataset,
            prompt,
            steps,
            &mut self.rng,
            Sampling::default(),
        )
    }

    /// The parameters in the tutorial's order.
    pub fn parameters(&mut self) -> &[Tensor] {
        self.tape.params_mut().0
    }

    pub fn parameter_count(&mut self) -> usize {
        self.parameters().iter().map(|p| p.data.len()).sum()
    }
}
// ANCHOR_END: trainer
