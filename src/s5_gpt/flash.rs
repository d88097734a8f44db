//! Lesson layer. FlashAttention on the tape: causal attention, softmax(tril(Q·Kᵀ·scale,
//! mask_value))·V, recorded as one node instead of the naive graph's six (transpose, matmul,
//! scale, tril, softmax, matmul), so that no T × T matrix of scores or weights is kept between the
//! forward and the backward pass. The inputs are stacks of (T, D) matrices: (B, H, T, D) heads, or
//! the tutorial's (B, T, C) as one head.
//!
//! Two forms, each a forward pass with its backward pass right below it, as in [`super::ops`]:
//!
//! - **tiled**, FlashAttention-2 ([`tiled_forward`], [`tiled_backward`]): queries in blocks of Br,
//!   keys and values in tiles of Bc ([`Tiles`], stage 6's picture), a running maximum m and sum ℓ per row;
//!   the forward pass keeps only the output O and each row's log-sum-exp m + ln ℓ, and the backward
//!   pass recomputes each tile's weights from it. Equal to the naive graph up to rounding.
//! - **exact** ([`exact_forward`], [`exact_backward`]): the naive graph's very bits, one row of T
//!   scores at a time. Every gradient element that the naive graph sums over the queries (of K
//!   and of V) is summed here in the same order, the queries taken one after another.
//!
//! Both take stage 3's dropout on the weights while training ([`FlashDropout`]), with the mask the
//! naive graph's `Dropout` node would draw from the same generator, drawn again in each pass.
//!
//! The fast layer ([`super::fast::Fast`]) runs the tiled form without dropout in kernels of its
//! own, which give these functions' bits; for the exact form and for dropout it calls these lesson
//! functions. A run with either backend gives the same bits.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::ops::{self, dot};
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

// ANCHOR: tiles
/// How the (T, T) matrix of scores is cut: queries in blocks of `br` rows, keys and values in tiles
/// of `bc` rows. The last block and the last tile may be shorter, so neither needs to divide T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiles {
    /// Br, the queries of one block.
    pub br: usize,
    /// Bc, the keys (and values) of one tile.
    pub bc: usize,
}

impl Tiles {
    /// Blocks of `br` queries and tiles of `bc` keys. Panics if either is 0.
    pub fn new(br: usize, bc: usize) -> Self {
        assert!(br > 0 && bc > 0, "a block and a tile hold at least one row");
        Tiles { br, bc }
    }

    /// The query blocks of `t` tokens, in order.
    pub fn query_blocks(&self, t: usize) -> impl Iterator<Item = Range<usize>> {
        blocks(t, self.br)
    }

    /// The key tiles that query block `rows` must see: those that start at or before its last
    /// query, the last of them cut at that query (a later key is masked for every row of the
    /// block). Every later tile lies entirely above the diagonal (each of its keys comes after each
    /// of the block's queries), so it is skipped, not computed and masked.
    pub fn visible_key_tiles(&self, rows: &Range<usize>) -> impl Iterator<Item = Range<usize>> {
        blocks(rows.end, self.bc)
    }

    /// (computed, skipped): how many of the ⌈T/Br⌉ · ⌈T/Bc⌉ tiles a causal pass over `t` tokens
    /// computes, and how many it skips.
    pub fn count(&self, t: usize) -> (usize, usize) {
        let computed = self
            .query_blocks(t)
            .map(|rows| self.visible_key_tiles(&rows).count())
            .sum();
        (
            computed,
            t.div_ceil(self.br) * t.div_ceil(self.bc) - computed,
        )
    }
}

/// `0..n` cut into ranges of `size`, the last one shorter.
pub(crate) fn blocks(n: usize, size: usize) -> impl Iterator<Item = Range<usize>> {
    (0..n)
        .step_by(size)
        .map(move |start| start..n.min(start + size))
}
// ANCHOR_END: tiles

// ANCHOR: attention_form
/// How a model's attention is computed: the naive graph of six ops, or one FlashAttention node in
/// either form. The naive graph is the tutorial's.
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

/// The tiles of the tiled form on the tape: at the chapter's T = 32, 2 × 2 tiles, one of them
/// skipped.
pub const TAPE_TILES: Tiles = Tiles { br: 16, bc: 16 };

impl AttentionForm {
    /// Every form, in the order a list of them shows them.
    pub const ALL: [AttentionForm; 3] = [Self::Naive, Self::Tiled, Self::Exact];

