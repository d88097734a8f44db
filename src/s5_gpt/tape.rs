//! Lesson layer. The autograd: a tape of nodes, pushed in forward order and walked in reverse.
//!
//! The tutorial's `Tensor` (GPTmini's framework, `src/core`) keeps `parents` and a `gradient_fn`
//! closure on every tensor, sorts the graph topologically in `backward()` and calls the closures in
//! reverse. A forward pass already visits the nodes in a topological order, so here each operation
//! simply appends its output to a [`Tape`]: node `i` can only depend on nodes before it, and
//! walking the tape from the end runs every gradient after all of its contributions have arrived. No `Rc<RefCell>` graph is
//! needed; a node is an index.
//!
//! The first nodes of the tape are the model's parameters. They stay when [`Tape::reset`] clears
//! the rest, so one tape serves every training step, and the optimiser updates them in place.
//!
//! Each method below works out its output's shape and records an [`Op`]; the arithmetic itself is
//! the forward/backward pair in [`super::ops`], run by the tape's [`Backend`].

use super::backend::{Backend, Lesson, Op, mkn};
use super::flash::{Causal, FlashDropout, FlashForm, FlashNode};
use super::optim::AdamW;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

/// The arena: values, gradients and the operations that made them, all indexed by [`NodeId`].
pub struct Tape {
    values: Vec<Tensor>,
    /// The gradient of each value; an empty vector stands for zeros that nothing has added to yet.
    grads: Vec<Vec<f32>>,
    ops: Vec<Op>,
    /// How many nodes at the start are parameters.
    params: usize,
    backend: Box<dyn Backend>,
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let (nodes, params) = (self.values.len(), self.params);
        write!(f, "Tape {{ {nodes} nodes, {params} parameters }}")
    }
}

impl Default for Tape {
    fn default() -> Self {
        Tape::with_backend(Box::new(Lesson))
    }
}

impl Tape {
    /// A tape that computes with the lesson's plain functions.
    pub fn new() -> Self {
        Self::default()
    }

    /// A tape that computes with `backend`.
    pub fn with_backend(backend: Box<dyn Backend>) -> Self {
        Tape {
            values: vec![],
            grads: vec![],
            ops: vec![],
            params: 0,
            backend,
        }
    }

    /// Adds a parameter. Parameters come before every other node.
    pub fn param(&mut self, value: Tensor) -> NodeId {
        assert_eq!(
            self.values.len(),
            self.params,
            "parameters come before any operation"
        );
        self.params += 1;
        self.push(value, Op::Leaf)
    }

    /// Adds a constant input (no gradient is needed, but it is kept like any other node).
    pub fn input(&mut self, value: Tensor) -> NodeId {
        self.push(value, Op::Leaf)
    }

    fn push(&mut self, value: Tensor, op: Op) -> NodeId {
        self.values.push(value);
        self.grads.push(Vec::new());
        self.ops.push(op);
        NodeId(self.values.len() - 1)
    }

    /// Runs `op` into a new node of `shape`.
    fn apply(&mut self, shape: Vec<usize>, mut op: Op) -> NodeId {
        let len = shape.iter().product();
        let mut out = Tensor::new(&shape, self.backend.buffer(len));
        self.backend.forward(&mut op, &self.values, &mut out);
        self.push(out, op)
    }

    /// The operation that made a node.
    pub fn op(&self, id: NodeId) -> &Op {
        &self.ops[id.0]
    }

