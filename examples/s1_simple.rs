//! Stage 1: `cargo run --example s1_simple`. Prints §3.3's cells in the book's order.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s1_simple;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s1_simple",
        "Prints the cells of §3.3 (#2-#13): attention scores, softmax weights and context vectors without \
         trainable weights, by loops and as matrix products. Nothing here is random, so --seed (which \
         replaces the book's seeds 123 and 789 in stages 2-4) changes nothing in this stage.",
    );
    exit_code(s1_simple::run(&mut std::io::stdout().lock(), seeds))
}
