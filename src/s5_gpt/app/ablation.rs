//! Tool layer. The figures of the chapter "What the tutorial's model leaves out": the tutorial's model,
//! each thing it leaves out added on its own, then all of them, each trained with the tutorial's recipe;
//! the tutorial's model masked with 0 instead of −1e9; and the attention weights of a trained model.
//!
//! `cargo run --release --example ablation` trains every row for the tutorial's two epochs and writes the
//! tables the book includes; `tests/s5_beyond.rs` locks a short version of the same tables.

use std::fmt::Write as _;
use std::time::Instant;

use super::config::Config;
use super::progress::Progress;
use crate::s5_gpt::NodeId;
use crate::s5_gpt::backend::Op;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::model::Architecture;
use crate::s5_gpt::ops::MASK_VALUE;
use crate::s5_gpt::train::{Recipe, Trainer};

/// One model of the table: a name, the flags that make it, and its architecture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Variant {
    pub name: &'static str,
    pub flags: &'static str,
    pub architecture: Architecture,
}

/// The table's models, in its order: the tutorial's, one addition at a time, all of them, all and dropout.
pub fn variants() -> [Variant; 7] {
    let tutorial = Architecture::default();
    let everything = Architecture {
        qkv: true,
        heads: 4,
        residual: true,
        layer_norm: true,
        ..tutorial
    };
    let variant = |name, flags, architecture| Variant {
        name,
        flags,
        architecture,
    };
    [
        variant("the tutorial's", "", tutorial),
        variant(
            "+ Q/K/V",
            "--qkv",
            Architecture {
                qkv: true,
                ..tutorial
            },
        ),
        variant(
            "+ 4 heads",
            "--heads 4",
            Architecture {
                qkv: true,
                heads: 4,
                ..tutorial
            },
        ),
        variant(
            "+ residual",
            "--residual",
            Architecture {
                residual: true,
                ..tutorial
            },
        ),
        variant(
            "+ LayerNorm",
            "--layer-norm",
            Architecture {
                layer_norm: true,
                ..tutorial
            },
        ),
        variant(
            "all of them",
            "--heads 4 --residual --layer-norm",
            everything,
        ),
        variant(
            "all, and dropout 0.1",
            "--heads 4 --residual --layer-norm --dropout 0.1",
            Architecture {
                dropout: 0.1,
                ..everything
            },
        ),
    ]
}

/// What training one model gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    pub variant: Variant,
    pub parameters: usize,
    pub steps: usize,
    /// The mean training loss of the last [`TRAIN_WINDOW`] steps (fewer if the run is shorter).
    pub train_loss: f64,
    /// The mean loss over the test batches after training.
    pub test_loss: f64,
    /// The median time of a training step, in milliseconds.
    pub ms_per_step: f64,
    /// "ROMEO:" and [`SAMPLE_LEN`] characters sampled after training, as the chapter samples.
    pub sample: String,
}

/// Steps whose training losses are averaged: a batch of 4 windows is too noisy to read alone.
pub const TRAIN_WINDOW: usize = 1000;
/// Characters sampled after the prompt.
pub const SAMPLE_LEN: usize = 200;

/// The mean of the last [`TRAIN_WINDOW`] losses.
fn recent_mean(losses: &[f32]) -> f64 {
    let recent = &losses[losses.len().saturating_sub(TRAIN_WINDOW)..];
    recent.iter().map(|&l| f64::from(l)).sum::<f64>() / recent.len().max(1) as f64
}

/// Trains `variant` with the tutorial's recipe for `max_steps` (the two epochs if `None`), then tests it
/// and samples from it. Returns the trained model too.
pub fn measure(
    variant: &Variant,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<(Trainer, Measured), GptError> {
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
        let mut bar = Progress::new(variant.name, "steps", (0, trainer.steps), progress);
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
        let measured = Measured {
            variant: *variant,
            parameters: trainer.parameter_count(),
            steps: trainer.losses.len(),
            train_loss: recent_mean(&trainer.losses),
            test_loss: test.mean(),
            ms_per_step: times.get(times.len() / 2).copied().unwrap_or(0.0),
            sample: trainer.generate("ROMEO:", SAMPLE_LEN)?,
        };
        Ok((trainer, measured))
    })
}