    /// The nodes on the tape, parameters included.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the tape holds no node at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    pub fn value(&self, id: NodeId) -> &Tensor {
        &self.values[id.0]
    }

    /// The gradient of a node, or `None` if no gradient has reached it (it is zero).
    pub fn grad(&self, id: NodeId) -> Option<&[f32]> {
        let g = &self.grads[id.0];
        (!g.is_empty()).then_some(g.as_slice())
    }

    /// Drops every node after the parameters: the next forward pass starts from a clean tape.
    pub fn reset(&mut self) {
        let nodes = self
            .values
            .drain(self.params..)
            .zip(self.grads.drain(self.params..));
        for ((value, grad), op) in nodes.zip(self.ops.drain(self.params..)) {
            let [kept, more] = op.into_buffers();
            for buffer in [value.data, grad, kept, more] {
                self.backend.recycle(buffer);
            }
        }
    }

    /// `optimizer.zero_grad()`: every parameter's gradient becomes zero (an empty gradient is
    /// zero, and its buffer goes back to the backend).
    pub fn zero_grad(&mut self) {
        for grad in &mut self.grads[..self.params] {
            self.backend.recycle(std::mem::take(grad));
        }
    }

    /// The parameters, in the order they were added.
    pub fn params(&self) -> &[Tensor] {
        &self.values[..self.params]
    }

    /// Replaces the parameters' values (a checkpoint's weights), in the order they were added.
    pub fn set_params<'a>(&mut self, values: impl IntoIterator<Item = &'a [f32]>) {
        for (p, v) in self.values[..self.params].iter_mut().zip(values) {
            p.data.copy_from_slice(v);
        }
    }

    /// The parameters' gradients, in the order they were added (empty: zero).
    pub fn param_grads(&self) -> &[Vec<f32>] {
        &self.grads[..self.params]
    }

    // ANCHOR: backward
    /// `loss.backward()`: the gradient of the loss with respect to itself is 1; every other
    /// gradient follows from it, in reverse tape order.
    pub fn backward(&mut self, loss: NodeId) {
        self.backward_from(loss, vec![1.0]);
    }

    /// Like [`backward`](Self::backward), from a given gradient of `output` (to check one op).
    pub fn backward_from(&mut self, output: NodeId, d_output: Vec<f32>) {
        self.set_grad(output, d_output);
        for i in (self.params..=output.0).rev() {
            // Gradients flow to earlier nodes only, so node i's own gradient is complete here.
            if self.grads[i].is_empty() {
                continue; // nothing after node i used it
            }
            let d_inputs = self.op_backward(i); // dL/dx for each input x of node i's op
            for (x, d) in self.ops[i].inputs().into_iter().zip(d_inputs) {
                self.accumulate(x, d); // x.grad += d
            }
        }
    }
    // ANCHOR_END: backward

    /// Starts the backward pass: `d_output` becomes the gradient of `output`, copied into a buffer
    /// from the backend (the fast layer hands out buffers it reuses from step to step).
    fn set_grad(&mut self, output: NodeId, d_output: Vec<f32>) {
        let len = self.values[output.0].data.len();
        assert_eq!(d_output.len(), len, "wrong gradient size");
        let mut grad = self.backend.buffer(len);
        grad.copy_from_slice(&d_output);
        self.grads[output.0] = grad;
    }

    /// Node `i`'s op's backward pass: the gradient of each of its inputs, in the order of
    /// [`Op::inputs`], from node `i`'s own gradient. The backend runs the op's pair of functions.
    fn op_backward(&mut self, i: usize) -> Vec<Vec<f32>> {
        let mut d_inputs: Vec<Vec<f32>> = (self.ops[i].inputs().iter())
            .map(|x| self.backend.buffer(self.values[x.0].data.len()))
            .collect();
        let (op, out) = (&self.ops[i], &self.values[i]);
        self.backend
            .backward(op, &self.values, out, &self.grads[i], &mut d_inputs);
        d_inputs
    }

    /// `x.grad += d`. The first contribution is moved in; later ones are added in float32, and the
    /// backend takes back the spent buffer.
    fn accumulate(&mut self, x: NodeId, mut d: Vec<f32>) {
        let grad = &mut self.grads[x.0];
        if grad.is_empty() {
            std::mem::swap(grad, &mut d);
        } else {
            grad.iter_mut().zip(&d).for_each(|(g, d)| *g += d);
        }
        self.backend.recycle(d);
    }

    /// `clip_grad_norm(max_norm)` over every parameter's gradient; returns the norm before
    /// clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        self.fill_empty_grads();
        self.backend
            .clip_grad_norm(&mut self.grads[..self.params], max_norm)
    }

    /// `optimizer.step()`: one AdamW update of every parameter from its gradient.
    pub fn step(&mut self, optimizer: &mut AdamW) {
        self.fill_empty_grads();
        let step = optimizer.next_step();
        let (params, grads) = (&mut self.values[..self.params], &self.grads[..self.params]);
        let moments = optimizer.moments(params);
        self.backend.adamw_update(params, grads, moments, &step);
    }

    /// A parameter no gradient reached has a gradient of zeros, as the tutorial's `np.zeros_like`.
    fn fill_empty_grads(&mut self) {
        for (g, p) in self.grads.iter_mut().zip(&self.values[..self.params]) {
            if g.is_empty() {
                *g = vec![0.0; p.data.len()];
            }
        }
    }
}

