//! The exact form: tiled attention that gives stage 4's bits. The online form's rescales and its
//! final division by ℓ round differently from the naive softmax; this form instead does what the
//! naive one does, in its order, one tile at a time:
//!
//! 0. every pass starts from the same scores: [`score_tile`] computes each Q·Kᵀ entry with the
//!    same product kernel over the same D terms, divides it by the same √D and masks the same
//!    entries with −∞.
//! 1. pass 1 over K: each row's true maximum m. A maximum does not depend on the order it is
//!    taken in, so it is stage 1's `fold` of the whole row.
//! 2. pass 2 over K: each row's sum ℓ = Σ e^(s − m): libm's `expf` of the same difference, added
//!    in the order ndarray's `sum` adds a row of T values ([`UnrolledSum`]).
//! 3. pass 3 over K and V: each weight e^(s − m) / ℓ, the same `expf` and the same division, so
//!    the very number stage 4 holds, and O = W·V in chunks of [`KC`] keys, the chunks
//!    matrixmultiply cuts the naive product's T keys into ([`KC`] says why that is its order).
//!
//! Only the queries are blocked freely: matrixmultiply gives an output element the same sum
//! however many rows the product has, so a block of Br rows gets stage 4's rows.
//!
//! The weights must be divided by ℓ before they meet V (stage 4 rounds w = e/ℓ, then w·v), so ℓ
//! has to be complete before pass 3 starts: that is why there are three passes over K where the
//! online form has one. See [`super::tiled`] for the cost of each form.

use ndarray::linalg::general_mat_mul;
use ndarray::{Array1, Array2, ArrayView2, s};

use super::tiled::{Tiles, blocks, score_tile};

// ANCHOR: unrolled_sum
/// Stage 1's `softmax` adds a row with ndarray's `sum`, which for a contiguous row of `len` values
/// is `numeric_util::unrolled_fold`: the first 8·⌊len/8⌋ values go into eight running sums, value j
/// into sum j mod 8; then 0 + (p₀ + p₄), + (p₁ + p₅), + (p₂ + p₆), + (p₃ + p₇); then the last
/// len mod 8 values, one after another. This replays it with the values fed one at a time, in
/// increasing j. A value never fed counts as 0, which adds nothing to a sum of non-negative
/// values, so the masked exponentials (exactly 0 in stage 4) need not be fed.
#[derive(Clone, Debug)]
pub struct UnrolledSum {
    lanes: [f32; 8],
    tail: [f32; 7],
    whole: usize,
}

impl UnrolledSum {
    /// The sum of a row of `len` values.
    pub fn new(len: usize) -> Self {
        UnrolledSum {
            lanes: [0.0; 8],
            tail: [0.0; 7],
            whole: len / 8 * 8,
        }
    }

    /// Adds value `j` of the row; values must come in increasing `j`.
    pub fn add(&mut self, j: usize, x: f32) {
        match j < self.whole {
            true => self.lanes[j % 8] += x,
            false => self.tail[j - self.whole] = x,
        }
    }

    /// The sum, as `unrolled_fold` adds it.
    pub fn total(&self) -> f32 {
        let p = &self.lanes;
        let lanes = (0..4).fold(0.0, |acc, i| acc + (p[i] + p[i + 4]));
        self.tail.iter().fold(lanes, |acc, &x| acc + x)
    }
}
// ANCHOR_END: unrolled_sum

// ANCHOR: kc
/// The keys matrixmultiply's sgemm adds in one go: it cuts the inner dimension of a product (here
/// the T keys of W·V) into chunks of `kc` = 256 (its `archparam::S_KC`, unless the crate is built
/// with `MATMUL_SGEMM_KC` set). Each output element is a sequential sum of the chunk's products,
/// started from 0 (with or without fused multiply-adds, as its kernel was picked at run time), and
/// each chunk's sum is then added to the element. A product over one chunk at a time, with
/// β = 0 first and β = 1 after, is therefore the naive product, whatever the number of rows.
pub const KC: usize = 256;
// ANCHOR_END: kc

