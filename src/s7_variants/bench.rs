//! Tool layer, not shown in the chapter: `cargo run --release --example s7_variants -- --bench`.
//! Times generation with stage 7's KV cache and without it (the whole window computed for every
//! character), for each variant, as the context grows; one line per context, variant and way:
//!
//! `T=256 variant=gqa cache=on threads=1 ms_per_token=… tokens_per_s=… kv_bytes_per_token=…`
//!
//! The model is the sequel's fullest one (4 heads, residual connections, LayerNorm) at width 64
//! with 2 blocks and a context of T, its weights as drawn: speed does not depend on them. The
//! prompt fills the context but for [`NEW_TOKENS`] tokens, and the time is that of writing those.

use std::io::Write;
use std::time::Instant;

use super::kv::KvShape;
use super::variants;
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::beyond::{Architecture, Gpt, GptConfig};
use crate::s5_gpt::cache::generate_cached;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::fast::{Fast, team};
use crate::s5_gpt::generate::{Sampling, generate};
use crate::s5_gpt::tape::Tape;

/// The tokens each timed generation writes, after a prompt that fills the rest of the context.
pub const NEW_TOKENS: usize = 32;

/// The contexts the bench runs at by default.
pub const CONTEXTS: [usize; 3] = [64, 256, 1024];

/// One timed generation.
#[derive(Clone, Debug, PartialEq)]
pub struct Timed {
    pub context: usize,
    pub variant: &'static str,
    pub cached: bool,
    pub ms_per_token: f64,
    pub kv_bytes_per_token: u64,
}

impl Timed {
    /// The bench's line.
    pub fn line(&self, threads: usize) -> String {
        let on = if self.cached { "on" } else { "off" };
        format!(
            "T={} variant={} cache={on} threads={threads} ms_per_token={:.3} tokens_per_s={:.1} kv_bytes_per_token={}",
            self.context,
            self.variant,
            self.ms_per_token,
            1e3 / self.ms_per_token,
            self.kv_bytes_per_token
        )
    }
}

/// A short name for a line: `full`, `gqa`, `mqa`, `swa`, `rope`, `mla`, `mla_rope`.
pub fn short_name(arch: &Architecture) -> &'static str {
    if arch.latent.is_some() {
        return if arch.rope { "mla_rope" } else { "mla" };
    }
    match (arch.kv_heads, arch.window, arch.rope) {
        (Some(1), ..) => "mqa",
        (Some(_), ..) => "gqa",
        (_, Some(_), _) => "swa",
        (_, _, true) => "rope",
        _ => "full",
    }
}

/// Times each of the chapter's variants at each of `contexts`, with and without the cache, on
/// `threads` threads of the fast layer, `repeat` times each (the line gives the median), printing
/// a line for each as it ends.
pub fn run<W: Write>(
    out: &mut W,
    contexts: &[usize],
    threads: usize,
    repeat: usize,
) -> std::io::Result<()> {
    for &context in contexts {
        for (_, arch) in variants() {
            for cached in [true, false] {
                let mut runs = Vec::with_capacity(repeat);
                for _ in 0..repeat {
                    let timed = team::with_team(threads, || time(arch, context, cached))?;
                    runs.push(timed.map_err(std::io::Error::other)?);
                }
                runs.sort_by(|a, b| a.ms_per_token.total_cmp(&b.ms_per_token));
                let timed = &runs[runs.len() / 2];
                writeln!(out, "{}", timed.line(threads))?;
                out.flush()?;
            }
        }
    }
    Ok(())
}

/// One generation of [`NEW_TOKENS`] tokens at `context`.
pub fn time(arch: Architecture, context: usize, cached: bool) -> Result<Timed, GptError> {
    let text: String = "O Romeo, Romeo! wherefore art thou Romeo? ".repeat(context / 16 + 1);
    let data = CharDataset::from_text(&text, 1, 8);
    let config = GptConfig {
        vocab_size: data.vocab_size(),
        context_size: context,
        embedding_size: 64,
        blocks: 2,
        architecture: arch,
    };
    let mut tape = Tape::with_backend(Box::new(Fast::new()));
    let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(42), config);
    let prompt = &text[..context.saturating_sub(NEW_TOKENS).max(1)];
    let (rng, sampling) = (&mut NumpyRandom::seed(42), Sampling::default());
    let started = Instant::now();
    match cached {
        true => generate_cached(&mut tape, &model, &data, prompt, NEW_TOKENS, rng, sampling)?,
        false => generate(&mut tape, &model, &data, prompt, NEW_TOKENS, rng, sampling)?,
    };
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let kv = KvShape::of(&arch, 2, 64, 4); // float32
    Ok(Timed {
        context,
        variant: short_name(&arch),
        cached,
        ms_per_token: ms / NEW_TOKENS as f64,
        kv_bytes_per_token: kv.bytes_per_token(),
    })
}
