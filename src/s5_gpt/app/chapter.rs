//! Tool layer. The chapter run: load, train, test and sample, and the report that the snapshot
//! locks. Also the pieces the subcommands share with it: the opening lines, the test pass with its
//! progress bar, the loss CSV and curve.

use std::io::Write;
use std::ops::ControlFlow;

use super::config::Config;
use super::files::{LOSS_CSV_HEADER, loss_csv_line, write_atomic};
use super::progress::Progress;
use super::sample::check_prompt;
use crate::figures;
use crate::lang::Lang;
use crate::s5_gpt::data::Split;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::train::{TestResult, Trainer};

/// What a run produced, for readers of the numbers (a loss curve, the book).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The loss of each step's batch, before that step's update.
    pub losses: Vec<f32>,
    /// The learning rate of each step.
    pub lrs: Vec<f64>,
    /// The mean loss over the test batches.
    pub test_loss: f64,
    pub test_batches: usize,
    /// The prompt followed by the generated characters.
    pub sample: String,
}

/// Runs the chapter: load, train, test, generate; writes the report to `out` and returns the
/// figures.
pub fn run<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, GptError> {
    cfg.with_threads(|| run_chapter(out, cfg))
}

fn run_chapter<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, GptError> {
    let mut trainer = cfg.trainer()?;
    check_prompt(&trainer.dataset, &cfg.prompt)?; // now, not after a minute of training
    describe(out, &trainer)?;

    let mut progress = Progress::new("train", "steps", (0, trainer.steps), cfg.progress);
    let mut written = Ok(());
    trainer.train(|trainer| {
        let s = trainer.losses.len() - 1;
        let (loss, lr) = (trainer.losses[s], trainer.lrs[s]);
        progress.step(Some(loss));
        if cfg.log_every > 0 && s.is_multiple_of(cfg.log_every) {
            written = progress.suspend(|| writeln!(out, "step {s}: lr {lr}, loss {loss}"));
        }
        if written.is_ok() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    })?;
    written?;
    progress.finish();

    let result = test(&mut trainer, cfg.progress);
    let shape: Vec<String> = result.logits_shape.iter().map(|d| d.to_string()).collect();
    writeln!(
        out,
        "prediction: {} steps, each ({})",
        result.batches,
        shape.join(", ")
    )?;
    writeln!(out, "loss: {}", result.mean())?;
    write_curves(cfg, &trainer, Some(result.mean()))?;

    let sample = trainer.generate(&cfg.prompt, cfg.sample_len)?;
    writeln!(out)?;
    writeln!(out, "{sample}")?;
    Ok(Report {
        losses: trainer.losses,
        lrs: trainer.lrs,
        test_loss: result.mean(),
        test_batches: result.batches,
        sample,
    })
}

/// The data and model lines that open a run's report.
pub fn describe(out: &mut impl Write, trainer: &Trainer) -> Result<(), GptError> {
    let ds = &trainer.dataset;
    let (chars, symbols) = (ds.tokens.len(), ds.vocab_size());
    let (train, test) = (ds.len(Split::Train), ds.len(Split::Test));
    writeln!(
        out,
        "data: {chars} characters, {symbols} symbols, {train} train batches, {test} test batches"
    )?;
    writeln!(out, "model: {} parameters", trainer.parameter_count())?;
    Ok(())
}

/// The test loss, with a progress bar over the test batches.
pub fn test(trainer: &mut Trainer, progress: bool) -> TestResult {
    let batches = trainer.dataset.len(Split::Test);
    let mut bar = Progress::new("test", "batches", (0, batches), progress);
    let result = trainer.test(|| bar.step(None));
    bar.finish();
    result
}

/// Writes the loss CSV and the loss-curve SVG that `cfg` asks for.
pub fn write_curves(
    cfg: &Config,
    trainer: &Trainer,
    test_loss: Option<f64>,
) -> Result<(), GptError> {
    if let Some(path) = &cfg.loss_csv {
        let mut text = String::from(LOSS_CSV_HEADER);
        for (s, (&loss, &lr)) in trainer.losses.iter().zip(&trainer.lrs).enumerate() {
            text.push_str(&loss_csv_line(s, lr, loss));
        }
        write_atomic(path, text.as_bytes())?;
    }
    if let Some(path) = &cfg.plot {
        let figure = figures::loss_curve(Lang::En, &trainer.losses, test_loss);
        write_atomic(path, figure.svg.as_bytes())?;
    }
    Ok(())
}
