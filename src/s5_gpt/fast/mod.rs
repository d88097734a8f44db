//! Fast layer. The [`Fast`] backend: the lesson's arithmetic, to the bit, in a fraction of the
//! time.
//!
//! | module | what it adds | why the bits stay the same |
//! |---|---|---|
//! | [`flash`] | the FlashAttention op's tiled form without dropout: sixteen query rows per vector, scores, softmax statistics and products in register tiles, query blocks (forward) or matrices (backward) on the threads | each lane does one row's operations in the lesson's order, over the lesson's tiles; every sum takes its terms in the lesson's order, by one fused multiply-add each |
//! | [`kernels`] | matrix products in tiles over blocks of k, B packed panel by panel (a transposed B in 8×8 squares); AVX-512 or AVX2 loops, with FMA; pairwise sums a vector block at a time | each output still adds its terms in the lesson's order, each with one fused multiply-add; a sum keeps the lesson's blocks and tree |
//! | [`tiles`] | the tile for each kind of core (12×32 or 8×32 AVX-512, 6×16 AVX2, plain) and the panel size for its L1 cache, chosen at start-up | every tile adds the same terms to an output in the same order |
//! | [`layers`] | scale, mask, heads, transpose, dropout and LayerNorm on the threads | each band runs the lesson's operations on whole rows, matrices or columns |
//! | [`team`] | the calling thread plus spinning helpers | work is split only along independent outputs, never inside a sum |
//! | [`peak`] | the core's own FMA limit, measured, for `--peak` and `--bench` | it times only its own chains |
//! | [`pool`] | buffers reused from step to step | every buffer is overwritten in full before it is read |
//! | [`timers`] | time per op, for `--bench` | timing reads the clock, not the numbers |
//! | [`wasm_fma`] | on WebAssembly, the products' fused multiply-adds from float64 lanes | float64 holds a·b exactly, and the rare sums that could round twice are finished exactly |
//!
//! The embeddings and the loss's backward pass, where little time goes, run the lesson's
//! functions, and so do the FlashAttention op's exact form and its forms with dropout
//! ([`super::flash`]); its tiled form without dropout runs [`flash`]'s kernels.
//! `tests/s5_layers.rs` checks every op, forward and backward, and whole training runs against the
//! lesson; `tests/s6_fast.rs` checks the FlashAttention kernels.

pub mod flash;
pub mod kernels;
pub mod layers;
pub mod peak;
pub mod pool;
pub mod team;
pub mod tiles;
pub mod timers;
pub mod wasm_fma;

use super::backend::{Backend, Lesson, Op, heads_shape, mkn, rows_cols};
use super::ops::{self, PROB_FLOOR};
use super::optim::{self, AdamWStep};
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;
use kernels::{Strided, matmul, matmul_batched, pairwise_sum_by, vectorised};
use pool::Pool;

/// The fast backend: the lesson's results from kernels, threads and reused buffers.
#[derive(Debug, Default)]
pub struct Fast {
    pool: Pool,
}

impl Fast {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Backend for Fast {
    fn buffer(&mut self, len: usize) -> Vec<f32> {
        self.pool.take(len)
    }

    fn recycle(&mut self, buffer: Vec<f32>) {
        self.pool.put(buffer);
    }

