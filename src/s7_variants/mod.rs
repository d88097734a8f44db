//! Stage 7: attention in today's LLMs. Not in rasbt's chapter 3: the stage follows rasbt's bonus
//! material (`ch04/03_kv-cache`, `ch04/04_gqa`, `ch04/05_mla`, `ch04/06_swa`, and RoPE in
//! `ch05/07_gpt_to_llama`) and builds each variant on stage 5's tape, as flags of the sequel's
//! model ([`Architecture`]): `kv_heads`, `window`, `rope` and `latent`.
//!
//! 1. [`kv`]: what a KV cache holds per token and in all, for each variant: rasbt's estimators'
//!    formula and figures.
//! 2. Grouped-query and multi-query attention: K key/value heads shared by H query heads
//!    ([`crate::s5_gpt::variants::repeat_kv_forward`]).
//! 3. Sliding-window attention: the band mask ([`crate::s5_gpt::variants::window_forward`]).
//! 4. Rotary positions: pairs of coordinates turned by the position
//!    ([`crate::s5_gpt::variants::rope_forward`]).
//! 5. Multi-head latent attention: keys and values unfolded from a latent, and the weights folded
//!    so that a step reads the latents directly ([`latent`], [`crate::s5_gpt::latent`]).
//! 6. The variants side by side on the sequel's fullest model: parameters, cache, loss.
//! 7. [`weights`]: each variant's first block on a prompt, its mask and its heads' weights.
//!
//! [`exercises`] holds the solutions of the chapter's exercises.
//!
//! [`run`] prints them in that order, as `cargo run --example s7_variants` shows them.

pub mod app;
pub mod bench;
pub mod bench_rolling;
pub mod exercises;
pub mod kv;
pub mod latent;
#[cfg(not(target_arch = "wasm32"))]
pub mod weigh;
pub mod weights;

use std::io::Write;

use crate::Error;
use crate::print::{cell, heading};
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::beyond::{Architecture, Gpt, GptConfig};
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::optim::AdamW;
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::variants::{repeat_kv_forward, rope_angles, rope_forward};

pub use kv::{KvShape, gigabytes, rasbt_examples};

/// Prints the chapter's outputs: the cache's memory, the groups, the band, the rotation, the
/// latent's absorbed weights, and the variants side by side.
pub fn run<W: Write>(out: &mut W) -> Result<(), Error> {
    kv_memory(out)?;
    grouped_heads(out)?;
    sliding_window(out)?;
    rotary_positions(out)?;
    latent::print(out)?;
    side_by_side(out)?;
    Ok(())
}

/// rasbt's estimators' examples, computed by [`KvShape`].
fn kv_memory<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(out, "What the KV cache holds")?;
    let lines: Vec<String> = rasbt_examples()
        .iter()
        .map(|(name, shape, context)| {
            let per_token = shape.bytes_per_token();
            let total = gigabytes(shape.total_bytes(1, context.to_owned()));
            format!("{name:<18} {per_token:>9} bytes per token   context {context:>6}: {total}")
        })
        .collect();
    cell(out, "kv", "KvShape::total_bytes, bfloat16", &lines)
}

// ANCHOR: groups_map
/// For H query heads and K key/value heads, the K/V head each query head reads: h / (H/K).
pub fn kv_head_of_each_query_head(heads: usize, kv_heads: usize) -> Vec<usize> {
    let ids: Vec<f32> = (0..kv_heads).map(|k| k as f32).collect();
    let mut out = vec![0.0; heads];
    repeat_kv_forward(&mut out, &ids, heads / kv_heads, 1); // one value per head
    out.into_iter().map(|k| k as usize).collect()
}
// ANCHOR_END: groups_map

/// Which K/V head each of 4 query heads reads, for K = 4, 2 and 1, and what W_key and W_value weigh.
fn grouped_heads<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(
        out,
        "Grouped-query attention: 4 query heads, K key/value heads",
    )?;
    let (c, heads) = (64, 4);
    let lines: Vec<String> = [4, 2, 1]
        .iter()
        .map(|&k| {
            let reads = kv_head_of_each_query_head(heads, k);
            let weights = 2 * (c * k * c / heads + k * c / heads); // W_key, W_value and biases
            format!("K = {k}: query heads 0-3 read K/V heads {reads:?}; W_key + W_value: {weights:>5} parameters")
        })
        .collect();
    cell(out, "groups", "repeat_kv, C = 64", &lines)
}

/// The band of T = 8 tokens and W = 3: which keys (columns) each token (row) sees.
fn sliding_window<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(out, "Sliding-window attention: T = 8, W = 3")?;
    let band = weights::visible(8, Some(3)); // (T, T): the future and the old past hidden
    let lines: Vec<String> = (band.iter().enumerate())
        .map(|(i, row)| {
            let seen: String = row.iter().map(|&s| if s { " 1" } else { " ·" }).collect();
            let keys = row.iter().filter(|&&s| s).count();
            format!(
                "token {i}:{seen}   {keys} {}",
                if keys == 1 { "key" } else { "keys" }
            )
        })
        .collect();
    cell(out, "band", "tril, then window", &lines)
}

