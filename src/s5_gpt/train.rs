//! Lesson layer. The tutorial's `GPTTrainer`: its hyperparameters, `train` (one optimiser step per
//! batch), `test` (the mean test loss) and `generate`.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use super::backend::Backend;
use super::beyond::{Architecture, Gpt, GptConfig, dropout_masks};
use super::data::{Batch, CharDataset, Split};
use super::error::GptError;
use super::generate::{Sampling, generate};
use super::model::Model;
use super::optim::{AdamW, WarmupCosine};
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

/// Linear warm-up steps of the tutorial's scheduler.
pub const WARMUP_STEPS: usize = 100;

/// The largest global gradient norm the tutorial lets through (`clip_grad_norm()`'s default).
pub const MAX_GRAD_NORM: f64 = 1.0;

/// The tutorial's hyperparameters (`EPOCHS`, `BATCH_SIZE`, `CONTEXT_SIZE`, `EMBEDDING_SIZE`,
/// `BLOCKS`, `LEARNING_RATE`) and its seed. `Recipe::default()` is the chapter's.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub epochs: usize,
    pub batch_size: usize,
    pub context_size: usize,
    pub embedding_size: usize,
    pub blocks: usize,
    /// What the model adds to the tutorial's; serialised flat, as fields of the recipe itself.
    #[serde(flatten)]
    pub architecture: Architecture,
    /// The peak learning rate; the schedule ends at a tenth of it.
    pub lr: f64,
    /// `np.random.seed(seed)`: the initial weights, then the sampling.
    pub seed: u32,
}

impl Default for Recipe {
    fn default() -> Self {
        Recipe {
            epochs: 2,
            batch_size: 4,
            context_size: 32,
            embedding_size: 64,
            blocks: 2,
            architecture: Architecture::default(),
            lr: 1e-3,
            seed: 42,
        }
    }
}

// ANCHOR: train_step
/// One training step, in the tutorial's order: zero the gradients, forward and loss, backward,
/// clip, update. `loss` records the model's forward pass and its loss on the tape and returns the
/// loss node. Returns the loss of this batch before the update.
pub fn train_step(
    tape: &mut Tape,
    optimizer: &mut AdamW,
    lr: f64,
    loss: impl FnOnce(&mut Tape) -> NodeId,
) -> f32 {
    optimizer.lr = lr;
    tape.reset();
    tape.zero_grad();
    let loss = loss(tape); // ()
    let value = tape.value(loss).data[0];
    tape.backward(loss);
    tape.clip_grad_norm(MAX_GRAD_NORM);
    tape.step(optimizer);
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
    /// The mean loss per test batch: Σ / 1,742 for Tiny Shakespeare (2.0406 after two epochs).
    pub fn mean(&self) -> f64 {
        self.loss_sum / self.batches as f64
    }
}

