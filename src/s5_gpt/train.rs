//! The chapter's `GPTTrainer`: `train` (one optimiser step per batch) and `test` (the mean test loss).

use super::data::{Batch, CharDataset, Split};
use super::model::Gpt;
use super::optim::{AdamW, clip_grad_norm};
use super::tape::Tape;

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
    clip_grad_norm(grads, MAX_GRAD_NORM);
    optimizer.step(params, grads);
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
/// Runs every test batch through the model (no gradients) and sums the per-batch mean cross-entropies.
///
/// The stored NumPy chapter divides this sum by `len(dataset)` *after* switching the dataset back to
/// training mode, i.e. by the 15,684 train batches instead of the 1,742 test batches, and prints
/// 0.2266… instead of 2.0406…. [`TestResult::mean`] divides by the number of test batches.
pub fn test(tape: &mut Tape, model: &Gpt, dataset: &CharDataset) -> TestResult {
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
    }
    tape.reset();
    TestResult {
        batches,
        logits_shape,
        loss_sum,
    }
}
// ANCHOR_END: test
