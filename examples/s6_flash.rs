//! Stage 6: `cargo run --example s6_flash`. Prints the online softmax of stage 1's scores step by
//! step.

use std::process::ExitCode;

use attention_from_scratch::cli::{SeedArgs, exit_code};
use attention_from_scratch::s6_flash;

fn main() -> ExitCode {
    let seeds = SeedArgs::parse_for(
        "s6_flash",
        "Prints the online softmax of stage 1's scores of \"journey\", two keys at a time: the running \
         maximum m, the running sum l and the rescale e^(m_old - m_new) at each step, ending at stage 1's \
         weights.",
    );
    exit_code(s6_flash::run(&mut std::io::stdout().lock(), seeds))
}
