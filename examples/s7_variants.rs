//! Stage 7: `cargo run --example s7_variants`. Prints what the KV cache holds for each of today's
//! attention variants, how grouped-query heads share keys and values, the sliding window's band,
//! rotary positions, and the variants side by side on the sequel's model.

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut out = std::io::stdout().lock();
    match attention_from_scratch::s7_variants::run(&mut out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
