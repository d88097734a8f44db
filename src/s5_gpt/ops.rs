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

use super::kernels::{self, Strided, matmul, matmul_batched, pairwise_sum, transpose};
use super::tape::{NodeId, Tape, Tensor, accumulate, grad_buffer};
use rayon::prelude::*;

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
    pub(super) fn backward(
        &self,
        g: &[f32],
        out: &Tensor,
        values: &[Tensor],
        grads: &mut [Vec<f32>],
    ) {
        let v = |id: &NodeId| &values[id.0];
        match self {
            Op::Leaf => {}
            Op::Embedding { table, ids } => embedding_backward(g, ids, *table, v(table), grads),
            Op::Add { a, b } => add_backward(g, *a, *b, v(b), grads),
            Op::Transpose { a } => transpose_backward(g, *a, v(a), grads),
            Op::MatMul { a, b } => matmul_backward(g, (*a, v(a)), (*b, v(b)), grads),
            Op::Scale { a, s } => accumulate(grads, *a, g.iter().map(|g| g * s).collect()),
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
}

// ANCHOR: embedding
impl Tape {
    /// `Embedding.forward`: gathers one row of `table` (V, C) per id. `shape` is the ids' shape, (B, T) or (T).
    pub fn embedding(&mut self, table: NodeId, ids: &[usize], shape: &[usize]) -> NodeId {
        let t = self.value(table);
        let (rows, c) = (t.shape[0], t.last_dim());
        let mut out = Vec::with_capacity(ids.len() * c);
        for &id in ids {
            assert!(id < rows, "token id {id} outside the table's {rows} rows");
            out.extend_from_slice(&t.data[id * c..(id + 1) * c]);
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
fn embedding_backward(g: &[f32], ids: &[usize], table: NodeId, t: &Tensor, grads: &mut [Vec<f32>]) {
    let c = t.last_dim();
    let dt = grad_buffer(grads, table, t.data.len()); // (V, C)
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
        let (av, bv) = (self.value(a), self.value(b));
        assert!(
            av.shape.ends_with(&bv.shape),
            "cannot broadcast {:?} onto {:?}",
            bv.shape,
            av.shape
        );
        let mut out = av.data.clone();
        for row in out.chunks_exact_mut(bv.data.len()) {
            row.iter_mut().zip(&bv.data).for_each(|(o, b)| *o += b);
        }
        let out = Tensor::new(&av.shape, out); // (B, T, C)
        self.push(out, Op::Add { a, b })
    }
}

/// `_unbroadcast`: `a` takes `g` as it is; `b` takes `g` summed over the leading axes, in order.
fn add_backward(g: &[f32], a: NodeId, b: NodeId, bv: &Tensor, grads: &mut [Vec<f32>]) {
    let mut db = vec![0.0f32; bv.data.len()]; // (T, C)
    for row in g.chunks_exact(db.len()) {
        db.iter_mut().zip(row).for_each(|(d, g)| *d += g);
    }
    accumulate(grads, a, g.to_vec());
    accumulate(grads, b, db);
}
// ANCHOR_END: add

/// Splits a shape (…, R, C) into (batch, R, C).
fn matrices(shape: &[usize]) -> (usize, usize, usize) {
    let n = shape.len();
    assert!(n >= 2, "need at least two axes, got {shape:?}");
    (shape[..n - 2].iter().product(), shape[n - 2], shape[n - 1])
}

/// Transposes each matrix of a (batch, rows, cols) array.
fn transpose_each(data: &[f32], (batch, rows, cols): (usize, usize, usize)) -> Vec<f32> {
    let mut out = Vec::with_capacity(data.len());
    for m in data.chunks_exact(rows * cols).take(batch) {
        out.extend(transpose(m, rows, cols));
    }
    out
}

// ANCHOR: transpose
impl Tape {
    /// `x.transpose((0, 2, 1))`: swaps the last two axes, (B, T, C) → (B, C, T).
    pub fn transpose(&mut self, a: NodeId) -> NodeId {
        let av = self.value(a);
        let (batch, r, c) = matrices(&av.shape);
        let mut shape = av.shape.clone();
        let n = shape.len();
        shape.swap(n - 2, n - 1);
        let out = Tensor::new(&shape, transpose_each(&av.data, (batch, r, c))); // (B, C, T)
        self.push(out, Op::Transpose { a })
    }
}

/// The inverse permutation is the same swap.
fn transpose_backward(g: &[f32], a: NodeId, av: &Tensor, grads: &mut [Vec<f32>]) {
    let (batch, r, c) = matrices(&av.shape);
    accumulate(grads, a, transpose_each(g, (batch, c, r)));
}
// ANCHOR_END: transpose

// ANCHOR: matmul
impl Tape {
    /// `a @ b` for stacks of matrices: (…, M, K) @ (…, K, N) → (…, M, N), e.g. x @ xᵀ: (B, T, C) @ (B, C, T).
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (av, bv) = (self.value(a), self.value(b));
        let (batch, m, k) = matrices(&av.shape);
        let (batch_b, k_b, n) = matrices(&bv.shape);
        assert!(
            batch == batch_b && k == k_b,
            "cannot multiply {:?} by {:?}",
            av.shape,
            bv.shape
        );
        let mut out = vec![0.0; batch * m * n];
        matmul_batched(&mut out, &av.data, false, &bv.data, batch, (m, k, n));
        let mut shape = av.shape.clone();
        *shape.last_mut().unwrap() = n;
        let out = Tensor::new(&shape, out); // (B, T, T)
        self.push(out, Op::MatMul { a, b })
    }
}

/// dA = G·Bᵀ and dB = Aᵀ·G, matrix by matrix.
fn matmul_backward(
    g: &[f32],
    (a, av): (NodeId, &Tensor),
    (b, bv): (NodeId, &Tensor),
    grads: &mut [Vec<f32>],
) {
    let (batch, m, k) = matrices(&av.shape);
    let n = bv.last_dim();
    let bt = transpose_each(&bv.data, (batch, k, n)); // (…, N, K)
    let mut da = vec![0.0; av.data.len()]; // (…, M, K)
    matmul_batched(&mut da, g, false, &bt, batch, (m, n, k));
    let mut db = vec![0.0; bv.data.len()]; // (…, K, N)
    matmul_batched(&mut db, &av.data, true, g, batch, (k, m, n));
    accumulate(grads, a, da);
    accumulate(grads, b, db);
}
// ANCHOR_END: matmul

// ANCHOR: scale
impl Tape {
    /// `x * s` for a scalar `s` that is not trained (the attention's 1/√C). Its gradient is `g * s`,
    /// in `Op::backward`.
    pub fn scale(&mut self, a: NodeId, s: f32) -> NodeId {
        let av = self.value(a);
        let out = Tensor::new(&av.shape, av.data.iter().map(|x| x * s).collect());
        self.push(out, Op::Scale { a, s })
    }
}
// ANCHOR_END: scale

// ANCHOR: tril
/// The value masked scores take: −1e9 as float32, so that softmax gives them a weight of exactly 0.
pub const MASK_VALUE: f32 = -1e9;

impl Tape {
    /// `Tril`: keeps the lower triangle of the last two axes, diagonal included, and writes −1e9 above it.
    /// Token t may then attend to tokens 0..=t only.
    pub fn tril(&mut self, a: NodeId) -> NodeId {
        let av = self.value(a);
        let (_, r, c) = matrices(&av.shape);
        let mut out = av.data.clone();
        for (idx, x) in out.iter_mut().enumerate() {
            let (i, j) = ((idx / c) % r, idx % c);
            if j > i {
                *x = MASK_VALUE;
            }
        }
        let out = Tensor::new(&av.shape, out); // (B, T, T)
        self.push(out, Op::Tril { a })
    }
}

/// `x.grad += p.grad * keep`: the gradient passes where the score was kept and is 0 above the diagonal.
fn tril_backward(g: &[f32], a: NodeId, av: &Tensor, grads: &mut [Vec<f32>]) {
    let (_, r, c) = matrices(&av.shape);
    let da = g
        .iter()
        .enumerate()
        .map(|(idx, &g)| if idx % c > (idx / c) % r { 0.0 } else { g })
        .collect();
    accumulate(grads, a, da);
}
// ANCHOR_END: tril

// ANCHOR: softmax
/// exp(x − max) / Σ exp(x − max) along one row, in float32.
fn softmax_row(x: &[f32], out: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for (o, &v) in out.iter_mut().zip(x) {
        *o = libm::expf(v - max);
    }
    let sum = pairwise_sum(out);
    out.iter_mut().for_each(|o| *o /= sum);
}

impl Tape {
    /// `Softmax(axis=-1)`: each row of the last axis becomes weights that sum to 1.
    pub fn softmax(&mut self, a: NodeId) -> NodeId {
        let av = self.value(a);
        let c = av.last_dim();
        let mut out = vec![0.0; av.data.len()];
        for (x, o) in av.data.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
            softmax_row(x, o);
        }
        let out = Tensor::new(&av.shape, out); // (B, T, T)
        self.push(out, Op::Softmax { a })
    }
}

/// dx = s ⊙ (g − Σ s ⊙ g), row by row; `s` is the softmax output.
fn softmax_backward(g: &[f32], a: NodeId, s: &Tensor, grads: &mut [Vec<f32>]) {
    let c = s.last_dim();
    let mut da = vec![0.0; g.len()];
    let mut sg = vec![0.0; c];
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
    accumulate(grads, a, da);
}
// ANCHOR_END: softmax

// ANCHOR: gelu
/// Elements per parallel block of GELU.
const BLOCK: usize = 4096;

/// √(2/π) as NumPy computes it: a float64 scalar, which makes the GELU arithmetic below float64.
fn gelu_c() -> f64 {
    (2.0 / std::f64::consts::PI).sqrt()
}

impl Tape {
    /// GELU, tanh form: 0.5·x·(1 + tanh(c·(x + 0.044715·x³))).
    ///
    /// As in the tutorial, `x³` and `x + 0.044715·x³` are float32, the rest float64 (because `c` is a
    /// float64 scalar), and the output is stored as float32. tanh is kept for the backward pass.
    pub fn gelu(&mut self, x: NodeId) -> NodeId {
        let xv = self.value(x);
        let c = gelu_c();
        let mut tanh = vec![0.0f64; xv.data.len()];
        let mut out = vec![0.0f32; xv.data.len()];
        // Blocks of elements on all threads; each element's arithmetic is the same wherever it runs.
        let blocks = out.par_chunks_mut(BLOCK).zip(tanh.par_chunks_mut(BLOCK));
        blocks
            .zip(xv.data.par_chunks(BLOCK))
            .for_each(|((out, tanh), x)| {
                kernels::vectorised(|| {
                    for ((o, t), &x) in out.iter_mut().zip(tanh).zip(x) {
                        let cube = (f64::from(x) * f64::from(x) * f64::from(x)) as f32; // x ** 3
                        *t = kernels::tanh(c * f64::from(x + 0.044715f32 * cube));
                        *o = (f64::from(0.5f32 * x) * (1.0 + *t)) as f32;
                    }
                })
            });
        let out = Tensor::new(&xv.shape, out); // (B, T, 4C)
        self.push(out, Op::Gelu { x, tanh })
    }
}

/// The exact derivative of the tanh form: 0.5(1+t) + 0.5·x·(1−t²)·c·(1 + 3·0.044715·x²).
fn gelu_backward(g: &[f32], x: NodeId, xv: &Tensor, tanh: &[f64], grads: &mut [Vec<f32>]) {
    let c = gelu_c();
    let k = (3.0f64 * 0.044715) as f32;
    let mut dx = vec![0.0f32; g.len()];
    let blocks = dx.par_chunks_mut(BLOCK).zip(xv.data.par_chunks(BLOCK));
    let blocks = blocks.zip(tanh.par_chunks(BLOCK)).zip(g.par_chunks(BLOCK));
    blocks.for_each(|(((dx, x), tanh), g)| {
        kernels::vectorised(|| {
            for (((dx, &x), &t), &g) in dx.iter_mut().zip(x).zip(tanh).zip(g) {
                let slope = f64::from(1.0f32 + k * (x * x));
                let d = 0.5 * (1.0 + t) + f64::from(0.5f32 * x) * (1.0 - t * t) * c * slope;
                *dx = (f64::from(g) * d) as f32;
            }
        })
    });
    accumulate(grads, x, dx);
}
// ANCHOR_END: gelu

// ANCHOR: linear
impl Tape {
    /// `Linear`: y = x·Wᵀ + b over any leading axes; W is (out, in) as in the tutorial, b is (out).
    pub fn linear(&mut self, x: NodeId, w: NodeId, b: NodeId) -> NodeId {
        let (xv, wv, bv) = (self.value(x), self.value(w), self.value(b));
        let (n_out, n_in) = (wv.shape[0], wv.shape[1]);
        assert_eq!(
            xv.last_dim(),
            n_in,
            "Linear({n_in}, {n_out}) got input {:?}",
            xv.shape
        );
        let rows = xv.data.len() / n_in; // N = B·T
        let wt = transpose(&wv.data, n_out, n_in); // (in, out)
        let mut y = vec![0.0; rows * n_out];
        matmul(
            &mut y,
            Strided::rows(&xv.data, n_in),
            &wt,
            rows,
            n_in,
            n_out,
        ); // (N, out)
        for row in y.chunks_exact_mut(n_out) {
            row.iter_mut().zip(&bv.data).for_each(|(y, b)| *y += b);
        }
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
    grads: &mut [Vec<f32>],
) {
    let (n_out, n_in) = (wv.shape[0], wv.shape[1]);
    let rows = xv.data.len() / n_in;
    let mut dx = vec![0.0; rows * n_in]; // (N, in)
    matmul(
        &mut dx,
        Strided::rows(g, n_out),
        &wv.data,
        rows,
        n_out,
        n_in,
    );
    let mut dw = vec![0.0; n_out * n_in]; // (out, in)
    matmul(
        &mut dw,
        Strided::transposed(g, n_out),
        &xv.data,
        n_out,
        rows,
        n_in,
    );
    let mut db = vec![0.0f32; n_out]; // (out)
    for row in g.chunks_exact(n_out) {
        db.iter_mut().zip(row).for_each(|(d, g)| *d += g);
    }
    accumulate(grads, x, dx);
    accumulate(grads, w, dw);
    accumulate(grads, b, db);
}
// ANCHOR_END: linear

// ANCHOR: cross_entropy
/// `GPTLoss` clips the target's probability to [1e-10, 1] before the log, so a 0 never gives ∞.
const PROB_FLOOR: f32 = 1e-10;

impl Tape {
    /// `GPTLoss`: the mean over N = B·T positions of −ln softmax(logits)\[target\]. Returns a scalar node.
    pub fn cross_entropy(&mut self, logits: NodeId, targets: &[usize]) -> NodeId {
        let lv = self.value(logits);
        let v = lv.last_dim();
        assert_eq!(
            lv.data.len(),
            targets.len() * v,
            "one target per row of logits"
        );
        let mut softmax = vec![0.0; lv.data.len()]; // (N, V)
        for (x, s) in lv.data.chunks_exact(v).zip(softmax.chunks_exact_mut(v)) {
            softmax_row(x, s);
        }
        let logs: Vec<f32> = targets
            .iter()
            .enumerate()
            .map(|(row, &y)| libm::logf(softmax[row * v + y].clamp(PROB_FLOOR, 1.0)))
            .collect(); // (N)
        let n = targets.len() as f32;
        let loss = Tensor::new(&[], vec![0.0 - pairwise_sum(&logs) / n]);
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
    grads: &mut [Vec<f32>],
) {
    let v = softmax.len() / targets.len();
    let n = targets.len() as f32;
    let mut d = softmax.to_vec(); // (N, V)
    for (row, &y) in targets.iter().enumerate() {
        d[row * v + y] -= 1.0;
    }
    d.iter_mut().for_each(|d| *d = g * *d / n);
    accumulate(grads, logits, d);
}
// ANCHOR_END: cross_entropy
