//! Fast layer. Time per op: a [`Timed`] backend wraps another and adds up how long each op takes,
//! by the op's name, forward and backward together. `s5_gpt --bench` uses it for its breakdown; the
//! ops themselves know nothing of it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::backend::{Backend, Op};
use crate::s5_gpt::optim::AdamWStep;
use crate::s5_gpt::tensor::Tensor;

/// Time spent per op name ("matmul", "gelu", …, "clip_grad_norm", "adamw"), shared with whoever
/// reads it.
pub type Clock = Rc<RefCell<BTreeMap<&'static str, Duration>>>;

/// A backend that times `inner`'s work into `clock`.
pub struct Timed {
    pub inner: Box<dyn Backend>,
    pub clock: Clock,
}

/// Adds the time since `started` to `name`.
fn charge(clock: &Clock, name: &'static str, started: Instant) {
    *clock.borrow_mut().entry(name).or_default() += started.elapsed();
}

impl Backend for Timed {
    fn buffer(&mut self, len: usize) -> Vec<f32> {
        self.inner.buffer(len)
    }

    fn recycle(&mut self, buffer: Vec<f32>) {
        self.inner.recycle(buffer);
    }

    fn forward(&mut self, op: &mut Op, values: &[Tensor], out: &mut Tensor) {
        let started = Instant::now();
        self.inner.forward(op, values, out);
        charge(&self.clock, op.name(), started);
    }

    fn backward(
        &mut self,
        op: &Op,
        values: &[Tensor],
        out: &Tensor,
        d_out: &[f32],
        d_inputs: &mut [Vec<f32>],
    ) {
        let started = Instant::now();
        self.inner.backward(op, values, out, d_out, d_inputs);
        charge(&self.clock, op.name(), started);
    }

    fn dropout_mask(&mut self, mask: &mut [f32], rng: &mut NumpyRandom, p: f64) {
        let started = Instant::now();
        self.inner.dropout_mask(mask, rng, p);
        charge(&self.clock, "dropout", started);
    }

    fn clip_grad_norm(&mut self, grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
        let started = Instant::now();
        let norm = self.inner.clip_grad_norm(grads, max_norm);
        charge(&self.clock, "clip_grad_norm", started);
        norm
    }

    fn adamw_update(
        &mut self,
        params: &mut [Tensor],
        grads: &[Vec<f32>],
        moments: (&mut [Vec<f32>], &mut [Vec<f32>]),
        step: &AdamWStep,
    ) {
        let started = Instant::now();
        self.inner.adamw_update(params, grads, moments, step);
        charge(&self.clock, "adamw", started);
    }
}
