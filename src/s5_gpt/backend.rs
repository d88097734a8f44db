//! Lesson layer. What the tape records for each node, and the [`Backend`] that runs it: the
//! lesson's plain functions of [`super::ops`] ([`Lesson`]), or the fast layer's kernels, which give
//! the same bits.
//!
//! The tape decides *what* is computed and keeps the graph; a backend decides *how*. That split
//! lets one tape, one model and one training loop run on either, and lets the tests compare the two
//! op by op.

use super::flash::FlashNode;
use super::ops;
use super::optim::{self, AdamWStep};
use super::tensor::{NodeId, Tensor};
use super::variants;
use crate::rng::numpy::NumpyRandom;

/// What made a node: the operation, its inputs, and what its backward pass needs besides their
/// values.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
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
        x: NodeId,
    },
    MatMul {
        a: NodeId,
        b: NodeId,
    },
    Scale {
        x: NodeId,
        s: f32,
    },
    /// `value` is what the mask writes above the diagonal.
    Tril {
        x: NodeId,
        value: f32,
    },
    Softmax {
        x: NodeId,
    },
    /// `tanh` is filled by the forward pass, one value per element.
    Gelu {
        x: NodeId,
        tanh: Vec<f32>,
    },
    Linear {
        x: NodeId,
        w: NodeId,
        b: NodeId,
    },
    SplitHeads {
        x: NodeId,
        heads: usize,
    },
    MergeHeads {
        x: NodeId,
    },
    /// `mask` (0 or 1/(1 − p) per weight) is drawn when the node is recorded.
    Dropout {
        x: NodeId,
        mask: Vec<f32>,
    },
    /// `mean` and `rstd` (1/σ), one per row, are filled by the forward pass.
    LayerNorm {
        x: NodeId,
        w: NodeId,
        b: NodeId,
        mean: Vec<f32>,
        rstd: Vec<f32>,
    },
    /// Stage 7: each key/value head repeated for the `groups` query heads that share it.
    RepeatKv {
        x: NodeId,
        groups: usize,
    },
    /// Stage 7: `value` over the scores older than the `window` newest keys (after `Tril`).
    Window {
        x: NodeId,
        window: usize,
        value: f32,
    },
    /// Stage 7: rotary positions; the first row of each matrix is the token at `offset`.
    Rope {
        x: NodeId,
        offset: usize,
    },
    /// Stage 8: part of each key taken from the key one row before.
    KeyOffset {
        x: NodeId,
    },
    /// Stage 7: each row of `a` followed by the same row of `b` (latent attention's rotary part).
    Concat {
        a: NodeId,
        b: NodeId,
    },
    /// Causal attention softmax(tril(Q·Kᵀ·scale, mask_value))·V as one node, with stage 3's
    /// dropout on the weights while training ([`super::flash`]).
    FlashAttention(Box<FlashNode>),
    /// `probs` (N, V) is filled by the forward pass.
    CrossEntropy {
        logits: NodeId,
        targets: Vec<usize>,
        probs: Vec<f32>,
    },
}

impl Op {
    /// The nodes this op reads, in the order its backward pass writes their gradients.
    pub fn inputs(&self) -> Vec<NodeId> {
        match *self {
            Op::Leaf => vec![],
            Op::Embedding { table, .. } => vec![table],
            Op::Add { a, b } | Op::MatMul { a, b } | Op::Concat { a, b } => vec![a, b],
            Op::Transpose { x }
            | Op::Scale { x, .. }
            | Op::Tril { x, .. }
            | Op::Softmax { x }
            | Op::Gelu { x, .. }
            | Op::SplitHeads { x, .. }
            | Op::MergeHeads { x }
            | Op::Dropout { x, .. }
            | Op::RepeatKv { x, .. }
            | Op::Window { x, .. }
            | Op::Rope { x, .. }
            | Op::KeyOffset { x } => vec![x],
            Op::Linear { x, w, b } | Op::LayerNorm { x, w, b, .. } => vec![x, w, b],
            Op::CrossEntropy { logits, .. } => vec![logits],
            Op::FlashAttention(ref node) => node.inputs(),
        }
    }

