//! Lesson layer. Stage 7's multi-head latent attention (MLA, DeepSeek-V2's; rasbt's
//! `ch04/05_mla` caches the latent without RoPE): the pieces [`super::beyond::Attention`] adds for
//! [`super::beyond::Architecture`]'s `latent`. The chapter `s7_variants` shows them.
//!
//! Keys and values are not projected from x directly. x is first squeezed to a latent c, L wide,
//! the only thing the KV cache keeps of a token; W_key and W_value unfold each head's keys and
//! values from c. RoPE cannot go through that squeeze (its angle depends on the position, so it
//! would have to be unfolded again for every key), so with rotary positions a small rotary part is put
//! beside each query and key instead: DeepSeek's decoupled RoPE, R = D/2 wide, its key shared by
//! every head and cached beside c.
//!
//! [`absorb`] folds W_key into W_query and W_value into the output layer, so that a query reads
//! the cached latents directly ([`absorbed_attention`]); the reals give the same scores, float32 gives
//! them within [`score_bound`].

use super::model::Linear;
use super::ops::{dot, softmax_forward};
use super::tape::Tape;
use super::tensor::NodeId;
use crate::rng::numpy::NumpyRandom;

// ANCHOR: latent
/// What latent attention adds to a block's attention: the squeeze to the latent, and the
/// decoupled rotary part.
#[derive(Clone, Copy, Debug)]
pub struct Latent {
    /// W_DKV, C → L: the latent c, which W_key and W_value (L → H·D) unfold.
    pub down: Linear,
    /// With rotary positions (`Architecture::rope`), W_QR (C → H·R) and W_KR (C → R): a rotary
    /// part for each head's query, and one rotary key for all the heads.
    pub rotary: Option<[Linear; 2]>,
    /// H, the heads the rotary queries split into.
    pub heads: usize,
}

impl Latent {
    /// W_DKV, then with `rope` W_QR and W_KR, drawn in that order, for width `c`, latent `l` and
    /// head width `d`.
    pub fn new(
        tape: &mut Tape,
        rng: &mut NumpyRandom,
        (c, l, d): Dims,
        heads: usize,
        rope: bool,
    ) -> Self {
        let down = Linear::new(tape, rng, c, l);
        let r = rotary_width(d);
        let rotary = rope.then(|| {
            [
                Linear::new(tape, rng, c, heads * r),
                Linear::new(tape, rng, c, r),
            ]
        });
        Latent {
            down,
            rotary,
            heads,
        }
    }
}
// ANCHOR_END: latent

// ANCHOR: compress
impl Latent {
    /// What the cache keeps of the tokens at positions `offset`.. of x (B, T, C): the latent c
    /// (B, T, L) and, with RoPE, the turned rotary key (B, 1, T, R).
    pub fn compress(&self, tape: &mut Tape, x: NodeId, offset: usize) -> Vec<NodeId> {
        let c = self.down.forward(tape, x); // (B, T, L)
        let Some([_, key_rope]) = self.rotary else {
            return vec![c];
        };
        let k_r = key_rope.forward(tape, x); // (B, T, R)
        let k_r = self.split(tape, k_r, 1); // (B, 1, T, R)
        vec![c, tape.rope(k_r, offset)]
    }

    /// Each head's query q (B, H, T, D) with its turned rotary part beside it: (B, H, T, D + R).
    pub fn rotary_queries(&self, tape: &mut Tape, q: NodeId, x: NodeId, offset: usize) -> NodeId {
        match self.rotary_part(tape, x, offset) {
            Some(q_r) => tape.concat(q, q_r), // (B, H, T, D + R)
            None => q,
        }
    }

    /// The turned rotary part of each head's query, (B, H, T, R), if there is one.
    pub fn rotary_part(&self, tape: &mut Tape, x: NodeId, offset: usize) -> Option<NodeId> {
        let [query_rope, _] = self.rotary?;
        let q_r = query_rope.forward(tape, x); // (B, T, H·R)
        let q_r = self.split(tape, q_r, self.heads); // (B, H, T, R)
        Some(tape.rope(q_r, offset))
    }

    /// Each head's keys k (B, H, T, D) with the shared rotary key beside them: (B, H, T, D + R).
    /// `kept` is what [`Latent::compress`] returned, or the cache's copy of it.
    pub fn rotary_keys(&self, tape: &mut Tape, k: NodeId, kept: &[NodeId]) -> NodeId {
        let Some(&k_r) = kept.get(1) else {
            return k;
        };
        let k_r = match self.heads {
            1 => k_r,
            h => tape.repeat_kv(k_r, h), // (B, H, T, R): multi-query, for the rotary part
        };
        tape.concat(k, k_r) // (B, H, T, D + R)
    }

