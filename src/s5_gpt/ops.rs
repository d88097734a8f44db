//! Lesson layer. Every operation of the GPT as two plain functions: its forward pass and, right
//! below it, its backward pass.
//!
//! These are the tutorial's `Tensor` operators (`+`, `@`, `transpose`, `*`) and its layers
//! (`Embedding`, `Linear`, `Softmax` from GPTmini's framework, and the chapter's own `Tril`, `GELU`
//! and `GPTLoss`). As in llm.c, the functions work on slices and know nothing of the tape: a
//! forward pass writes its output, and a backward pass writes the gradient of each input (`d_x`)
//! from the gradient of the output (`d_out`). The tape records which operation made each node and calls these through
//! [`super::backend`].
//!
//! Arithmetic is float32, as in the tutorial: a product adds its terms in order, each with one
//! fused multiply-add, a sum along a row is NumPy's [`pairwise_sum`], and GELU's tanh is the crate's
//! own. These functions define the bits of every training run; Appendix B explains why they are
//! the same on every machine. Shapes: B batch, T tokens, C channels, V vocabulary, N = B·T rows.

use crate::rng::numpy::NumpyRandom;

// ANCHOR: dot
/// Σ `a[p]·b[p]` over p in order, starting from 0, each term added by one fused multiply-add:
/// `sum = fma(a[p], b[p], sum)`, the exact a·b + sum rounded once. IEEE 754 defines that result
/// exactly, so every machine gives the same bits, in hardware or in software.
pub fn dot(a: impl Iterator<Item = f32>, b: impl Iterator<Item = f32>) -> f32 {
    a.zip(b).fold(0.0, |sum, (a, b)| a.mul_add(b, sum))
}
// ANCHOR_END: dot

// ANCHOR: embedding
/// `Embedding.forward`: row i of `out` (N, C) is row `ids[i]` of `table` (V, C).
pub fn embedding_forward(out: &mut [f32], table: &[f32], ids: &[usize], c: usize) {
    for (row, &id) in out.chunks_exact_mut(c).zip(ids) {
        row.copy_from_slice(&table[id * c..(id + 1) * c]);
    }
}

/// `np.add.at(weight.grad, ids, d_out)`: each row of `d_out` is added to its id's row, in order.
pub fn embedding_backward(d_table: &mut [f32], d_out: &[f32], ids: &[usize], c: usize) {
    d_table.fill(0.0);
    for (g, &id) in d_out.chunks_exact(c).zip(ids) {
        let row = &mut d_table[id * c..(id + 1) * c];
        row.iter_mut().zip(g).for_each(|(d, g)| *d += g);
    }
}
// ANCHOR_END: embedding

// ANCHOR: add
/// `a + b`, with `b` repeated over the leading axes of `a`: (B, T, C) + (T, C).
pub fn add_forward(out: &mut [f32], a: &[f32], b: &[f32]) {
    for (out, a) in out.chunks_exact_mut(b.len()).zip(a.chunks_exact(b.len())) {
        for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
            *o = a + b;
        }
    }
}

/// `_unbroadcast`: `a` takes `d_out` as it is; `b` takes `d_out` summed over the leading axes, in
/// order.
pub fn add_backward(d_a: &mut [f32], d_b: &mut [f32], d_out: &[f32]) {
    d_a.copy_from_slice(d_out);
    d_b.fill(0.0);
    for row in d_out.chunks_exact(d_b.len()) {
        d_b.iter_mut().zip(row).for_each(|(d, g)| *d += g);
    }
}
// ANCHOR_END: add

// ANCHOR: transpose
/// `x.transpose((0, 2, 1))`: each (R, C) matrix of `x` becomes a (C, R) matrix of `out`.
pub fn transpose_forward(out: &mut [f32], x: &[f32], (rows, cols): (usize, usize)) {
    for (out, x) in out
        .chunks_exact_mut(rows * cols)
        .zip(x.chunks_exact(rows * cols))
    {
        for (i, row) in x.chunks_exact(cols).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                out[j * rows + i] = v; // out[j][i] = x[i][j]
            }
        }
    }
}

