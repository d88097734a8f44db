//! Lesson layer. FlashAttention on the tape: causal attention, softmax(tril(Q·Kᵀ·scale,
//! mask_value))·V, recorded as one node instead of the naive graph's six (transpose, matmul,
//! scale, tril, softmax, matmul), so that no T × T matrix of scores or weights is kept between the
//! forward and the backward pass. The inputs are stacks of (T, D) matrices: (B, H, T, D) heads, or
//! the tutorial's (B, T, C) as one head.
//!
//! Two forms, each a forward pass with its backward pass right below it, as in [`super::ops`]:
//!
//! - **tiled**, FlashAttention-2 ([`tiled_forward`], [`tiled_backward`]): queries in blocks of Br,
//!   keys and values in tiles of Bc (stage 6's [`Tiles`]), a running maximum m and sum ℓ per row;
//!   the forward pass keeps only the output O and each row's log-sum-exp m + ln ℓ, and the backward
//!   pass recomputes each tile's weights from it. Equal to the naive graph up to rounding.
//! - **exact** ([`exact_forward`], [`exact_backward`]): the naive graph's very bits, one row of T
//!   scores at a time. Every gradient element that the naive graph sums over the queries (of K
//!   and of V) is summed here in the same order, the queries taken one after another.
//!
//! The fast layer ([`super::fast::Fast`]) has no kernel for this op yet: it falls back to these
//! lesson functions, so a run with either backend gives the same bits.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::ops::{self, dot};
use crate::s6_flash::Tiles;

// ANCHOR: attention_form
/// How a model's attention is computed: the naive graph of six ops, or one FlashAttention node in
/// either form. `--attention` on `s5_gpt`; the naive graph is the tutorial's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionForm {
    /// transpose, matmul, scale, tril, softmax, matmul: the T × T scores and weights on the tape.
    #[default]
    Naive,
    /// FlashAttention-2 in tiles of [`TAPE_TILES`]: close to the naive graph, not its bits.
    Tiled,
    /// The naive graph's bits, a row at a time.
    Exact,
}

/// The tiles of `--attention tiled`: at the chapter's T = 32, 2 × 2 tiles, one of them skipped.
pub const TAPE_TILES: Tiles = Tiles { br: 16, bc: 16 };

impl AttentionForm {
    /// Every form, in the order `--help` lists them.
    pub const ALL: [AttentionForm; 3] = [Self::Naive, Self::Tiled, Self::Exact];

    /// The form's name on the command line and in a checkpoint.
    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Tiled => "tiled",
            Self::Exact => "exact",
        }
    }

    /// The FlashAttention node's form, or `None` for the naive graph.
    pub fn flash(self) -> Option<FlashForm> {
        match self {
            Self::Naive => None,
            Self::Tiled => Some(FlashForm::Tiled(TAPE_TILES)),
            Self::Exact => Some(FlashForm::Exact),
        }
    }

    /// Whether this is the tutorial's naive graph (a checkpoint then leaves the field out).
    pub fn is_naive(&self) -> bool {
        *self == Self::Naive
    }
}
// ANCHOR_END: attention_form

/// How a FlashAttention node computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashForm {
    /// FlashAttention-2 in these tiles.
    Tiled(Tiles),
    /// The naive graph's bits.
    Exact,
}

/// What the op needs besides its tensors: T and D of each (T, D) matrix, the factor the scores are
/// multiplied by (1/√D), and the score the causal mask writes above the diagonal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Causal {
    pub t: usize,
    pub d: usize,
    pub scale: f32,
    pub mask_value: f32,
}

impl Causal {
    /// The settings for tensors of `shape` (…, T, D).
    pub fn of(shape: &[usize], scale: f32, mask_value: f32) -> Self {
        let [.., t, d] = shape[..] else {
            panic!("attention needs (…, T, D), got {shape:?}")
        };
        Causal {
            t,
            d,
            scale,
            mask_value,
        }
    }

    /// Score (i, j) as the naive graph computes it: matmul's `dot` of query i and key j (the same
    /// terms in the same order as row i of Q times column j of Kᵀ), times the scale as `scale`
    /// multiplies it, or the mask's value where key j comes after query i, which is what `Tril`
    /// writes over it.
    fn score(&self, [q, k, _]: Qkv, i: usize, j: usize) -> f32 {
        if j > i {
            return self.mask_value;
        }
        dot(
            row(q, i, self.d).iter().copied(),
            row(k, j, self.d).iter().copied(),
        ) * self.scale
    }
}

/// One (T, D) matrix each of Q, K and V.
type Qkv<'a> = [&'a [f32]; 3];

/// Row `i` of a matrix `d` wide.
fn row(x: &[f32], i: usize, d: usize) -> &[f32] {
    &x[i * d..][..d]
}

