//! Fast layer. The attention's elementwise ops and the sequel's layers, shared among the threads:
//! scale, mask, softmax's backward pass, transpose, heads, dropout and LayerNorm.
//!
//! Each op runs the lesson's own arithmetic on bands of whole rows, whole matrices or whole batch
//! items (or, for LayerNorm's parameter gradients, bands of columns), so every output element goes
//! through exactly the operations the lesson does, in the same order. The bands only decide which
//! thread computes an element, never how.

use super::kernels::{pairwise_sum_by, transposed_copy, vectorised};
use super::team;
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::ops;

/// Below this many values an op runs on the calling thread: waking a helper costs more.
const PARALLEL_MIN_VALUES: usize = 1 << 14;
/// Bands per thread: a helper the machine runs late leaves fewer to the calling thread at the end.
const BANDS_PER_THREAD: usize = 2;

/// How many of `units` (rows, matrices, items) of `size` values each go into one band: all of them
/// below 16,384 values in all, else two bands per thread.
pub fn per_band(units: usize, size: usize) -> usize {
    let threads = team::threads();
    if threads == 1 || units * size < PARALLEL_MIN_VALUES {
        return units.max(1);
    }
    units.div_ceil(threads * BANDS_PER_THREAD).max(1)
}

/// Calls `f(out_band, x_band)` on bands of whole units of `size` values, on any thread.
fn in_bands(out: &mut [f32], x: &[f32], size: usize, f: impl Fn(&mut [f32], &[f32]) + Sync) {
    let size = size.max(1);
    let band = per_band(x.len() / size, size) * size;
    team::for_each(out.chunks_mut(band).zip(x.chunks(band)), |(out, x)| {
        f(out, x)
    });
}

/// The lesson's `x * s`, in bands of elements.
pub fn scale_forward(out: &mut [f32], x: &[f32], s: f32) {
    in_bands(out, x, 64, |out, x| {
        vectorised(
            #[inline(always)]
            || out.iter_mut().zip(x).for_each(|(o, x)| *o = x * s),
        )
    });
}

/// The lesson's `d_out * s`.
pub fn scale_backward(d_x: &mut [f32], d_out: &[f32], s: f32) {
    scale_forward(d_x, d_out, s);
}

/// The lesson's `Tril` forward (`value` above each diagonal), a band of whole (T, T) matrices at a
/// time, copying only what is kept.
pub fn tril_forward(out: &mut [f32], x: &[f32], t: usize, value: f32) {
    in_bands(out, x, t * t, |out, x| {
        vectorised(
            #[inline(always)]
            || {
                for (r, (out, x)) in out.chunks_exact_mut(t).zip(x.chunks_exact(t)).enumerate() {
                    let i = r % t; // the row within its matrix
                    copy(&mut out[..=i], &x[..=i]);
                    out[i + 1..].iter_mut().for_each(|o| *o = value);
                }
            },
        )
    });
}

/// The lesson's `Tril` backward: the gradient passes below and on the diagonal, 0 above.
pub fn tril_backward(d_x: &mut [f32], d_out: &[f32], t: usize) {
    tril_forward(d_x, d_out, t, 0.0);
}

/// The lesson's softmax backward, d_x = s ⊙ (d_out − Σ s ⊙ d_out), on bands of rows with one
/// scratch row per band.
pub fn softmax_backward(d_x: &mut [f32], d_out: &[f32], s: &[f32], width: usize) {
    let band = per_band(s.len() / width.max(1), width) * width;
    let bands = d_x.chunks_mut(band).zip(d_out.chunks(band));
    team::for_each(bands.zip(s.chunks(band)), |((d_x, d_out), s)| {
        let mut s_g = vec![0.0; width];
        vectorised(
            #[inline(always)]
            || {
                let rows = d_x.chunks_exact_mut(width).zip(d_out.chunks_exact(width));
                for ((d_x, g), s) in rows.zip(s.chunks_exact(width)) {
                    s_g.iter_mut()
                        .zip(s.iter().zip(g))
                        .for_each(|(p, (s, g))| *p = s * g);
                    let sum = pairwise_sum_by(&s_g, |v| v);
                    d_x.iter_mut()
                        .zip(s.iter().zip(g))
                        .for_each(|(d, (s, g))| *d = s * (g - sum));
                }
            },
        )
    });
}