/// The inverse of a swap is the same swap, back from (C, R) to (R, C).
pub fn transpose_backward(d_x: &mut [f32], d_out: &[f32], (rows, cols): (usize, usize)) {
    transpose_forward(d_x, d_out, (cols, rows));
}
// ANCHOR_END: transpose

// ANCHOR: matmul
/// `a @ b` for stacks of matrices: (…, M, K) @ (…, K, N) → (…, M, N).
pub fn matmul_forward(out: &mut [f32], a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) {
    let stack = out.chunks_exact_mut(m * n).zip(a.chunks_exact(m * k));
    for ((c, a), b) in stack.zip(b.chunks_exact(k * n)) {
        for i in 0..m {
            for j in 0..n {
                let b_column = b[j..].iter().step_by(n); // b[·][j]
                c[i * n + j] = dot(a[i * k..][..k].iter().copied(), b_column.copied());
            }
        }
    }
}

/// dA = dC·Bᵀ and dB = Aᵀ·dC, matrix by matrix.
pub fn matmul_backward(
    d_a: &mut [f32],
    d_b: &mut [f32],
    d_out: &[f32],
    a: &[f32],
    b: &[f32],
    (m, k, n): (usize, usize, usize),
) {
    let grads = d_a.chunks_exact_mut(m * k).zip(d_b.chunks_exact_mut(k * n));
    let values = d_out
        .chunks_exact(m * n)
        .zip(a.chunks_exact(m * k))
        .zip(b.chunks_exact(k * n));
    for ((d_a, d_b), ((d_c, a), b)) in grads.zip(values) {
        for i in 0..m {
            for p in 0..k {
                let (d_c_row, b_row) = (&d_c[i * n..][..n], &b[p * n..][..n]);
                d_a[i * k + p] = dot(d_c_row.iter().copied(), b_row.iter().copied());
            }
        }
        for p in 0..k {
            for j in 0..n {
                let (a_column, d_c_column) = (a[p..].iter().step_by(k), d_c[j..].iter().step_by(n));
                d_b[p * n + j] = dot(a_column.copied(), d_c_column.copied());
            }
        }
    }
}
// ANCHOR_END: matmul

// ANCHOR: scale
/// `x * s` for a scalar `s` that is not trained (the attention's 1/√C).
pub fn scale_forward(out: &mut [f32], x: &[f32], s: f32) {
    out.iter_mut().zip(x).for_each(|(o, x)| *o = x * s);
}

/// `d_out * s`.
pub fn scale_backward(d_x: &mut [f32], d_out: &[f32], s: f32) {
    scale_forward(d_x, d_out, s);
}
// ANCHOR_END: scale

// ANCHOR: tril
/// The tutorial's value for masked scores: −1e9 as float32, so that softmax gives them a weight of
/// exactly 0.
pub const MASK_VALUE: f32 = -1e9;

/// `Tril`: keeps the lower triangle of each (T, T) matrix, diagonal included, and writes `value`
/// above it (the tutorial's [`MASK_VALUE`]), so that token t attends to tokens 0..=t only.
pub fn tril_forward(out: &mut [f32], x: &[f32], t: usize, value: f32) {
    out.copy_from_slice(x);
    for (r, row) in out.chunks_exact_mut(t).enumerate() {
        let i = r % t; // the row within its matrix
        row[i + 1..].fill(value);
    }
}

/// `x.grad += p.grad * keep`: the gradient passes where the score was kept and is 0 above the
/// diagonal.
pub fn tril_backward(d_x: &mut [f32], d_out: &[f32], t: usize) {
    d_x.copy_from_slice(d_out);
    for (r, row) in d_x.chunks_exact_mut(t).enumerate() {
        row[r % t + 1..].fill(0.0);
    }
}
// ANCHOR_END: tril

// ANCHOR: softmax
/// `Softmax(axis=-1)` of every row of `width` values: exp(x − max) / Σ exp(x − max), in float32.
pub fn softmax_forward(out: &mut [f32], x: &[f32], width: usize) {
    for (out, x) in out.chunks_exact_mut(width).zip(x.chunks_exact(width)) {
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        for (o, &v) in out.iter_mut().zip(x) {
            *o = libm::expf(v - max);
        }
        let sum = pairwise_sum(out);
        out.iter_mut().for_each(|o| *o /= sum);
    }
}