// ANCHOR: exact_attention
/// Stage 4's attention for one causal head, bit for bit, without its T × T matrices: Q, K, V
/// (T, D) -> (T, D). Passes 1 and 2 walk the keys in tiles of `tiles.bc`; pass 3 in the naive
/// product's chunks of [`KC`]. Tiles above the diagonal are skipped in every pass; a skipped
/// weight is 0 in stage 4, and its product adds ±0 there, which changes no sum but one that is
/// exactly −0 (the only output whose bits could differ: an output of −0 here may be +0 in stage 4,
/// which needs every product of the row to be −0).
pub fn exact_attention(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    v: &ArrayView2<f32>,
    tiles: Tiles,
) -> Array2<f32> {
    let (t, d) = q.dim();
    let mut output = Array2::zeros((t, d)); // (T, D)
    for rows in tiles.query_blocks(t) {
        let m = row_maxima(q, k, &rows, tiles); // (Br)
        let l = row_sums(q, k, &rows, tiles, &m); // (Br)
        let o = weighted_values(q, k, v, &rows, (&m, &l)); // (Br, D)
        output.slice_mut(s![rows, ..]).assign(&o);
    }
    output
}

/// Pass 1: m, the largest score of each row of block `rows`, as stage 1's `softmax` folds it.
fn row_maxima(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    rows: &std::ops::Range<usize>,
    tiles: Tiles,
) -> Array1<f32> {
    let mut m = Array1::from_elem(rows.len(), f32::NEG_INFINITY); // (Br)
    for keys in tiles.visible_key_tiles(rows) {
        let scores = score_tile(q, k, rows, &keys); // (Br, Bc)
        for (m, row) in m.iter_mut().zip(scores.rows()) {
            *m = row.fold(*m, |a, &x| a.max(x));
        }
    }
    m
}

/// Pass 2: ℓ = Σⱼ e^(sⱼ − m) of each row, in the order stage 1's `softmax` adds a row of T values.
fn row_sums(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    rows: &std::ops::Range<usize>,
    tiles: Tiles,
    m: &Array1<f32>,
) -> Array1<f32> {
    let t = q.nrows();
    let mut sums = vec![UnrolledSum::new(t); rows.len()];
    for keys in tiles.visible_key_tiles(rows) {
        let scores = score_tile(q, k, rows, &keys); // (Br, Bc)
        for ((sum, row), &m) in sums.iter_mut().zip(scores.rows()).zip(m) {
            for (j, &s) in keys.clone().zip(row) {
                sum.add(j, libm::expf(s - m));
            }
        }
    }
    sums.iter().map(UnrolledSum::total).collect()
}

/// Pass 3: W = e^(S − m) / ℓ and O = W·V, one chunk of [`KC`] keys at a time, the first chunk
/// written (β = 0) and the others added (β = 1), as matrixmultiply does over the naive T keys.
fn weighted_values(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    v: &ArrayView2<f32>,
    rows: &std::ops::Range<usize>,
    (m, l): (&Array1<f32>, &Array1<f32>),
) -> Array2<f32> {
    let mut o = Array2::zeros((rows.len(), v.ncols())); // (Br, D)
    for keys in blocks(rows.end, KC) {
        let mut w = score_tile(q, k, rows, &keys); // (Br, KC)
        for ((mut row, &m), &l) in w.rows_mut().into_iter().zip(m).zip(l) {
            row.mapv_inplace(|s| libm::expf(s - m)); // stage 1's softmax, in its order
            row.mapv_inplace(|e| e / l);
        }
        let beta = if keys.start == 0 { 0.0 } else { 1.0 };
        general_mat_mul(1.0, &w, &v.slice(s![keys, ..]), beta, &mut o); // O (+)= W·V
    }
    o
}
// ANCHOR_END: exact_attention
