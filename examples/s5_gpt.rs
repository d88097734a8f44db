//! Stage 5: train the tutorial's tiny GPT on Tiny Shakespeare, test it, and generate a sample.
//!
//! `cargo run --release --example s5_gpt` runs the whole chapter (31,368 steps); `--max-steps 300` stops
//! early, `--bench` times training steps instead. `train`, `generate` and `eval` work with checkpoints:
//!
//! ```text
//! cargo run --release --example s5_gpt -- train --save runs/tiny --max-steps 5000
//! cargo run --release --example s5_gpt -- train --resume runs/tiny
//! cargo run --release --example s5_gpt -- generate --checkpoint runs/tiny --prompt "JULIET:"
//! cargo run --release --example s5_gpt -- eval --checkpoint runs/tiny
//! ```
//!
//! See `--help`, and `train --help` and so on, for every flag.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::s5_gpt::cli::{Cli, Outcome};

/// Set by Ctrl-C; training saves a checkpoint and stops at the next step.
static STOP: AtomicBool = AtomicBool::new(false);

/// The exit code of a run stopped by Ctrl-C, as a shell reports one killed by SIGINT.
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let cli = Cli::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if cli.saves_checkpoints() {
        // A first Ctrl-C asks for a checkpoint; a second one quits at once (the last checkpoint stays).
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
        Ok(Outcome::Interrupted) => ExitCode::from(INTERRUPTED),
        other => exit_code(other.map(drop)),
    }
}
