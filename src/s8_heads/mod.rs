//! Stage 8: what attention learns. Not in either tutorial: the stage follows Elhage et al., *A
//! Mathematical Framework for Transformer Circuits* (2021), and Olsson et al., *In-context Learning
//! and Induction Heads* (2022), and trains their attention-only models from scratch on stage 5's
//! tape, as flags of the sequel's model ([`Architecture`](crate::s5_gpt::beyond::Architecture)):
//! `attention_only` and `key_offset`.
//!
//! 1. [`repeats`]: repeated random text, to test with and to train on.
//! 2. [`detectors`]: previous-token, duplicate-token and induction scores of every head.
//! 3. [`icl`]: in-context learning, the second copy's loss and Olsson's score.
//! 4. [`study`]: the phase change, probed while the model trains.

pub mod ablation;
pub mod app;
pub mod circuits;
pub mod detectors;
pub mod exercises;
pub mod icl;
pub mod repeats;
pub mod study;

use std::io::Write;
use std::path::PathBuf;

use ablation::{Ablation, HeadId, ablated_params};
use circuits::{
    HeadWeights, k_composed_qk_circuit, k_composition, k_composition_baseline, ov_circuit,
};
use detectors::{Detector, HAND_MADE_TEXT, hand_made, score};
use icl::copy_losses;
use repeats::Repeats;
use study::{Probe, Probes, train_probed};

use crate::print::{cell, heading};
use crate::s5_gpt::app::config::Config;
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::train::{Recipe, Trainer};

/// Steps each of the study's models trains.
pub const PHASE_STEPS: usize = 4500;

/// Where the text comes from, and on how many threads the fast layer runs.
#[derive(Clone, Debug)]
pub struct Settings {
    pub data: PathBuf,
    pub threads: usize,
}

/// `data/tinyshakespeare.txt`, or the copy beside the crate's folder.
pub fn default_corpus() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let local = here.join("data/tinyshakespeare.txt");
    match local.is_file() {
        true => local,
        false => here.join("../shared/data/tinyshakespeare.txt"),
    }
}

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

/// The trainer of `model` on the corpus, for `steps` steps.
pub fn study_trainer(
    model: &StudyModel,
    settings: &Settings,
    steps: usize,
) -> Result<Trainer, ToolError> {
    let cfg = Config {
        recipe: study_recipe(model),
        data: Some(settings.data.clone()),
        max_steps: Some(steps),
        threads: settings.threads,
        ..Config::default()
    };
    let mut trainer = cfg.trainer()?;
    study::scale_embeddings(&mut trainer, model.embedding_scale);
    Ok(trainer)
}

/// One probe as a line of the record.
pub fn probe_line(model: &str, p: &Probe) -> String {
    let heads: Vec<String> = p
        .heads
        .iter()
        .enumerate()
        .flat_map(|(b, heads)| {
            heads
                .iter()
                .enumerate()
                .map(move |(h, s)| format!("b{b}h{h}={:.3}/{:.3}/{:.3}", s[0], s[1], s[2]))
        })
        .collect();
    format!(
        "model={model} step={} train_loss={:.4} first_copy={:.4} second_copy={:.4} icl={:.4} {}",
        p.step,
        p.train_loss,
        p.first_copy,
        p.second_copy,
        p.icl_score,
        heads.join(" ")
    )
}

/// `--phase`: trains each of the study's models (or only `only`) for `steps` steps, probing every
/// `every`, and prints one line per probe.
pub fn phase<W: Write>(
    out: &mut W,
    settings: &Settings,
    (steps, every): (usize, usize),
    only: Option<&str>,
) -> Result<(), ToolError> {
    let cfg = Config {
        threads: settings.threads,
        ..Config::default()
    };
    for model in study_models()
        .iter()
        .filter(|m| only.is_none_or(|n| n == m.name))
    {
        eprintln!("s8_heads: training {} for {steps} steps…", model.name);
        let start = std::time::Instant::now();
        cfg.with_threads(|| {
            let mut trainer = study_trainer(model, settings, steps)?;
            let v = trainer.dataset.vocab_size();
            let probes = Probes::new(PROBE_SEED, 8, trainer.recipe.context_size, v);
            let mut lines = vec![];
            train_probed(&mut trainer, model.repeats, (&probes, every), |p| {
                lines.push(probe_line(model.name, p));
            })?;
            for line in lines {
                writeln!(out, "{line}")?;
            }
            let seconds = start.elapsed().as_secs();
            writeln!(out, "# {} took {seconds} s, probes included.", model.name)?;
            out.flush()?;
            Ok(())
        })?;
    }
    Ok(())
}

