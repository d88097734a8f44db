//! Stage 6: `cargo run --example s6_flash`. Prints the online softmax of stage 1's scores step by
//! step, then the tiled and exact forms of causal attention beside stage 4's. With `--bench`
//! (in release mode), times the naive, tiled and exact forms as the context grows instead.

use std::process::ExitCode;

use attention_from_scratch::BookSeeds;
use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s6_flash::{self, bench::BenchArgs};
use clap::Parser;

/// Prints the online softmax of stage 1's scores of "journey", two keys at a time: the running
/// maximum m, the running sum l and the rescale e^(m_old - m_new) at each step, ending at stage 1's
/// weights. Then tiled causal attention (FlashAttention's forward) and its exact form in stage 4's
/// layer and on one head of 64 columns at T = 256, each with its largest difference from stage 4.
/// With --bench, times instead causal attention at length (12 heads of 64 columns by default), one
/// line per context and form: forward and backward milliseconds, and the memory the form holds.
#[derive(Debug, Parser)]
#[command(name = "s6_flash")]
struct Cli {
    #[command(flatten)]
    seed: SeedArgs,
    #[command(flatten)]
    bench: BenchArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.bench.bench {
        let (mut out, mut progress) = (std::io::stdout().lock(), std::io::stderr());
        return exit_code(s6_flash::bench::run(&cli.bench, &mut out, &mut progress));
    }
    let seeds = BookSeeds::new(cli.seed.seed);
    exit_code(s6_flash::run(&mut std::io::stdout().lock(), seeds))
}
