//! Tool layer. `s5_gpt train`: the chapter's training loop with a log, checkpoints, `--resume` and
//! a clean stop on Ctrl-C.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::super::args::{TrainArgs, recipe_flags};
use super::super::chapter::{describe, write_curves};
use super::super::checkpoint::{self, CONFIG_FILE, Checkpoint, TrainState};
use super::super::config::{Config, SAVE_EVERY};
use super::super::estimates::Estimates;
use super::super::progress::Progress;
use super::{Outcome, warn_about_corpus};
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::train::{Recipe, Trainer};

// ANCHOR: train
/// `s5_gpt train`: trains from scratch or from `--resume DIR`, logs, saves, and stops cleanly on
/// Ctrl-C.
pub fn run(args: TrainArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<Outcome, ToolError> {
    let mut cfg = args.run.config(args.recipe.recipe());
    let resumed = match &args.resume {
        Some(dir) => {
            let saved = checkpoint::load(dir)?;
            cfg.recipe = resumed_recipe(&args, &saved)?;
            Some(saved)
        }
        None => None,
    };
    SAVE_EVERY.check(args.save_every)?;
    warn_about_corpus(&cfg);
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        if let Some(saved) = &resumed {
            same_run(&trainer, &cfg, saved)?;
        }
        let save = save_folder(&args)?; // after every check: a refusal writes nothing
        if let Some(saved) = &resumed {
            saved.train_state()?.restore(&mut trainer);
            writeln!(
                out,
                "resuming {} after step {}",
                saved.dir.display(),
                trainer.losses.len()
            )?;
        }
        describe(out, &trainer)?;
        let mut estimates = Estimates::new(&cfg);
        let outcome = train_steps(
            &mut trainer,
            &args,
            &mut estimates,
            save.as_ref(),
            out,
            stop,
        )?;
        write_curves(&cfg, &trainer, None, &estimates.points)?;
        if let Some(dir) = &save {
            checkpoint::save(dir, &TrainState::of(&trainer))?;
        }
        report_end(out, &trainer, save.as_ref(), outcome)?;
        Ok(outcome)
    })
}

