//! Stage 2: `cargo run --example s2_trainable`. Prints §3.4's cells and exercise 3.1 in the book's
//! order.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s2_trainable;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s2_trainable",
        "Prints the cells of §3.4 (#16-#23) and exercise 3.1: self-attention with trainable \
         weights, and why the scores are divided by sqrt(d_k). The torch.rand walk-through, the \
         sqrt(d_k) example, SelfAttention_v1 and the exercise draw at seed 123, SelfAttention_v2 at \
         seed 789; --seed N replaces both.",
    );
    exit_code(s2_trainable::run(&mut std::io::stdout().lock(), seeds))
}
