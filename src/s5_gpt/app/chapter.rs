//! Tool layer. The chapter run: load, train, test and sample, and the report that the snapshot
//! locks. Also the pieces the subcommands share with it: the opening lines, the test pass with its
//! progress bar, the loss CSV and curve.

use std::io::Write;
use std::ops::ControlFlow;

use super::config::Config;
use super::estimates::Estimates;
use super::files::{LOSS_CSV_HEADER, LOSS_CSV_HEADER_ESTIMATES, loss_csv_line, write_atomic};
use super::progress::Progress;
use super::sample::check_prompt;
use crate::figures;
use crate::lang::Lang;
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::data::Split;
use crate::s5_gpt::train::{Estimate, TestResult, Trainer};

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
    /// The `--eval-every` estimates (none without it).
    pub estimates: Vec<Estimate>,
}

/// Runs the chapter: load, train, test, generate; writes the report to `out` and returns the
/// figures.
pub fn run<W: Write>(out: &mut W, cfg: &Config) -> Result<Report, ToolError> {
    run_and(out, cfg, |_| ()).map(|(report, ())| report)
}

/// [`run`], then `after` on the trained model (for a figure of what it predicts); `after` comes
/// last, so it changes nothing the run reports.
pub fn run_and<W: Write, T>(
    out: &mut W,
    cfg: &Config,
    after: impl FnOnce(&mut Trainer) -> T,
) -> Result<(Report, T), ToolError> {
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        let report = run_chapter(out, cfg, &mut trainer)?;
        Ok((report, after(&mut trainer)))
    })
}

fn run_chapter<W: Write>(
    out: &mut W,
    cfg: &Config,
    trainer: &mut Trainer,
) -> Result<Report, ToolError> {
    check_prompt(&trainer.dataset, &cfg.prompt)?; // now, not after a minute of training
    describe(out, trainer)?;

    let mut progress = Progress::new("train", "steps", (0, trainer.steps), cfg.progress);
    let mut estimates = Estimates::new(cfg);
    let mut written = match estimates.due(trainer) {
        Some(line) => writeln!(out, "{line}"),
        None => Ok(()),
    };
    trainer.train(|trainer| {
        let s = trainer.losses.len() - 1;
        let (loss, lr) = (trainer.losses[s], trainer.lrs[s]);
        progress.step(Some(loss));
        if cfg.log_every > 0 && s.is_multiple_of(cfg.log_every) && written.is_ok() {
            written = progress.suspend(|| writeln!(out, "step {s}: lr {lr}, loss {loss}"));
        }
        if let Some(line) = estimates.due(trainer)
            && written.is_ok()
        {
            written = progress.suspend(|| writeln!(out, "{line}"));
        }
        if written.is_ok() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(())
        }
    })?;
    written?;
    progress.finish();

    let result = test(trainer, cfg.progress);
    let shape: Vec<String> = result.logits_shape.iter().map(|d| d.to_string()).collect();
    writeln!(
        out,
        "prediction: {} steps, each ({})",
        result.batches,
        shape.join(", ")
    )?;
    writeln!(out, "loss: {}", result.mean())?;
    write_curves(cfg, trainer, Some(result.mean()), &estimates.points)?;

    let sample = trainer.generate(&cfg.prompt, cfg.sample_len)?;
    writeln!(out)?;
    writeln!(out, "{sample}")?;
    Ok(Report {
        losses: trainer.losses.clone(),
        lrs: trainer.lrs.clone(),
        test_loss: result.mean(),
        test_batches: result.batches,
        sample,
        estimates: estimates.points,
    })
}

/// The data and model lines that open a run's report.
pub fn describe(out: &mut impl Write, trainer: &Trainer) -> Result<(), ToolError> {
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

/// Writes the loss CSV and the loss-curve SVG that `cfg` asks for, with the `--eval-every`
/// estimates as two more columns and two more curves.
pub fn write_curves(
    cfg: &Config,
    trainer: &Trainer,
    test_loss: Option<f64>,
    estimates: &[Estimate],
) -> Result<(), ToolError> {
    if let Some(path) = &cfg.loss_csv {
        write_atomic(path, loss_csv(cfg, trainer, estimates).as_bytes())?;
    }
    if let Some(path) = &cfg.plot {
        let figure = figures::loss_curves(Lang::En, &trainer.losses, estimates, test_loss);
        write_atomic(path, figure.svg.as_bytes())?;
    }
    Ok(())
}

/// The `--loss-csv` text: `step,lr,loss` for every step, and with `--eval-every` the estimates on
/// the rows of their steps (empty elsewhere). The first three columns are the same either way.
fn loss_csv(cfg: &Config, trainer: &Trainer, estimates: &[Estimate]) -> String {
    let with_estimates = cfg.eval_every > 0;
    let header = match with_estimates {
        true => LOSS_CSV_HEADER_ESTIMATES,
        false => LOSS_CSV_HEADER,
    };
    let mut text = String::from(header);
    let mut next = estimates.iter().peekable();
    for (s, (&loss, &lr)) in trainer.losses.iter().zip(&trainer.lrs).enumerate() {
        let mut line = loss_csv_line(s, lr, loss);
        if with_estimates {
            line.pop(); // the line break
            match next.next_if(|e| e.step == s) {
                Some(e) => line.push_str(&format!(",{},{}\n", e.train, e.test)),
                None => line.push_str(",,\n"),
            }
        }
        text.push_str(&line);
    }
    text
}
