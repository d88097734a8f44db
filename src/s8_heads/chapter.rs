//! Tool layer: what `cargo run --example s8_heads` prints ([`run`], the chapter's outputs) and
//! what `--phase` records ([`phase`]), on the corpus read from disk. Native only: the WebAssembly
//! build reads no corpus from disk.

use std::io::Write;
use std::path::PathBuf;

use super::circuits::{
    HeadWeights, k_composed_qk_circuit, k_composition, k_composition_baseline, ov_circuit,
};
use super::detectors::{Detector, HAND_MADE_TEXT, hand_made, head_scores, score};
use super::study::{Probe, Probes, train_probed};
use super::{PROBE_SEED, StudyModel, ablations, study_models, study_recipe, study_trainer_on};
use crate::print::{cell, heading};
use crate::s5_gpt::app::config::{Config, check_vocabulary};
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::train::{Recipe, Trainer};

/// Where the text comes from, and on how many threads the fast layer runs.
#[derive(Clone, Debug)]
pub struct Settings {
    pub data: PathBuf,
    pub threads: usize,
}

/// The trainer of `model` on the corpus, for `steps` steps, checked and loaded as stage 5's
/// command line loads it.
pub fn study_trainer(
    model: &StudyModel,
    settings: &Settings,
    steps: usize,
) -> Result<Trainer, ToolError> {
    let cfg = Config {
        recipe: study_recipe(model),
        data: Some(settings.data.clone()),
        threads: settings.threads,
        ..Config::default()
    };
    cfg.check()?;
    let (b, t) = (cfg.recipe.batch_size, cfg.recipe.context_size);
    let dataset = CharDataset::load(&settings.data, b, t)?;
    check_vocabulary(&dataset, &settings.data)?;
    Ok(study_trainer_on(model, dataset, steps, cfg.backend()))
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
                lines.push(p.line(model.name));
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

/// `--book-models`: the tutorial's model and each of stage 7's variants, trained with the
/// tutorial's recipe for `max_steps` (the two epochs if `None`), then their heads' scores on the
/// probes' repeated random text, one line per model: each head's previous-token score, then the
/// highest induction and duplicate-token scores of any head.
pub fn book_models<W: Write>(
    out: &mut W,
    settings: &Settings,
    max_steps: Option<usize>,
) -> Result<(), ToolError> {
    let models = std::iter::once(("the tutorial's", Architecture::default()))
        .chain(crate::s7_variants::variants());
    writeln!(
        out,
        "{:<16}{:<48}{:>10}{:>10}",
        "model", "previous-token score, each head: block 0 | 1", "induction", "duplicate"
    )?;
    for (name, arch) in models {
        let cfg = Config {
            recipe: Recipe {
                architecture: arch,
                ..Recipe::default()
            },
            data: Some(settings.data.clone()),
            max_steps,
            threads: settings.threads,
            ..Config::default()
        };
        let steps = max_steps.map_or("two epochs".to_string(), |n| format!("{n} steps"));
        eprintln!("s8_heads: training {name} ({steps})…");
        let scores = cfg.with_threads(|| {
            let mut trainer = cfg.trainer()?;
            trainer.train(|_| std::ops::ControlFlow::Continue(()))?;
            let (t, v) = (trainer.recipe.context_size, trainer.dataset.vocab_size());
            let probes = Probes::new(PROBE_SEED, 8, t, v);
            Ok(head_scores(
                &trainer.model,
                &mut trainer.tape,
                &probes.sequences,
            ))
        })?;
        writeln!(out, "{}", book_model_line(name, &scores))?;
        out.flush()?;
    }
    Ok(())
}

/// A model's line of `--book-models`: each head's previous-token score, block by block, then the
/// highest induction and duplicate-token scores of any head.
fn book_model_line(name: &str, scores: &[Vec<[f64; 3]>]) -> String {
    let blocks: Vec<String> = (scores.iter())
        .map(|heads| {
            heads
                .iter()
                .map(|s| format!("{:.2}", s[0]))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let highest = |kind: usize| scores.iter().flatten().map(|s| s[kind]).fold(0.0, f64::max);
    format!(
        "{name:<16}{:<48}{:>10.2}{:>10.2}",
        blocks.join(" | "),
        highest(2),
        highest(1)
    )
}

/// Steps of the chapter's short run.
pub const SHORT_STEPS: usize = 200;

/// A line of a detector table: its name, then one cell per detector, 17 characters wide.
fn detector_row(name: &str, cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| format!("{c:>17}")).collect();
    format!("{name:>10}{}", cells.join(""))
}

/// A line of cells 12 characters wide.
fn wide_row(cells: &[String]) -> String {
    let cells: Vec<String> = cells.iter().map(|c| format!("{c:>12}")).collect();
    cells.join("")
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
    heading(out, "8.4 The phase change: a short run, probed")?;
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
    heading(out, "8.5 and 8.6 Circuits and ablation")?;
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
    let header = ["2nd, zero", "2nd, mean", "test, zero", "test, mean"];
    let mut lines = vec![format!(
        "{:>10}{}",
        "ablated",
        wide_row(&header.map(String::from))
    )];
    for a in ablations(trainer, probes) {
        let cells = [a.zero.0, a.mean.0, a.zero.1, a.mean.1].map(|x| format!("{x:.3}"));
        lines.push(format!("{:>10}{}", a.head, wide_row(&cells)));
    }
    let prints =
        "each head zero- and mean-ablated: the loss on the second copy and on the test split";
    Ok(cell(out, "ablation", prints, &lines)?)
}
