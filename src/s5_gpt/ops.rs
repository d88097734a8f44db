//! The operations the GPT needs, each as a forward pass next to its gradient.
//!
//! These are the seed tutorial's `Tensor` operators (`+`, `@`, `transpose`, `*`) and its layers
//! (`Embedding`, `Linear`, `Softmax`, and the chapter's own `Tril`, `GELU` and `GPTLoss`). Each forward
//! method appends its output to the [`Tape`] together with an `Op` that remembers the inputs; the matching
//! `*_backward` function right below it is the tutorial's `gradient_fn` closure.
//!
//! Arithmetic follows the tutorial's NumPy float32 rules, including the few places where NumPy 2 computes in
//! float64 and rounds back (GELU with its float64 constant √(2/π)); sums along a row use NumPy's
//! [`pairwise_sum`]. Shapes use B batch, T tokens, C channels, V vocabulary, N = B·T rows.

use super::bench::Part;
use super::kernels::{self, Strided, matmul, matmul_batched, pairwise_sum};
use super::tape::{Grads, NodeId, Spare, Tape, Tensor};
use super::team;

/// What made a node, with what its gradient needs.
#[derive(Debug)]
pub(super) enum Op {
    /// A parameter or an input: nothing to propagate.
    Leaf,
    Embedding {
        table: NodeId,
        ids: Vec<usize>,
    },
    Add {
        a: NodeId,
        b: NodeId,
    },
    Transpose {
        a: NodeId,
    },
    MatMul {
        a: NodeId,
        b: NodeId,
    },
    Scale {
        a: NodeId,
        s: f32,
    },
    Tril {
        a: NodeId,
    },
    Softmax {
        a: NodeId,
    },
    Gelu {
        x: NodeId,
        tanh: Vec<f64>,
    },
    Linear {
        x: NodeId,
        w: NodeId,
        b: NodeId,
    },
    CrossEntropy {
        logits: NodeId,
        targets: Vec<usize>,
        softmax: Vec<f32>,
    },
}

impl Op {
    /// Runs this node's gradient: `g` is the gradient of `out`, the node's own value.
    pub(super) fn backward(&self, g: &[f32], out: &Tensor, values: &[Tensor], grads: &mut Grads) {
        let v = |id: &NodeId| &values[id.0];
        match self {
            Op::Leaf => {}
            Op::Embedding { table, ids } => embedding_backward(g, ids, *table, v(table), grads),
            Op::Add { a, b } => add_backward(g, *a, *b, v(b), grads),
            Op::Transpose { a } => transpose_backward(g, *a, v(a), grads),
            Op::MatMul { a, b } => matmul_backward(g, (*a, v(a)), (*b, v(b)), grads),
            Op::Scale { a, s } => scale_backward(g, *a, *s, grads),
            Op::Tril { a } => tril_backward(g, *a, v(a), grads),
            Op::Softmax { a } => softmax_backward(g, *a, out, grads),
            Op::Gelu { x, tanh } => gelu_backward(g, *x, v(x), tanh, grads),
            Op::Linear { x, w, b } => linear_backward(g, (*x, v(x)), (*w, v(w)), *b, grads),
            Op::CrossEntropy {
                logits,
                targets,
                softmax,
            } => cross_entropy_backward(g[0], *logits, targets, softmax, grads),
        }
    }

    /// The part of a training step this op counts towards in [`super::bench`]'s breakdown.
    pub(super) fn part(&self) -> Part {
        match self {
            Op::MatMul { .. } | Op::Linear { .. } => Part::Products,
            Op::Scale { .. } | Op::Tril { .. } | Op::Softmax { .. } => Part::Softmax,
            Op::Gelu { .. } => Part::Gelu,
            Op::CrossEntropy { .. } => Part::Loss,
            Op::Leaf | Op::Embedding { .. } | Op::Add { .. } | Op::Transpose { .. } => Part::Rest,
        }
    }

    /// Gives the buffers this node kept for its gradient back to `spare`, for the next step.
    pub(super) fn recycle(self, spare: &mut Spare) {
        match self {
            Op::Gelu { tanh, .. } => spare.put_f64(tanh),
            Op::CrossEntropy { softmax, .. } => spare.put(softmax),
            _ => {}
        }
    }
}

