//! Stage 6: `cargo run --example s6_flash`. Prints the online softmax of stage 1's scores step by
//! step, then the tiled and exact forms of causal attention beside stage 4's. `--scores` walks
//! other scores, `--context T --tile N` sets the head at length. With `--bench` (in release mode),
//! times the naive, tiled and exact forms as the context grows instead.

use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::s6_flash::app::Cli;
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (mut out, mut progress) = (std::io::stdout().lock(), std::io::stderr());
    exit_code(cli.run(&mut out, &mut progress))
}