/// Row `i` of a matrix `d` wide, to write.
fn row_mut(x: &mut [f32], i: usize, d: usize) -> &mut [f32] {
    &mut x[i * d..][..d]
}

/// `x += w·y`, element by element, each with one fused multiply-add: the next term of sums that
/// run over the queries.
fn add_scaled(x: &mut [f32], w: f32, y: &[f32]) {
    x.iter_mut()
        .zip(y)
        .for_each(|(x, &y)| *x = w.mul_add(y, *x));
}

/// The stack's matrices one at a time: Q, K and V of each.
fn matrices<'a>(qkv: Qkv<'a>, c: Causal) -> impl Iterator<Item = Qkv<'a>> {
    let [q, k, v] = qkv.map(|x| x.chunks_exact(c.t * c.d));
    q.zip(k).zip(v).map(|((q, k), v)| [q, k, v])
}

/// `keys` cut into tiles of `bc`, the last one shorter.
fn key_tiles(keys: Range<usize>, bc: usize) -> impl Iterator<Item = Range<usize>> {
    let end = keys.end;
    keys.step_by(bc)
        .map(move |start| start..end.min(start + bc))
}

/// The keys after query block `rows`, every one of them masked for every row of the block, or none
/// when no row gives a masked score any weight: e^(mask_value − x) is exactly 0 for each row's `x`
/// (its maximum m in the forward pass, its log-sum-exp, which is at least m, in the backward).
/// Then those tiles are skipped, not computed; with the tutorial's −1e9 they always are. With a
/// mask value of 0 the future keeps some weight, and its tiles are computed like the others.
fn masked_keys(rows: &Range<usize>, x: &[f32], c: Causal) -> Range<usize> {
    let weighted = x.iter().any(|&x| libm::expf(c.mask_value - x) != 0.0);
    if weighted { rows.end..c.t } else { c.t..c.t }
}

// ANCHOR: tiled_forward
/// A query block's running state (stage 6's `Running`, on slices): per row the largest score so
/// far m, the sum so far ℓ = Σ e^(s − m), and the output so far O = Σ e^(s − m)·v, all measured
/// from the current m.
struct Running<'a> {
    rows: Range<usize>,
    m: Vec<f32>,
    l: Vec<f32>,
    /// The block's rows of the output, (Br, D).
    o: &'a mut [f32],
}

impl<'a> Running<'a> {
    /// Nothing seen yet: m = −∞, ℓ = 0, O = 0.
    fn new(rows: Range<usize>, out: &'a mut [f32], d: usize) -> Self {
        let o = &mut out[rows.start * d..rows.end * d];
        o.fill(0.0);
        let n = rows.len();
        Running {
            rows,
            m: vec![f32::NEG_INFINITY; n],
            l: vec![0.0; n],
            o,
        }
    }

    /// Folds in key tile `keys`: per row its scores, the new maximum, the rescale e^(m_old − m_new)
    /// of what the row holds, the weights P = e^(S − m_new), then ℓ ← ℓ·rescale + ΣP and O ←
    /// O·rescale + P·V. Every row's first tile holds key 0, so m is finite from then on.
    fn fold(&mut self, keys: Range<usize>, qkv: Qkv, c: Causal) {
        for (r, i) in self.rows.clone().enumerate() {
            let scores: Vec<f32> = keys.clone().map(|j| c.score(qkv, i, j)).collect(); // (Bc)
            let m_new = scores.iter().fold(self.m[r], |m, &s| m.max(s));
            let rescale = libm::expf(self.m[r] - m_new); // 0 at the first tile
            let o = row_mut(self.o, r, c.d);
            o.iter_mut().for_each(|o| *o *= rescale);
            let mut sum = 0.0;
            for (j, s) in keys.clone().zip(scores) {
                let p = libm::expf(s - m_new);
                sum += p;
                add_scaled(o, p, row(qkv[2], j, c.d));
            }
            self.l[r] = self.l[r] * rescale + sum;
            self.m[r] = m_new;
        }
    }

    /// O / ℓ per row, and the log-sum-exp m + ln ℓ written into `lse`.
    fn finish(self, lse: &mut [f32], d: usize) {
        for (r, i) in self.rows.enumerate() {
            row_mut(self.o, r, d)
                .iter_mut()
                .for_each(|o| *o /= self.l[r]);
            lse[i] = self.m[r] + libm::logf(self.l[r]);
        }
    }
}