    /// (B, T, n·W) → (B, n, T, W); one head keeps (B, T, W), as the model's heads do.
    fn split(&self, tape: &mut Tape, y: NodeId, n: usize) -> NodeId {
        match self.heads {
            1 => y,
            _ => tape.split_heads(y, n),
        }
    }
}

// ANCHOR_END: compress

/// (C, L, D): the model's width, the latent's and a head's.
pub type Dims = (usize, usize, usize);

/// R, the width of the decoupled rotary part: half a head, as DeepSeek-V2's 64 beside 128.
pub fn rotary_width(d: usize) -> usize {
    d / 2
}

// ANCHOR: absorb
/// Latent attention's weights folded for reading the cached latents directly, head by head. Each
/// bias rides as one more column, which a 1 appended to x and to c multiplies: x̂ = [x, 1],
/// ĉ = [c, 1]. Folded in float64 and rounded once.
#[derive(Clone, Debug, PartialEq)]
pub struct Absorbed {
    /// Â_h = Q̂_hᵀ·K̂_h, (C + 1, L + 1): x̂ᵀ·Â_h·ĉ is head h's score q·k, with k never unfolded.
    pub scores: Vec<Vec<f32>>,
    /// Ô_h = W_out,h·V̂_h, (C, L + 1): Ô_h·ẑ is head h's share of the output, for ẑ the weighted
    /// sum of the ĉ, with v never unfolded.
    pub outputs: Vec<Vec<f32>>,
    /// The output layer's bias, (C).
    pub bias: Vec<f32>,
}

/// Folds W_key into W_query and W_value into the output layer, for `heads` heads: what a model
/// with latent attention can do once, after training.
pub fn absorb(tape: &Tape, layers: [Linear; 4], heads: usize) -> Absorbed {
    fold(tape, layers, heads, |w| w)
}

/// [`absorb`], each weight passed through `each` first.
fn fold(tape: &Tape, layers: [Linear; 4], heads: usize, each: fn(f64) -> f64) -> Absorbed {
    let [q_hat, k_hat, v_hat, out] = layers.map(|w| with_bias(tape, w, each)); // (out, in + 1)
    let width = out[0].len() - 1; // H·D, the output layer's input
    let d = width / heads;
    let mut absorbed = Absorbed {
        scores: vec![],
        outputs: vec![],
        bias: out.iter().map(|row| row[width] as f32).collect(), // (C)
    };
    for h in 0..heads {
        let rows = h * d..(h + 1) * d; // head h's rows of W_query, W_key and W_value
        let [q_h, k_h, v_h] = [&q_hat, &k_hat, &v_hat].map(|w| &w[rows.clone()]); // (D, in + 1)
        let w_out_h: Vec<Vec<f64>> = out.iter().map(|row| row[rows.clone()].to_vec()).collect();
        absorbed.scores.push(transposed_product(q_h, k_h)); // (C + 1, L + 1)
        absorbed.outputs.push(product(&w_out_h, v_h)); // (C, L + 1)
    }
    absorbed
}
// ANCHOR_END: absorb

/// [`absorb`] with every weight made positive: the scores it gives for |x| and |c| are the sums
/// [`score_bound`] scales.
pub fn absorb_magnitudes(tape: &Tape, layers: [Linear; 4], heads: usize) -> Absorbed {
    fold(tape, layers, heads, f64::abs)
}

/// A layer's weight (out, in) with its bias as one more column, (out, in + 1), in float64.
fn with_bias(tape: &Tape, layer: Linear, each: fn(f64) -> f64) -> Vec<Vec<f64>> {
    let (w, b) = (tape.value(layer.weight), tape.value(layer.bias));
    let n_in = w.last_dim();
    let rows = w.data.chunks_exact(n_in).zip(&b.data);
    let row = |(w, b): (&[f32], &f32)| w.iter().chain([b]).map(|&x| each(f64::from(x))).collect();
    rows.map(row).collect()
}

