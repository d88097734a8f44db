//! Stage 5: train the tutorial's tiny GPT on Tiny Shakespeare, test it, and generate a sample.
//!
//! `cargo run --release --example s5_gpt` runs the whole chapter (31,368 steps); `--max-steps 300`
//! stops early, `--bench` times training steps instead. `train`, `generate` and `eval` work with
//! checkpoints:
//!
//! ```text
//! cargo run --release --example s5_gpt -- train --save runs/tiny --max-steps 5000
//! cargo run --release --example s5_gpt -- train --resume runs/tiny
//! cargo run --release --example s5_gpt -- generate --checkpoint runs/tiny --prompt "JULIET:"
//! cargo run --release --example s5_gpt -- eval --checkpoint runs/tiny
//! ```
//!
//! See `--help`, and `train --help` and so on, for every flag; `--reference` runs the lesson's
//! plain code. The program itself is [`attention_from_scratch::s5_gpt::app::main`], so that the
//! tests can run it too.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(attention_from_scratch::s5_gpt::app::main(
        std::env::args_os(),
    ))
}
