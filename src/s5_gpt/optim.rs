//! Lesson layer. The tutorial's `AdamWOptimizer`, its `clip_grad_norm` and the
//! `WarmupCosineScheduler`.
//!
//! Arithmetic is float32 as in NumPy: Python-float hyper-parameters (lr, betas, eps, weight decay)
//! are rounded to float32 before use, and the few quantities the tutorial computes in Python
//! doubles (bias corrections, the gradient norm, the clip scale, the learning rate) are float64
//! here too.

use super::ops::pairwise_sum;
use super::tensor::Tensor;

/// AdamW with decoupled weight decay and one step counter shared by all parameters.
#[derive(Clone, Debug)]
pub struct AdamW {
    /// Set before every step by the scheduler.
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Steps taken; the first update uses t = 1.
    pub t: i32,
    /// The first and second moments of every parameter, in parameter order (empty before the first
    /// step).
    pub m: Vec<Vec<f32>>,
    pub v: Vec<Vec<f32>>,
}

/// The numbers one AdamW step uses, as float32: NumPy rounds a Python float when it meets a float32
/// array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    pub lr: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub one_minus_beta1: f32,
    pub one_minus_beta2: f32,
    /// The bias corrections 1 − β₁ᵗ and 1 − β₂ᵗ, computed in Python doubles.
    pub correction1: f32,
    pub correction2: f32,
    pub eps: f32,
    pub weight_decay: f32,
}

impl AdamW {
    /// `AdamWOptimizer(params, lr)` with the defaults betas (0.9, 0.999), eps 1e-8, weight decay
    /// 0.01.
    pub fn new(lr: f64) -> Self {
        AdamW {
            lr,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            t: 0,
            m: vec![],
            v: vec![],
        }
    }

    /// The moments of `params`, zeros until the first step.
    pub fn moments(&mut self, params: &[Tensor]) -> (&mut [Vec<f32>], &mut [Vec<f32>]) {
        if self.m.is_empty() {
            self.m = params.iter().map(|p| vec![0.0; p.data.len()]).collect();
            self.v = self.m.clone();
        }
        (&mut self.m, &mut self.v)
    }
}

// ANCHOR: adamw
impl AdamW {
    /// Counts a step (t += 1) and returns its numbers.
    pub fn next_step(&mut self) -> AdamWStep {
        self.t += 1;
        let f = |x: f64| x as f32;
        let t = f64::from(self.t);
        AdamWStep {
            lr: f(self.lr),
            beta1: f(self.beta1),
            beta2: f(self.beta2),
            one_minus_beta1: f(1.0 - self.beta1),
            one_minus_beta2: f(1.0 - self.beta2),
            correction1: f(1.0 - libm::pow(self.beta1, t)),
            correction2: f(1.0 - libm::pow(self.beta2, t)),
            eps: f(self.eps),
            weight_decay: f(self.weight_decay),
        }
    }
}

/// One parameter's update: w, its gradient g and its moments m, v, element by element. Only tensors
/// of two or more axes (weights, embeddings) decay.
#[inline(always)]
pub fn adamw_update(
    w: &mut [f32],
    g: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    s: &AdamWStep,
    decay: bool,
) {
    for (((w, &g), m), v) in w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        *m = s.beta1 * *m + s.one_minus_beta1 * g;
        *v = s.beta2 * *v + s.one_minus_beta2 * (g * g);
        let (m_hat, v_hat) = (*m / s.correction1, *v / s.correction2);
        if decay {
            *w -= *w * s.weight_decay * s.lr;
        }
        *w -= s.lr * m_hat / (v_hat.sqrt() + s.eps);
    }
}
// ANCHOR_END: adamw

// ANCHOR: clip
/// `clip_grad_norm(max_norm)`: if the global L2 norm of all gradients exceeds `max_norm`, scales
/// them all by `max_norm / (norm + 1e-6)`. Returns the norm before clipping.
///
/// Each tensor's Σg² is a float32 NumPy sum; the running total, the square root and the scale are
/// Python doubles, and `grad *= scale` multiplies in float64 and rounds back to float32.
pub fn clip_grad_norm(grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
    let sum_of_squares = |g: &Vec<f32>| pairwise_sum(&g.iter().map(|x| x * x).collect::<Vec<_>>());
    let total = grads
        .iter()
        .fold(0.0f64, |total, g| total + f64::from(sum_of_squares(g)));
    let norm = total.sqrt();
    if norm > max_norm && max_norm > 0.0 {
        let scale = max_norm / (norm + 1e-6);
        for x in grads.iter_mut().flatten() {
            *x = (f64::from(*x) * scale) as f32;
        }
    }
    norm
}
// ANCHOR_END: clip

// ANCHOR: schedule
/// `WarmupCosineScheduler(max_lr, total_steps, warmup_steps, min_lr)`: a linear warm-up, then half
/// a cosine from `max_lr` down to `min_lr`. A pure function of the step.
#[derive(Clone, Copy, Debug)]
pub struct WarmupCosine {
    pub max_lr: f64,
    pub total: usize,
    pub warmup: usize,
    pub min_lr: f64,
}

impl WarmupCosine {
    pub fn new(max_lr: f64, total: usize, warmup: usize, min_lr: f64) -> Self {
        let total = total.max(1);
        WarmupCosine {
            max_lr,
            total,
            warmup: warmup.min(total),
            min_lr,
        }
    }

    /// The learning rate of 0-based step `s`. The grouping follows the tutorial's Python
    /// expression, so step 15,684 of 31,368 gives 0.0005522606350706313 to the last bit.
    pub fn lr(&self, s: usize) -> f64 {
        if self.warmup > 0 && s < self.warmup {
            return self.max_lr * (s + 1) as f64 / self.warmup as f64;
        }
        if s >= self.total {
            return self.min_lr;
        }
        let progress = (s - self.warmup) as f64 / (self.total - self.warmup).max(1) as f64;
        let cosine = 0.5 * (1.0 + libm::cos(std::f64::consts::PI * progress));
        self.min_lr + (self.max_lr - self.min_lr) * cosine
    }
}
// ANCHOR_END: schedule
