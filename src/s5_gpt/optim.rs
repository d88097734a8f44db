//! The tutorial's `AdamWOptimizer`, its `clip_grad_norm` and the `WarmupCosineScheduler`.
//!
//! Arithmetic is float32 as in NumPy: Python-float hyper-parameters (lr, betas, eps, weight decay) are
//! rounded to float32 before use, and the few quantities the tutorial computes in Python doubles (bias
//! corrections, the gradient norm, the clip scale, the learning rate) are float64 here too.

use super::kernels::{self, pairwise_sum_by};
use super::tape::Tensor;
use super::team;

/// Elements per piece of work when the threads share out AdamW's update.
const BLOCK: usize = 2048;

// ANCHOR: adamw
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
    t: i32,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

impl AdamW {
    /// `AdamWOptimizer(params, lr)` with the defaults betas (0.9, 0.999), eps 1e-8, weight decay 0.01.
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

    /// One update of every parameter from its gradient (an empty gradient counts as zeros).
    pub fn step(&mut self, params: &mut [Tensor], grads: &[Vec<f32>]) {
        if self.m.is_empty() {
            self.m = params.iter().map(|p| vec![0.0; p.data.len()]).collect();
            self.v = self.m.clone();
        }
        self.t += 1;
        let f = |x: f64| x as f32; // a Python float meeting a float32 array
        let (b1, b2, one_b1, one_b2) = (
            f(self.beta1),
            f(self.beta2),
            f(1.0 - self.beta1),
            f(1.0 - self.beta2),
        );
        // 1 − βᵗ in Python doubles, rounded to float32 when it divides.
        let c1 = f(1.0 - libm::pow(self.beta1, f64::from(self.t)));
        let c2 = f(1.0 - libm::pow(self.beta2, f64::from(self.t)));
        let (lr, eps, wd) = (f(self.lr), f(self.eps), f(self.weight_decay));
        // An empty gradient is zeros: with g = 0 the moments still decay and the weights still move.
        let zeros: Vec<Vec<f32>> = (params.iter().zip(grads))
            .map(|(p, g)| vec![0.0; if g.is_empty() { p.data.len() } else { 0 }])
            .collect();
        // Elements are independent, so the threads share them out in blocks; each element's arithmetic
        // is the same wherever it runs.
        let tensors = params.iter_mut().zip(grads).zip(&zeros);
        let blocks = tensors.zip(self.m.iter_mut().zip(&mut self.v)).flat_map(
            |(((p, g), zeros), (m, v))| {
                let g = if g.is_empty() { zeros } else { g };
                let decay = p.ndim() >= 2; // weights and embeddings, not biases
                let (w, g) = (p.data.chunks_mut(BLOCK), g.chunks(BLOCK));
                let (m, v) = (m.chunks_mut(BLOCK), v.chunks_mut(BLOCK));
                w.zip(g)
                    .zip(m.zip(v))
                    .map(move |(w_g, m_v)| (w_g, m_v, decay))
            },
        );
        team::for_each(blocks, |((w, g), (m, v), decay)| {
            // Each element's operations are correctly rounded IEEE ones, so SIMD lanes give the same bits.
            // `move` copies the scalars into the closure, so the compiler keeps them in registers.
            kernels::vectorised(
                #[inline(always)]
                move || {
                    let elements = w.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut());
                    for (((w, &g), m), v) in elements {
                        *m = b1 * *m + one_b1 * g;
                        *v = b2 * *v + one_b2 * (g * g);
                        let (m_hat, v_hat) = (*m / c1, *v / c2);
                        if decay {
                            *w -= *w * wd * lr;
                        }
                        *w -= lr * m_hat / (v_hat.sqrt() + eps);
                    }
                },
            );
        });
    }
}
// ANCHOR_END: adamw

/// What a checkpoint needs to continue a run.
impl AdamW {
    /// Steps taken so far (t), and the first and second moments of every parameter, in parameter order.
    /// Both lists are empty before the first step. A checkpoint saves these three.
    pub fn state(&self) -> (i32, &[Vec<f32>], &[Vec<f32>]) {
        (self.t, &self.m, &self.v)
    }

    /// Continues from a saved [`state`](Self::state), so that the next update is the one an uninterrupted
    /// run would make.
    pub fn restore(&mut self, t: i32, m: Vec<Vec<f32>>, v: Vec<Vec<f32>>) {
        (self.t, self.m, self.v) = (t, m, v);
    }
}

// ANCHOR: clip
/// `clip_grad_norm(max_norm)`: if the global L2 norm of all gradients exceeds `max_norm`, scales them all
/// by `max_norm / (norm + 1e-6)`. Returns the norm before clipping.
///
/// Each tensor's Σg² is a float32 NumPy sum; the running total, the square root and the scale are
/// Python doubles, and `grad *= scale` multiplies in float64 and rounds back to float32.
pub fn clip_grad_norm(grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
    // Each tensor's sum on any thread, largest tensors first so that the threads get even shares; the
    // float64 total then adds the sums in the tensors' order.
    let mut sums = vec![0.0f32; grads.len()];
    let mut tensors: Vec<_> = sums.iter_mut().zip(grads.iter()).collect();
    tensors.sort_by_key(|(_, g)| std::cmp::Reverse(g.len()));
    team::for_each(tensors, |(sum, g)| {
        *sum = kernels::vectorised(
            #[inline(always)]
            || pairwise_sum_by(g, |x| x * x),
        )
    });
    let total = sums.iter().fold(0.0f64, |total, &s| total + f64::from(s));
    let norm = total.sqrt();
    if norm > max_norm && max_norm > 0.0 {
        let scale = max_norm / (norm + 1e-6);
        team::for_each(grads.iter_mut(), |g| {
            kernels::vectorised(
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
// ANCHOR_END: clip

// ANCHOR: schedule
/// `WarmupCosineScheduler(max_lr, total_steps, warmup_steps, min_lr)`: a linear warm-up, then half a cosine
/// from `max_lr` down to `min_lr`. A pure function of the step.
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

    /// The learning rate of 0-based step `s`. The grouping follows the tutorial's Python expression, so
    /// step 15,684 of 31,368 gives 0.0005522606350706313 to the last bit.
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
