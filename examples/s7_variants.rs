//! Stage 7: `cargo run --example s7_variants`. Prints what the KV cache holds for each of today's
//! attention variants, how grouped-query heads share keys and values, the sliding window's band,
//! rotary positions, and the variants side by side on the sequel's model. With `--bench` (in
//! release mode), times generation with the KV cache and without it instead.

use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::s7_variants::app::Cli;
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    exit_code(cli.run(&mut std::io::stdout().lock()))
}
