//! Stage 4: `cargo run --example s4_multihead`. Prints §3.6's cells in the book's order.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s4_multihead;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s4_multihead",
        "Prints the cells of §3.6 and exercises 3.2–3.3: multi-head attention, as a wrapper and with weight splits.",
    );
    exit_code(s4_multihead::run(&mut std::io::stdout().lock(), seeds))
}
