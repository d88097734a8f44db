//! The autograd: a tape of nodes, pushed in forward order and walked in reverse.
//!
//! The seed tutorial's `Tensor` keeps `parents` and a `gradient_fn` closure on every tensor, sorts the graph
//! topologically in `backward()` and calls the closures in reverse. A forward pass already visits the nodes
//! in a topological order, so here each operation simply appends its output to a [`Tape`]: node `i` can only
//! depend on nodes before it, and walking the tape from the end runs every gradient after all of its
//! contributions have arrived. No `Rc<RefCell>` graph is needed; a node is an index.
//!
//! The first nodes of the tape are the model's parameters. They stay when [`Tape::reset`] clears the rest,
//! so one tape serves every training step, and the optimiser updates them in place.
//!
//! Each operation's forward pass and its gradient live side by side in [`super::ops`].
//!
//! The graph is the same at every step, so the buffers of one step's nodes are kept in a spare store
//! when the tape is reset and handed out again to the next step's nodes: after the first step, training
//! allocates no memory.

use std::collections::BTreeMap;

use super::bench;
use super::ops::Op;
use std::time::Instant;

/// An n-dimensional float32 array in row-major order: the tutorial's `Tensor.data` (DTYPE = float32).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    /// # Panics
    /// If `data` does not hold exactly the number of values `shape` describes.
    pub fn new(shape: &[usize], data: Vec<f32>) -> Self {
        let len: usize = shape.iter().product();
        assert_eq!(
            data.len(),
            len,
            "shape {shape:?} needs {len} values, got {}",
            data.len()
        );
        Tensor {
            shape: shape.to_vec(),
            data,
        }
    }

    /// The size of the last axis (C, V or T, depending on the tensor).
    pub fn last_dim(&self) -> usize {
        *self.shape.last().unwrap_or(&1)
    }

    /// `ndim` in NumPy's terms; AdamW decays only tensors with two or more.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
}

/// A node on the tape: the index of a value and its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId(pub(super) usize);

/// The arena: values, gradients and the operations that made them, all indexed by [`NodeId`].
#[derive(Debug, Default)]
pub struct Tape {
    values: Vec<Tensor>,
    /// The gradient of each value; an empty vector stands for zeros that nothing has added to yet.
    grads: Vec<Vec<f32>>,
    ops: Vec<Op>,
    /// How many nodes at the start are parameters.
    params: usize,
    /// Buffers of earlier steps' nodes, for the next nodes to reuse.
    pub(super) spare: Spare,
    /// When the last node was pushed, while the per-part timers of [`super::bench`] are on.
    last_push: Option<Instant>,
}

impl Tape {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a parameter. Parameters come before every other node.
    pub fn param(&mut self, value: Tensor) -> NodeId {
        assert_eq!(
            self.values.len(),
            self.params,
            "parameters must be added before any operation"
        );
        self.params += 1;
        self.push(value, Op::Leaf)
    }

    /// Adds a constant input (no gradient is needed, but it is kept like any other node).
    pub fn input(&mut self, value: Tensor) -> NodeId {
        self.push(value, Op::Leaf)
    }

    /// Appends an operation's output. Used by the operations in [`super::ops`].
    pub(super) fn push(&mut self, value: Tensor, op: Op) -> NodeId {
        if bench::timing() {
            // The time since the last node went into computing this one.
            let now = Instant::now();
            if let Some(last) = self.last_push {
                bench::charge(op.part(), now - last);
            }
            self.last_push = Some(now);
        }
        self.values.push(value);
        self.grads.push(Vec::new());
        self.ops.push(op);
        NodeId(self.values.len() - 1)
    }

    pub fn value(&self, id: NodeId) -> &Tensor {
        &self.values[id.0]
    }

    /// The gradient of a node, or `None` if no gradient has reached it (it is zero).
    pub fn grad(&self, id: NodeId) -> Option<&[f32]> {
        let g = &self.grads[id.0];
        (!g.is_empty()).then_some(g.as_slice())
    }

    /// Drops every node after the parameters: the next forward pass starts from a clean tape. Their
    /// buffers go to the spare store.
    pub fn reset(&mut self) {
        for value in self.values.drain(self.params..) {
            self.spare.put(value.data);
        }
        for grad in self.grads.drain(self.params..) {
            self.spare.put(grad);
        }
        for op in self.ops.drain(self.params..) {
            op.recycle(&mut self.spare);
        }
        self.last_push = bench::timing().then(Instant::now);
    }

    /// `optimizer.zero_grad()`: every parameter's gradient becomes zero.
    pub fn zero_grad(&mut self) {
        for grad in &mut self.grads {
            self.spare.put(std::mem::take(grad));
        }
    }