    // ANCHOR: fast_forward
    fn forward(&mut self, op: &mut Op, values: &[Tensor], out: &mut Tensor) {
        let v = |id: &NodeId| &values[id.0];
        let o = &mut out.data;
        match op {
            Op::MatMul { a, b } => {
                let (a, b) = (v(a), v(b));
                let batch = a.matrices().0;
                matmul_batched(o, (&a.data, false), (&b.data, false), batch, mkn(a, b));
            }
            Op::Add { a, b } => layers::add_forward(o, &v(a).data, &v(b).data),
            Op::Scale { x, s } => layers::scale_forward(o, &v(x).data, *s),
            Op::Tril { x, value } => layers::tril_forward(o, &v(x).data, v(x).last_dim(), *value),
            Op::Softmax { x } => softmax_rows(&v(x).data, o, v(x).last_dim()),
            Op::Transpose { x } => layers::transpose_forward(o, &v(x).data, rows_cols(v(x))),
            Op::SplitHeads { x, .. } => {
                layers::split_heads_forward(o, &v(x).data, heads_shape(&out.shape))
            }
            Op::MergeHeads { x } => {
                layers::merge_heads_forward(o, &v(x).data, heads_shape(&v(x).shape))
            }
            Op::Dropout { x, mask } => layers::dropout_forward(o, &v(x).data, mask),
            Op::Gelu { x, tanh } => {
                *tanh = self.pool.take(o.len());
                gelu(o, tanh, &v(x).data);
            }
            Op::Linear { x, w, b } => {
                let (x, w, b) = (v(x), v(w), v(b));
                let (n_out, n_in) = (w.shape[0], w.shape[1]);
                let (x_rows, w_t) = (
                    Strided::rows(&x.data, n_in),
                    Strided::transposed(&w.data, n_in),
                );
                let rows = o.len() / n_out; // N = B·T
                matmul(o, x_rows, w_t, Some(&b.data), (rows, n_in, n_out)); // (N, out)
            }
            Op::CrossEntropy {
                logits,
                targets,
                probs,
            } => {
                *probs = self.pool.take(v(logits).data.len());
                o[0] = self.cross_entropy(probs, &v(logits).data, targets);
            }
            Op::LayerNorm {
                x,
                w,
                b,
                mean,
                rstd,
            } => {
                let rows = o.len() / v(w).data.len();
                (*mean, *rstd) = (self.pool.take(rows), self.pool.take(rows));
                let (x, w, b) = (&v(x).data, &v(w).data, &v(b).data);
                layers::layer_norm_forward(o, (mean, rstd), x, w, b);
            }
            Op::FlashAttention(node) if flash::runs(node) => flash::forward(node, values, o),
            _ => Lesson.forward(op, values, out),
        }
    }
    // ANCHOR_END: fast_forward

    fn backward(
        &mut self,
        op: &Op,
        values: &[Tensor],
        out: &Tensor,
        d_out: &[f32],
        d_inputs: &mut [Vec<f32>],
    ) {
        let v = |id: &NodeId| &values[id.0];
        match (op, &mut *d_inputs) {
            (Op::MatMul { a, b }, [d_a, d_b]) => {
                let (a, b) = (v(a), v(b));
                let (batch, (m, k, n)) = (a.matrices().0, mkn(a, b));
                let mut pieces = Vec::new();
                let (d_c, a, b) = ((d_out, false), (&a.data[..], true), (&b.data[..], true));
                kernels::matmul_batched_pieces(&mut pieces, d_a, d_c, b, batch, (m, n, k));
                kernels::matmul_batched_pieces(
                    &mut pieces,
                    d_b,
                    a,
                    (d_out, false),
                    batch,
                    (k, m, n),
                );
                kernels::run(pieces);
            }
            (Op::Add { .. }, [d_a, d_b]) => layers::add_backward(d_a, d_b, d_out),
            (Op::Scale { s, .. }, [d_x]) => layers::scale_backward(d_x, d_out, *s),
            (Op::Tril { x, .. }, [d_x]) => layers::tril_backward(d_x, d_out, v(x).last_dim()),
            (Op::Softmax { .. }, [d_x]) => {
                layers::softmax_backward(d_x, d_out, &out.data, out.last_dim())
            }
            (Op::Transpose { x }, [d_x]) => layers::transpose_backward(d_x, d_out, rows_cols(v(x))),
            (Op::SplitHeads { .. }, [d_x]) => {
                layers::split_heads_backward(d_x, d_out, heads_shape(&out.shape))
            }
            (Op::MergeHeads { x }, [d_x]) => {
                layers::merge_heads_backward(d_x, d_out, heads_shape(&v(x).shape))
            }
            (Op::Dropout { mask, .. }, [d_x]) => layers::dropout_backward(d_x, d_out, mask),
            (
                Op::LayerNorm {
                    x, w, mean, rstd, ..
                },
                [d_x, d_w, d_b],
            ) => {
                let (x, w) = (&v(x).data, &v(w).data);
                layers::layer_norm_backward(d_x, (d_w, d_b), d_out, x, w, (mean, rstd));
            }
            (Op::Gelu { x, tanh }, [d_x]) => gelu_backward(d_x, d_out, &v(x).data, tanh),
            (Op::Linear { x, w, .. }, [d_x, d_w, d_b]) => {
                linear_backward(d_x, d_w, d_b, d_out, &v(x).data, &v(w).data)
            }
            (Op::FlashAttention(node), [d_v, d_q, d_k]) if flash::runs(node) => {
                flash::backward(node, values, (&out.data, d_out), [d_v, d_q, d_k])
            }
            _ => Lesson.backward(op, values, out, d_out, d_inputs),
        }
    }