/// d_x = s ⊙ (d_out − Σ s ⊙ d_out), row by row, where `s` is the softmax's output.
pub fn softmax_backward(d_x: &mut [f32], d_out: &[f32], s: &[f32], width: usize) {
    let rows = d_x.chunks_exact_mut(width).zip(d_out.chunks_exact(width));
    for ((d_x, g), s) in rows.zip(s.chunks_exact(width)) {
        let s_g: Vec<f32> = s.iter().zip(g).map(|(s, g)| s * g).collect();
        let sum = pairwise_sum(&s_g);
        for ((d, s), g) in d_x.iter_mut().zip(s).zip(g) {
            *d = s * (g - sum);
        }
    }
}
// ANCHOR_END: softmax

// ANCHOR: gelu
/// √(2/π) in float32.
pub const GELU_C: f32 = 0.797_884_6;

/// The argument of GELU's tanh, c·(x + 0.044715·x³).
#[inline(always)]
pub fn gelu_tanh_arg(x: f32) -> f32 {
    GELU_C * (x + 0.044715 * (x * x * x))
}

/// GELU, tanh form: 0.5·x·(1 + tanh(c·(x + 0.044715·x³))). Keeps each tanh for the backward pass.
#[inline(always)]
pub fn gelu_forward(out: &mut [f32], tanh_out: &mut [f32], x: &[f32]) {
    for ((o, t), &x) in out.iter_mut().zip(tanh_out.iter_mut()).zip(x) {
        *t = tanh(gelu_tanh_arg(x));
        *o = 0.5 * x * (1.0 + *t);
    }
}

/// The exact derivative of the tanh form: 0.5(1+t) + 0.5·x·(1−t²)·c·(1 + 3·0.044715·x²).
#[inline(always)]
pub fn gelu_backward(d_x: &mut [f32], d_out: &[f32], x: &[f32], tanh_out: &[f32]) {
    let elements = d_x.iter_mut().zip(d_out).zip(x).zip(tanh_out);
    for (((d_x, &g), &x), &t) in elements {
        let slope = GELU_C * (1.0 + (3.0 * 0.044715) * (x * x));
        *d_x = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * slope);
    }
}
// ANCHOR_END: gelu

// ANCHOR: linear
/// `Linear`: y = x·Wᵀ + b for N rows, with x (N, in), W (out, in) as in the tutorial, b (out), y
/// (N, out) written to `out`. The bias is added after the whole sum, as `x @ W.T + b` does.
pub fn linear_forward(out: &mut [f32], x: &[f32], w: &[f32], b: &[f32], n_in: usize) {
    let n_out = b.len();
    for (out_row, x_row) in out.chunks_exact_mut(n_out).zip(x.chunks_exact(n_in)) {
        for ((y, w_row), b) in out_row.iter_mut().zip(w.chunks_exact(n_in)).zip(b) {
            *y = dot(x_row.iter().copied(), w_row.iter().copied()) + b;
        }
    }
}

/// d_x = d_out·W, d_W = d_outᵀ·x, d_b = Σ over rows of d_out (each sum in order).
pub fn linear_backward(
    d_x: &mut [f32],
    d_w: &mut [f32],
    d_b: &mut [f32],
    d_out: &[f32],
    x: &[f32],
    w: &[f32],
) {
    let (n_out, n_in) = (d_b.len(), d_w.len() / d_b.len());
    for (d_x_row, d_out_row) in d_x.chunks_exact_mut(n_in).zip(d_out.chunks_exact(n_out)) {
        for (i, d) in d_x_row.iter_mut().enumerate() {
            *d = dot(
                d_out_row.iter().copied(),
                w[i..].iter().step_by(n_in).copied(),
            );
        }
    }
    for (o, d_w_row) in d_w.chunks_exact_mut(n_in).enumerate() {
        for (i, d) in d_w_row.iter_mut().enumerate() {
            let (d_out_column, x_column) = (
                d_out[o..].iter().step_by(n_out),
                x[i..].iter().step_by(n_in),
            );
            *d = dot(d_out_column.copied(), x_column.copied());
        }
    }
    for (o, d) in d_b.iter_mut().enumerate() {
        *d = d_out[o..].iter().step_by(n_out).fold(0.0, |sum, g| sum + g);
    }
}
// ANCHOR_END: linear