/// The tiled forward pass: O (…, T, D) and the log-sum-exp of each row (…, T), nothing else. Each
/// query block reads the key and value tiles up to its last query once; the tiles above the
/// diagonal are skipped when the mask gives them no weight (see `masked_keys`).
pub fn tiled_forward(out: &mut [f32], lse: &mut [f32], qkv: Qkv, c: Causal, tiles: Tiles) {
    let outputs = out
        .chunks_exact_mut(c.t * c.d)
        .zip(lse.chunks_exact_mut(c.t));
    for ((out, lse), qkv) in outputs.zip(matrices(qkv, c)) {
        for rows in tiles.query_blocks(c.t) {
            let mut running = Running::new(rows.clone(), out, c.d);
            for keys in tiles.visible_key_tiles(&rows) {
                running.fold(keys, qkv, c);
            }
            for keys in key_tiles(masked_keys(&rows, &running.m, c), tiles.bc) {
                running.fold(keys, qkv, c);
            }
            running.finish(lse, c.d);
        }
    }
}
// ANCHOR_END: tiled_forward

// ANCHOR: tiled_backward
/// The tiled backward pass, FlashAttention-2's: with D_i = rowsum(dO ⊙ O) per row, each tile's
/// weights are recomputed from the saved log-sum-exp, P = e^(S − lse), and then dV += Pᵀ·dO,
/// dP = dO·Vᵀ, dS = P ⊙ (dP − D_i) (zero where masked, then times the scale), dQ += dS·K and
/// dK += dSᵀ·Q. `d` is (dV, dQ, dK), the order of the op's inputs.
pub fn tiled_backward(
    d: [&mut [f32]; 3],
    d_out: &[f32],
    out: &[f32],
    lse: &[f32],
    qkv: Qkv,
    c: Causal,
    tiles: Tiles,
) {
    let n = c.t * c.d;
    let [d_v, d_q, d_k] = d.map(|d| d.chunks_exact_mut(n));
    let grads = d_v.zip(d_q).zip(d_k).map(|((v, q), k)| [v, q, k]);
    let given = d_out.chunks_exact(n).zip(out.chunks_exact(n));
    for ((mut d, (d_out, out)), (lse, qkv)) in grads
        .zip(given)
        .zip(lse.chunks_exact(c.t).zip(matrices(qkv, c)))
    {
        d.iter_mut().for_each(|d| d.fill(0.0));
        let rows_d_o = d_out.chunks_exact(c.d).zip(out.chunks_exact(c.d));
        let delta = rows_d_o.map(|(g, o)| dot(g.iter().copied(), o.iter().copied())); // D_i
        let delta: Vec<f32> = delta.collect(); // (T)
        for rows in tiles.query_blocks(c.t) {
            let masked = masked_keys(&rows, &lse[rows.clone()], c);
            for keys in tiles
                .visible_key_tiles(&rows)
                .chain(key_tiles(masked, tiles.bc))
            {
                backward_tile(&mut d, (d_out, &delta, lse), qkv, (&rows, keys), c);
            }
        }
    }
}

/// One tile's share of the gradients: (dV, dQ, dK) of one matrix from dO, D and the lse.
fn backward_tile(
    [d_v, d_q, d_k]: &mut [&mut [f32]; 3],
    (d_out, delta, lse): (&[f32], &[f32], &[f32]),
    qkv: Qkv,
    (rows, keys): (&Range<usize>, Range<usize>),
    c: Causal,
) {
    let [q, k, v] = qkv;
    for i in rows.clone() {
        let d_out_i = row(d_out, i, c.d);
        for j in keys.clone() {
            let p = libm::expf(c.score(qkv, i, j) - lse[i]);
            add_scaled(row_mut(d_v, j, c.d), p, d_out_i);
            let d_p = dot(d_out_i.iter().copied(), row(v, j, c.d).iter().copied());
            let d_s = if j > i {
                0.0
            } else {
                p * (d_p - delta[i]) * c.scale
            };
            add_scaled(row_mut(d_q, i, c.d), d_s, row(k, j, c.d));
            add_scaled(row_mut(d_k, j, c.d), d_s, row(q, i, c.d));
        }
    }
}
// ANCHOR_END: tiled_backward

// ANCHOR: exact_forward
/// Row i of the naive graph's scores and weights: the T scores of [`Causal::score`] (matmul, scale,
/// tril), then `softmax_forward` on that one row. Softmax works row by row, so one row of it is
/// the naive graph's row: the same maximum over all T values, the mask's included, the same `expf`
/// of each difference, the same `pairwise_sum` of the T exponentials (the masked ones are exactly
/// 0 with −1e9, and are summed in their places either way), the same division.
fn weights_row(qkv: Qkv, i: usize, (scores, weights): (&mut [f32], &mut [f32]), c: Causal) {
    for (j, s) in scores.iter_mut().enumerate() {
        *s = c.score(qkv, i, j);
    }
    ops::softmax_forward(weights, scores, c.t);
}