    fn dropout_mask(&mut self, mask: &mut [f32], rng: &mut NumpyRandom, p: f64) {
        layers::dropout_mask(mask, rng, p);
    }

    fn clip_grad_norm(&mut self, grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
        clip_grad_norm(grads, max_norm)
    }

    fn adamw_update(
        &mut self,
        params: &mut [Tensor],
        grads: &[Vec<f32>],
        moments: (&mut [Vec<f32>], &mut [Vec<f32>]),
        step: &AdamWStep,
    ) {
        adamw_update(params, grads, moments, step);
    }
}

/// Below this, `expf` is exactly +0 in float32 (it underflows below about −103.97).
const EXP_ZERO_BELOW: f32 = -104.0;

/// The lesson's softmax of one row. The exponentials come from [`kernels::expf`], a vector at a time,
/// and from `libm::expf` itself where that one does not cover (near underflow), or 0 where the
/// library gives exactly 0 (masked scores): the library's bits either way.
#[inline(always)]
fn softmax_row(x: &[f32], out: &mut [f32]) {
    let max = row_max(x);
    // A causal row ends in masked scores: their exponentials are 0, and are not computed.
    let live = x
        .iter()
        .rposition(|&v| !exp_is_zero(v - max))
        .map_or(0, |i| i + 1);
    out[live..].fill(0.0);
    // Selects, not branches, so that the loop runs a vector of lanes at a time; `rare` notes a score
    // near underflow (or NaN), which takes the library's own call below.
    let mut rare = false;
    for (o, &v) in out[..live].iter_mut().zip(x) {
        let d = v - max;
        let zero = exp_is_zero(d);
        rare |= !kernels::expf_covers(d) & !zero;
        *o = if zero { 0.0 } else { kernels::expf(d) };
    }
    if rare {
        for (o, &v) in out.iter_mut().zip(x) {
            let d = v - max;
            if !kernels::expf_covers(d) && !exp_is_zero(d) {
                *o = libm::expf(d);
            }
        }
    }
    let sum = pairwise_sum_by(out, |v| v);
    out.iter_mut().for_each(|o| *o /= sum);
}

/// Whether `libm::expf(d)` is exactly +0 (false for NaN).
#[inline(always)]
fn exp_is_zero(d: f32) -> bool {
    d < EXP_ZERO_BELOW
}

/// The largest value of `x`, as the lesson's `fold` of `f32::max` finds it, but eight lanes at a
/// time. A maximum does not depend on the order it is taken in: only the sign of a zero maximum
/// could, and `v − max` is then the same for every `v` except ±0, whose exponential is 1 either way.
/// A comparison, not `f32::max`, keeps the larger: the same value (a NaN is passed over either
/// way), and no call to `fmaxf` per value in WebAssembly.
#[inline(always)]
fn row_max(x: &[f32]) -> f32 {
    let larger = |m: f32, v: f32| if v > m { v } else { m };
    let mut lanes = [f32::NEG_INFINITY; 8];
    let rows = x.chunks_exact(8);
    let rest = rows.remainder();
    for row in rows {
        lanes
            .iter_mut()
            .zip(row)
            .for_each(|(m, &v)| *m = larger(*m, v));
    }
    lanes
        .iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| larger(m, v))
}

/// [`softmax_row`] of every row of `x` (rows of `width`) into `out`, in bands of rows (two per
/// thread, so that a helper the machine runs late leaves less to the calling thread at the end).
fn softmax_rows(x: &[f32], out: &mut [f32], width: usize) {
    let band = layers::per_band(x.len() / width, width) * width;
    team::for_each(x.chunks(band).zip(out.chunks_mut(band)), |(x, out)| {
        vectorised(
            #[inline(always)]
            || {
                for (x, o) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
                    softmax_row(x, o);
                }
            },
        )
    });
}

