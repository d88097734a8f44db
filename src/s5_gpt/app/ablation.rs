//! Tool layer. The figures of the chapter "What the tutorial's model leaves out": the tutorial's
//! model, each thing it leaves out added on its own, then all of them, each trained with the
//! tutorial's recipe; the tutorial's model masked with 0 instead of −1e9; and the attention weights
//! of a trained model.
//!
//! `cargo run --release --example ablation` trains every row for the tutorial's two epochs and
//! writes the tables the book includes; `tests/s5_beyond.rs` locks a short version of the same
//! tables.

use std::fmt::Write as _;
use std::time::Instant;

use super::config::Config;
use super::progress::Progress;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::model::Architecture;
use crate::s5_gpt::ops::MASK_VALUE;
use crate::s5_gpt::train::{Recipe, Trainer};

/// One model of the table: a name, the flags that make it, and its architecture.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    pub flags: String,
    pub architecture: Architecture,
}

impl Variant {
    /// The same model with the causal mask writing 0 instead of −1e9.
    pub fn masked_with_0(&self) -> Variant {
        Variant {
            name: format!("{}, masked with 0", self.name),
            flags: format!("{} --mask-value 0", self.flags).trim().to_string(),
            architecture: Architecture {
                mask_value: 0.0,
                ..self.architecture
            },
        }
    }
}

/// Where [`variants`] puts the tutorial's model and the one with all the additions but dropout: the
/// two that are also trained masked with 0.
pub const TUTORIAL: usize = 0;
pub const ALL_OF_THEM: usize = 6;

/// The table's models, in its order: the tutorial's, one addition at a time, all of them but
/// LayerNorm, all of them, all and dropout.
pub fn variants() -> [Variant; 8] {
    let tutorial = Architecture::default();
    let everything = Architecture {
        qkv: true,
        heads: 4,
        residual: true,
        layer_norm: true,
        ..tutorial
    };
    let variant = |name: &str, flags: &str, architecture| Variant {
        name: name.to_string(),
        flags: flags.to_string(),
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
            "4 heads and residual",
            "--heads 4 --residual",
            Architecture {
                layer_norm: false,
                ..everything
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
    /// The mean weight a character gives itself, over every block and head, on [`LINE`] (from its
    /// second character on: the first can attend to nothing else).
    pub self_weight: f64,
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

/// Trains `variant` with the tutorial's recipe for `max_steps` (the two epochs if `None`), then
/// tests it and samples from it. Returns the trained model too.
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

/// `flags` in code quotes, or "(none)".
fn quoted(flags: &str) -> String {
    if flags.is_empty() {
        "(none)".to_string()
    } else {
        format!("`{flags}`")
    }
}

/// The table as Markdown: one row per model, with the time per step if `times`.
pub fn table(rows: &[Measured], times: bool) -> String {
    let mut text =
        String::from("| model | flags | parameters | train loss | test loss | weight on itself |");
    text.push_str(if times { " ms per step |\n" } else { "\n" });
    text.push_str("|---|---|---:|---:|---:|---:|");
    text.push_str(if times { "---:|\n" } else { "\n" });
    for row in rows {
        let _ = write!(
            text,
            "| {} | {} | {} | {:.4} | {:.4} | {:.2} |",
            row.variant.name,
            quoted(&row.variant.flags),
            thousands(row.parameters),
            row.train_loss,
            row.test_loss,
            row.self_weight
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

/// A model trained with the causal mask writing 0 instead of −1e9.
#[derive(Clone, Debug, PartialEq)]
pub struct MaskZero {
    pub measured: Measured,
    /// The test loss of the same weights with the mask back at −1e9: the future hidden, as it is
    /// when the model generates.
    pub test_loss_future_hidden: f64,
}

/// Trains `variant` masked with 0, then tests it with the future in view and with it hidden.
pub fn mask_value_0(
    variant: &Variant,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<MaskZero, GptError> {
    let (mut trainer, measured) = measure(&variant.masked_with_0(), max_steps, progress)?;
    for block in &mut trainer.model.blocks {
        block.attention.mask_value = MASK_VALUE;
    }
    let hidden = Config::default().with_threads(|| Ok(trainer.test(|| ())))?;
    Ok(MaskZero {
        measured,
        test_loss_future_hidden: hidden.mean(),
    })
}

/// The mask study as Markdown: each model masked with −1e9 and with 0, then the samples of the
/// latter.
pub fn mask_table(pairs: &[(&Measured, &MaskZero)]) -> String {
    let mut text = String::from(
        "| model | flags | train loss | test loss | test loss, future hidden |\n|---|---|---:|---:|---:|\n",
    );
    for (causal, zero) in pairs {
        let rows = [
            (*causal, causal.test_loss),
            (&zero.measured, zero.test_loss_future_hidden),
        ];
        for (row, hidden) in rows {
            let _ = writeln!(
                text,
                "| {} | {} | {:.4} | {:.4} | {hidden:.4} |",
                row.variant.name,
                quoted(&row.variant.flags),
                row.train_loss,
                row.test_loss
            );
        }
    }
    for (_, zero) in pairs {
        let row = &zero.measured;
        let _ = write!(
            text,
            "\n{} (`{}`), {} characters after the prompt:\n\n```text\n{}\n```\n",
            sentence_case(&row.variant.name),
            row.variant.flags,
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

/// The attention weights of every head of every block of `trainer`'s model on `line`: for block b
/// and head h, a (T, T) matrix, row i holding character i's weights over the characters 0..=i.
pub fn attention_maps(trainer: &mut Trainer, line: &str) -> Result<Vec<Vec<Vec<f32>>>, GptError> {
    let ids = trainer.dataset.encode(line)?;
    Ok(trainer.model.attention_maps(&mut trainer.tape, &ids))
}

/// The row with the lowest test loss.
pub fn best(rows: &[Measured]) -> Option<&Measured> {
    rows.iter()
        .min_by(|a, b| a.test_loss.total_cmp(&b.test_loss))
}

/// A line of the corpus, for [`attention_maps`]: the first T characters of Richard III's
/// "A horse! a horse! my kingdom for a horse!".
pub const LINE: &str = "A horse! a horse! my kingdom for";