/// The seed of the probes' repeated random sequences.
pub const PROBE_SEED: u32 = 8;

/// Steps of the chapter's short run.
pub const SHORT_STEPS: usize = 200;

/// A line of a detector table: its name, then one cell per detector, 17 characters wide.
fn detector_row(name: &str, cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| format!("{c:>17}")).collect();
    format!("{name:>10}{}", cells.join(""))
}

/// A line of cells 10 characters wide.
fn row(cells: &[String]) -> String {
    cells
        .iter()
        .map(|c| format!("{c:>10}"))
        .collect::<Vec<_>>()
        .join("")
}

// ANCHOR: run
/// Prints the chapter's outputs, in its order.
pub fn run<W: Write>(out: &mut W, settings: &Settings) -> Result<(), ToolError> {
    hand_made_scores(out)?;
    let model = study_models()[0]; // two blocks, attention only
    let cfg = Config {
        threads: settings.threads,
        ..Config::default()
    };
    cfg.with_threads(|| {
        let mut trainer = study_trainer(&model, settings, SHORT_STEPS)?;
        let v = trainer.dataset.vocab_size();
        let probes = Probes::new(PROBE_SEED, 8, trainer.recipe.context_size, v);
        let taken = train_probed(&mut trainer, model.repeats, (&probes, 100), |_| {})?;
        short_run(out, &taken)?;
        heads_table(out, taken.last().expect("a probe at the end"))?;
        circuits_summary(out, &trainer, taken.last().expect("a probe at the end"))?;
        ablation_table(out, &mut trainer, &probes)
    })
}
// ANCHOR_END: run

/// The detectors on patterns made by hand, on CAPULET written twice.
fn hand_made_scores<W: Write>(out: &mut W) -> Result<(), ToolError> {
    heading(out, "8.2 Head detectors")?;
    let mut lines = vec![];
    let tokens: Vec<usize> = HAND_MADE_TEXT.chars().map(|c| c as usize).collect();
    let patterns = hand_made(tokens.len());
    let names: Vec<String> = Detector::ALL.iter().map(|d| d.name().to_string()).collect();
    lines.push(detector_row("looks at", &names));
    for (name, weights) in &patterns {
        let scores: Vec<String> = Detector::ALL
            .iter()
            .map(|&d| format!("{:.3}", score(d, &tokens, weights)))
            .collect();
        lines.push(detector_row(name, &scores));
    }
    let prints = format!("each head's scores on {HAND_MADE_TEXT:?}");
    Ok(cell(out, "hand-made", &prints, &lines)?)
}

/// The short run's probes, one line each.
fn short_run<W: Write>(out: &mut W, taken: &[Probe]) -> Result<(), ToolError> {
    heading(out, "8.3 A short run, probed")?;
    let header = [
        "step",
        "loss",
        "1st copy",
        "2nd copy",
        "ICL",
        "prev b0",
        "induct b1",
    ];
    let mut lines = vec![row(&header.map(String::from))];
    for p in taken {
        let (prev, induction) = (p.best(0, 0), p.best(1, 2));
        let cells = [
            p.step.to_string(),
            format!("{:.3}", p.train_loss),
            format!("{:.3}", p.first_copy),
            format!("{:.3}", p.second_copy),
            format!("{:+.3}", p.icl_score),
            format!("h{} {:.2}", prev.0, prev.1),
            format!("h{} {:.2}", induction.0, induction.1),
        ];
        lines.push(row(&cells));
    }
    Ok(cell(
        out,
        "short run",
        "probes of the two-block model",
        &lines,
    )?)
}

/// Every head's three scores at the last probe.
fn heads_table<W: Write>(out: &mut W, p: &Probe) -> Result<(), ToolError> {
    let names: Vec<String> = Detector::ALL.iter().map(|d| d.name().to_string()).collect();
    let mut lines = vec![detector_row("head", &names)];
    for (b, heads) in p.heads.iter().enumerate() {
        for (h, s) in heads.iter().enumerate() {
            let cells: Vec<String> = s.iter().map(|x| format!("{x:.3}")).collect();
            lines.push(detector_row(&format!("b{b}h{h}"), &cells));
        }
    }
    let prints = format!("each head's scores after {} steps", p.step);
    Ok(cell(out, "heads", &prints, &lines)?)
}

