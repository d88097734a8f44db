//! Stage 1: `cargo run --example s1_simple`. Prints §3.3's cells in the book's order.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s1_simple;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s1_simple",
        "Prints the cells of §3.3: attention without trainable weights.",
    );
    exit_code(s1_simple::run(&mut std::io::stdout().lock(), seeds))
}
