//! Stage 8: what attention learns. Not in either tutorial: the stage follows Elhage et al., *A
//! Mathematical Framework for Transformer Circuits* (2021), and Olsson et al., *In-context Learning
//! and Induction Heads* (2022), and trains their attention-only models from scratch on stage 5's
//! tape, as flags of the sequel's model ([`Architecture`]):
//! `attention_only` and `key_offset`.
//!
//! 1. [`repeats`]: repeated random text, to test with and to train on.
//! 2. [`detectors`]: previous-token, duplicate-token and induction scores of every head.
//! 3. [`icl`]: in-context learning, the second copy's loss and Olsson's score.
//! 4. [`study`]: the phase change, probed while the model trains.
//! 5. [`circuits`]: each head's QK and OV circuits, and K-composition.
//! 6. [`ablation`]: a head taken out, zero or mean.
//!
//! [`exercises`] holds the solutions of the chapter's exercises; `chapter` prints the chapter's
//! outputs and records the study (`cargo run --example s8_heads`, `-- --phase`).

pub mod ablation;
#[cfg(not(target_arch = "wasm32"))]
pub mod app;
#[cfg(not(target_arch = "wasm32"))]
pub mod chapter;
pub mod circuits;
pub mod detectors;
pub mod exercises;
pub mod icl;
pub mod repeats;
pub mod study;

#[cfg(not(target_arch = "wasm32"))]
pub use chapter::{Settings, book_models, phase, run, study_trainer};

use ablation::{Ablation, HeadId, ablated_params};
use circuits::{k_composed_qk_circuit, ov_circuit};
use icl::copy_losses;
use repeats::Repeats;
use study::Probes;

use crate::s5_gpt::backend::Backend;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::data::{CharDataset, Split};
use crate::s5_gpt::train::{Recipe, Trainer};

/// Steps each of the study's models trains.
pub const PHASE_STEPS: usize = 4500;

// ANCHOR: study_models
/// One of the study's models: its name, its architecture, its blocks, and whether repeated random
/// text is mixed into its batches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StudyModel {
    pub name: &'static str,
    pub blocks: usize,
    pub architecture: Architecture,
    pub repeats: Option<Repeats>,
    /// What the token and position tables are multiplied by before training (1: the tutorial's
    /// 0.02·N(0, 1); 50: N(0, 1)).
    pub embedding_scale: f32,
}

/// Every row of a batch carries a random stretch of 8 to 32 characters written twice.
pub const REPEATS: Repeats = Repeats {
    every: 1,
    lengths: (8, 32),
};

/// Half of the rows carry one.
pub const HALF_REPEATS: Repeats = Repeats {
    every: 2,
    lengths: (8, 32),
};

/// The tables at N(0, 1) ([`study::scale_embeddings`]).
pub const UNIT_EMBEDDINGS: f32 = 50.0;

/// Four heads, residual connections, LayerNorm and no feed-forward network.
pub fn attention_only(key_offset: bool) -> Architecture {
    Architecture {
        attention_only: true,
        key_offset,
        ..Architecture::everything(4, 0.0)
    }
}

/// The study: attention-only models of two blocks and of one, one block with the key offset, and
/// the recipes that fail (the tutorial's small embeddings, half the rows repeated, the text
/// alone), then the sequel's fullest model, all from the same seed.
pub fn study_models() -> [StudyModel; 7] {
    let model = |name, blocks, architecture, repeats, embedding_scale| StudyModel {
        name,
        blocks,
        architecture,
        repeats,
        embedding_scale,
    };
    let (ao, offset) = (attention_only(false), attention_only(true));
    let unit = UNIT_EMBEDDINGS;
    [
        model("aon2", 2, ao, Some(REPEATS), unit),
        model("aon1", 1, ao, Some(REPEATS), unit),
        model("aon1-offset", 1, offset, Some(REPEATS), unit),
        model("aon2-small-emb", 2, ao, Some(REPEATS), 1.0),
        model("aon2-half", 2, ao, Some(HALF_REPEATS), unit),
        model("aon2-text", 2, ao, None, unit),
        model(
            "full",
            2,
            Architecture::everything(4, 0.0),
            Some(REPEATS),
            unit,
        ),
    ]
}

/// The study's recipe for `model`: the tutorial's seed, width and schedule, with a longer context,
/// a larger batch and a higher learning rate.
pub fn study_recipe(model: &StudyModel) -> Recipe {
    Recipe {
        epochs: 100, // the schedule's length; the study stops long before
        batch_size: 32,
        context_size: 64,
        embedding_size: 64,
        blocks: model.blocks,
        architecture: model.architecture,
        lr: 3e-3,
        seed: 42,
    }
}
// ANCHOR_END: study_models

/// The trainer of `model` on `dataset` for `steps` steps, its tables scaled before the first step:
/// the study's run, on the command line and in the page.
pub fn study_trainer_on(
    model: &StudyModel,
    dataset: CharDataset,
    steps: usize,
    backend: Box<dyn Backend>,
) -> Trainer {
    let mut trainer = Trainer::new(study_recipe(model), dataset, backend, Some(steps));
    study::scale_embeddings(&mut trainer, model.embedding_scale);
    trainer
}