/// The lesson's `a + b`, `b` repeated over the leading axes of `a`, a band of whole repeats at a
/// time.
pub fn add_forward(out: &mut [f32], a: &[f32], b: &[f32]) {
    if a.len() != b.len() {
        return in_bands(out, a, b.len(), |out, a| {
            vectorised(
                #[inline(always)]
                || ops::add_forward(out, a, b),
            )
        });
    }
    // A residual connection: the same shapes, so bands of elements.
    let band = per_band(a.len().div_ceil(64), 64) * 64;
    let bands = out.chunks_mut(band).zip(a.chunks(band));
    team::for_each(bands.zip(b.chunks(band)), |((out, a), b)| {
        vectorised(
            #[inline(always)]
            || ops::add_forward(out, a, b),
        )
    });
}

/// The lesson's `add` backward: `a` takes `d_out` as it is, `b` the sum of `d_out` over the leading
/// axes in order. When `b` has `a`'s shape that sum has one term, `0 + g`, computed as the lesson
/// does (it turns −0 into +0), and both halves go to the threads in one fork.
pub fn add_backward(d_a: &mut [f32], d_b: &mut [f32], d_out: &[f32]) {
    if d_b.len() != d_out.len() {
        return ops::add_backward(d_a, d_b, d_out);
    }
    team::for_each([(d_a, false), (d_b, true)], |(d, summed)| {
        vectorised(
            #[inline(always)]
            || match summed {
                false => copy(d, d_out),
                true => d.iter_mut().zip(d_out).for_each(|(d, &g)| *d = 0.0 + g),
            },
        )
    });
}

/// The lesson's transpose of each (R, C) matrix, a band of matrices at a time, in 8 × 8 squares
/// ([`transposed_copy`]).
pub fn transpose_forward(out: &mut [f32], x: &[f32], (rows, cols): (usize, usize)) {
    let size = rows * cols;
    in_bands(out, x, size, |out, x| {
        for (out, x) in out.chunks_exact_mut(size).zip(x.chunks_exact(size)) {
            transposed_copy(out, rows, x, cols, (rows, cols)); // (C, R)
        }
    });
}

/// The lesson's transpose backward: the gradient of each (R, C) matrix, transposed back.
pub fn transpose_backward(d_x: &mut [f32], d_out: &[f32], (rows, cols): (usize, usize)) {
    transpose_forward(d_x, d_out, (cols, rows));
}

/// Stage 4's `split_heads`, (B, T, H·D) → (B, H, T, D), one batch item per band at most.
pub fn split_heads_forward(out: &mut [f32], x: &[f32], (t, h, d): (usize, usize, usize)) {
    in_bands(out, x, t * h * d, |out, x| {
        vectorised(
            #[inline(always)]
            || {
                let items = out
                    .chunks_exact_mut(t * h * d)
                    .zip(x.chunks_exact(t * h * d));
                for (out, x) in items {
                    for (i, token) in x.chunks_exact(h * d).enumerate() {
                        for (head, part) in token.chunks_exact(d).enumerate() {
                            copy(&mut out[(head * t + i) * d..][..d], part); // out[head][i] = x[i][head]
                        }
                    }
                }
            },
        )
    });
}

/// Stage 4's `merge_heads`, (B, H, T, D) → (B, T, H·D), one batch item per band at most.
pub fn merge_heads_forward(out: &mut [f32], x: &[f32], (t, h, d): (usize, usize, usize)) {
    in_bands(out, x, t * h * d, |out, x| {
        vectorised(
            #[inline(always)]
            || {
                let items = out
                    .chunks_exact_mut(t * h * d)
                    .zip(x.chunks_exact(t * h * d));
                for (out, x) in items {
                    for (head, rows) in x.chunks_exact(t * d).enumerate() {
                        for (i, part) in rows.chunks_exact(d).enumerate() {
                            copy(&mut out[(i * h + head) * d..][..d], part); // out[i][head] = x[head][i]
                        }
                    }
                }
            },
        )
    });
}

/// A split's gradient goes back the way it came: merged.
pub fn split_heads_backward(d_x: &mut [f32], d_out: &[f32], shape: (usize, usize, usize)) {
    merge_heads_forward(d_x, d_out, shape);
}

/// A merge's gradient is split again.
pub fn merge_heads_backward(d_x: &mut [f32], d_out: &[f32], shape: (usize, usize, usize)) {
    split_heads_forward(d_x, d_out, shape);
}