/// The table as Markdown: one row per model, with the time per step if `times`.
pub fn table(rows: &[Measured], times: bool) -> String {
    let mut text = String::from("| model | flags | parameters | train loss | test loss |");
    text.push_str(if times { " ms per step |\n" } else { "\n" });
    text.push_str("|---|---|---:|---:|---:|");
    text.push_str(if times { "---:|\n" } else { "\n" });
    for row in rows {
        let flags = match row.variant.flags {
            "" => "(none)".to_string(),
            flags => format!("`{flags}`"),
        };
        let _ = write!(
            text,
            "| {} | {flags} | {} | {:.4} | {:.4} |",
            row.variant.name,
            thousands(row.parameters),
            row.train_loss,
            row.test_loss
        );
        text.push_str(&if times {
            format!(" {:.2} |\n", row.ms_per_step)
        } else {
            "\n".to_string()
        });
    }
    text
}

/// 84929 as "84,929".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The tutorial's model trained with the causal mask writing 0 instead of −1e9.
#[derive(Clone, Debug, PartialEq)]
pub struct MaskZero {
    pub measured: Measured,
    /// The test loss of the same weights with the mask back at −1e9: the future hidden, as it is when the
    /// model generates.
    pub test_loss_future_hidden: f64,
}

/// Trains the tutorial's model with `--mask-value 0`, then tests it with and without the future in view.
pub fn mask_value_0(max_steps: Option<usize>, progress: bool) -> Result<MaskZero, GptError> {
    let variant = Variant {
        name: "the tutorial's, masked with 0",
        flags: "--mask-value 0",
        architecture: Architecture {
            mask_value: 0.0,
            ..Architecture::default()
        },
    };
    let (mut trainer, measured) = measure(&variant, max_steps, progress)?;
    for block in &mut trainer.model.blocks {
        block.attention.mask_value = MASK_VALUE;
    }
    let hidden = Config::default().with_threads(|| Ok(trainer.test(|| ())))?;
    Ok(MaskZero {
        measured,
        test_loss_future_hidden: hidden.mean(),
    })
}

/// The mask study as Markdown: the tutorial's row and the masked-with-0 row, then both samples.
pub fn mask_table(tutorial: &Measured, zero: &MaskZero) -> String {
    let mut text = String::from(
        "| model | flags | train loss | test loss | test loss, future hidden |\n|---|---|---:|---:|---:|\n",
    );
    let rows = [
        (tutorial, tutorial.test_loss),
        (&zero.measured, zero.test_loss_future_hidden),
    ];
    for (row, hidden) in rows {
        let flags = match row.variant.flags {
            "" => "(none)".to_string(),
            flags => format!("`{flags}`"),
        };
        let _ = writeln!(
            text,
            "| {} | {flags} | {:.4} | {:.4} | {hidden:.4} |",
            row.variant.name, row.train_loss, row.test_loss
        );
    }
    for row in [tutorial, &zero.measured] {
        let _ = write!(
            text,
            "\n{} model, {} characters after the prompt:\n\n```text\n{}\n```\n",
            sentence_case(row.variant.name),
            SAMPLE_LEN,
            row.sample
        );
    }
    text
}

fn sentence_case(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The attention weights of every head of every block of `trainer`'s model on `line`: for block b and
/// head h, a (T, T) matrix, row i holding character i's weights over the characters 0..=i.
pub fn attention_maps(trainer: &mut Trainer, line: &str) -> Result<Vec<Vec<Vec<f32>>>, GptError> {
    let ids = trainer.dataset.encode(line)?;
    let tape = &mut trainer.tape;
    tape.reset();
    trainer.model.forward(tape, &ids, 1, None); // (1, T, V)
    // The attention weights are the softmax nodes, one per block, in order: (1, H, T, T).
    let weights: Vec<Vec<Vec<f32>>> = (0..tape.len())
        .map(NodeId)
        .filter(|&id| matches!(tape.op(id), Op::Softmax { .. }))
        .map(|id| {
            let t = ids.len();
            let heads = tape.value(id).data.chunks(t * t);
            heads.map(<[f32]>::to_vec).collect()
        })
        .collect();
    tape.reset();
    Ok(weights)
}

/// The row with the lowest test loss.
pub fn best(rows: &[Measured]) -> Option<&Measured> {
    rows.iter()
        .min_by(|a, b| a.test_loss.total_cmp(&b.test_loss))
}

/// A line of the corpus, for [`attention_maps`]: the first T characters of Richard III's
/// "A horse! a horse! my kingdom for a horse!".
pub const LINE: &str = "A horse! a horse! my kingdom for";