/// Position p turns pair i by p·θᵢ: the first pair turns fastest, the last slowest; and a query
/// and a key turned by their positions m and n score alike wherever m − n is the same.
fn rotary_positions<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(out, "Rotary positions: a head of D = 8, four pairs")?;
    let d = 8;
    let (cos, sin) = rope_angles(0..4, d); // (4, D/2)
    let mut lines: Vec<String> = (0..4)
        .map(|p| {
            let pairs: Vec<String> = (0..d / 2)
                .map(|i| format!("({:7.4}, {:7.4})", cos[p * d / 2 + i], sin[p * d / 2 + i]))
                .collect();
            format!("position {p}: {}", pairs.join(" "))
        })
        .collect();
    let q: Vec<f32> = (0..d).map(|i| 0.5 - 0.1 * i as f32).collect();
    let k: Vec<f32> = (0..d).map(|i| 0.1 * i as f32 - 0.2).collect();
    for (m, n) in [(2, 0), (5, 3), (9, 7), (3, 0)] {
        let score = turned_score(&q, &k, m, n);
        lines.push(format!(
            "q at {m}, k at {n} (m − n = {}): q·k = {score:.6}",
            m - n
        ));
    }
    cell(
        out,
        "rope",
        "(cos, sin) of p·θᵢ per pair; scores of turned q and k",
        &lines,
    )
}

// ANCHOR: turned_score
/// q turned to position m, k turned to position n, and their dot product: it depends on m − n.
pub fn turned_score(q: &[f32], k: &[f32], m: usize, n: usize) -> f32 {
    let d = q.len();
    let (mut q_m, mut k_n) = (vec![0.0; d], vec![0.0; d]);
    rope_forward(&mut q_m, q, (1, d), m); // one row, at position m
    rope_forward(&mut k_n, k, (1, d), n);
    q_m.iter().zip(&k_n).map(|(a, b)| a * b).sum()
}
// ANCHOR_END: turned_score

/// The text the side-by-side models learn: one line, its own characters as the vocabulary.
pub const LINE: &str = "O Romeo, Romeo! wherefore art thou Romeo? Deny thy father";

/// Training steps of the side-by-side comparison, on [`LINE`]'s first window.
pub const STEPS: usize = 10;

// ANCHOR: side_by_side_variants
/// The sequel's fullest model (4 heads, residual connections, LayerNorm) and stage 7's variants of
/// it, with the chapter's names.
pub fn variants() -> Vec<(&'static str, Architecture)> {
    let full = Architecture::everything(4, 0.0);
    vec![
        ("full, 4 heads", full),
        (
            "GQA, K = 2",
            Architecture {
                kv_heads: Some(2),
                ..full
            },
        ),
        (
            "MQA, K = 1",
            Architecture {
                kv_heads: Some(1),
                ..full
            },
        ),
        (
            "SWA, W = 8",
            Architecture {
                window: Some(8),
                ..full
            },
        ),
        ("RoPE", Architecture { rope: true, ..full }),
        (
            "MLA, L = 32",
            Architecture {
                latent: Some(32),
                ..full
            },
        ),
        (
            "MLA + RoPE",
            Architecture {
                latent: Some(32),
                rope: true,
                ..full
            },
        ),
    ]
}
// ANCHOR_END: side_by_side_variants

/// What one variant is: its parameters, the cache a token adds, its loss at the start and after
/// [`STEPS`] AdamW steps on [`LINE`].
#[derive(Clone, Debug, PartialEq)]
pub struct Weighed {
    pub parameters: usize,
    pub kv_bytes_per_token: u64,
    pub losses: [f32; 2],
}

/// The chapter's model with `arch`: the tutorial's sizes (context 32, width 64, 2 blocks), [`LINE`]'s
/// characters as its vocabulary, its weights drawn from `np.random.seed(42)`; and that vocabulary.
pub fn chapter_model(tape: &mut Tape, arch: Architecture) -> (Gpt, CharDataset) {
    let data = CharDataset::from_text(LINE, 1, 32);
    let config = GptConfig {
        vocab_size: data.vocab_size(),
        context_size: 32,
        embedding_size: 64,
        blocks: 2,
        architecture: arch,
    };
    (Gpt::new(tape, &mut NumpyRandom::seed(42), config), data)
}

/// The chapter's model ([`chapter_model`]) with `arch`, trained on [`LINE`]'s first window at a
/// learning rate of 1e-2.
pub fn weigh(tape: &mut Tape, arch: Architecture) -> Weighed {
    let (model, data) = chapter_model(tape, arch);
    let ids = data.encode(LINE).expect("the line's own characters");
    let (x, y) = (&ids[..32], &ids[1..33]); // (1, T) each
    let mut optimizer = AdamW::new(1e-2);
    let mut losses = [0.0; 2];
    for step in 0..=STEPS {
        tape.reset();
        let logits = model.forward(tape, x, 1, None); // (1, T, V)
        let loss = tape.cross_entropy(logits, y);
        let value = tape.value(loss).data[0];
        if step == 0 || step == STEPS {
            losses[usize::from(step == STEPS)] = value;
        }
        tape.zero_grad();
        tape.backward(loss);
        tape.step(&mut optimizer);
    }
    Weighed {
        parameters: tape.params().iter().map(|p| p.data.len()).sum(),
        kv_bytes_per_token: KvShape::of(&arch, 2, 64, 4).bytes_per_token(), // float32
        losses,
    }
}

/// Each variant weighed, one line each.
fn side_by_side<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(
        out,
        "The variants side by side: context 32, width 64, 2 blocks",
    )?;
    let mut lines = vec![format!(
        "{:<14} {:>10} {:>16} {:>12} {:>15}",
        "variant",
        "parameters",
        "KV bytes/token",
        "loss step 0",
        format!("loss step {STEPS}")
    )];
    for (name, arch) in variants() {
        let w = weigh(&mut Tape::new(), arch);
        lines.push(format!(
            "{name:<14} {:>10} {:>16} {:>12.4} {:>15.4}",
            w.parameters, w.kv_bytes_per_token, w.losses[0], w.losses[1]
        ));
    }
    cell(out, "side by side", "weigh, float32", &lines)
}
