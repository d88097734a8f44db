//! Stage 6: `cargo run --example s6_flash`. Prints the online softmax of stage 1's scores step by
//! step, then the tiled and exact forms of causal attention beside stage 4's.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s6_flash;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s6_flash",
        "Prints the online softmax of stage 1's scores of \"journey\", two keys at a time: the running \
         maximum m, the running sum l and the rescale e^(m_old - m_new) at each step, ending at stage 1's \
         weights. Then tiled causal attention (FlashAttention's forward) and its exact form in stage 4's \
         layer and on one head of 64 columns at T = 256, each with its largest difference from stage 4.",
    );
    exit_code(s6_flash::run(&mut std::io::stdout().lock(), seeds))
}