// ANCHOR: embedding
impl Tape {
    /// `Embedding.forward`: gathers one row of `table` (V, C) per id. `shape` is the ids' shape, (B, T) or (T).
    pub fn embedding(&mut self, table: NodeId, ids: &[usize], shape: &[usize]) -> NodeId {
        let c = self.value(table).last_dim();
        let mut out = self.spare.take(ids.len() * c);
        let t = self.value(table);
        for (&id, row) in ids.iter().zip(out.chunks_exact_mut(c)) {
            assert!(
                id < t.shape[0],
                "token id {id} outside the table's {} rows",
                t.shape[0]
            );
            row.copy_from_slice(&t.data[id * c..(id + 1) * c]);
        }
        let out = Tensor::new(&[shape, &[c]].concat(), out); // (B, T, C)
        self.push(
            out,
            Op::Embedding {
                table,
                ids: ids.to_vec(),
            },
        )
    }
}

/// `np.add.at(weight.grad, ids, g)`: each row of `g` is added to its id's row, in order.
fn embedding_backward(g: &[f32], ids: &[usize], table: NodeId, t: &Tensor, grads: &mut Grads) {
    let c = t.last_dim();
    let dt = grads.buffer(table, t.data.len()); // (V, C)
    for (&id, g_row) in ids.iter().zip(g.chunks_exact(c)) {
        dt[id * c..(id + 1) * c]
            .iter_mut()
            .zip(g_row)
            .for_each(|(d, g)| *d += g);
    }
}
// ANCHOR_END: embedding

// ANCHOR: add
impl Tape {
    /// `a + b` with NumPy broadcasting of `b` over the leading axes of `a`, e.g. (B, T, C) + (T, C).
    pub fn add(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let mut out = self.spare.take(self.value(a).data.len());
        let (av, bv) = (self.value(a), self.value(b));
        assert!(
            av.shape.ends_with(&bv.shape),
            "cannot broadcast {:?} onto {:?}",
            bv.shape,
            av.shape
        );
        let rows = out
            .chunks_exact_mut(bv.data.len())
            .zip(av.data.chunks_exact(bv.data.len()));
        for (o, a) in rows {
            o.iter_mut()
                .zip(a.iter().zip(&bv.data))
                .for_each(|(o, (a, b))| *o = a + b);
        }
        let out = Tensor::new(&av.shape, out); // (B, T, C)
        self.push(out, Op::Add { a, b })
    }
}

/// `_unbroadcast`: `a` takes `g` as it is; `b` takes `g` summed over the leading axes, in order.
fn add_backward(g: &[f32], a: NodeId, b: NodeId, bv: &Tensor, grads: &mut Grads) {
    let mut db = grads.spare.zeros(bv.data.len()); // (T, C)
    for row in g.chunks_exact(db.len()) {
        db.iter_mut().zip(row).for_each(|(d, g)| *d += g);
    }
    let mut da = grads.spare.take(g.len()); // (B, T, C)
    da.copy_from_slice(g);
    grads.add(a, da);
    grads.add(b, db);
}
// ANCHOR_END: add

/// Splits a shape (…, R, C) into (batch, R, C).
fn matrices(shape: &[usize]) -> (usize, usize, usize) {
    let n = shape.len();
    assert!(n >= 2, "need at least two axes, got {shape:?}");
    (shape[..n - 2].iter().product(), shape[n - 2], shape[n - 1])
}

/// Writes the transpose of each matrix of `src` (batch, rows, cols) into `dst` (batch, cols, rows).
fn transpose_each(dst: &mut [f32], src: &[f32], (_, rows, cols): (usize, usize, usize)) {
    let matrices = dst
        .chunks_exact_mut(rows * cols)
        .zip(src.chunks_exact(rows * cols));
    for (dst, src) in matrices {
        for (i, row) in src.chunks_exact(cols).enumerate() {
            for (j, &v) in row.iter().enumerate() {
                dst[j * rows + i] = v;
            }
        }
    }
}