/// The seed of the probes' repeated random sequences.
pub const PROBE_SEED: u32 = 8;

/// Runs `f` on the trainer with head `id` zero-ablated, then puts the head back.
fn with_ablated_trainer<R>(
    trainer: &mut Trainer,
    (id, ablation): (HeadId, Ablation),
    f: impl FnOnce(&mut Trainer) -> R,
) -> R {
    let model = trainer.model.clone();
    let reference = trainer.dataset.batch(Split::Test, 0); // mean ablation's text
    let tape = &mut trainer.tape;
    let ablated = ablated_params(&model, tape, (id, ablation), (&reference.x, reference.rows));
    let kept: Vec<Vec<f32>> = tape.params().iter().map(|p| p.data.clone()).collect();
    tape.set_params(ablated.iter().map(Vec::as_slice));
    let result = f(trainer);
    trainer.tape.set_params(kept.iter().map(Vec::as_slice));
    result
}

// ANCHOR: look_at
/// The mean loss on the probes' second copies with head `id` taken out (`ablation`), the model
/// left as it was.
pub fn ablated_copy_loss(
    trainer: &mut Trainer,
    probes: &Probes,
    (id, ablation): (HeadId, Ablation),
) -> f64 {
    with_ablated_trainer(trainer, (id, ablation), |t| {
        copy_losses(&t.model, &mut t.tape, &probes.sequences).1
    })
}

/// What the chapter's pictures show of a trained two-block model.
#[derive(Clone, Debug)]
pub struct Trained {
    /// Steps trained.
    pub steps: usize,
    /// The vocabulary, token by token.
    pub vocab: Vec<char>,
    /// The repeated random text the stripe is drawn on, and every head's weights on it:
    /// `maps[block][head]` (T, T), row-major.
    pub text: Vec<usize>,
    pub maps: Vec<Vec<Vec<f32>>>,
    /// The previous-token head of block 0 and the induction head of block 1.
    pub heads: (usize, usize),
    /// The induction head's full OV circuit, and its QK circuit through the previous-token head.
    pub ov: circuits::Matrix,
    pub qk: circuits::Matrix,
    /// Each head zero-ablated and mean-ablated, the model as it is first.
    pub ablation: Vec<Ablated>,
}

/// Characters in the stripe's text: 12 random ones, twice.
pub const STRIPE_LEN: usize = 12;

/// Looks at `trainer`'s two-block model: its heads on a short repeated text, its best
/// previous-token and induction heads' circuits, and each head ablated.
pub fn look_at(trainer: &mut Trainer, probes: &Probes) -> Trained {
    let last = study::probe(trainer, probes, f64::NAN);
    let heads = (last.best(0, 0).0, last.best(1, 2).0);
    let v = trainer.dataset.vocab_size();
    let text = repeats::repeated_random(
        &mut crate::rng::numpy::NumpyRandom::seed(PROBE_SEED + 1),
        STRIPE_LEN,
        v,
    );
    let maps = crate::s5_gpt::beyond::attention_maps(&trainer.model, &mut trainer.tape, &text);
    let (model, tape) = (&trainer.model, &trainer.tape);
    Trained {
        steps: trainer.losses.len(),
        vocab: trainer.dataset.vocab.clone(),
        text,
        maps,
        heads,
        ov: ov_circuit(model, tape, 1, heads.1),
        qk: k_composed_qk_circuit(model, tape, heads.0, heads.1),
        ablation: ablations(trainer, probes),
    }
}

/// One row of the ablation table: the head taken out ("none" for the model as it is), and the
/// loss on the second copy of the probes and on the test split with the head zero-ablated and
/// mean-ablated.
#[derive(Clone, Debug, PartialEq)]
pub struct Ablated {
    pub head: String,
    pub zero: (f64, f64),
    pub mean: (f64, f64),
}

/// The model as it is, then each head zero-ablated and mean-ablated in turn (the mean over the
/// first test batch).
pub fn ablations(trainer: &mut Trainer, probes: &Probes) -> Vec<Ablated> {
    let measure = |trainer: &mut Trainer| {
        let (_, second) = copy_losses(&trainer.model, &mut trainer.tape, &probes.sequences);
        (second, trainer.estimate(probes.test_batches).test)
    };
    let kept = measure(trainer);
    let mut rows = vec![Ablated {
        head: "none".to_string(),
        zero: kept,
        mean: kept,
    }];
    for block in 0..trainer.model.blocks.len() {
        for head in 0..trainer.model.blocks[block].attn.num_heads {
            let id = HeadId { block, head };
            rows.push(Ablated {
                head: format!("b{block}h{head}"),
                zero: with_ablated_trainer(trainer, (id, Ablation::Zero), measure),
                mean: with_ablated_trainer(trainer, (id, Ablation::Mean), measure),
            });
        }
    }
    rows
}
// ANCHOR_END: look_at