/// A short copy as a loop the compiler unrolls in place, rather than a call to `memcpy` per head.
#[inline(always)]
fn copy(out: &mut [f32], x: &[f32]) {
    out.iter_mut().zip(x).for_each(|(o, &x)| *o = x);
}

/// The lesson's dropout mask ([`ops::dropout_mask`]) from the same draws in the same order, taken
/// a block at a time ([`NumpyRandom::fill_random_sample`]) rather than one call per weight. The
/// draws are one sequence, so this runs on the calling thread.
pub fn dropout_mask(mask: &mut [f32], rng: &mut NumpyRandom, p: f64) {
    let scale = (1.0 / (1.0 - p)) as f32;
    let mut u = [0.0; 1024];
    for mask in mask.chunks_mut(u.len()) {
        let u = &mut u[..mask.len()];
        vectorised(
            #[inline(always)]
            || {
                rng.fill_random_sample(u);
                for (m, &u) in mask.iter_mut().zip(u.iter()) {
                    *m = if u >= p { scale } else { 0.0 };
                }
            },
        );
    }
}

/// The lesson's dropout: each value times its entry of the mask.
pub fn dropout_forward(out: &mut [f32], x: &[f32], mask: &[f32]) {
    let band = per_band(x.len().div_ceil(64), 64) * 64;
    let bands = out.chunks_mut(band).zip(x.chunks(band));
    team::for_each(bands.zip(mask.chunks(band)), |((out, x), mask)| {
        vectorised(
            #[inline(always)]
            || ops::dropout_forward(out, x, mask),
        )
    });
}

/// The gradient passes where the weight was kept, scaled the same way.
pub fn dropout_backward(d_x: &mut [f32], d_out: &[f32], mask: &[f32]) {
    dropout_forward(d_x, d_out, mask);
}

/// The lesson's LayerNorm forward, a band of rows at a time: μ, σ² and y = (x − μ)·(1/σ)·w + b
/// with the lesson's operations in the lesson's order, 1/σ held in a register rather than read back
/// from its slice for every value.
pub fn layer_norm_forward(
    y: &mut [f32],
    (mean, rstd): (&mut [f32], &mut [f32]),
    x: &[f32],
    w: &[f32],
    b: &[f32],
) {
    let c = w.len();
    let rows = per_band(mean.len(), c);
    let bands = y.chunks_mut(rows * c).zip(x.chunks(rows * c));
    let stats = mean.chunks_mut(rows).zip(rstd.chunks_mut(rows));
    team::for_each(bands.zip(stats), |((y, x), (mean, rstd))| {
        vectorised(
            #[inline(always)]
            || {
                let rows = y.chunks_exact_mut(c).zip(x.chunks_exact(c));
                for ((y, x), (mean, rstd)) in rows.zip(mean.iter_mut().zip(rstd.iter_mut())) {
                    let mu = pairwise_sum_by(x, |v| v) / c as f32;
                    let variance = pairwise_sum_by(x, |v| (v - mu) * (v - mu)) / c as f32;
                    let r = 1.0 / (variance + ops::LAYER_NORM_EPS).sqrt();
                    (*mean, *rstd) = (mu, r);
                    for (((y, &x), w), b) in y.iter_mut().zip(x).zip(w).zip(b) {
                        *y = (x - mu) * r * w + b;
                    }
                }
            },
        )
    });
}

/// The lesson's LayerNorm backward. Each row's d_x depends on that row alone, so bands of rows
/// compute it; d_w and d_b are sums over the rows in order, so bands of columns compute those, each
/// going down all the rows. Both kinds of band are independent and run in one fork.
pub fn layer_norm_backward(
    d_x: &mut [f32],
    (d_w, d_b): (&mut [f32], &mut [f32]),
    d_out: &[f32],
    x: &[f32],
    w: &[f32],
    (mean, rstd): (&[f32], &[f32]),
) {
    let c = w.len();
    let rows = per_band(mean.len(), c);
    let cols = per_band(c, mean.len());
    let row_bands = d_x.chunks_mut(rows * c).enumerate().map(Band::Rows);
    let col_bands = d_w.chunks_mut(cols).zip(d_b.chunks_mut(cols));
    let col_bands = col_bands.enumerate().map(Band::Columns);
    team::for_each(row_bands.chain(col_bands), |band| match band {
        Band::Rows((i, d_x)) => {
            let first = i * rows;
            let stats = (&mean[first..], &rstd[first..]);
            let (d_out, x) = (&d_out[first * c..], &x[first * c..]);
            layer_norm_rows(d_x, d_out, x, w, stats);
        }
        Band::Columns((j, (d_w, d_b))) => {
            layer_norm_columns((d_w, d_b), j * cols, d_out, x, (mean, rstd), c)
        }
    });
}