// ANCHOR: heads
/// Stage 4's `split_heads`: (B, T, H·D) → (B, H, T, D). Head h takes columns h·D..(h+1)·D of every
/// token.
pub fn split_heads_forward(out: &mut [f32], x: &[f32], (t, h, d): (usize, usize, usize)) {
    for (out, x) in out
        .chunks_exact_mut(t * h * d)
        .zip(x.chunks_exact(t * h * d))
    {
        for (i, token) in x.chunks_exact(h * d).enumerate() {
            for (head, part) in token.chunks_exact(d).enumerate() {
                out[(head * t + i) * d..][..d].copy_from_slice(part); // out[head][i] = x[i][head]
            }
        }
    }
}

/// A split's gradient goes back the way it came: merged.
pub fn split_heads_backward(d_x: &mut [f32], d_out: &[f32], shape: (usize, usize, usize)) {
    merge_heads_forward(d_x, d_out, shape);
}

/// Stage 4's `merge_heads`: (B, H, T, D) → (B, T, H·D), the heads side by side again.
pub fn merge_heads_forward(out: &mut [f32], x: &[f32], (t, h, d): (usize, usize, usize)) {
    for (out, x) in out
        .chunks_exact_mut(t * h * d)
        .zip(x.chunks_exact(t * h * d))
    {
        for (head, rows) in x.chunks_exact(t * d).enumerate() {
            for (i, part) in rows.chunks_exact(d).enumerate() {
                out[(i * h + head) * d..][..d].copy_from_slice(part); // out[i][head] = x[head][i]
            }
        }
    }
}

/// A merge's gradient is split again.
pub fn merge_heads_backward(d_x: &mut [f32], d_out: &[f32], shape: (usize, usize, usize)) {
    split_heads_forward(d_x, d_out, shape);
}
// ANCHOR_END: heads

// ANCHOR: dropout
/// Stage 3's dropout mask: each weight is kept with probability 1 − p and then scaled by 1/(1 − p),
/// so that a row of weights keeps its expected sum; the others become 0. It is NumPy's
/// `(np.random.random_sample(n) >= p) * np.float32(1 / (1 - p))`: one draw per weight, in order.
pub fn dropout_mask(mask: &mut [f32], rng: &mut NumpyRandom, p: f64) {
    let scale = (1.0 / (1.0 - p)) as f32;
    for m in mask {
        *m = if rng.random_sample() >= p { scale } else { 0.0 };
    }
}

/// Dropout: each weight times its entry of the mask.
pub fn dropout_forward(out: &mut [f32], x: &[f32], mask: &[f32]) {
    for ((o, x), m) in out.iter_mut().zip(x).zip(mask) {
        *o = x * m;
    }
}

/// The gradient passes where the weight was kept, scaled the same way.
pub fn dropout_backward(d_x: &mut [f32], d_out: &[f32], mask: &[f32]) {
    dropout_forward(d_x, d_out, mask);
}
// ANCHOR_END: dropout

// ANCHOR: layer_norm
/// LayerNorm's ε, PyTorch's and GPT-2's: it keeps 1/σ finite for a row whose values are all equal.
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// LayerNorm of every row of C values: y = (x − μ)·(1/σ)·w + b, with μ the row's mean and σ² its
/// variance plus ε (each mean as NumPy's `mean` adds up). Keeps μ and 1/σ of each row for the
/// backward pass.
pub fn layer_norm_forward(
    y: &mut [f32],
    (mean, rstd): (&mut [f32], &mut [f32]),
    x: &[f32],
    w: &[f32],
    b: &[f32],
) {
    let c = w.len();
    let rows = y.chunks_exact_mut(c).zip(x.chunks_exact(c));
    for ((y, x), (mean, rstd)) in rows.zip(mean.iter_mut().zip(rstd.iter_mut())) {
        let mu = pairwise_sum(x) / c as f32;
        let variance = pairwise_sum_by(x, |v| (v - mu) * (v - mu)) / c as f32;
        (*mean, *rstd) = (mu, 1.0 / (variance + LAYER_NORM_EPS).sqrt());
        for (((y, &x), w), b) in y.iter_mut().zip(x).zip(w).zip(b) {
            *y = (x - mu) * *rstd * w + b;
        }
    }
}