// ANCHOR: transpose
impl Tape {
    /// `x.transpose((0, 2, 1))`: swaps the last two axes, (B, T, C) → (B, C, T).
    pub fn transpose(&mut self, a: NodeId) -> NodeId {
        let mut out = self.spare.take(self.value(a).data.len());
        let av = self.value(a);
        transpose_each(&mut out, &av.data, matrices(&av.shape));
        let mut shape = av.shape.clone();
        let n = shape.len();
        shape.swap(n - 2, n - 1);
        let out = Tensor::new(&shape, out); // (B, C, T)
        self.push(out, Op::Transpose { a })
    }
}

/// The inverse permutation is the same swap.
fn transpose_backward(g: &[f32], a: NodeId, av: &Tensor, grads: &mut Grads) {
    let (batch, r, c) = matrices(&av.shape);
    let mut da = grads.spare.take(g.len()); // (B, T, C)
    transpose_each(&mut da, g, (batch, c, r));
    grads.add(a, da);
}
// ANCHOR_END: transpose

// ANCHOR: matmul
impl Tape {
    /// `a @ b` for stacks of matrices: (…, M, K) @ (…, K, N) → (…, M, N), e.g. x @ xᵀ: (B, T, C) @ (B, C, T).
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (batch, m, k) = matrices(&self.value(a).shape);
        let (batch_b, k_b, n) = matrices(&self.value(b).shape);
        let mut out = self.spare.take(batch * m * n);
        let (av, bv) = (self.value(a), self.value(b));
        assert!(
            batch == batch_b && k == k_b,
            "cannot multiply {:?} by {:?}",
            av.shape,
            bv.shape
        );
        let (a_rows, b_rows) = ((&av.data[..], false), (&bv.data[..], false));
        matmul_batched(&mut out, a_rows, b_rows, batch, (m, k, n));
        let mut shape = av.shape.clone();
        *shape.last_mut().unwrap() = n;
        let out = Tensor::new(&shape, out); // (B, T, T)
        self.push(out, Op::MatMul { a, b })
    }
}

/// dA = G·Bᵀ and dB = Aᵀ·G, matrix by matrix; the transposes are read through strides.
fn matmul_backward(
    g: &[f32],
    (a, av): (NodeId, &Tensor),
    (b, bv): (NodeId, &Tensor),
    grads: &mut Grads,
) {
    let (batch, m, k) = matrices(&av.shape);
    let n = bv.last_dim();
    let mut da = grads.spare.take(av.data.len()); // (…, M, K)
    let mut db = grads.spare.take(bv.data.len()); // (…, K, N)
    team::join(
        || matmul_batched(&mut da, (g, false), (&bv.data, true), batch, (m, n, k)),
        || matmul_batched(&mut db, (&av.data, true), (g, false), batch, (k, m, n)),
    );
    grads.add(a, da);
    grads.add(b, db);
}
// ANCHOR_END: matmul

// ANCHOR: scale
impl Tape {
    /// `x * s` for a scalar `s` that is not trained (the attention's 1/√C).
    pub fn scale(&mut self, a: NodeId, s: f32) -> NodeId {
        let mut out = self.spare.take(self.value(a).data.len());
        let av = self.value(a);
        out.iter_mut().zip(&av.data).for_each(|(o, x)| *o = x * s);
        let out = Tensor::new(&av.shape, out); // (B, T, T)
        self.push(out, Op::Scale { a, s })
    }
}

/// `g * s`.
fn scale_backward(g: &[f32], a: NodeId, s: f32, grads: &mut Grads) {
    let mut da = grads.spare.take(g.len());
    da.iter_mut().zip(g).for_each(|(d, g)| *d = g * s);
    grads.add(a, da);
}
// ANCHOR_END: scale

// ANCHOR: tril
/// The value masked scores take: −1e9 as float32, so that softmax gives them a weight of exactly 0.
pub const MASK_VALUE: f32 = -1e9;

/// Calls `f(i, j, element)` for every element of each (rows, cols) matrix in `data`.
fn for_each_ij(
    data: &mut [f32],
    rows: usize,
    cols: usize,
    mut f: impl FnMut(usize, usize, &mut f32),
) {
    for matrix in data.chunks_exact_mut(rows * cols) {
        for (i, row) in matrix.chunks_exact_mut(cols).enumerate() {
            row.iter_mut().enumerate().for_each(|(j, x)| f(i, j, x));
        }
    }
}