    /// The buffers the forward pass filled for the backward pass, handed over when the node is
    /// dropped (an empty `Vec` holds no buffer, and an array needs no allocation).
    pub fn into_buffers(self) -> [Vec<f32>; 2] {
        match self {
            Op::Gelu { tanh: kept, .. }
            | Op::CrossEntropy { probs: kept, .. }
            | Op::Dropout { mask: kept, .. } => [kept, vec![]],
            Op::FlashAttention(node) => [node.lse, vec![]],
            Op::LayerNorm { mean, rstd, .. } => [mean, rstd],
            _ => [vec![], vec![]],
        }
    }

    /// The tutorial's name for the op, for messages and for timing by op.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "leaf",
            Op::Embedding { .. } => "embedding",
            Op::Add { .. } => "add",
            Op::Transpose { .. } => "transpose",
            Op::MatMul { .. } => "matmul",
            Op::Scale { .. } => "scale",
            Op::Tril { .. } => "tril",
            Op::Softmax { .. } => "softmax",
            Op::Gelu { .. } => "gelu",
            Op::Linear { .. } => "linear",
            Op::SplitHeads { .. } => "split_heads",
            Op::MergeHeads { .. } => "merge_heads",
            Op::Dropout { .. } => "dropout",
            Op::LayerNorm { .. } => "layer_norm",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::FlashAttention(_) => "flash_attention",
            Op::RepeatKv { .. } => "repeat_kv",
            Op::Window { .. } => "window",
            Op::Rope { .. } => "rope",
            Op::Concat { .. } => "concat",
            Op::KeyOffset { .. } => "key_offset",
        }
    }
}

/// The arithmetic behind the tape and the optimiser. [`Lesson`] defines the results; another
/// backend must give the same bits (the fast layer's tests check that it does).
pub trait Backend {
    /// A buffer of `len` values, which the caller overwrites in full.
    fn buffer(&mut self, len: usize) -> Vec<f32> {
        vec![0.0; len]
    }

    /// Takes back a buffer the tape no longer needs, for reuse (the lesson simply drops it).
    fn recycle(&mut self, _buffer: Vec<f32>) {}

    /// Runs `op` on `values` (the tape so far) and writes the result into `out`.
    fn forward(&mut self, op: &mut Op, values: &[Tensor], out: &mut Tensor);

    /// Writes the gradient of each of `op.inputs()` into `d_inputs`, from `d_out`, the gradient of
    /// the op's output `out`.
    fn backward(
        &mut self,
        op: &Op,
        values: &[Tensor],
        out: &Tensor,
        d_out: &[f32],
        d_inputs: &mut [Vec<f32>],
    );

    /// Stage 3's dropout mask for `mask.len()` weights, drawn from `rng`: see [`ops::dropout_mask`].
    fn dropout_mask(&mut self, mask: &mut [f32], rng: &mut NumpyRandom, p: f64) {
        ops::dropout_mask(mask, rng, p);
    }

    /// `clip_grad_norm`: see [`optim::clip_grad_norm`].
    fn clip_grad_norm(&mut self, grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
        optim::clip_grad_norm(grads, max_norm)
    }

    /// One AdamW update of every parameter: see [`optim::adamw_update`].
    fn adamw_update(
        &mut self,
        params: &mut [Tensor],
        grads: &[Vec<f32>],
        moments: (&mut [Vec<f32>], &mut [Vec<f32>]),
        step: &AdamWStep,
    ) {
        let (m, v) = moments;
        for (((p, g), m), v) in params.iter_mut().zip(grads).zip(m).zip(v) {
            let decay = p.ndim() >= 2; // weights and embeddings, not biases
            optim::adamw_update(&mut p.data, g, m, v, step, decay);
        }
    }
}