// ANCHOR_END: layer_norm

// ANCHOR: layer_norm_backward
/// With x̂ = (x − μ)/σ and g = d_out·w, row by row: d_x = (g − mean(g) − x̂·mean(g·x̂))/σ;
/// and d_w = Σ over rows of d_out·x̂, d_b = Σ over rows of d_out, added in order.
pub fn layer_norm_backward(
    d_x: &mut [f32],
    d_w: &mut [f32],
    d_b: &mut [f32],
    d_out: &[f32],
    x: &[f32],
    w: &[f32],
    (mean, rstd): (&[f32], &[f32]),
) {
    let c = w.len();
    let (mut x_hat, mut g, mut g_x_hat) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
    d_w.fill(0.0);
    d_b.fill(0.0);
    let rows = d_x
        .chunks_exact_mut(c)
        .zip(d_out.chunks_exact(c))
        .zip(x.chunks_exact(c));
    for (((d_x, d_out), x), (&mean, &rstd)) in rows.zip(mean.iter().zip(rstd)) {
        for k in 0..c {
            x_hat[k] = (x[k] - mean) * rstd;
            g[k] = d_out[k] * w[k];
            g_x_hat[k] = g[k] * x_hat[k];
            d_w[k] += d_out[k] * x_hat[k];
            d_b[k] += d_out[k];
        }
        let (g_mean, g_x_hat_mean) = (
            pairwise_sum(&g) / c as f32,
            pairwise_sum(&g_x_hat) / c as f32,
        );
        for ((d, &g), &x_hat) in d_x.iter_mut().zip(&g).zip(&x_hat) {
            *d = (g - g_mean - x_hat * g_x_hat_mean) * rstd;
        }
    }
}
// ANCHOR_END: layer_norm_backward

// ANCHOR: cross_entropy
/// `GPTLoss` clips the target's probability to [1e-10, 1] before the log, so a 0 never gives ∞.
pub const PROB_FLOOR: f32 = 1e-10;

/// `GPTLoss`: the mean over N positions of `−ln softmax(logits)[target]`, with logits (N, V). Keeps
/// the softmax in `probs` (N, V) for the backward pass.
pub fn cross_entropy_forward(probs: &mut [f32], logits: &[f32], targets: &[usize]) -> f32 {
    let v = logits.len() / targets.len();
    softmax_forward(probs, logits, v);
    let rows = probs.chunks_exact(v).zip(targets);
    let logs: Vec<f32> = rows
        .map(|(p, &y)| libm::logf(p[y].clamp(PROB_FLOOR, 1.0)))
        .collect();
    0.0 - pairwise_sum(&logs) / targets.len() as f32
}
// ANCHOR_END: cross_entropy

// ANCHOR: cross_entropy_backward
/// (softmax − onehot)·d_loss/N. Like the tutorial, it ignores the clip.
pub fn cross_entropy_backward(d_logits: &mut [f32], d_loss: f32, probs: &[f32], targets: &[usize]) {
    let (v, n) = (probs.len() / targets.len(), targets.len() as f32);
    let rows = d_logits.chunks_exact_mut(v).zip(probs.chunks_exact(v));
    for ((d, p), &y) in rows.zip(targets) {
        d.copy_from_slice(p);
        d[y] -= 1.0;
        d.iter_mut().for_each(|d| *d = d_loss * *d / n);
    }
}
// ANCHOR_END: cross_entropy_backward

// ANCHOR: pairwise_sum
/// NumPy's `np.sum` of a contiguous float32 array: pairwise summation with eight accumulators.
///
/// NumPy adds blocks of at most 128 values with eight running sums, combines them as
/// `((r0+r1)+(r2+r3)) + ((r4+r5)+(r6+r7))`, adds the leftovers in order, and splits longer arrays
/// in two halves (a multiple of 8 on the left). Fewer than 8 values are added in order. Checked
/// against NumPy 2.4 for lengths 1 to 20,000 and for rows of 2-D arrays (`axis=-1`).
pub fn pairwise_sum(a: &[f32]) -> f32 {
    pairwise_sum_by(a, |x| x)
}