/// Aᵀ·B for A (K, M) and B (K, N), rounded to float32: (M, N), row-major.
fn transposed_product(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<f32> {
    let (m, n) = (a[0].len(), b[0].len());
    let entry = |i: usize, j: usize| a.iter().zip(b).map(|(a, b)| a[i] * b[j]).sum::<f64>();
    (0..m * n).map(|ij| entry(ij / n, ij % n) as f32).collect()
}

/// A·B for A (M, K) and B (K, N), rounded to float32: (M, N), row-major.
fn product(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<f32> {
    let n = b[0].len();
    let entry = |i: usize, j: usize| a[i].iter().zip(b).map(|(a, b)| a * b[j]).sum::<f64>();
    (0..a.len() * n)
        .map(|ij| entry(ij / n, ij % n) as f32)
        .collect()
}

// ANCHOR: absorbed_scores
/// What a query reads of the cached tokens: their latents (L', L) and, with RoPE, their turned
/// rotary keys (L', R) and the query's own rotary parts (H, R).
#[derive(Clone, Copy, Debug)]
pub struct Cached<'a> {
    pub latents: &'a [f32],
    pub rotary: Option<(&'a [f32], &'a [f32])>,
}

/// Head h's scores (before the scale) of the token x (C) over the cached tokens, through the
/// absorbed weights: the absorbed query q̃ = Â_hᵀ·x̂ (L + 1) against each ĉ, plus the rotary
/// part's q_r·k_r.
pub fn absorbed_scores(absorbed: &Absorbed, h: usize, x: &[f32], cached: Cached) -> Vec<f32> {
    let x_hat: Vec<f32> = x.iter().copied().chain([1.0]).collect(); // (C + 1)
    let a_h = &absorbed.scores[h]; // (C + 1, L + 1)
    let l1 = a_h.len() / x_hat.len(); // L + 1
    let column = |j: usize| a_h[j..].iter().step_by(l1).copied();
    let q_tilde: Vec<f32> = (0..l1)
        .map(|j| dot(x_hat.iter().copied(), column(j)))
        .collect();
    let latents = cached.latents.chunks_exact(l1 - 1);
    let content = latents.map(|c| dot(q_tilde.iter().copied(), c.iter().copied().chain([1.0])));
    let Some((q_r, k_r)) = cached.rotary else {
        return content.collect();
    };
    let r = q_r.len() / absorbed.scores.len();
    let q_r = &q_r[h * r..][..r];
    let turned = k_r
        .chunks_exact(r)
        .map(|k| dot(q_r.iter().copied(), k.iter().copied()));
    content.zip(turned).map(|(s, t)| s + t).collect()
}
// ANCHOR_END: absorbed_scores

// ANCHOR: absorbed_attention

/// The attention's output (C), output layer included, for the token x (C) over the cached tokens:
/// per head, the softmax of the scaled absorbed scores, the weighted sum ẑ of the ĉ (L + 1), and
/// Ô_h·ẑ. No key or value is ever unfolded.
pub fn absorbed_attention(absorbed: &Absorbed, x: &[f32], cached: Cached, scale: f32) -> Vec<f32> {
    let mut out = absorbed.bias.clone(); // (C)
    let l = absorbed.outputs[0].len() / out.len() - 1; // L
    for h in 0..absorbed.scores.len() {
        let scores: Vec<f32> = absorbed_scores(absorbed, h, x, cached)
            .iter()
            .map(|s| s * scale)
            .collect(); // (L')
        let mut weights = vec![0.0; scores.len()];
        softmax_forward(&mut weights, &scores, scores.len()); // (L')
        let c_hat = |j: usize| {
            cached
                .latents
                .chunks_exact(l)
                .map(move |c| c.get(j).copied().unwrap_or(1.0))
        };
        let z: Vec<f32> = (0..=l)
            .map(|j| dot(weights.iter().copied(), c_hat(j)))
            .collect();
        let o_h = absorbed.outputs[h].chunks_exact(l + 1); // (C, L + 1)
        for (out, row) in out.iter_mut().zip(o_h) {
            *out += dot(row.iter().copied(), z.iter().copied());
        }
    }
    out
}
// ANCHOR_END: absorbed_attention

// ANCHOR: score_bound
/// How far the absorbed and the unfolded forms of one score may part in float32. Each computes the
/// same real sum of products, x̂ᵀ·Q̂ᵀ·K̂·ĉ + q_r·k_r, and a sum of products of n factors is off
/// by at most γ_n = n·u/(1 − n·u) times the same sum with every number made positive (Higham,
/// *Accuracy and Stability of Numerical Algorithms*, §3.1 and §3.5), u = 2⁻²⁴. n counts the
/// roundings along the longest chain: C + 1, D + R and L + 1 terms, and the fold's one.
pub fn score_bound(abs_sum: f64, (c, d, r, l): (usize, usize, usize, usize)) -> f64 {
    let n = (c + 1 + d + r + l + 1 + 1) as f64;
    let u = f64::from(f32::EPSILON) / 2.0; // 2⁻²⁴
    2.0 * n * u / (1.0 - n * u) * abs_sum // the two forms' errors, added
}
// ANCHOR_END: score_bound