/// The lesson's backend: every op is the plain function of [`super::ops`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Lesson;

impl Backend for Lesson {
    fn forward(&mut self, op: &mut Op, values: &[Tensor], out: &mut Tensor) {
        let v = |id: &NodeId| &values[id.0];
        let o = &mut out.data;
        match op {
            Op::Leaf => {}
            Op::Embedding { table, ids } => {
                ops::embedding_forward(o, &v(table).data, ids, v(table).last_dim())
            }
            Op::Add { a, b } => ops::add_forward(o, &v(a).data, &v(b).data),
            Op::Transpose { x } => ops::transpose_forward(o, &v(x).data, rows_cols(v(x))),
            Op::MatMul { a, b } => ops::matmul_forward(o, &v(a).data, &v(b).data, mkn(v(a), v(b))),
            Op::Scale { x, s } => ops::scale_forward(o, &v(x).data, *s),
            Op::Tril { x, value } => ops::tril_forward(o, &v(x).data, v(x).last_dim(), *value),
            Op::Softmax { x } => ops::softmax_forward(o, &v(x).data, v(x).last_dim()),
            Op::Gelu { x, tanh } => {
                *tanh = vec![0.0; o.len()];
                ops::gelu_forward(o, tanh, &v(x).data);
            }
            Op::Linear { x, w, b } => {
                ops::linear_forward(o, &v(x).data, &v(w).data, &v(b).data, v(w).shape[1])
            }
            Op::SplitHeads { x, .. } => {
                ops::split_heads_forward(o, &v(x).data, heads_shape(&out.shape))
            }
            Op::MergeHeads { x } => {
                ops::merge_heads_forward(o, &v(x).data, heads_shape(&v(x).shape))
            }
            Op::Dropout { x, mask } => ops::dropout_forward(o, &v(x).data, mask),
            Op::LayerNorm {
                x,
                w,
                b,
                mean,
                rstd,
            } => {
                let rows = o.len() / v(w).data.len();
                (*mean, *rstd) = (vec![0.0; rows], vec![0.0; rows]);
                let (x, w, b) = (&v(x).data, &v(w).data, &v(b).data);
                ops::layer_norm_forward(o, (mean, rstd), x, w, b);
            }
            Op::CrossEntropy {
                logits,
                targets,
                probs,
            } => {
                *probs = vec![0.0; v(logits).data.len()];
                o[0] = ops::cross_entropy_forward(probs, &v(logits).data, targets);
            }
            Op::FlashAttention(node) => node.forward(values, o),
            Op::RepeatKv { x, groups } => {
                variants::repeat_kv_forward(o, &v(x).data, *groups, head_len(v(x)))
            }
            Op::Window { x, window, value } => {
                variants::window_forward(o, &v(x).data, v(x).last_dim(), *window, *value)
            }
            Op::Rope { x, offset } => {
                variants::rope_forward(o, &v(x).data, rows_cols(v(x)), *offset)
            }
            Op::Concat { a, b } => {
                let widths = (v(a).last_dim(), v(b).last_dim());
                variants::concat_forward(o, &v(a).data, &v(b).data, widths)
            }
            Op::KeyOffset { x } => variants::key_offset_forward(o, &v(x).data, rows_cols(v(x))),
        }
    }

