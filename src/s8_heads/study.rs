//! Lesson layer. The phase change, watched: train a model with stage 5's trainer and, every few
//! steps, run the detectors and the in-context measures on fixed probes. Probing runs the model
//! forward on its tape and draws nothing from the training's generators, so a probed run trains
//! the same bits as one that is not probed (`tests/s8_heads.rs` checks it).

use super::detectors::head_scores;
use super::icl::{copy_losses, icl_score};
use super::repeats::{Repeats, repeated_random, repeats_rng};
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::data::Split;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::train::Trainer;

// ANCHOR: probes
/// What every probe runs on: repeated random sequences and a few test batches, fixed for a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Probes {
    /// n random characters twice, n = T/2: the detectors' and the copy losses' input.
    pub sequences: Vec<Vec<usize>>,
    /// Test batches for Olsson's score.
    pub test_batches: usize,
}

impl Probes {
    /// `count` sequences of T/2 characters twice, from `np.random.RandomState(seed)`.
    pub fn new(seed: u32, count: usize, context: usize, vocab: usize) -> Self {
        let mut rng = NumpyRandom::seed(seed);
        let sequences = (0..count)
            .map(|_| repeated_random(&mut rng, context / 2, vocab))
            .collect();
        Probes {
            sequences,
            test_batches: 16,
        }
    }
}

/// One probe of a model: where its heads look and how it learns in context.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// Steps trained before the probe.
    pub step: usize,
    /// The mean training loss of the steps since the last probe.
    pub train_loss: f64,
    /// `heads[block][head]`: previous-token, duplicate-token and induction scores.
    pub heads: Vec<Vec<[f64; 3]>>,
    /// The mean loss on the first and the second copy of the probe sequences.
    pub first_copy: f64,
    pub second_copy: f64,
    /// Olsson's score on the test split: late loss minus early loss.
    pub icl_score: f64,
}

impl Probe {
    /// The highest score of `kind` (0 previous-token, 1 duplicate-token, 2 induction) in block
    /// `block`, and the head that has it.
    pub fn best(&self, block: usize, kind: usize) -> (usize, f64) {
        let scores = self.heads[block].iter().map(|h| h[kind]);
        scores.enumerate().fold(
            (0, f64::NEG_INFINITY),
            |b, (h, s)| if s > b.1 { (h, s) } else { b },
        )
    }
}

/// Probes the trainer's model now.
pub fn probe(trainer: &mut Trainer, probes: &Probes, train_loss: f64) -> Probe {
    let (tape, model) = (&mut trainer.tape, &trainer.model);
    let (first_copy, second_copy) = copy_losses(model, tape, &probes.sequences);
    Probe {
        step: trainer.losses.len(),
        train_loss,
        heads: head_scores(model, tape, &probes.sequences),
        first_copy,
        second_copy,
        icl_score: icl_score(model, tape, &trainer.dataset, probes.test_batches),
    }
}
// ANCHOR_END: probes

// ANCHOR: embedding_scale
/// The token and position tables times `scale`. The tutorial draws them as 0.02·N(0, 1), GPT-2's
/// choice; beside its He-initialised layers that is so small that the first block's output drowns
/// each character's own row in the stream, and a second block cannot tell which character it is
/// at. Times 50 they start at N(0, 1), PyTorch's `nn.Embedding` default.
pub fn scale_embeddings(trainer: &mut Trainer, scale: f32) {
    let model = &trainer.model;
    let tables: Vec<usize> = [Some(model.tok_emb), model.pos_emb]
        .into_iter()
        .flatten()
        .map(|id| id.0)
        .collect();
    let mut params: Vec<Vec<f32>> = trainer
        .tape
        .params()
        .iter()
        .map(|p| p.data.clone())
        .collect();
    for t in tables {
        params[t].iter_mut().for_each(|x| *x *= scale);
    }
    trainer.tape.set_params(params.iter().map(Vec::as_slice));
}
// ANCHOR_END: embedding_scale

// ANCHOR: train_probed
/// Trains from the next step to the trainer's last, batch s mod n of the training split with
/// `repeats` mixed in (if any), and probes the model before the first step and after every
/// `every`-th; `each` sees every probe as it is taken. Returns the probes.
pub fn train_probed(
    trainer: &mut Trainer,
    repeats: Option<Repeats>,
    (probes, every): (&Probes, usize),
    mut each: impl FnMut(&Probe),
) -> Result<Vec<Probe>, GptError> {
    let mut taken = vec![probe(trainer, probes, f64::NAN)];
    each(&taken[0]);
    while trainer.losses.len() < trainer.steps {
        let s = trainer.losses.len();
        mixed_step(trainer, repeats)?;
        if (s + 1).is_multiple_of(every) || s + 1 == trainer.steps {
            let loss = mean_loss_since(trainer, taken.last().map_or(0, |p| p.step));
            taken.push(probe(trainer, probes, loss));
            each(taken.last().expect("just pushed"));
        }
    }
    Ok(taken)
}

/// One training step s on batch s mod n of the training split, `repeats` mixed in (if any) from
/// the generator of step s, so that any step can be trained alone and give the same bits. Returns
/// its loss.
pub fn mixed_step(trainer: &mut Trainer, repeats: Option<Repeats>) -> Result<f32, GptError> {
    let s = trainer.losses.len();
    let (seed, vocab) = (trainer.recipe.seed, trainer.dataset.vocab_size());
    let mut batch = trainer
        .dataset
        .batch(Split::Train, s % trainer.dataset.len(Split::Train));
    if let Some(repeats) = repeats {
        repeats.mix(&mut batch, vocab, &mut repeats_rng(seed, s));
    }
    trainer.step(&batch)
}
// ANCHOR_END: train_probed

/// The mean training loss of the steps after the first `step`.
pub fn mean_loss_since(trainer: &Trainer, step: usize) -> f64 {
    let since = &trainer.losses[step..];
    since.iter().map(|&l| f64::from(l)).sum::<f64>() / since.len() as f64
}

impl Probe {
    /// The probe as a line of the study's record (`s8_heads --phase`), for the model `model`.
    pub fn line(&self, model: &str) -> String {
        let heads: Vec<String> = (self.heads.iter().enumerate())
            .flat_map(|(b, heads)| {
                let cell = move |(h, s): (usize, &[f64; 3])| {
                    format!("b{b}h{h}={:.3}/{:.3}/{:.3}", s[0], s[1], s[2])
                };
                heads.iter().enumerate().map(cell)
            })
            .collect();
        format!(
            "model={model} step={} train_loss={:.4} first_copy={:.4} second_copy={:.4} icl={:.4} {}",
            self.step,
            self.train_loss,
            self.first_copy,
            self.second_copy,
            self.icl_score,
            heads.join(" ")
        )
    }
}
