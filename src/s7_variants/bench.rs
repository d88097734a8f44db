//! Tool layer, not shown in the chapter: `cargo run --release --example s7_variants -- --bench`.
//! Times generation with stage 7's KV cache and without it (the whole window computed for every
//! character), for each variant, as the context grows; one line per round, context, variant and
//! way, the two ways taking turns:
//!
//! `T=256 variant=gqa cache=on threads=1 round=0 ms_per_token=… tokens_per_s=… recomputed=4 …`
//!
//! `recomputed` counts the timed steps that computed the whole window (the prefill, and every
//! step the cache could not take without changing the bits). Latent attention is timed twice with
//! the cache: unfolding the kept latents (`mla`, the same bits as recomputing) and reading them
//! through the absorbed weights (`mla_absorbed`). RoPE with a window (`swa_rope`) rolls: its cache
//! keeps W keys and each step costs O(W).
//!
//! `--rolling` times instead the rolling cache far past the context ([`super::bench_rolling::run_rolling`]).
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
use crate::s5_gpt::cache::{GptCache, generate_cached};
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::fast::{Fast, team};
use crate::s5_gpt::generate::{Sampling, generate, last_row, probabilities};
use crate::s5_gpt::rolling::generate_rolling;
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
    /// The timed steps that computed the whole window (or, rolling, the tokens it reaches).
    pub recomputed: usize,
    /// The bytes of keys and values (or latents) a step's attention reads for each cached token.
    pub read_bytes_per_token: u64,
}

impl Timed {
    /// The bench's line for round `round`.
    pub fn line(&self, threads: usize, round: usize) -> String {
        let on = if self.cached { "on" } else { "off" };
        format!(
            "T={} variant={} cache={on} threads={threads} round={round} ms_per_token={:.3} tokens_per_s={:.1} recomputed={} kv_bytes_per_token={} read_bytes_per_token={}",
            self.context,
            self.variant,
            self.ms_per_token,
            1e3 / self.ms_per_token,
            self.recomputed,
            self.kv_bytes_per_token,
            self.read_bytes_per_token,
        )
    }
}

/// A short name for a line: `full`, `gqa`, `mqa`, `swa`, `swa_rope`, `rope`, `mla`, `mla_rope`.
pub fn short_name(arch: &Architecture) -> &'static str {
    if arch.latent.is_some() {
        return if arch.rope { "mla_rope" } else { "mla" };
    }
    match (arch.kv_heads, arch.window, arch.rope) {
        (Some(1), ..) => "mqa",
        (Some(_), ..) => "gqa",
        (_, Some(_), true) => "swa_rope",
        (_, Some(_), _) => "swa",
        (_, _, true) => "rope",
        _ => "full",
    }
}

/// How a timed generation runs: with the cache (for latent attention, unfolding the latents or
/// reading them through the absorbed weights) or without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Cached,
    Absorbed,
    Recomputed,
}

/// The bench's models: the chapter's variants, and RoPE with the window of its SWA, which rolls.
pub fn bench_variants() -> Vec<Architecture> {
    let mut archs: Vec<Architecture> = variants().into_iter().map(|(_, a)| a).collect();
    let swa = archs.iter().find(|a| short_name(a) == "swa").copied();
    archs.extend(swa.map(|a| Architecture { rope: true, ..a }));
    archs
}

/// The ways a model of `arch` is timed: with and without the cache, and absorbed too for latent
/// attention.
fn ways(arch: &Architecture) -> Vec<Way> {
    match arch.latent {
        Some(_) => vec![Way::Cached, Way::Absorbed, Way::Recomputed],
        None => vec![Way::Cached, Way::Recomputed],
    }
}

/// Times each of the bench's models at each of `contexts` in each of its ways, on `threads`
/// threads of the fast layer, `repeat` rounds, the ways taking turns within each round, printing
/// every round's line as it ends.
pub fn run<W: Write>(
    out: &mut W,
    contexts: &[usize],
    threads: usize,
    repeat: usize,
) -> std::io::Result<()> {
    for &context in contexts {
        for arch in bench_variants() {
            for round in 0..repeat {
                for way in ways(&arch) {
                    let timed = team::with_team(threads, || time(arch, context, way))?;
                    let timed = timed.map_err(std::io::Error::other)?;
                    writeln!(out, "{}", timed.line(threads, round))?;
                    out.flush()?;
                }
            }
        }
    }
    Ok(())
}

/// The chapter's model of `arch` at `context`, with the text it reads and a prompt that fills the
/// context but for [`NEW_TOKENS`].
fn bench_model(arch: Architecture, context: usize) -> (Tape, Gpt, CharDataset, String) {
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
    let prompt = text[..context.saturating_sub(NEW_TOKENS).max(1)].to_string();
    (tape, model, data, prompt)
}