/// One piece of [`layer_norm_backward`]: rows of d_x, or columns of d_w and d_b.
enum Band<'a> {
    Rows((usize, &'a mut [f32])),
    Columns((usize, (&'a mut [f32], &'a mut [f32]))),
}

/// d_x = (g − mean(g) − x̂·mean(g·x̂))/σ for the rows of `d_x`, as the lesson computes it.
fn layer_norm_rows(d_x: &mut [f32], d_out: &[f32], x: &[f32], w: &[f32], stats: (&[f32], &[f32])) {
    let c = w.len();
    let (mut x_hat, mut g, mut g_x_hat) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
    vectorised(
        #[inline(always)]
        || {
            let rows = d_x.chunks_exact_mut(c).zip(d_out.chunks_exact(c));
            let rows = rows.zip(x.chunks_exact(c)).zip(stats.0.iter().zip(stats.1));
            for (((d_x, d_out), x), (&mean, &rstd)) in rows {
                let scratch = x_hat.iter_mut().zip(g.iter_mut()).zip(g_x_hat.iter_mut());
                for (((x_hat, g), g_x_hat), ((&x, &d_out), &w)) in
                    scratch.zip(x.iter().zip(d_out).zip(w))
                {
                    *x_hat = (x - mean) * rstd;
                    *g = d_out * w;
                    *g_x_hat = *g * *x_hat;
                }
                let (g_mean, g_x_hat_mean) = (
                    pairwise_sum_by(&g, |v| v) / c as f32,
                    pairwise_sum_by(&g_x_hat, |v| v) / c as f32,
                );
                for ((d, &g), &x_hat) in d_x.iter_mut().zip(&g).zip(&x_hat) {
                    *d = (g - g_mean - x_hat * g_x_hat_mean) * rstd;
                }
            }
        },
    )
}

/// d_w = Σ over rows of d_out·x̂ and d_b = Σ over rows of d_out, in row order, for the columns from
/// `j0`; x̂ is recomputed with the lesson's operations, so it has the same bits. Sixteen columns at a
/// time go down all the rows with their running sums in registers.
fn layer_norm_columns(
    (d_w, d_b): (&mut [f32], &mut [f32]),
    j0: usize,
    d_out: &[f32],
    x: &[f32],
    (mean, rstd): (&[f32], &[f32]),
    c: usize,
) {
    const W: usize = 16;
    vectorised(
        #[inline(always)]
        || {
            let chunks = d_w.chunks_mut(W).zip(d_b.chunks_mut(W));
            for (q, (d_w, d_b)) in chunks.enumerate() {
                let (mut sum_w, mut sum_b) = ([0.0f32; W], [0.0f32; W]);
                let (j, width) = (j0 + q * W, d_w.len());
                let rows = d_out.chunks_exact(c).zip(x.chunks_exact(c));
                for ((d_out, x), (&mean, &rstd)) in rows.zip(mean.iter().zip(rstd)) {
                    let sums = sum_w.iter_mut().zip(sum_b.iter_mut());
                    for ((w, b), (&d_out, &x)) in sums.zip(d_out[j..j + width].iter().zip(&x[j..]))
                    {
                        let x_hat = (x - mean) * rstd;
                        *w += d_out * x_hat;
                        *b += d_out;
                    }
                }
                d_w.copy_from_slice(&sum_w[..width]);
                d_b.copy_from_slice(&sum_b[..width]);
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast mask is the lesson's, for lengths around its block, and both leave the generator
    /// at the same point of its stream.
    #[test]
    fn dropout_mask_is_the_lessons() {
        for (len, p) in [
            (0, 0.1),
            (1, 0.5),
            (1023, 0.1),
            (1024, 0.25),
            (1025, 0.9),
            (5000, 0.1),
        ] {
            let (mut lesson, mut fast) = (NumpyRandom::seed(7), NumpyRandom::seed(7));
            let (mut want, mut got) = (vec![0.0; len], vec![f32::NAN; len]);
            ops::dropout_mask(&mut want, &mut lesson, p);
            dropout_mask(&mut got, &mut fast, p);
            assert_eq!(got, want, "{len} weights, p = {p}");
            assert_eq!(fast.random_sample(), lesson.random_sample());
        }
    }
}
