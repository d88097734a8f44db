//! Tool layer, not shown in the chapter: `cargo run --release --example s7_variants -- --bench
//! --rolling`. Times the rolling cache far past the context: the chapter's model with RoPE and a
//! window of 8 (context 32, width 64, 2 blocks, 4 heads) writes [`TOKENS`] characters, 100 times
//! its context, and the time per character is printed for each stretch of [`STRETCH`] (ten
//! contexts), one line per round, way and stretch, the ways taking turns within a round:
//!
//! `T=32 W=8 way=rolling threads=1 round=0 from=0 to=320 ms_per_token=…`
//!
//! The ways: `rolling`, the ring of W keys per block ([`Gpt::forward_rolling`]); `reach`, without
//! a cache, the last blocks·(W − 1) + 1 tokens computed again (the same characters); and
//! `window_cache`, stage 7's KV cache of the chapter's windows, which must compute the whole
//! window again at every step once the sequence is longer than the context.

use std::io::Write;
use std::time::Instant;

use super::bench::bench_variants;
use super::bench::short_name;
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::beyond::{Gpt, GptConfig};
use crate::s5_gpt::cache::GptCache;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::fast::{Fast, team};
use crate::s5_gpt::generate::{Sampling, last_row, probabilities};
use crate::s5_gpt::rolling::RollingCache;
use crate::s5_gpt::tape::Tape;

/// The characters each timed generation writes: 100 contexts.
pub const TOKENS: usize = 3200;

/// The characters of one printed stretch: ten contexts.
pub const STRETCH: usize = 320;

/// The chapter's context.
const CONTEXT: usize = 32;

/// The ways [`run_rolling`] times, in the order they take turns.
pub const WAYS: [&str; 3] = ["rolling", "reach", "window_cache"];

/// Times each way `rounds` times on `threads` threads of the fast layer, printing each stretch's
/// line as its way's round ends.
pub fn run_rolling<W: Write>(out: &mut W, threads: usize, rounds: usize) -> std::io::Result<()> {
    for round in 0..rounds {
        for way in WAYS {
            let times = team::with_team(threads, || per_token_ms(way))?;
            for (n, stretch) in times.chunks(STRETCH).enumerate() {
                let ms = stretch.iter().sum::<f64>() / stretch.len() as f64;
                let (from, to) = (n * STRETCH, n * STRETCH + stretch.len());
                writeln!(
                    out,
                    "T={CONTEXT} W={} way={way} threads={threads} round={round} from={from} to={to} ms_per_token={ms:.4}",
                    window()
                )?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// The bench's model that rolls: the chapter's SWA with RoPE.
fn rolling_model(tape: &mut Tape, data: &CharDataset) -> Gpt {
    let arch = bench_variants()
        .into_iter()
        .find(|a| short_name(a) == "swa_rope")
        .expect("the bench has RoPE with a window");
    let config = GptConfig {
        vocab_size: data.vocab_size(),
        context_size: CONTEXT,
        embedding_size: 64,
        blocks: 2,
        architecture: arch,
    };
    Gpt::new(tape, &mut NumpyRandom::seed(42), config)
}

/// W, the window of the model that rolls.
fn window() -> usize {
    let mut tape = Tape::new();
    let data = CharDataset::from_text("O Romeo", 1, 1);
    rolling_model(&mut tape, &data).blocks[0]
        .attn
        .window
        .expect("a window")
}

/// The milliseconds each of [`TOKENS`] characters took in `way`, after the prompt "O Romeo".
fn per_token_ms(way: &str) -> Vec<f64> {
    let data = CharDataset::from_text("O Romeo, Romeo! wherefore art thou Romeo? ", 1, 8);
    let tape = &mut Tape::with_backend(Box::new(Fast::new()));
    let model = rolling_model(tape, &data);
    let mut tokens = data
        .encode("O Romeo")
        .expect("the prompt's characters are the text's");
    let rng = &mut NumpyRandom::seed(42);
    let (mut rolling, mut exact) = (RollingCache::default(), GptCache::default());
    let mut times = Vec::with_capacity(TOKENS);
    for _ in 0..TOKENS {
        let started = Instant::now();
        tape.reset();
        let logits = match way {
            "rolling" => step_rolling(tape, &model, &tokens, &mut rolling),
            "reach" => model.prefill_rolling(tape, &tokens, &mut RollingCache::default()),
            _ => step_exact(tape, &model, &tokens, &mut exact),
        };
        let next = rng.choice(&probabilities(
            last_row(tape.value(logits)),
            Sampling::default(),
        ));
        tokens.push(next);
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times
}

/// One step of the rolling cache: the prefill at first, then the newest token.
fn step_rolling(
    tape: &mut Tape,
    model: &Gpt,
    tokens: &[usize],
    cache: &mut RollingCache,
) -> crate::s5_gpt::tensor::NodeId {
    match cache.len {
        0 => model.prefill_rolling(tape, tokens, cache),
        n => model.forward_rolling(tape, &tokens[n..], cache),
    }
}

/// One step of stage 7's KV cache, as `generate_cached` takes it: the newest token where the
/// cache extends, the whole window again where it does not.
fn step_exact(
    tape: &mut Tape,
    model: &Gpt,
    tokens: &[usize],
    cache: &mut GptCache,
) -> crate::s5_gpt::tensor::NodeId {
    let start = tokens.len().saturating_sub(model.config.context_size);
    let window = &tokens[start..];
    match cache.extends(model, window, start) {
        true => model.forward_cached(tape, &window[window.len() - 1..], cache),
        false => {
            *cache = GptCache::default();
            model.forward_cached(tape, window, cache)
        }
    }
}