/// One generation of [`NEW_TOKENS`] tokens at `context`, in `way`.
pub fn time(arch: Architecture, context: usize, way: Way) -> Result<Timed, GptError> {
    let (mut tape, model, data, prompt) = bench_model(arch, context);
    let (rng, sampling) = (&mut NumpyRandom::seed(42), Sampling::default());
    let tape = &mut tape;
    let started = Instant::now();
    let cached = way != Way::Recomputed;
    match way {
        _ if model.rolls() => generate_rolling(
            tape, &model, &data, &prompt, NEW_TOKENS, rng, sampling, cached,
        )?,
        Way::Cached => generate_cached(tape, &model, &data, &prompt, NEW_TOKENS, rng, sampling)?,
        Way::Absorbed => generate_absorbed(tape, &model, &data, &prompt, NEW_TOKENS, rng)?,
        Way::Recomputed => generate(tape, &model, &data, &prompt, NEW_TOKENS, rng, sampling)?,
    };
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let kv = KvShape::of(&arch, 2, 64, 4); // float32
    let prompt_len = prompt.chars().count();
    let recomputed = match way {
        Way::Recomputed => NEW_TOKENS,
        Way::Absorbed => 1,
        Way::Cached if model.rolls() => 1,
        Way::Cached => prefills(&model, prompt_len, NEW_TOKENS),
    };
    let variant = match way {
        Way::Absorbed => absorbed_name(&arch),
        _ => short_name(&arch),
    };
    Ok(Timed {
        context,
        variant,
        cached,
        ms_per_token: ms / NEW_TOKENS as f64,
        kv_bytes_per_token: kv.bytes_per_token(),
        recomputed,
        read_bytes_per_token: read_bytes_per_token(&arch, way),
    })
}

/// The bench's name for latent attention read through the absorbed weights.
fn absorbed_name(arch: &Architecture) -> &'static str {
    if arch.rope {
        "mla_rope_absorbed"
    } else {
        "mla_absorbed"
    }
}

/// How many of `steps` steps after a prompt of `prompt` tokens compute the whole window, as
/// [`generate_cached`] decides ([`GptCache::extends`]): the prefill, and every step the cache
/// cannot take without changing the bits.
pub fn prefills(model: &Gpt, prompt: usize, steps: usize) -> usize {
    let mut cache = GptCache::default();
    let mut count = 0;
    for n in prompt..prompt + steps {
        let start = n.saturating_sub(model.config.context_size);
        let window = vec![0; n - start];
        match cache.extends(model, &window, start) {
            true => cache.len += 1,
            false => {
                count += 1;
                cache.len = window.len();
            }
        }
    }
    count
}

/// The bytes a step's attention reads for each cached token, over the 2 blocks, float32: the
/// keys and values; for latent attention unfolded, the keys and values W_key and W_value make of
/// each kept latent (H·(D + R) + H·D values), and absorbed, the latent and rotary key themselves.
fn read_bytes_per_token(arch: &Architecture, way: Way) -> u64 {
    let kv = KvShape::of(arch, 2, 64, 4);
    match (arch.latent, way) {
        (Some(_), Way::Absorbed) | (None, _) => kv.bytes_per_token(),
        (Some(_), _) => {
            let (h, d) = (arch.heads as u64, 64 / arch.heads as u64);
            let r = if arch.rope { d / 2 } else { 0 };
            2 * 4 * (h * (d + r) + h * d)
        }
    }
}

/// Generation with latent attention's absorbed weights: the prompt computed whole into the cache
/// (the prefill), then each token through [`Gpt::forward_absorbed`], drawn as the chapter draws.
/// Not the recomputed bits (each score within the chapter's stated bound), so it is only timed.
fn generate_absorbed(
    tape: &mut Tape,
    model: &Gpt,
    data: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
) -> Result<String, GptError> {
    let mut tokens = data.encode(prompt)?;
    let absorbed = model.absorb(tape).expect("latent attention");
    let mut cache = GptCache::default();
    for _ in 0..steps {
        tape.reset();
        let logits = match cache.len {
            0 => model.forward_cached(tape, &tokens, &mut cache), // (1, L, V)
            _ => model.forward_absorbed(tape, tokens[tokens.len() - 1], &mut cache, &absorbed),
        };
        let last = last_row(tape.value(logits)); // (V)
        tokens.push(rng.choice(&probabilities(last, Sampling::default())));
    }
    tape.reset();
    Ok(data.decode(&tokens))
}