    /// The form's name, as a run's settings spell it.
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

// ANCHOR: flash_dropout
/// Stage 3's dropout on the weights, inside the op: each weight is kept with probability 1 − p and
/// scaled by 1/(1 − p), by the mask `Tape::dropout` would draw from the same generator. The naive
/// graph draws the mask of the (…, T, T) weights in one go, row after row; the op keeps only where
/// in the stream that mask starts, and draws it again, a strip of rows at a time and in the same
/// order, in each pass (FlashAttention keeps a seed and an offset for the same reason).
#[derive(Clone, Debug, PartialEq)]
pub struct FlashDropout {
    pub p: f64,
    /// The generator as it was when the naive graph would have drawn the mask.
    pub stream: NumpyRandom,
}

impl FlashDropout {
    /// Takes the mask of `weights` weights from `rng`: remembers where it starts, and moves `rng`
    /// past the draws (one per weight) that `Tape::dropout` would make, so that whatever is drawn
    /// after the op is what the naive graph draws after its dropout.
    pub fn take(p: f64, rng: &mut NumpyRandom, weights: usize) -> Self {
        let stream = rng.clone();
        for _ in 0..weights {
            rng.random_sample();
        }
        FlashDropout { p, stream }
    }
}

/// One pass's masks, drawn in the naive graph's order: matrices in order, the rows of each in
/// order. Without dropout every entry is 1, and x·1 = x exactly: the weights pass unchanged, bit
/// for bit, as in a graph with no dropout node.
struct Masks(Option<FlashDropout>);

impl Masks {
    fn new(dropout: Option<&FlashDropout>) -> Self {
        Masks(dropout.cloned())
    }

    /// The masks of the next `strip.len()` weights, whole rows of T.
    fn draw(&mut self, strip: &mut [f32]) {
        match &mut self.0 {
            Some(d) => ops::dropout_mask(strip, &mut d.stream, d.p),
            None => strip.fill(1.0),
        }
    }
}
// ANCHOR_END: flash_dropout

/// How a FlashAttention node computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashForm {
    /// FlashAttention-2 in these tiles.
    Tiled(Tiles),
    /// The naive graph's bits.
    Exact,
}

// ANCHOR: flash_node
/// What the tape records for a FlashAttention node: its inputs, settings, form and dropout, and what
/// its forward pass keeps for the backward pass.
#[derive(Clone, Debug, PartialEq)]
pub struct FlashNode {
    pub qkv: [NodeId; 3],
    pub causal: Causal,
    pub form: FlashForm,
    pub dropout: Option<FlashDropout>,
    /// The log-sum-exp of each row (…, T), filled by the tiled form's forward pass; the exact form
    /// keeps nothing.
    pub lse: Vec<f32>,
}

impl FlashNode {
    /// V, Q, K: the order the backward pass writes their gradients in, and the tape adds them in.
    /// When Q, K and V are one node (the tutorial's attention), the naive graph adds that node's
    /// gradient in this order: dV (from the last matmul, the first one back), then dQ (from the
    /// scores' matmul), then dK (through the transpose), each `+=` in float32.
    pub fn inputs(&self) -> Vec<NodeId> {
        let [q, k, v] = self.qkv;
        vec![v, q, k]
    }

    /// The forward pass of the node's form into `out`.
    pub fn forward(&mut self, values: &[Tensor], out: &mut [f32]) {
        let (qkv, c, dropout) = (self.values(values), self.causal, self.dropout.as_ref());
        match self.form {
            FlashForm::Tiled(tiles) => {
                self.lse = vec![0.0; out.len() / c.d];
                tiled_forward((out, &mut self.lse), qkv, c, tiles, dropout);
            }
            FlashForm::Exact => exact_forward(out, qkv, c, dropout),
        }
    }

    /// The backward pass of the node's form: (dV, dQ, dK) from the output and its gradient.
    pub fn backward(
        &self,
        values: &[Tensor],
        (out, d_out): (&[f32], &[f32]),
        d: [&mut Vec<f32>; 3],
    ) {
        let (qkv, c, dropout) = (self.values(values), self.causal, self.dropout.as_ref());
        let d = d.map(|d| &mut d[..]);
        match self.form {
            FlashForm::Tiled(tiles) => {
                tiled_backward(d, d_out, (out, &self.lse), qkv, c, tiles, dropout)
            }
            FlashForm::Exact => exact_backward(d, d_out, qkv, c, dropout),
        }
    }