impl Fast {
    /// The lesson's cross-entropy, with the softmax shared among the threads and the logs from the
    /// pool.
    fn cross_entropy(&mut self, probs: &mut [f32], logits: &[f32], targets: &[usize]) -> f32 {
        let v = logits.len() / targets.len();
        softmax_rows(logits, probs, v);
        let mut logs = self.pool.take(targets.len());
        for ((log, p), &y) in logs.iter_mut().zip(probs.chunks_exact(v)).zip(targets) {
            *log = libm::logf(p[y].clamp(PROB_FLOOR, 1.0));
        }
        let loss = 0.0 - pairwise_sum_by(&logs, |v| v) / targets.len() as f32;
        self.pool.put(logs);
        loss
    }
}

/// Splits `len` elements into blocks of a multiple of 64, two per thread.
fn block_per_thread(len: usize) -> usize {
    layers::per_band(len.div_ceil(64), 64) * 64
}

/// The lesson's GELU forward, a block of elements per thread. Compiled for AVX-512 (or AVX2), the
/// lesson's own loop runs sixteen (or eight) elements per instruction: [`ops::tanh`] computes both
/// of its branches and then picks one, so each lane does exactly the scalar operations.
fn gelu(out: &mut [f32], tanh: &mut [f32], x: &[f32]) {
    let block = block_per_thread(out.len());
    let blocks = out.chunks_mut(block).zip(tanh.chunks_mut(block));
    team::for_each(blocks.zip(x.chunks(block)), |((out, tanh), x)| {
        vectorised(
            #[inline(always)]
            || ops::gelu_forward(out, tanh, x),
        )
    });
}

/// The lesson's GELU backward, a block of elements per thread.
fn gelu_backward(d_x: &mut [f32], d_out: &[f32], x: &[f32], tanh: &[f32]) {
    let block = block_per_thread(d_x.len());
    let blocks = d_x.chunks_mut(block).zip(x.chunks(block));
    let blocks = blocks.zip(tanh.chunks(block)).zip(d_out.chunks(block));
    team::for_each(blocks, |(((d_x, x), tanh), g)| {
        vectorised(
            #[inline(always)]
            move || ops::gelu_backward(d_x, g, x, tanh),
        )
    });
}

/// With G and X flattened to (N, ·): dx = G·W, dW = Gᵀ·X and db = Σ_rows G, all in one fork.
fn linear_backward(
    d_x: &mut [f32],
    d_w: &mut [f32],
    d_b: &mut [f32],
    g: &[f32],
    x: &[f32],
    w: &[f32],
) {
    let (n_out, n_in) = (d_b.len(), d_w.len() / d_b.len());
    let rows = x.len() / n_in;
    let (g_rows, g_t) = (Strided::rows(g, n_out), Strided::transposed(g, n_out));
    let (w_rows, x_rows) = (Strided::rows(w, n_in), Strided::rows(x, n_in));
    let mut pieces: Vec<kernels::Piece> = vec![Box::new(|| {
        d_b.fill(0.0);
        vectorised(
            #[inline(always)]
            || {
                for row in g.chunks_exact(n_out) {
                    d_b.iter_mut().zip(row).for_each(|(d, g)| *d += g);
                }
            },
        )
    })];
    kernels::matmul_pieces(&mut pieces, d_x, g_rows, w_rows, None, (rows, n_out, n_in));
    kernels::matmul_pieces(&mut pieces, d_w, g_t, x_rows, None, (n_out, rows, n_in));
    kernels::run(pieces);
}

/// Elements per piece of work when the threads share out AdamW's update.
const BLOCK: usize = 8192;

/// The lesson's AdamW update, in blocks of elements shared among the threads, each in vector lanes.
fn adamw_update(
    params: &mut [Tensor],
    grads: &[Vec<f32>],
    (m, v): (&mut [Vec<f32>], &mut [Vec<f32>]),
    step: &AdamWStep,
) {
    let tensors = params
        .iter_mut()
        .zip(grads)
        .zip(m.iter_mut().zip(v.iter_mut()));
    let blocks = tensors.flat_map(|((p, g), (m, v))| {
        let decay = p.ndim() >= 2;
        let (w, g) = (p.data.chunks_mut(BLOCK), g.chunks(BLOCK));
        let (m, v) = (m.chunks_mut(BLOCK), v.chunks_mut(BLOCK));
        w.zip(g)
            .zip(m.zip(v))
            .map(move |(w_g, m_v)| (w_g, m_v, decay))
    });
    let step = *step;
    team::for_each(blocks, |((w, g), (m, v), decay)| {
        // `move` copies the step's numbers into the closure, so the compiler keeps them in
        // registers.
        vectorised(
            #[inline(always)]
            move || optim::adamw_update(w, g, m, v, &step, decay),
        );
    });
}