    /// The parameters' values and gradients, in the order they were added.
    pub fn params_mut(&mut self) -> (&mut [Tensor], &mut [Vec<f32>]) {
        (
            &mut self.values[..self.params],
            &mut self.grads[..self.params],
        )
    }

    // ANCHOR: backward
    /// `loss.backward()`: seeds the gradient of the scalar `loss` with 1 and runs every operation's
    /// gradient in reverse tape order.
    pub fn backward(&mut self, loss: NodeId) {
        let mut seed = self.spare.take(1);
        seed[0] = 1.0;
        self.backward_from(loss, seed);
    }

    /// Like [`backward`](Self::backward), with the output's gradient given (for gradient checks of one op).
    pub fn backward_from(&mut self, output: NodeId, grad: Vec<f32>) {
        assert_eq!(
            grad.len(),
            self.values[output.0].data.len(),
            "seed gradient has the wrong size"
        );
        self.grads[output.0] = grad;
        let mut grads = Grads {
            of: &mut self.grads,
            spare: &mut self.spare,
        };
        for i in (self.params..=output.0).rev() {
            // Gradients flow to earlier nodes only, so node i's own gradient is complete here.
            if grads.of[i].is_empty() {
                continue;
            }
            let g = std::mem::take(&mut grads.of[i]);
            let op = &self.ops[i];
            bench::timed(op.part(), || {
                op.backward(&g, &self.values[i], &self.values, &mut grads)
            });
            grads.of[i] = g;
        }
    }
    // ANCHOR_END: backward
}

/// What a gradient function writes to: the gradients of the nodes, and spare buffers to build them in.
pub(super) struct Grads<'a> {
    of: &'a mut [Vec<f32>],
    pub spare: &'a mut Spare,
}

impl Grads<'_> {
    /// `x.grad += contribution`. The first contribution is moved in; later ones are added in float32.
    pub fn add(&mut self, id: NodeId, mut contribution: Vec<f32>) {
        let g = &mut self.of[id.0];
        if g.is_empty() {
            std::mem::swap(g, &mut contribution);
        } else {
            g.iter_mut().zip(&contribution).for_each(|(g, c)| *g += c);
        }
        self.spare.put(contribution);
    }

    /// The gradient of `id` as a mutable buffer, zero-filled on first use (for scatter-adds).
    pub fn buffer(&mut self, id: NodeId, len: usize) -> &mut [f32] {
        let g = &mut self.of[id.0];
        if g.is_empty() {
            *g = self.spare.zeros(len);
        }
        g
    }
}

/// Buffers that finished nodes gave back, to be handed out again, filed by capacity. The graph is the same
/// at every step, so each request finds a buffer of exactly its size after the first step.
#[derive(Debug, Default)]
pub(super) struct Spare {
    f32s: BTreeMap<usize, Vec<Vec<f32>>>,
    f64s: BTreeMap<usize, Vec<Vec<f64>>>,
}

impl Spare {
    /// Keeps `buffer` for later (an empty one is dropped).
    pub fn put(&mut self, buffer: Vec<f32>) {
        file(&mut self.f32s, buffer);
    }

    pub fn put_f64(&mut self, buffer: Vec<f64>) {
        file(&mut self.f64s, buffer);
    }

    /// A buffer of `len` values that still hold an earlier step's numbers: the caller must overwrite
    /// every one. Skipping the zero-fill saves a pass over memory per node.
    pub fn take(&mut self, len: usize) -> Vec<f32> {
        take_fitting(&mut self.f32s, len)
    }

    /// Like [`take`](Self::take), for float64.
    pub fn take_f64(&mut self, len: usize) -> Vec<f64> {
        take_fitting(&mut self.f64s, len)
    }

    /// A buffer of `len` zeros.
    pub fn zeros(&mut self, len: usize) -> Vec<f32> {
        let mut buffer = self.take(len);
        buffer.fill(0.0);
        buffer
    }
}

fn file<T>(store: &mut BTreeMap<usize, Vec<Vec<T>>>, buffer: Vec<T>) {
    if buffer.capacity() > 0 {
        store.entry(buffer.capacity()).or_default().push(buffer);
    }
}

/// Removes the smallest buffer that holds `len` values from `store` (or makes one) and sets its length.
fn take_fitting<T: Copy + Default>(store: &mut BTreeMap<usize, Vec<Vec<T>>>, len: usize) -> Vec<T> {
    let mut buffer = match store.range_mut(len..).next() {
        Some((&capacity, buffers)) => {
            let buffer = buffers.pop().expect("no empty lists are kept");
            if buffers.is_empty() {
                store.remove(&capacity);
            }
            buffer
        }
        None => Vec::new(),
    };
    buffer.resize(len, T::default());
    buffer
}
