//! Tool layer. The measuring of the chapter "What the tutorial's model leaves out": the tutorial's
//! model, each thing it leaves out added on its own, then all of them, each trained with the
//! tutorial's recipe; the tutorial's model masked with 0 instead of −1e9; and the attention weights
//! of a trained model.
//!
//! `cargo run --release --example ablation` trains every row for the tutorial's two epochs, keeps
//! what it measured in a [`Record`](crate::figures::ablation::Record), and draws from it the tables
//! the book includes ([`crate::figures::ablation`]), once in each edition's words;
//! `tests/s5_beyond.rs` locks a short version of the same tables.

use std::time::Instant;

use super::config::Config;
use super::progress::Progress;
use crate::figures::ablation::{MaskZero, Measured, SAMPLE_LEN, Variant};
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::ops::MASK_VALUE;
use crate::s5_gpt::train::{Recipe, Trainer};

/// Steps whose training losses are averaged: a batch of 4 windows is too noisy to read alone.
pub const TRAIN_WINDOW: usize = 1000;

/// The mean of the last [`TRAIN_WINDOW`] losses.
fn recent_mean(losses: &[f32]) -> f64 {
    let recent = &losses[losses.len().saturating_sub(TRAIN_WINDOW)..];
    recent.iter().map(|&l| f64::from(l)).sum::<f64>() / recent.len().max(1) as f64
}

/// [`measure`] for a model of `architecture` that the ablation's tables do not name: stage 7's
/// variants, named by `name` and the `flags` that train it.
pub fn measure_architecture(
    (name, flags): (&str, String),
    architecture: Architecture,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<(Trainer, Measured), ToolError> {
    let variant = Variant {
        name: name.to_string(),
        name_zh: name.to_string(),
        flags,
        architecture,
    };
    measure(&variant, max_steps, progress)
}

/// Trains `variant` with the tutorial's recipe for `max_steps` (the two epochs if `None`), then
/// tests it and samples from it. Returns the trained model too.
pub fn measure(
    variant: &Variant,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<(Trainer, Measured), ToolError> {
    let cfg = Config {
        recipe: Recipe {
            architecture: variant.architecture,
            ..Recipe::default()
        },
        max_steps,
        progress,
        ..Config::default()
    };
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        let mut bar = Progress::new(&variant.name, "steps", (0, trainer.steps), progress);
        let mut times = Vec::with_capacity(trainer.steps);
        let mut started = Instant::now();
        trainer.train(|trainer| {
            times.push(started.elapsed().as_secs_f64() * 1e3);
            bar.step(trainer.losses.last().copied());
            started = Instant::now();
            std::ops::ControlFlow::Continue(())
        })?;
        bar.finish();
        times.sort_by(f64::total_cmp);
        let test = super::chapter::test(&mut trainer, progress);
        let maps = attention_maps(&mut trainer, LINE)?;
        let measured = Measured {
            variant: variant.clone(),
            parameters: trainer.parameter_count(),
            steps: trainer.losses.len(),
            train_loss: recent_mean(&trainer.losses),
            test_loss: test.mean(),
            ms_per_step: times.get(times.len() / 2).copied().unwrap_or(0.0),
            self_weight: self_weight(&maps),
            sample: trainer.generate("ROMEO:", SAMPLE_LEN)?,
        };
        Ok((trainer, measured))
    })
}

/// The mean of `maps[b][h][i][i]` over blocks b, heads h and characters i ≥ 1.
fn self_weight(maps: &[Vec<Vec<f32>>]) -> f64 {
    let diagonal = maps.iter().flatten().flat_map(|weights| {
        let t = weights.len().isqrt();
        (1..t).map(move |i| f64::from(weights[i * t + i]))
    });
    let (sum, n) = diagonal.fold((0.0, 0), |(s, n), w| (s + w, n + 1));
    sum / f64::from(n.max(1))
}

/// Trains `variant` masked with 0, then tests it with the future in view and with it hidden.
pub fn mask_value_0(
    variant: &Variant,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<MaskZero, ToolError> {
    let (mut trainer, measured) = measure(&variant.masked_with_0(), max_steps, progress)?;
    for block in &mut trainer.model.blocks {
        block.attn.mask_value = MASK_VALUE;
    }
    let hidden = Config::default().with_threads(|| Ok(trainer.test(|| ())))?;
    Ok(MaskZero {
        measured,
        test_loss_future_hidden: hidden.mean(),
    })
}

/// The attention weights of every head of every block of `trainer`'s model on `line`: for block b
/// and head h, a (T, T) matrix, row i holding character i's weights over the characters 0..=i.
pub fn attention_maps(trainer: &mut Trainer, line: &str) -> Result<Vec<Vec<Vec<f32>>>, ToolError> {
    let ids = trainer.dataset.encode(line)?;
    Ok(crate::s5_gpt::beyond::attention_maps(
        &trainer.model,
        &mut trainer.tape,
        &ids,
    ))
}

/// A line of the corpus, for [`attention_maps`]: the first T characters of Richard III's
/// "A horse! a horse! my kingdom for a horse!".
pub const LINE: &str = "A horse! a horse! my kingdom for";