/// The training loop with a progress bar, a log line every `--log-every` steps, a checkpoint every
/// `--save-every` steps, and a stop at the first step after Ctrl-C.
fn train_steps(
    trainer: &mut Trainer,
    args: &TrainArgs,
    estimates: &mut Estimates,
    save: Option<&PathBuf>,
    out: &mut impl Write,
    stop: &AtomicBool,
) -> Result<Outcome, ToolError> {
    let start = trainer.losses.len();
    let mut progress = Progress::new("train", "steps", (start, trainer.steps), !args.run.quiet);
    let mut since = (Instant::now(), start);
    let mut failed = match estimates.due(trainer) {
        Some(line) => writeln!(out, "{line}").map_err(ToolError::from),
        None => Ok(()),
    };
    let mut outcome = Outcome::Done;
    if stop.load(Ordering::Relaxed) && start < trainer.steps {
        progress.finish();
        return Ok(Outcome::Interrupted);
    }
    trainer.train(|trainer| {
        let s = trainer.losses.len() - 1;
        let loss = trainer.losses[s];
        progress.step(Some(loss));
        let log_every = args.run.log_every;
        let log = log_every > 0 && (s.is_multiple_of(log_every) || s + 1 == trainer.steps);
        if log && failed.is_ok() {
            let ms = since.0.elapsed().as_secs_f64() * 1e3 / (s + 1 - since.1) as f64;
            since = (Instant::now(), s + 1);
            let lr = trainer.lrs[s];
            let line = format!("step {s}: loss {loss:.4}, lr {lr:.1e}, {ms:.1} ms/step");
            failed = progress
                .suspend(|| writeln!(out, "{line}"))
                .map_err(ToolError::from);
        }
        if let Some(line) = estimates.due(trainer)
            && failed.is_ok()
        {
            failed = progress
                .suspend(|| writeln!(out, "{line}"))
                .map_err(ToolError::from);
        }
        if let Some(dir) = save
            && args.save_every > 0
            && (s + 1).is_multiple_of(args.save_every)
            && failed.is_ok()
        {
            failed = checkpoint::save(dir, &TrainState::of(trainer));
        }
        if stop.load(Ordering::Relaxed) && s + 1 < trainer.steps {
            outcome = Outcome::Interrupted;
        }
        if failed.is_err() || outcome == Outcome::Interrupted {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    progress.finish();
    failed.map(|()| outcome)
}
// ANCHOR_END: train

/// Where `train` saves: `--save`, or else the `--resume` folder. The folder is made after the run's
/// checks and before its first step (so that a bad path fails before training, and a refused run
/// leaves nothing behind), and one holding another run's checkpoint is refused unless
/// `--overwrite`.
fn save_folder(args: &TrainArgs) -> Result<Option<PathBuf>, ToolError> {
    let Some(dir) = args.save.as_ref().or(args.resume.as_ref()) else {
        return Ok(None);
    };
    let continuing = args.resume.as_ref() == Some(dir);
    if dir.join(CONFIG_FILE).exists() && !continuing && !args.overwrite {
        return Err(ToolError::CheckpointExists { dir: dir.clone() });
    }
    std::fs::create_dir_all(dir).map_err(|source| ToolError::Write {
        path: dir.clone(),
        source,
    })?;
    Ok(Some(dir.clone()))
}

/// The recipe of a resumed run: the checkpoint's. A recipe flag given anew must agree with it.
fn resumed_recipe(args: &TrainArgs, saved: &Checkpoint) -> Result<Recipe, ToolError> {
    let given = recipe_flags(&args.recipe.recipe());
    for ((id, flag, given), (_, _, saved)) in
        given.into_iter().zip(recipe_flags(&saved.config.recipe))
    {
        if args.given.contains(&id) && given != saved {
            return Err(ToolError::ResumeMismatch { flag, given, saved });
        }
    }
    Ok(saved.config.recipe)
}

/// A checkpoint only continues on the text it was trained on (the same characters in the same
/// order, and so the same schedule).
pub fn same_run(trainer: &Trainer, cfg: &Config, saved: &Checkpoint) -> Result<(), ToolError> {
    same_vocabulary(&trainer.dataset, cfg, saved)?;
    let (total, saved_total) = (trainer.schedule.total, saved.config.total_steps);
    if total != saved_total {
        let why =
            format!("total_steps is {saved_total}, but its recipe on this text gives {total}");
        return Err(ToolError::CheckpointMismatch {
            dir: saved.dir.clone(),
            why,
        });
    }
    Ok(())
}

/// A checkpoint only makes sense on the text it was trained on: the same characters, in the same
/// order.
pub fn same_vocabulary(
    dataset: &CharDataset,
    cfg: &Config,
    saved: &Checkpoint,
) -> Result<(), ToolError> {
    if dataset.vocab == saved.config.vocab() {
        return Ok(());
    }
    Err(ToolError::VocabularyMismatch {
        data_path: cfg.data_path(),
        dir: saved.dir.clone(),
        data: dataset.vocab_size(),
        saved: saved.config.vocab_size,
    })
}

fn report_end(
    out: &mut impl Write,
    trainer: &Trainer,
    save: Option<&PathBuf>,
    outcome: Outcome,
) -> Result<(), ToolError> {
    let done = trainer.losses.len();
    let recent = &trainer.losses[done.saturating_sub(100)..];
    if outcome == Outcome::Interrupted {
        writeln!(out, "interrupted after step {done} of {}", trainer.steps)?;
    } else if recent.is_empty() {
        writeln!(out, "trained no steps")?;
    } else {
        let mean = recent.iter().map(|&l| f64::from(l)).sum::<f64>() / recent.len() as f64;
        writeln!(
            out,
            "trained {done} steps; mean loss of the last 100: {mean:.4}"
        )?;
    }
    match save {
        Some(dir) => {
            let dir = dir.display();
            writeln!(out, "saved {dir}")?;
            if outcome == Outcome::Interrupted {
                writeln!(out, "continue with: s5_gpt train --resume {dir}")?;
            }
        }
        None => writeln!(out, "not saved (pass --save DIR to keep the model)")?,
    }
    Ok(())
}