/// The lesson's clipping: each tensor's Σg² on any thread (largest first, so the threads get even
/// shares), the float64 total in the tensors' order, then the scaling shared among the threads.
fn clip_grad_norm(grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
    let mut sums = vec![0.0f32; grads.len()];
    let mut tensors: Vec<_> = sums.iter_mut().zip(grads.iter()).collect();
    tensors.sort_by_key(|(_, g)| std::cmp::Reverse(g.len()));
    team::for_each(tensors, |(sum, g)| {
        *sum = vectorised(
            #[inline(always)]
            || pairwise_sum_by(g, |x| x * x),
        )
    });
    let total = sums.iter().fold(0.0f64, |total, &s| total + f64::from(s));
    let norm = total.sqrt();
    if norm > max_norm && max_norm > 0.0 {
        let scale = max_norm / (norm + 1e-6);
        team::for_each(grads.iter_mut(), |g| {
            vectorised(
                #[inline(always)]
                || {
                    g.iter_mut()
                        .for_each(|x| *x = (f64::from(*x) * scale) as f32)
                },
            )
        });
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::EXP_ZERO_BELOW;

    #[test]
    fn expf_is_exactly_zero_below_the_cut() {
        // Every float32 from just below the cut down to −∞ (bit patterns grow with the magnitude).
        let first = EXP_ZERO_BELOW.to_bits() + 1;
        for bits in first..=f32::NEG_INFINITY.to_bits() {
            let e = libm::expf(f32::from_bits(bits));
            assert_eq!(e.to_bits(), 0, "expf({}) = {e}", f32::from_bits(bits));
        }
    }

    /// Masked scores skip the call: after subtracting the row's maximum they are far below the cut.
    const _: () = assert!(crate::s5_gpt::ops::MASK_VALUE < EXP_ZERO_BELOW);

    /// The lanes' maximum is the lesson's sequential one, on rows of every length up to 70 with
    /// NaNs, infinities, signed zeros and ties.
    #[test]
    fn row_max_is_the_sequential_maximum() {
        let mut rng = crate::rng::numpy::NumpyRandom::seed(9);
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1.0];
        for len in 0..70 {
            for trial in 0..50 {
                let x: Vec<f32> = (0..len)
                    .map(|i| match (trial + i) % 7 {
                        0 if trial % 3 == 0 => specials[(trial + i) % specials.len()],
                        _ => rng.standard_normal() as f32,
                    })
                    .collect();
                let want = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
                let got = super::row_max(&x);
                assert!(got == want || got.is_nan() && want.is_nan(), "{x:?}");
            }
        }
    }

    /// The fast softmax is the lesson's to the bit, rows of masked scores, near-underflow scores
    /// and signed zeros included.
    #[test]
    fn softmax_row_is_the_lessons() {
        use crate::s5_gpt::ops::{MASK_VALUE, softmax_forward};
        let mut rng = crate::rng::numpy::NumpyRandom::seed(10);
        for width in [1, 7, 8, 9, 64, 65] {
            for trial in 0..200 {
                let x: Vec<f32> = (0..width)
                    .map(|i| match (trial * 31 + i * 7) % 11 {
                        0 => MASK_VALUE,
                        1 => -90.0 - (i % 14) as f32,
                        2 => {
                            if i % 2 == 0 {
                                0.0
                            } else {
                                -0.0
                            }
                        }
                        _ => 4.0 * rng.standard_normal() as f32,
                    })
                    .collect();
                let mut want = vec![0.0; width];
                softmax_forward(&mut want, &x, width);
                let mut got = vec![0.0; width];
                super::softmax_row(&x, &mut got);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{x:?}");
            }
        }
    }
}