/// The tutorial's tensor operators and layers, each recorded on the tape. Shapes as in
/// [`super::ops`].
impl Tape {
    /// `Embedding.forward`: one row of `table` (V, C) per id; `shape` is the ids' shape, (B, T) or
    /// (T).
    pub fn embedding(&mut self, table: NodeId, ids: &[usize], shape: &[usize]) -> NodeId {
        let (rows, c) = (self.value(table).shape[0], self.value(table).last_dim());
        assert!(
            ids.iter().all(|&id| id < rows),
            "a token id is outside the table's {rows} rows"
        );
        let ids = ids.to_vec();
        self.apply([shape, &[c]].concat(), Op::Embedding { table, ids }) // (B, T, C)
    }

    /// `a + b` with NumPy broadcasting of `b` over the leading axes of `a`, e.g. (B, T, C) + (T,
    /// C).
    pub fn add(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (sa, sb) = (&self.value(a).shape, &self.value(b).shape);
        assert!(sa.ends_with(sb), "cannot broadcast {sb:?} onto {sa:?}");
        self.apply(sa.clone(), Op::Add { a, b }) // (B, T, C)
    }

    /// `x.transpose((0, 2, 1))`: swaps the last two axes, (B, T, C) → (B, C, T).
    pub fn transpose(&mut self, x: NodeId) -> NodeId {
        let mut shape = self.value(x).shape.clone();
        let n = shape.len();
        shape.swap(n - 2, n - 1);
        self.apply(shape, Op::Transpose { x }) // (B, C, T)
    }

    /// `a @ b` for stacks of matrices: (…, M, K) @ (…, K, N) → (…, M, N), e.g. (B, T, C) @ (B, C,
    /// T).
    pub fn matmul(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (av, bv) = (self.value(a), self.value(b));
        let ((batch, _, k), (batch_b, k_b, _)) = (av.matrices(), bv.matrices());
        assert!(
            batch == batch_b && k == k_b,
            "cannot multiply {:?} by {:?}",
            av.shape,
            bv.shape
        );
        let mut shape = av.shape.clone();
        *shape.last_mut().unwrap() = mkn(av, bv).2;
        self.apply(shape, Op::MatMul { a, b }) // (B, T, T)
    }

    /// `x * s` for a scalar `s` that is not trained.
    pub fn scale(&mut self, x: NodeId, s: f32) -> NodeId {
        self.apply(self.value(x).shape.clone(), Op::Scale { x, s })
    }

    /// `Tril`: `value` above the diagonal of each (T, T) matrix (the tutorial's is −1e9).
    pub fn tril(&mut self, x: NodeId, value: f32) -> NodeId {
        let (_, rows, cols) = self.value(x).matrices();
        assert_eq!(rows, cols, "Tril masks square matrices");
        self.apply(self.value(x).shape.clone(), Op::Tril { x, value })
    }

    /// `Softmax(axis=-1)`: each row of the last axis becomes weights that sum to 1.
    pub fn softmax(&mut self, x: NodeId) -> NodeId {
        self.apply(self.value(x).shape.clone(), Op::Softmax { x })
    }

    /// GELU, tanh form, elementwise.
    pub fn gelu(&mut self, x: NodeId) -> NodeId {
        self.apply(self.value(x).shape.clone(), Op::Gelu { x, tanh: vec![] })
    }

