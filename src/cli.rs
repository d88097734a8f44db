//! What the stage examples share: the `--seed` flag, and turning an error into one line and an exit code.

use std::fmt::Display;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::BookSeeds;

/// The flags of the chapter-3 examples (stages 1–4).
#[derive(Debug, Parser)]
pub struct SeedArgs {
    /// Use seed N wherever the chapter calls torch.manual_seed (123 and 789), to compare with your own
    /// PyTorch run. Without it, the book's seeds hold.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

impl SeedArgs {
    /// Parses the command line of example `name`, whose `--help` starts with `about`. A bad flag exits
    /// with clap's one-line error.
    pub fn parse_for(name: &'static str, about: &'static str) -> BookSeeds {
        let matches = Self::command().name(name).about(about).get_matches();
        let args = Self::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
        BookSeeds::new(args.seed)
    }
}

/// Prints `error: …` on one line and fails, or succeeds quietly. A closed pipe (`… | head`) is not an error.
pub fn exit_code<E: Display>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.to_string().contains("Broken pipe") => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