    /// The values of Q, K and V.
    fn values<'a>(&self, values: &'a [Tensor]) -> Qkv<'a> {
        self.qkv.map(|x| &values[x.0].data[..])
    }
}
// ANCHOR_END: flash_node

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
pub(crate) fn key_tiles(keys: Range<usize>, bc: usize) -> impl Iterator<Item = Range<usize>> {
    let end = keys.end;
    keys.step_by(bc)
        .map(move |start| start..end.min(start + bc))
}

/// The keys after query block `rows`, every one of them masked for every row of the block, or none
/// when no row gives a masked score any weight: e^(mask_value − x) is exactly 0 for each row's `x`
/// (its maximum m in the forward pass, its log-sum-exp, which is at least m, in the backward).
/// Then those tiles are skipped, not computed; with the tutorial's −1e9 they always are. With a
/// mask value of 0 the future keeps some weight, and its tiles are computed like the others.
pub(crate) fn masked_keys(rows: &Range<usize>, x: &[f32], c: Causal) -> Range<usize> {
    let weighted = x.iter().any(|&x| libm::expf(c.mask_value - x) != 0.0);
    if weighted { rows.end..c.t } else { c.t..c.t }
}

// ANCHOR: tiled_forward
/// A query block's running state (stage 6's `Running`, on slices): per row the largest score so
/// far m, the sum so far ℓ = Σ e^(s − m), and the output so far O = Σ e^(s − m)·mask·v, all
/// measured from the current m. ℓ sums the weights before dropout, as the softmax does.
struct Running<'a> {
    rows: Range<usize>,
    m: Vec<f32>,
    l: Vec<f32>,
    /// The block's rows of the output, (Br, D).
    o: &'a mut [f32],
    /// The block's rows of the dropout mask, (Br, T).
    mask: Vec<f32>,
}

impl<'a> Running<'a> {
    /// Nothing seen yet: m = −∞, ℓ = 0, O = 0; the block's mask drawn.
    fn new(rows: Range<usize>, out: &'a mut [f32], masks: &mut Masks, c: Causal) -> Self {
        let o = &mut out[rows.start * c.d..rows.end * c.d];
        o.fill(0.0);
        let n = rows.len();
        let mut mask = vec![0.0; n * c.t];
        masks.draw(&mut mask);
        Running {
            rows,
            m: vec![f32::NEG_INFINITY; n],
            l: vec![0.0; n],
            o,
            mask,
        }
    }