    /// `Linear`: y = x·Wᵀ + b over any leading axes; W is (out, in), b is (out).
    pub fn linear(&mut self, x: NodeId, w: NodeId, b: NodeId) -> NodeId {
        let (n_out, n_in) = (self.value(w).shape[0], self.value(w).shape[1]);
        let xv = self.value(x);
        assert_eq!(
            xv.last_dim(),
            n_in,
            "Linear({n_in}, {n_out}) got input {:?}",
            xv.shape
        );
        let mut shape = xv.shape.clone();
        *shape.last_mut().unwrap() = n_out;
        self.apply(shape, Op::Linear { x, w, b }) // (B, T, out)
    }

    /// Stage 4's `split_heads`: (B, T, C) → (B, H, T, C/H).
    pub fn split_heads(&mut self, x: NodeId, heads: usize) -> NodeId {
        let shape = &self.value(x).shape;
        let (c, t) = (shape[shape.len() - 1], shape[shape.len() - 2]);
        assert!(c % heads == 0, "{heads} heads do not divide {c} channels");
        let shape = [&shape[..shape.len() - 2], &[heads, t, c / heads]].concat();
        self.apply(shape, Op::SplitHeads { x, heads }) // (B, H, T, D)
    }

    /// Stage 4's `merge_heads`: (B, H, T, D) → (B, T, H·D).
    pub fn merge_heads(&mut self, x: NodeId) -> NodeId {
        let shape = &self.value(x).shape;
        let [.., h, t, d] = shape[..] else {
            panic!("merge_heads needs (…, H, T, D), got {shape:?}")
        };
        let shape = [&shape[..shape.len() - 3], &[t, h * d]].concat();
        self.apply(shape, Op::MergeHeads { x }) // (B, T, C)
    }

    /// Stage 7's grouped-query heads: (B, K, T, D) → (B, K·G, T, D), each key/value head repeated
    /// for the `groups` query heads that share it (`repeat_interleave`).
    pub fn repeat_kv(&mut self, x: NodeId, groups: usize) -> NodeId {
        let mut shape = self.value(x).shape.clone();
        let n = shape.len();
        assert!(n >= 3, "repeat_kv needs (…, K, T, D), got {shape:?}");
        shape[n - 3] *= groups;
        self.apply(shape, Op::RepeatKv { x, groups }) // (B, H, T, D)
    }

    /// Stage 7's sliding window: `value` over the scores older than the `window` newest keys of
    /// each (T, T) matrix. It comes after `tril`, which masks the future.
    pub fn window(&mut self, x: NodeId, window: usize, value: f32) -> NodeId {
        let (_, rows, cols) = self.value(x).matrices();
        assert_eq!(rows, cols, "the window masks square matrices");
        assert!(window > 0, "a window holds at least one key");
        let shape = self.value(x).shape.clone();
        self.apply(shape, Op::Window { x, window, value })
    }

    /// Stage 7's rotary positions on (…, T, D) queries or keys, D even; row t is the token at
    /// position `offset + t`.
    pub fn rope(&mut self, x: NodeId, offset: usize) -> NodeId {
        let d = self.value(x).last_dim();
        assert!(
            d.is_multiple_of(2),
            "RoPE turns pairs: the head width {d} must be even"
        );
        self.apply(self.value(x).shape.clone(), Op::Rope { x, offset })
    }

    /// Stage 8's one-position key offset on (…, T, D) keys: part of each key comes from the key
    /// before it ([`super::variants::key_offset_forward`]).
    pub fn key_offset(&mut self, x: NodeId) -> NodeId {
        self.apply(self.value(x).shape.clone(), Op::KeyOffset { x })
    }

    /// Stage 7's `torch.cat([a, b], dim=-1)`: (…, T, A) and (…, T, B) → (…, T, A + B).
    pub fn concat(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (sa, sb) = (&self.value(a).shape, &self.value(b).shape);
        let n = sa.len();
        assert_eq!(
            sa[..n - 1],
            sb[..sb.len() - 1],
            "concat joins rows of the same shape"
        );
        let mut shape = sa.clone();
        shape[n - 1] += sb[sb.len() - 1];
        self.apply(shape, Op::Concat { a, b }) // (…, T, A + B)
    }

