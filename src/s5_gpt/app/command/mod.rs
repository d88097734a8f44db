//! Tool layer. The program `s5_gpt`: parse the command line, catch Ctrl-C, run the chapter or a
//! subcommand, and turn the result into an exit status.

pub mod eval;
pub mod generate;
pub mod train;

use std::ffi::OsString;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use super::args::{ChapterArgs, Cli, Command};
use super::bench;
use super::chapter;
use super::config::Config;
use super::files::corpus_warning;
use crate::s5_gpt::app::error::ToolError;

/// The exit status of a run stopped by Ctrl-C, as a shell reports one killed by SIGINT.
pub const INTERRUPTED: u8 = 130;

/// Set by Ctrl-C: training saves a checkpoint and stops at the next step.
static STOP: AtomicBool = AtomicBool::new(false);

// ANCHOR: main
/// The program `s5_gpt`: parses `args` (program name first), catches Ctrl-C when there is a
/// checkpoint to save, runs, and returns the exit status: 0 done, 1 failed (the error printed on
/// one line), 130 stopped.
pub fn main(args: impl IntoIterator<Item = OsString>) -> u8 {
    let cli = Cli::try_parse_args(args).unwrap_or_else(|e| e.exit());
    if cli.saves_checkpoints() {
        // A first Ctrl-C asks for a checkpoint; a second one quits at once (the last checkpoint
        // stays).
        let handler = || {
            if STOP.swap(true, Ordering::Relaxed) {
                std::process::exit(INTERRUPTED.into());
            }
        };
        if let Err(e) = ctrlc::set_handler(handler) {
            eprintln!("warning: Ctrl-C will not save a checkpoint: {e}");
        }
    }
    match cli.run(&mut std::io::stdout(), &STOP) {
        Ok(Outcome::Interrupted) => INTERRUPTED,
        other => crate::cli::status(other.map(drop)),
    }
}
// ANCHOR_END: main

/// How a command ended, for the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Ctrl-C stopped training (after saving, if there was somewhere to save).
    Interrupted,
}

impl Cli {
    /// Whether this command may write a checkpoint, and so should catch Ctrl-C.
    pub fn saves_checkpoints(&self) -> bool {
        matches!(&self.command, Some(Command::Train(t)) if t.save.is_some() || t.resume.is_some())
    }

    /// Runs the command, writing its report to `out`. Training stops at the next step once `stop`
    /// is set.
    pub fn run(self, out: &mut impl Write, stop: &AtomicBool) -> Result<Outcome, ToolError> {
        let done = |result: Result<(), ToolError>| result.map(|()| Outcome::Done);
        match self.command {
            None => done(run_chapter(self.chapter, out)),
            Some(Command::Train(args)) => train::run(*args, out, stop),
            Some(Command::Generate(args)) => done(generate::run(args, out)),
            Some(Command::Eval(args)) => done(eval::run(args, out)),
        }
    }
}

/// The chapter run, or with `--bench` the benchmark of its training steps.
fn run_chapter(args: ChapterArgs, out: &mut impl Write) -> Result<(), ToolError> {
    let cfg = args.config();
    warn_about_corpus(&cfg);
    match args.bench {
        _ if args.peak => bench::print_peak(out, &cfg),
        Some(steps) => write!(out, "{}", bench::run(&cfg, steps)?).map_err(ToolError::from),
        None => chapter::run(out, &cfg).map(drop),
    }
}

/// Prints a warning on stderr if the default corpus is not the expected Tiny Shakespeare.
fn warn_about_corpus(cfg: &Config) {
    if cfg.data.is_none()
        && let Some(warning) = corpus_warning(&cfg.data_path())
    {
        eprintln!("{warning}");
    }
}