    /// Folds in key tile `keys`: per row its scores, the new maximum, the rescale e^(m_old − m_new)
    /// of what the row holds, the weights P = e^(S − m_new), then ℓ ← ℓ·rescale + ΣP and O ←
    /// O·rescale + (P ⊙ mask)·V. Every row's first tile holds key 0, so m is finite from then on.
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
                add_scaled(o, p * self.mask[r * c.t + j], row(qkv[2], j, c.d));
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
pub fn tiled_forward(
    (out, lse): (&mut [f32], &mut [f32]),
    qkv: Qkv,
    c: Causal,
    tiles: Tiles,
    dropout: Option<&FlashDropout>,
) {
    let mut masks = Masks::new(dropout);
    let outputs = out
        .chunks_exact_mut(c.t * c.d)
        .zip(lse.chunks_exact_mut(c.t));
    for ((out, lse), qkv) in outputs.zip(matrices(qkv, c)) {
        for rows in tiles.query_blocks(c.t) {
            let mut running = Running::new(rows.clone(), out, &mut masks, c);
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
/// The tiled backward pass, FlashAttention-2's: with Δᵢ = rowsum(dO ⊙ O) per row, each tile's
/// weights are recomputed from the saved log-sum-exp, P = e^(S − lse), and with dropout's mask M
/// (drawn again, [`FlashDropout`]) dV += (P ⊙ M)ᵀ·dO, dP = (dO·Vᵀ) ⊙ M, dS = P ⊙ (dP − Δᵢ) (zero
/// where masked, then times the scale), dQ += dS·K and dK += dSᵀ·Q. Δᵢ = rowsum(dO ⊙ O) =
/// Σⱼ P_ij·dP_ij holds with the mask too, since O_i = Σⱼ P_ij·M_ij·v_j. `d` is (dV, dQ, dK), the
/// order of the op's inputs.
pub fn tiled_backward(
    d: [&mut [f32]; 3],
    d_out: &[f32],
    (out, lse): (&[f32], &[f32]),
    qkv: Qkv,
    c: Causal,
    tiles: Tiles,
    dropout: Option<&FlashDropout>,
) {
    let n = c.t * c.d;
    let mut masks = Masks::new(dropout);
    let [d_v, d_q, d_k] = d.map(|d| d.chunks_exact_mut(n));
    let grads = d_v.zip(d_q).zip(d_k).map(|((v, q), k)| [v, q, k]);
    let given = d_out.chunks_exact(n).zip(out.chunks_exact(n));
    for ((mut d, (d_out, out)), (lse, qkv)) in grads
        .zip(given)
        .zip(lse.chunks_exact(c.t).zip(matrices(qkv, c)))
    {
        d.iter_mut().for_each(|d| d.fill(0.0));
        let rows_d_o = d_out.chunks_exact(c.d).zip(out.chunks_exact(c.d));
        let delta = rows_d_o.map(|(g, o)| dot(g.iter().copied(), o.iter().copied())); // Δᵢ
        let delta: Vec<f32> = delta.collect(); // (T)
        for rows in tiles.query_blocks(c.t) {
            let mut mask = vec![0.0; rows.len() * c.t]; // (Br, T)
            masks.draw(&mut mask);
            let masked = masked_keys(&rows, &lse[rows.clone()], c);
            for keys in tiles
                .visible_key_tiles(&rows)
                .chain(key_tiles(masked, tiles.bc))
            {
                let given = (d_out, &delta[..], lse, &mask[..]);
                backward_tile(&mut d, given, qkv, (&rows, keys), c);
            }
        }
    }
}

/// One tile's share of the gradients: (dV, dQ, dK) of one matrix from dO, D, the lse and the
/// block's rows of the mask.
fn backward_tile(
    [d_v, d_q, d_k]: &mut [&mut [f32]; 3],
    (d_out, delta, lse, mask): (&[f32], &[f32], &[f32], &[f32]),
    qkv: Qkv,
    (rows, keys): (&Range<usize>, Range<usize>),
    c: Causal,
) {
    let [q, k, v] = qkv;
    for i in rows.clone() {
        let d_out_i = row(d_out, i, c.d);
        for j in keys.clone() {
            let p = libm::expf(c.score(qkv, i, j) - lse[i]);
            let m = mask[(i - rows.start) * c.t + j];
            add_scaled(row_mut(d_v, j, c.d), p * m, d_out_i);
            let d_p = dot(d_out_i.iter().copied(), row(v, j, c.d).iter().copied()) * m;
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
/// The rows of T values the exact form holds beyond its inputs and outputs: one query's scores,
/// weights, dropout mask and weights kept, and in the backward pass their gradients.
struct Rows {
    scores: Vec<f32>,
    weights: Vec<f32>,
    mask: Vec<f32>,
    kept: Vec<f32>,
    d_kept: Vec<f32>,
    d_weights: Vec<f32>,
    d_scores: Vec<f32>,
}

impl Rows {
    fn new(t: usize) -> Self {
        let row = || vec![0.0; t];
        Rows {
            scores: row(),
            weights: row(),
            mask: row(),
            kept: row(),
            d_kept: row(),
            d_weights: row(),
            d_scores: row(),
        }
    }

    /// Row i of the naive graph's scores, weights and weights kept. The T scores of
    /// [`Causal::score`] (matmul, scale, tril), then `softmax_forward` on that one row: softmax
    /// works row by row, so this is the naive graph's row, the same maximum over all T values (the
    /// mask's included), the same `expf` of each difference, the same `pairwise_sum` of the T
    /// exponentials (the masked ones, exactly 0 with −1e9, summed in their places either way), the
    /// same division. Then `dropout_forward` with the row's mask, the next T draws of the stream,
    /// which is the naive mask's row i since the rows come in its order.
    fn forward(&mut self, qkv: Qkv, i: usize, masks: &mut Masks, c: Causal) {
        for (j, s) in self.scores.iter_mut().enumerate() {
            *s = c.score(qkv, i, j);
        }
        ops::softmax_forward(&mut self.weights, &self.scores, c.t);
        masks.draw(&mut self.mask);
        ops::dropout_forward(&mut self.kept, &self.weights, &self.mask);
    }
}

/// The exact forward pass: O (…, T, D), the naive graph's bits. Each output row is `matmul_forward`
/// of its row of weights kept with V: an output element of a product depends only on its row of
/// the left factor, so row i alone gives the naive graph's row i, Σⱼ w_ij·v_j over j = 0..T in
/// order, the masked weights included. Nothing is kept for the backward pass, which recomputes
/// the rows (and draws the masks again).
pub fn exact_forward(out: &mut [f32], qkv: Qkv, c: Causal, dropout: Option<&FlashDropout>) {
    let (mut rows, mut masks) = (Rows::new(c.t), Masks::new(dropout));
    for (out, qkv) in out.chunks_exact_mut(c.t * c.d).zip(matrices(qkv, c)) {
        for (i, out_i) in out.chunks_exact_mut(c.d).enumerate() {
            rows.forward(qkv, i, &mut masks, c);
            ops::matmul_forward(out_i, &rows.kept, qkv[2], (1, c.t, c.d));
        }
    }
}
// ANCHOR_END: exact_forward

// ANCHOR: exact_backward
/// The exact backward pass: (dV, dQ, dK), the naive graph's bits, one query row at a time.
///
/// The naive graph walks back context = W'·V (`matmul_backward`), dropout (W' = W ⊙ mask, when
/// training with it), softmax, tril, scale, scores = Q·Kᵀ (`matmul_backward`) and transpose. Per
/// element:
///
/// - dW'_ij = Σ_d dO_id·v_jd and dQ_ip = Σⱼ dS_ij·k_jp (j = 0..T, the masked zeros included) are
///   `dot`s along row i, computed here from row i alone with the same terms in the same order.
/// - dropout's backward (times the mask), softmax's backward of row i (`softmax_backward` on that
///   row: the same products and the same `pairwise_sum` of T of them), tril's (0 above the
///   diagonal), scale's (times the scale): elementwise or row by row, the same operations.
/// - dV_jd = Σᵢ w'_ij·dO_id and dK_jp = (dKᵀ)_pj = Σᵢ q_ip·dS_ij are `dot`s down a column, over the
///   queries i = 0..T, each term one fused multiply-add onto the sum so far, from 0. Here each row
///   i adds its term to every element of dV and dK as it is reached, rows in increasing i, starting
///   from 0: the same fused multiply-adds in the same order. The transpose copies dKᵀ back exactly.
///
/// Holds seven rows of T (`Rows`) beyond the inputs and gradients.
pub fn exact_backward(
    d: [&mut [f32]; 3],
    d_out: &[f32],
    qkv: Qkv,
    c: Causal,
    dropout: Option<&FlashDropout>,
) {
    let n = c.t * c.d;
    let (mut rows, mut masks) = (Rows::new(c.t), Masks::new(dropout));
    let [d_v, d_q, d_k] = d.map(|d| d.chunks_exact_mut(n));
    let grads = d_v.zip(d_q).zip(d_k);
    for ((((d_v, d_q), d_k), d_out), qkv) in grads.zip(d_out.chunks_exact(n)).zip(matrices(qkv, c))
    {
        d_v.fill(0.0);
        d_k.fill(0.0);
        for i in 0..c.t {
            rows.forward(qkv, i, &mut masks, c);
            rows.backward([d_v, d_q, d_k], row(d_out, i, c.d), qkv, i, c);
        }
    }
}

impl Rows {
    /// Query row i's share of the exact backward pass (see [`exact_backward`]), after
    /// [`Rows::forward`] of the same row.
    fn backward(
        &mut self,
        [d_v, d_q, d_k]: [&mut [f32]; 3],
        d_out_i: &[f32],
        qkv: Qkv,
        i: usize,
        c: Causal,
    ) {
        let [q, k, v] = qkv;
        for (j, (d_kept, &kept)) in self.d_kept.iter_mut().zip(&self.kept).enumerate() {
            *d_kept = dot(d_out_i.iter().copied(), row(v, j, c.d).iter().copied()); // matmul's dA
            add_scaled(row_mut(d_v, j, c.d), kept, d_out_i); // matmul's dB, term i
        }
        ops::dropout_backward(&mut self.d_weights, &self.d_kept, &self.mask);
        let d_s = &mut self.d_scores;
        ops::softmax_backward(d_s, &self.d_weights, &self.weights, c.t);
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
}
// ANCHOR_END: exact_backward