/// [`pairwise_sum`] of `f(x)` for each `x` of `a`, without storing the `f(x)` first.
#[inline(always)]
pub fn pairwise_sum_by(a: &[f32], f: impl Fn(f32) -> f32 + Copy) -> f32 {
    pairwise_tree(a, |block| pairwise_block(block, f))
}

/// The most values [`pairwise_block`] adds; longer arrays are split.
pub const PAIRWISE_BLOCK: usize = 128;

/// The halving: arrays longer than [`PAIRWISE_BLOCK`] are split in two (a multiple of 8 on the
/// left) until each part is a block, and the blocks' sums `block_sum` are added back up the tree.
/// Apart from the block so that the fast layer can sum each block in vector code.
pub fn pairwise_tree(a: &[f32], block_sum: impl Fn(&[f32]) -> f32 + Copy) -> f32 {
    if a.len() <= PAIRWISE_BLOCK {
        return block_sum(a);
    }
    let half = a.len() / 2;
    let half = half - half % 8;
    pairwise_tree(&a[..half], block_sum) + pairwise_tree(&a[half..], block_sum)
}

/// One block of at most [`PAIRWISE_BLOCK`] values: in order if fewer than 8, else eight running
/// sums, combined as a tree, then the leftovers in order.
#[inline(always)]
pub fn pairwise_block(a: &[f32], f: impl Fn(f32) -> f32 + Copy) -> f32 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |s, &x| s + f(x));
    }
    let mut r: [f32; 8] = std::array::from_fn(|j| f(a[j]));
    let whole = n - n % 8;
    for block in a[8..whole].chunks_exact(8) {
        for (rj, &x) in r.iter_mut().zip(block) {
            *rj += f(x);
        }
    }
    let head = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    a[whole..].iter().fold(head, |s, &x| s + f(x))
}
// ANCHOR_END: pairwise_sum

/// [`pairwise_sum`] of `zeros` zeros followed by `a`, to the bit, visiting only the blocks that
/// hold a value of `a`: a block of zeros sums to exactly 0, and adding 0 changes nothing. A cached
/// step with a window sums its W weights so, behind the keys the window forgot.
pub fn pairwise_sum_behind(zeros: usize, a: &[f32]) -> f32 {
    sum_behind(zeros, a, 0..zeros + a.len())
}

/// The sum of the values at `part` of `zeros` zeros followed by `a`, halved as [`pairwise_tree`]
/// halves it.
fn sum_behind(zeros: usize, a: &[f32], part: std::ops::Range<usize>) -> f32 {
    if part.end <= zeros {
        return 0.0;
    }
    let n = part.len();
    if n <= PAIRWISE_BLOCK {
        let mut block = [0.0; PAIRWISE_BLOCK];
        let from = part.start.max(zeros);
        block[from - part.start..n].copy_from_slice(&a[from - zeros..part.end - zeros]);
        return pairwise_block(&block[..n], |x| x);
    }
    let half = n / 2 - n / 2 % 8;
    let middle = part.start + half;
    sum_behind(zeros, a, part.start..middle) + sum_behind(zeros, a, middle..part.end)
}

// ANCHOR: tanh
/// Below this |x|, tanh is its odd polynomial; from here on, 1 − 2/(e^{2|x|} + 1).
const TANH_SMALL: f32 = 0.625;
/// tanh(x) = x + x·z·P(z) with z = x², on |x| < 0.625: P's coefficients, highest power first (a
/// minimax fit, 0.07 ulp from tanh before rounding).
const TANH_P: [f32; 5] = [
    -0.005_717_048_4,
    0.020_650_592,
    -0.053_743_5,
    0.133_314_91,
    -0.333_332_84,
];
/// tanh(x) rounds to 1 in float32 from about 9.01; clamping at 10 keeps e^{2|x|} finite.
const TANH_ONE_FROM: f32 = 10.0;
/// ln 2 split in two so that k·LN2_HI is exact for the k used here (Cephes' constants).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Adding 1.5·2²³ rounds a float32 to an integer and leaves it in the low bits.
const ROUND: f32 = 12_582_912.0;
/// 1/n! for n = 7 down to 2: the Taylor series of eʳ − 1, highest power first.
const INV_FACT: [f32; 6] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
];