// ANCHOR: test
/// Runs every test batch through the model (no gradients) and sums the per-batch mean
/// cross-entropies; `each` is called after every batch (for a progress bar).
pub fn test(
    tape: &mut Tape,
    model: &impl Model,
    dataset: &CharDataset,
    mut each: impl FnMut(),
) -> TestResult {
    let mut loss_sum = 0.0f64;
    let mut logits_shape = vec![];
    let batches = dataset.len(Split::Test);
    for i in 0..batches {
        let batch = dataset.batch(Split::Test, i);
        tape.reset();
        let logits = model.logits(tape, &batch.x, batch.rows); // (B, T, V)
        logits_shape.clone_from(&tape.value(logits).shape);
        let loss = tape.cross_entropy(logits, &batch.y); // ()
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

// ANCHOR: estimate
/// The model's loss at one point of a run, estimated on fixed batches of each split.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Steps trained before the estimate: the model whose loss row `step` of the log shows.
    pub step: usize,
    /// The mean loss on the fixed training batches.
    pub train: f64,
    /// The mean loss on the fixed held-out (test) batches.
    pub test: f64,
}

/// The mean loss on `k` fixed batches of `split`, spread evenly over it (batch i·n/k for i < k),
/// without dropout or gradients, as nanoGPT's `estimate_loss` does every `eval_interval` steps.
/// The same batches every time, so two estimates differ only because the model changed. It draws
/// no random numbers and changes no parameter, so a run that estimates trains the same bits as one
/// that does not. NaN when the split has no batch.
pub fn estimate(
    tape: &mut Tape,
    model: &impl Model,
    dataset: &CharDataset,
    split: Split,
    k: usize,
) -> f64 {
    let n = dataset.len(split);
    let k = k.min(n);
    let mut loss_sum = 0.0f64;
    for i in 0..k {
        let batch = dataset.batch(split, i * n / k);
        tape.reset();
        let logits = model.logits(tape, &batch.x, batch.rows); // (B, T, V)
        let loss = tape.cross_entropy(logits, &batch.y); // ()
        loss_sum += f64::from(tape.value(loss).data[0]);
    }
    tape.reset();
    loss_sum / k as f64
}
// ANCHOR_END: estimate

// ANCHOR: trainer
/// The chapter's set-up and `GPTTrainer` in one place: dataset, model, optimiser, schedule and
/// generator.
#[derive(Debug)]
pub struct Trainer {
    pub recipe: Recipe,
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
    /// The loss of every step trained so far, before its update; the next step is `losses.len()`.
    pub losses: Vec<f32>,
    /// The learning rate of every step trained so far.
    pub lrs: Vec<f64>,
}

impl Trainer {
    /// Seeds the generator and builds the model in the tutorial's order; `backend` does the
    /// arithmetic.
    pub fn new(
        recipe: Recipe,
        dataset: CharDataset,
        backend: Box<dyn Backend>,
        max_steps: Option<usize>,
    ) -> Self {
        let mut rng = NumpyRandom::seed(recipe.seed);
        let mut tape = Tape::with_backend(backend);
        let config = GptConfig {
            vocab_size: dataset.vocab_size(),
            context_size: recipe.context_size,
            embedding_size: recipe.embedding_size,
            blocks: recipe.blocks,
            architecture: recipe.architecture,
        };
        let model = Gpt::new(&mut tape, &mut rng, config);
        let total = recipe.epochs * dataset.len(Split::Train);
        let schedule = WarmupCosine::new(recipe.lr, total, WARMUP_STEPS, recipe.lr / 10.0);
        let steps = max_steps.map_or(total, |m| m.min(total));
        let (losses, lrs) = (vec![], vec![]); // grown step by step: a run may stop early
        let optimizer = AdamW::new(recipe.lr);
        Trainer {
            recipe,
            dataset,
            tape,
            model,
            rng,
            optimizer,
            schedule,
            steps,
            losses,
            lrs,
        }
    }

    /// Trains from the next step to `steps`, one batch after another (no shuffling, batch s mod
    /// 15,684), and calls `each` after every step; `each` may stop the run early.
    pub fn train(
        &mut self,
        mut each: impl FnMut(&mut Trainer) -> ControlFlow<()>,
    ) -> Result<(), GptError> {
        while self.losses.len() < self.steps {
            let s = self.losses.len();
            let batch = self
                .dataset
                .batch(Split::Train, s % self.dataset.len(Split::Train));
            self.step(&batch)?;
            if each(self).is_break() {
                break;
            }
        }
        Ok(())
    }

    /// Trains the next step on `batch` and returns its loss before the update. A loss that is not
    /// a finite number ends the run with an error: every later step would be NaN too.
    pub fn step(&mut self, batch: &Batch) -> Result<f32, GptError> {
        let s = self.losses.len();
        let lr = self.schedule.lr(s);
        let dropout = self.recipe.architecture.dropout > 0.0;
        let mut masks = dropout.then(|| dropout_masks(self.recipe.seed, s));
        let (tape, optimizer, model) = (&mut self.tape, &mut self.optimizer, &self.model);
        let loss = train_step(tape, optimizer, lr, |tape| {
            let logits = model.forward(tape, &batch.x, batch.rows, masks.as_mut()); // (B, T, V)
            tape.cross_entropy(logits, &batch.y) // ()
        });
        if !loss.is_finite() {
            return Err(GptError::LossNotFinite {
                step: s,
                loss,
                lr: self.recipe.lr,
            });
        }
        self.losses.push(loss);
        self.lrs.push(lr);
        Ok(loss)
    }

    /// The mean loss over the test split; `each` is called after every batch.
    pub fn test(&mut self, each: impl FnMut()) -> TestResult {
        test(&mut self.tape, &self.model, &self.dataset, each)
    }

    /// The loss now on `k` fixed training batches and `k` fixed test batches ([`estimate`]).
    pub fn estimate(&mut self, k: usize) -> Estimate {
        let (tape, model, dataset) = (&mut self.tape, &self.model, &self.dataset);
        Estimate {
            step: self.losses.len(),
            train: estimate(tape, model, dataset, Split::Train, k),
            test: estimate(tape, model, dataset, Split::Test, k),
        }
    }

    /// `prompt` and `steps` sampled characters, continuing the generator's stream.
    pub fn generate(&mut self, prompt: &str, steps: usize) -> Result<String, GptError> {
        let (tape, model, rng) = (&mut self.tape, &self.model, &mut self.rng);
        generate(
            tape,
            model,
            &self.dataset,
            prompt,
            steps,
            rng,
            Sampling::default(),
        )
    }
}
// ANCHOR_END: trainer

/// Counts the tool and the chapter print.
impl Trainer {
    /// The parameters in the tutorial's order.
    pub fn parameters(&self) -> &[Tensor] {
        self.tape.params()
    }

    pub fn parameter_count(&self) -> usize {
        self.parameters().iter().map(|p| p.data.len()).sum()
    }
}