    fn backward(
        &mut self,
        op: &Op,
        values: &[Tensor],
        out: &Tensor,
        d_out: &[f32],
        d_inputs: &mut [Vec<f32>],
    ) {
        let v = |id: &NodeId| &values[id.0];
        match (op, d_inputs) {
            (Op::Leaf, _) => {}
            (Op::Embedding { table, ids }, [d_table]) => {
                ops::embedding_backward(d_table, d_out, ids, v(table).last_dim())
            }
            (Op::Add { .. }, [d_a, d_b]) => ops::add_backward(d_a, d_b, d_out),
            (Op::Transpose { x }, [d_x]) => ops::transpose_backward(d_x, d_out, rows_cols(v(x))),
            (Op::MatMul { a, b }, [d_a, d_b]) => {
                ops::matmul_backward(d_a, d_b, d_out, &v(a).data, &v(b).data, mkn(v(a), v(b)));
            }
            (Op::Scale { s, .. }, [d_x]) => ops::scale_backward(d_x, d_out, *s),
            (Op::Tril { x, .. }, [d_x]) => ops::tril_backward(d_x, d_out, v(x).last_dim()),
            (Op::Softmax { .. }, [d_x]) => {
                ops::softmax_backward(d_x, d_out, &out.data, out.last_dim())
            }
            (Op::Gelu { x, tanh }, [d_x]) => ops::gelu_backward(d_x, d_out, &v(x).data, tanh),
            (Op::Linear { x, w, .. }, [d_x, d_w, d_b]) => {
                ops::linear_backward(d_x, d_w, d_b, d_out, &v(x).data, &v(w).data);
            }
            (Op::SplitHeads { .. }, [d_x]) => {
                ops::split_heads_backward(d_x, d_out, heads_shape(&out.shape))
            }
            (Op::MergeHeads { x }, [d_x]) => {
                ops::merge_heads_backward(d_x, d_out, heads_shape(&v(x).shape))
            }
            (Op::Dropout { mask, .. }, [d_x]) => ops::dropout_backward(d_x, d_out, mask),
            (
                Op::LayerNorm {
                    x, w, mean, rstd, ..
                },
                [d_x, d_w, d_b],
            ) => {
                let (x, w) = (&v(x).data, &v(w).data);
                ops::layer_norm_backward(d_x, d_w, d_b, d_out, x, w, (mean, rstd));
            }
            (Op::CrossEntropy { targets, probs, .. }, [d_logits]) => {
                ops::cross_entropy_backward(d_logits, d_out[0], probs, targets);
            }
            (Op::FlashAttention(node), [d_v, d_q, d_k]) => {
                node.backward(values, (&out.data, d_out), [d_v, d_q, d_k]);
            }
            (Op::RepeatKv { x, groups }, [d_x]) => {
                variants::repeat_kv_backward(d_x, d_out, *groups, head_len(v(x)))
            }
            (Op::Window { x, window, .. }, [d_x]) => {
                variants::window_backward(d_x, d_out, v(x).last_dim(), *window)
            }
            (Op::Rope { x, offset }, [d_x]) => {
                variants::rope_backward(d_x, d_out, rows_cols(v(x)), *offset)
            }
            (Op::Concat { a, b }, [d_a, d_b]) => {
                let widths = (v(a).last_dim(), v(b).last_dim());
                variants::concat_backward(d_a, d_b, d_out, widths)
            }
            (Op::KeyOffset { x }, [d_x]) => {
                variants::key_offset_backward(d_x, d_out, rows_cols(v(x)))
            }
            (op, d) => panic!(
                "{} has {} inputs, not {}",
                op.name(),
                op.inputs().len(),
                d.len()
            ),
        }
    }
}

/// (R, C) of a stack of matrices.
pub fn rows_cols(x: &Tensor) -> (usize, usize) {
    let (_, rows, cols) = x.matrices();
    (rows, cols)
}

/// T·D, the values of one head of a (B, H, T, D) tensor: one (T, D) matrix.
pub fn head_len(x: &Tensor) -> usize {
    let (_, rows, cols) = x.matrices();
    rows * cols
}

/// (T, H, D) of a (B, H, T, D) tensor of heads.
pub fn heads_shape(shape: &[usize]) -> (usize, usize, usize) {
    let [.., h, t, d] = shape else {
        panic!("heads are (B, H, T, D), not {shape:?}")
    };
    (*t, *h, *d)
}

/// (M, K, N) of the product of stacks (…, M, K) and (…, K, N).
pub fn mkn(a: &Tensor, b: &Tensor) -> (usize, usize, usize) {
    let ((_, m, k), n) = (a.matrices(), b.last_dim());
    (m, k, n)
}