    /// Stage 3's dropout with probability `p`, its mask drawn from `rng` now (see
    /// [`super::ops::dropout_mask`]), by the backend.
    pub fn dropout(&mut self, x: NodeId, p: f64, rng: &mut NumpyRandom) -> NodeId {
        let mut mask = self.backend.buffer(self.value(x).data.len());
        self.backend.dropout_mask(&mut mask, rng, p);
        self.apply(self.value(x).shape.clone(), Op::Dropout { x, mask })
    }

    // ANCHOR: flash_attention
    /// Causal attention as one node: softmax(tril(q·kᵀ·`scale`, `mask_value`))·v for q, k, v of one
    /// shape (…, T, D), (B, H, T, D) heads or the tutorial's (B, T, C) as one head, computed in
    /// `form` ([`super::flash`]). The naive graph's six nodes, without their T × T matrices.
    pub fn flash_attention(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        scale: f32,
        mask_value: f32,
        form: FlashForm,
    ) -> NodeId {
        let causal = self.causal([q, k, v], scale, mask_value);
        self.record_flash([q, k, v], causal, form, None)
    }

    /// [`flash_attention`](Self::flash_attention) with stage 3's dropout of probability `p` on
    /// the weights, its mask the one [`dropout`](Self::dropout) would draw from `rng` there: the
    /// naive graph's seven nodes as one.
    pub fn flash_attention_dropout(
        &mut self,
        qkv: [NodeId; 3],
        (scale, mask_value): (f32, f32),
        form: FlashForm,
        (p, rng): (f64, &mut NumpyRandom),
    ) -> NodeId {
        let causal = self.causal(qkv, scale, mask_value);
        let weights = self.value(qkv[0]).data.len() / causal.d * causal.t; // (…, T, T)
        let dropout = FlashDropout::take(p, rng, weights);
        self.record_flash(qkv, causal, form, Some(dropout))
    }
    // ANCHOR_END: flash_attention

    /// The attention's settings, for q, k and v of one shape (…, T, D).
    fn causal(&self, [q, k, v]: [NodeId; 3], scale: f32, mask_value: f32) -> Causal {
        let shape = &self.value(q).shape;
        assert!(
            shape.len() >= 2 && [k, v].iter().all(|&x| self.value(x).shape == *shape),
            "attention needs q, k and v of one shape (…, T, D), got {shape:?}"
        );
        Causal::of(shape, scale, mask_value)
    }

    fn record_flash(
        &mut self,
        qkv: [NodeId; 3],
        causal: Causal,
        form: FlashForm,
        dropout: Option<FlashDropout>,
    ) -> NodeId {
        let op = Op::FlashAttention(Box::new(FlashNode {
            qkv,
            causal,
            form,
            dropout,
            lse: vec![],
        }));
        self.apply(self.value(qkv[0]).shape.clone(), op) // (…, T, D)
    }

    /// LayerNorm over the last axis, with scale `w` (C) and shift `b` (C).
    pub fn layer_norm(&mut self, x: NodeId, w: NodeId, b: NodeId) -> NodeId {
        let (xv, c) = (self.value(x), self.value(w).data.len());
        assert_eq!(xv.last_dim(), c, "LayerNorm({c}) got input {:?}", xv.shape);
        let op = Op::LayerNorm {
            x,
            w,
            b,
            mean: vec![],
            rstd: vec![],
        };
        self.apply(xv.shape.clone(), op) // (B, T, C)
    }

    /// `GPTLoss`: the mean cross-entropy of logits (…, V) against one target per row. A scalar
    /// node.
    pub fn cross_entropy(&mut self, logits: NodeId, targets: &[usize]) -> NodeId {
        let lv = self.value(logits);
        assert_eq!(
            lv.data.len(),
            targets.len() * lv.last_dim(),
            "one target per row of logits"
        );
        let targets = targets.to_vec();
        self.apply(
            vec![],
            Op::CrossEntropy {
                logits,
                targets,
                probs: vec![],
            },
        ) // ()
    }
}