/// The best previous-token head of block 0 and induction head of block 1: their K-composition
/// against random heads', and how diagonal the induction head's circuits are.
fn circuits_summary<W: Write>(out: &mut W, trainer: &Trainer, p: &Probe) -> Result<(), ToolError> {
    let (prev, induction) = (p.best(0, 0).0, p.best(1, 2).0);
    let (model, tape) = (&trainer.model, &trainer.tape);
    heading(out, "8.4 Circuits and ablation")?;
    let later = HeadWeights::of(tape, &model.blocks[1].attn, induction);
    let earlier = HeadWeights::of(tape, &model.blocks[0].attn, prev);
    let c = model.config.embedding_size;
    let baseline = k_composition_baseline(c, c / model.blocks[1].attn.num_heads, 100, 0);
    let composition = k_composition(&later, &earlier);
    let ov = ov_circuit(model, tape, 1, induction);
    let qk = k_composed_qk_circuit(model, tape, prev, induction);
    let lines = [
        format!(
            "K-composition of b1h{induction} with b0h{prev}: {composition:.3} (random heads: {baseline:.3})"
        ),
        format!(
            "OV circuit of b1h{induction}: the diagonal holds the largest of {:.1}% of the columns",
            100.0 * ov.diagonal_share()
        ),
        format!(
            "QK circuit of b1h{induction} through b0h{prev}: the diagonal holds the largest of {:.1}%",
            100.0 * qk.diagonal_share()
        ),
    ];
    let prints = format!(
        "b0h{prev}, the best previous-token head, and b1h{induction}, the best induction head"
    );
    Ok(cell(out, "circuits", &prints, &lines)?)
}

/// The loss on the second copy of the probes and on the test split with each head zero-ablated.
fn ablation_table<W: Write>(
    out: &mut W,
    trainer: &mut Trainer,
    probes: &Probes,
) -> Result<(), ToolError> {
    let mut lines = vec![format!(
        "{:>10}{}",
        "ablated",
        row(&["2nd copy".into(), "test".into()])
    )];
    for (name, second, test) in ablations(trainer, probes) {
        lines.push(format!(
            "{name:>10}{}",
            row(&[format!("{second:.3}"), format!("{test:.3}")])
        ));
    }
    let prints = "each head zero-ablated: the loss on the second copy and on the test split";
    Ok(cell(out, "ablation", prints, &lines)?)
}

/// Runs `f` on the trainer with head `id` zero-ablated, then puts the head back.
fn with_ablated_trainer<R>(
    trainer: &mut Trainer,
    id: HeadId,
    f: impl FnOnce(&mut Trainer) -> R,
) -> R {
    let model = trainer.model.clone();
    let kept: Vec<Vec<f32>> = trainer
        .tape
        .params()
        .iter()
        .map(|p| p.data.clone())
        .collect();
    let ablated = ablated_params(&model, &mut trainer.tape, (id, Ablation::Zero), (&[], 0));
    trainer.tape.set_params(ablated.iter().map(Vec::as_slice));
    let result = f(trainer);
    trainer.tape.set_params(kept.iter().map(Vec::as_slice));
    result
}

// ANCHOR: look_at
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
    /// Each head zero-ablated (none first): its name, the loss on the second copy and on the test
    /// split.
    pub ablation: Vec<(String, f64, f64)>,
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

/// The loss on the second copy of the probes and on the test split, with no head ablated and
/// then with each head zero-ablated in turn.
pub fn ablations(trainer: &mut Trainer, probes: &Probes) -> Vec<(String, f64, f64)> {
    let measure = |trainer: &mut Trainer| {
        let (_, second) = copy_losses(&trainer.model, &mut trainer.tape, &probes.sequences);
        (second, trainer.estimate(probes.test_batches).test)
    };
    let (second, test) = measure(trainer);
    let mut rows = vec![("none".to_string(), second, test)];
    for block in 0..trainer.model.blocks.len() {
        for head in 0..trainer.model.blocks[block].attn.num_heads {
            let (second, test) = with_ablated_trainer(trainer, HeadId { block, head }, measure);
            rows.push((format!("b{block}h{head}"), second, test));
        }
    }
    rows
}
// ANCHOR_END: look_at