impl Tape {
    /// `Tril`: keeps the lower triangle of the last two axes, diagonal included, and writes −1e9 above it.
    /// Token t may then attend to tokens 0..=t only.
    pub fn tril(&mut self, a: NodeId) -> NodeId {
        let mut out = self.spare.take(self.value(a).data.len());
        let av = self.value(a);
        let (_, r, c) = matrices(&av.shape);
        out.copy_from_slice(&av.data);
        for_each_ij(&mut out, r, c, |i, j, x| {
            if j > i {
                *x = MASK_VALUE;
            }
        });
        let out = Tensor::new(&av.shape, out); // (B, T, T)
        self.push(out, Op::Tril { a })
    }
}

/// `x.grad += p.grad * keep`: the gradient passes where the score was kept and is 0 above the diagonal.
fn tril_backward(g: &[f32], a: NodeId, av: &Tensor, grads: &mut Grads) {
    let (_, r, c) = matrices(&av.shape);
    let mut da = grads.spare.take(g.len());
    da.copy_from_slice(g);
    for_each_ij(&mut da, r, c, |i, j, d| {
        if j > i {
            *d = 0.0;
        }
    });
    grads.add(a, da);
}
// ANCHOR_END: tril

// ANCHOR: softmax
/// Below this, `expf` is exactly +0 in float32 (it underflows below about −103.97), so the call is skipped.
const EXP_ZERO_BELOW: f32 = -104.0;

/// exp(x − max) / Σ exp(x − max) along one row, in float32. Masked scores (−1e9) get exactly 0 without
/// calling `expf`.
fn softmax_row(x: &[f32], out: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for (o, &v) in out.iter_mut().zip(x) {
        let d = v - max;
        *o = if d < EXP_ZERO_BELOW {
            0.0
        } else {
            libm::expf(d)
        };
    }
    let sum = pairwise_sum(out);
    out.iter_mut().for_each(|o| *o /= sum);
}

/// [`softmax_row`] of every row of `x` (rows of `width`) into `out`, a band of rows per thread.
fn softmax_rows(x: &[f32], out: &mut [f32], width: usize) {
    let band = (x.len() / width).div_ceil(team::threads()) * width;
    team::for_each(x.chunks(band).zip(out.chunks_mut(band)), |(x, out)| {
        for (x, o) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
            softmax_row(x, o);
        }
    });
}

impl Tape {
    /// `Softmax(axis=-1)`: each row of the last axis becomes weights that sum to 1.
    pub fn softmax(&mut self, a: NodeId) -> NodeId {
        let mut out = self.spare.take(self.value(a).data.len());
        let av = self.value(a);
        softmax_rows(&av.data, &mut out, av.last_dim());
        let out = Tensor::new(&av.shape, out); // (B, T, T)
        self.push(out, Op::Softmax { a })
    }
}

/// dx = s ⊙ (g − Σ s ⊙ g), row by row; `s` is the softmax output.
fn softmax_backward(g: &[f32], a: NodeId, s: &Tensor, grads: &mut Grads) {
    let c = s.last_dim();
    let mut da = grads.spare.take(g.len());
    let mut sg = grads.spare.take(c);
    for ((s, g), d) in s
        .data
        .chunks_exact(c)
        .zip(g.chunks_exact(c))
        .zip(da.chunks_exact_mut(c))
    {
        sg.iter_mut()
            .zip(s.iter().zip(g))
            .for_each(|(p, (s, g))| *p = s * g);
        let dot = pairwise_sum(&sg);
        d.iter_mut()
            .zip(s.iter().zip(g))
            .for_each(|(d, (s, g))| *d = s * (g - dot));
    }
    grads.spare.put(sg);
    grads.add(a, da);
}
// ANCHOR_END: softmax

// ANCHOR: gelu
/// √(2/π) as NumPy computes it: a float64 scalar, which makes the GELU arithmetic below float64.
fn gelu_c() -> f64 {
    (2.0 / std::f64::consts::PI).sqrt()
}

/// Splits `len` elements into one block per thread, a multiple of 64 each.
fn block_per_thread(len: usize) -> usize {
    len.div_ceil(team::threads()).next_multiple_of(64).max(64)
}

