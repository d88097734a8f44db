//! Stage 3: `cargo run --example s3_causal`. Prints §3.5's cells in the book's order.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s3_causal;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s3_causal",
        "Prints the cells of §3.5: causal masking, dropout and the CausalAttention class, then \
         dropout in training and at inference.",
    );
    exit_code(s3_causal::run(&mut std::io::stdout().lock(), seeds))
}