/// The exact forward pass: O (…, T, D), the naive graph's bits. Each output row is `matmul_forward`
/// of its row of weights with V: an output element of a product depends only on its row of the
/// left factor, so row i alone gives the naive graph's row i: Σⱼ w_ij·v_j over j = 0..T in order,
/// the masked weights included. Nothing is kept for the backward pass, which recomputes the rows.
pub fn exact_forward(out: &mut [f32], qkv: Qkv, c: Causal) {
    let (mut scores, mut weights) = (vec![0.0; c.t], vec![0.0; c.t]);
    for (out, qkv) in out.chunks_exact_mut(c.t * c.d).zip(matrices(qkv, c)) {
        for (i, out_i) in out.chunks_exact_mut(c.d).enumerate() {
            weights_row(qkv, i, (&mut scores, &mut weights), c);
            ops::matmul_forward(out_i, &weights, qkv[2], (1, c.t, c.d));
        }
    }
}
// ANCHOR_END: exact_forward

// ANCHOR: exact_backward
/// The exact backward pass: (dV, dQ, dK), the naive graph's bits, one query row at a time.
///
/// The naive graph walks back context = W·V (`matmul_backward`), softmax, tril, scale, scores =
/// Q·Kᵀ (`matmul_backward`) and transpose. Per element:
///
/// - dW_ij = Σ_d dO_id·v_jd and dQ_ip = Σⱼ dS_ij·k_jp (j = 0..T, the masked zeros included) are
///   `dot`s along row i, computed here from row i alone with the same terms in the same order.
/// - dM = softmax's backward of row i (`softmax_backward` on that row: the same products and the
///   same `pairwise_sum` of T of them), then tril's backward (0 above the diagonal), then scale's
///   (times the scale): elementwise, the same operations.
/// - dV_jd = Σᵢ w_ij·dO_id and dK_jp = (dKᵀ)_pj = Σᵢ q_ip·dS_ij are `dot`s down a column, over the
///   queries i = 0..T, each term one fused multiply-add onto the sum so far, from 0. Here each row
///   i adds its term to every element of dV and dK as it is reached, rows in increasing i, starting
///   from 0: the same fused multiply-adds in the same order. The transpose copies dKᵀ back exactly.
///
/// Holds four rows of T (scores, weights, dW, dS) beyond the inputs and gradients.
pub fn exact_backward(d: [&mut [f32]; 3], d_out: &[f32], qkv: Qkv, c: Causal) {
    let t = c.t;
    let mut rows: [Vec<f32>; 4] = std::array::from_fn(|_| vec![0.0; t]);
    let [d_v, d_q, d_k] = d.map(|d| d.chunks_exact_mut(t * c.d));
    let grads = d_v.zip(d_q).zip(d_k);
    for ((((d_v, d_q), d_k), d_out), qkv) in
        grads.zip(d_out.chunks_exact(t * c.d)).zip(matrices(qkv, c))
    {
        d_v.fill(0.0);
        d_k.fill(0.0);
        for i in 0..t {
            exact_backward_row([d_v, d_q, d_k], row(d_out, i, c.d), qkv, i, &mut rows, c);
        }
    }
}

/// Query row i's share of the exact backward pass (see [`exact_backward`]).
fn exact_backward_row(
    [d_v, d_q, d_k]: [&mut [f32]; 3],
    d_out_i: &[f32],
    qkv: Qkv,
    i: usize,
    [scores, weights, d_w, d_s]: &mut [Vec<f32>; 4],
    c: Causal,
) {
    let [q, k, v] = qkv;
    weights_row(qkv, i, (scores, weights), c);
    for (j, (d_w, &w)) in d_w.iter_mut().zip(weights.iter()).enumerate() {
        *d_w = dot(d_out_i.iter().copied(), row(v, j, c.d).iter().copied()); // matmul's dA
        add_scaled(row_mut(d_v, j, c.d), w, d_out_i); // matmul's dB, term i
    }
    ops::softmax_backward(d_s, d_w, weights, c.t);
    d_s[i + 1..].fill(0.0); // tril's backward
    d_s.iter_mut().for_each(|g| *g *= c.scale); // scale's backward
    for (p, d_q) in row_mut(d_q, i, c.d).iter_mut().enumerate() {
        let k_column = k[p..].iter().step_by(c.d);
        *d_q = dot(d_s.iter().copied(), k_column.copied()); // matmul's dA
    }
    for (j, &g) in d_s.iter().enumerate() {
        add_scaled(row_mut(d_k, j, c.d), g, row(q, i, c.d)); // matmul's dB, term i, transposed
    }
}
// ANCHOR_END: exact_backward