impl Tape {
    /// GELU, tanh form: 0.5·x·(1 + tanh(c·(x + 0.044715·x³))).
    ///
    /// As in the tutorial, `x³` and `x + 0.044715·x³` are float32, the rest float64 (because `c` is a
    /// float64 scalar), and the output is stored as float32. tanh is kept for the backward pass.
    pub fn gelu(&mut self, x: NodeId) -> NodeId {
        let len = self.value(x).data.len();
        let (mut out, mut tanh) = (self.spare.take(len), self.spare.take_f64(len));
        let xv = self.value(x);
        let c = gelu_c();
        // A block of elements per thread; each element's arithmetic is the same wherever it runs.
        let block = block_per_thread(len);
        let blocks = out.chunks_mut(block).zip(tanh.chunks_mut(block));
        team::for_each(blocks.zip(xv.data.chunks(block)), |((out, tanh), x)| {
            kernels::vectorised(
                #[inline(always)]
                || gelu_block(out, tanh, x, c),
            )
        });
        let out = Tensor::new(&xv.shape, out); // (B, T, 4C)
        self.push(out, Op::Gelu { x, tanh })
    }
}

/// Elements GELU works on at once: four AVX2 vectors of float64, whose tanh chains run side by side.
const LANES: usize = 16;

/// GELU of one block of elements; `tanh` gets each element's tanh.
#[inline(always)]
fn gelu_block(out: &mut [f32], tanh: &mut [f64], x: &[f32], c: f64) {
    let arg = |x: f32| {
        let cube = (f64::from(x) * f64::from(x) * f64::from(x)) as f32; // x ** 3
        c * f64::from(x + 0.044715f32 * cube)
    };
    let gelu = |x: f32, t: f64| (f64::from(0.5f32 * x) * (1.0 + t)) as f32;
    let lanes = out
        .chunks_mut(LANES)
        .zip(tanh.chunks_mut(LANES))
        .zip(x.chunks(LANES));
    for ((out, tanh), x) in lanes {
        if let Ok(x) = <[f32; LANES]>::try_from(x) {
            tanh.copy_from_slice(&kernels::tanh(x.map(arg)));
        } else {
            // The last, shorter group: one element at a time, with the same operations.
            for (t, &x) in tanh.iter_mut().zip(x) {
                *t = kernels::tanh([arg(x)])[0];
            }
        }
        for ((o, &t), &x) in out.iter_mut().zip(&*tanh).zip(x) {
            *o = gelu(x, t);
        }
    }
}

/// The exact derivative of the tanh form: 0.5(1+t) + 0.5·x·(1−t²)·c·(1 + 3·0.044715·x²).
fn gelu_backward(g: &[f32], x: NodeId, xv: &Tensor, tanh: &[f64], grads: &mut Grads) {
    let c = gelu_c();
    let k = (3.0f64 * 0.044715) as f32;
    let mut dx = grads.spare.take(g.len());
    let block = block_per_thread(g.len());
    let blocks = dx.chunks_mut(block).zip(xv.data.chunks(block));
    let blocks = blocks.zip(tanh.chunks(block)).zip(g.chunks(block));
    team::for_each(blocks, |(((dx, x), tanh), g)| {
        kernels::vectorised(
            #[inline(always)]
            move || {
                for (((dx, &x), &t), &g) in dx.iter_mut().zip(x).zip(tanh).zip(g) {
                    let slope = f64::from(1.0f32 + k * (x * x));
                    let d = 0.5 * (1.0 + t) + f64::from(0.5f32 * x) * (1.0 - t * t) * c * slope;
                    *dx = (f64::from(g) * d) as f32;
                }
            },
        )
    });
    grads.add(x, dx);
}
// ANCHOR_END: gelu

