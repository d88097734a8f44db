//! Stage 8: `cargo run --example s8_heads`. Prints the head detectors on patterns made by hand,
//! then a short run of the two-block attention-only model: its heads' scores, circuits and
//! ablations. With `--phase` (in release mode), trains the study's models and prints the record
//! the chapter is drawn from.

use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::s8_heads::app::Cli;
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    exit_code(cli.run(&mut std::io::stdout().lock()))
}