/// tanh in float32 from +, −, × and ÷ alone, so that it gives the same bits on every machine.
/// Within 1.21 ulp of the true tanh on every float32 input (`tests/s5_tanh.rs` checks).
///
/// Both branches are always computed and one is picked at the end, with no jump: so a loop of
/// these can run eight or sixteen elements per vector instruction, each lane doing exactly these
/// operations.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let a = if a > TANH_ONE_FROM { TANH_ONE_FROM } else { a }; // NaN stays NaN
    let t = if a < TANH_SMALL {
        tanh_series(a)
    } else {
        tanh_from_exp(a)
    };
    t.copysign(x)
}

/// tanh(a) for 0 ≤ a < 0.625: the odd polynomial a + a·z·P(z) with z = a².
#[inline(always)]
fn tanh_series(a: f32) -> f32 {
    let z = a * a;
    a + a * (z * TANH_P.iter().fold(0.0, |p, &c| p * z + c))
}

/// tanh(a) for 0.625 ≤ a ≤ 10: 1 − 2/(e^{2a} + 1), with e^{2a} = 2ᵏ·eʳ for 2a = k·ln 2 + r and
/// |r| ≤ ln2/2.
#[inline(always)]
fn tanh_from_exp(a: f32) -> f32 {
    let y = 2.0 * a;
    let rounded = y * std::f32::consts::LOG2_E + ROUND;
    let k = rounded - ROUND;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let expm1_r = r + r * (r * INV_FACT.iter().fold(0.0, |s, &f| s * r + f));
    let two_k = f32::from_bits((rounded.to_bits() << 23).wrapping_add(127 << 23));
    let exp_plus_1 = two_k * expm1_r + (two_k + 1.0); // 2ᵏ(eʳ − 1) + 2ᵏ + 1, rounded once
    1.0 - 2.0 / exp_plus_1
}
// ANCHOR_END: tanh

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_sum_matches_numpy() {
        // np.sum(np.arange(n, dtype=np.float32) * np.float32(0.1)) for these n, as printed by NumPy
        // 2.4.
        let sum = |n: usize| pairwise_sum(&(0..n).map(|i| i as f32 * 0.1f32).collect::<Vec<_>>());
        assert_eq!(sum(5), 1.0);
        assert_eq!(sum(65), 207.99998);
        assert_eq!(sum(129), 825.6);
        assert_eq!(sum(1000), 49950.0);
        assert_eq!(sum(8193), 3.355853e6);
    }

    #[test]
    fn zeros_in_front_sum_as_the_whole_row() {
        let a: Vec<f32> = (0..700).map(|i| (i as f32 * 0.37).sin().abs()).collect();
        for zeros in [0, 1, 7, 8, 100, 127, 128, 129, 200, 513, 1000] {
            for len in [0, 1, 5, 8, 9, 64, 127, 128, 129, 300, 700] {
                let row = [vec![0.0; zeros], a[..len].to_vec()].concat();
                let whole = pairwise_sum(&row);
                let behind = pairwise_sum_behind(zeros, &a[..len]);
                assert_eq!(
                    behind.to_bits(),
                    whole.to_bits(),
                    "{zeros} zeros, {len} values"
                );
            }
        }
    }

    #[test]
    fn products_add_in_order() {
        // (2×3)·(3×2), against sums written out by hand.
        let a: [f32; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b: [f32; 6] = [0.5, -1.0, 0.25, 2.0, -0.125, 4.0];
        let mut c = [0.0; 4];
        matmul_forward(&mut c, &a, &b, (2, 3, 2));
        assert_eq!(c[0], ((0.0 + a[0] * b[0]) + a[1] * b[2]) + a[2] * b[4]);
        assert_eq!(c[3], ((0.0 + a[3] * b[1]) + a[4] * b[3]) + a[5] * b[5]);
    }
}