// ANCHOR: linear
impl Tape {
    /// `Linear`: y = x·Wᵀ + b over any leading axes; W is (out, in) as in the tutorial, b is (out).
    pub fn linear(&mut self, x: NodeId, w: NodeId, b: NodeId) -> NodeId {
        let (n_out, n_in) = (self.value(w).shape[0], self.value(w).shape[1]);
        let rows = self.value(x).data.len() / n_in; // N = B·T
        let mut y = self.spare.take(rows * n_out);
        let (xv, wv, bv) = (self.value(x), self.value(w), self.value(b));
        assert_eq!(
            xv.last_dim(),
            n_in,
            "Linear({n_in}, {n_out}) got input {:?}",
            xv.shape
        );
        let (x_rows, w_t) = (
            Strided::rows(&xv.data, n_in),
            Strided::transposed(&wv.data, n_in),
        );
        matmul(&mut y, x_rows, w_t, Some(&bv.data), (rows, n_in, n_out)); // (N, out)
        let mut shape = xv.shape.clone();
        *shape.last_mut().unwrap() = n_out;
        let y = Tensor::new(&shape, y); // (B, T, out)
        self.push(y, Op::Linear { x, w, b })
    }
}

/// With G and X flattened to (N, ·): dx = G·W, dW = Gᵀ·X, db = Σ_rows G.
fn linear_backward(
    g: &[f32],
    (x, xv): (NodeId, &Tensor),
    (w, wv): (NodeId, &Tensor),
    b: NodeId,
    grads: &mut Grads,
) {
    let (n_out, n_in) = (wv.shape[0], wv.shape[1]);
    let rows = xv.data.len() / n_in;
    let mut dx = grads.spare.take(rows * n_in); // (N, in)
    let mut dw = grads.spare.take(n_out * n_in); // (out, in)
    let (g_rows, g_t) = (Strided::rows(g, n_out), Strided::transposed(g, n_out));
    let (w_rows, x_rows) = (Strided::rows(&wv.data, n_in), Strided::rows(&xv.data, n_in));
    team::join(
        || matmul(&mut dx, g_rows, w_rows, None, (rows, n_out, n_in)),
        || matmul(&mut dw, g_t, x_rows, None, (n_out, rows, n_in)),
    );
    let mut db = grads.spare.zeros(n_out); // (out)
    for row in g.chunks_exact(n_out) {
        db.iter_mut().zip(row).for_each(|(d, g)| *d += g);
    }
    grads.add(x, dx);
    grads.add(w, dw);
    grads.add(b, db);
}
// ANCHOR_END: linear

// ANCHOR: cross_entropy
/// `GPTLoss` clips the target's probability to [1e-10, 1] before the log, so a 0 never gives ∞.
const PROB_FLOOR: f32 = 1e-10;

impl Tape {
    /// `GPTLoss`: the mean over N = B·T positions of −ln softmax(logits)\[target\]. Returns a scalar node.
    pub fn cross_entropy(&mut self, logits: NodeId, targets: &[usize]) -> NodeId {
        let mut softmax = self.spare.take(self.value(logits).data.len()); // (N, V)
        let mut logs = self.spare.take(targets.len()); // (N)
        let lv = self.value(logits);
        let v = lv.last_dim();
        assert_eq!(
            lv.data.len(),
            targets.len() * v,
            "one target per row of logits"
        );
        softmax_rows(&lv.data, &mut softmax, v);
        for ((log, s), &y) in logs.iter_mut().zip(softmax.chunks_exact(v)).zip(targets) {
            *log = libm::logf(s[y].clamp(PROB_FLOOR, 1.0));
        }
        let n = targets.len() as f32;
        let mut loss = self.spare.take(1);
        loss[0] = 0.0 - pairwise_sum(&logs) / n;
        let loss = Tensor::new(&[], loss);
        self.spare.put(logs);
        self.push(
            loss,
            Op::CrossEntropy {
                logits,
                targets: targets.to_vec(),
                softmax,
            },
        )
    }
}

/// (softmax − onehot)·g/N. Like the tutorial, it ignores the clip.
fn cross_entropy_backward(
    g: f32,
    logits: NodeId,
    targets: &[usize],
    softmax: &[f32],
    grads: &mut Grads,
) {
    let v = softmax.len() / targets.len();
    let n = targets.len() as f32;
    let mut d = grads.spare.take(softmax.len()); // (N, V)
    for ((d, s), &y) in d
        .chunks_exact_mut(v)
        .zip(softmax.chunks_exact(v))
        .zip(targets)
    {
        d.copy_from_slice(s);
        d[y] -= 1.0;
        d.iter_mut().for_each(|d| *d = g * *d / n);
    }
    grads.add(logits, d);
}
// ANCHOR_END: cross_entropy

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
}
