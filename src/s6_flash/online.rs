//! The online softmax: the weights of a row of scores read a few keys at a time, keeping only a
//! running maximum m and a running sum ℓ (Milakov and Gimelshein, "Online normalizer calculation for
//! softmax", 2018; the inner loop of FlashAttention).

use std::ops::Range;

use ndarray::{Array1, ArrayView1, Axis};

// ANCHOR: online_step
/// One step of the online softmax: the keys it reads, and the running maximum m and sum ℓ before
/// and after them. A figure or the page can draw the walk from these alone.
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineStep {
    /// The keys read in this step, `j` in `keys`.
    pub keys: Range<usize>,
    /// Their scores xⱼ.
    pub scores: Vec<f32>,
    /// m before the step: the largest score seen so far (−∞ before the first).
    pub m_old: f32,
    /// m after the step: max(m_old, the step's scores).
    pub m_new: f32,
    /// e^(m_old − m_new): what every exponential added so far is multiplied by, so that it is
    /// measured from the new maximum. 1 when the maximum did not move, 0 at the first step.
    pub rescale: f32,
    /// ℓ before the step: Σ e^(xⱼ − m_old) over the keys seen so far.
    pub l_old: f32,
    /// ℓ after the step: ℓ_old · e^(m_old − m_new) + Σ e^(xⱼ − m_new) over the step's keys.
    pub l_new: f32,
}

impl OnlineStep {
    /// Reads `scores`, the keys from `start` on, into the running (m, ℓ) = (`m_old`, `l_old`).
    fn read(m_old: f32, l_old: f32, start: usize, scores: &ArrayView1<f32>) -> Self {
        let m_new = scores.fold(m_old, |m, &x| m.max(x));
        let rescale = libm::expf(m_old - m_new); // e^(−∞) = 0 at the first step
        let exponentials = scores.iter().map(|&x| libm::expf(x - m_new));
        let l_new = exponentials.fold(l_old * rescale, |l, e| l + e);
        OnlineStep {
            keys: start..start + scores.len(),
            scores: scores.to_vec(),
            m_old,
            m_new,
            rescale,
            l_old,
            l_new,
        }
    }
}
// ANCHOR_END: online_step

// ANCHOR: online_softmax
/// The online softmax's one pass over a row of finite `scores`, `keys_per_step` keys at a time:
/// one [`OnlineStep`] per block of keys. The last step holds the row's maximum m and its sum ℓ =
/// Σⱼ e^(xⱼ − m); no step looks back at a score it has passed. Panics if `keys_per_step` is 0.
pub fn online_softmax(scores: &ArrayView1<f32>, keys_per_step: usize) -> Vec<OnlineStep> {
    assert!(keys_per_step > 0, "a step reads at least one key");
    let (mut m, mut l) = (f32::NEG_INFINITY, 0.0);
    let blocks = scores.axis_chunks_iter(Axis(0), keys_per_step);
    let mut steps = Vec::with_capacity(blocks.len());
    for (n, block) in blocks.enumerate() {
        let step = OnlineStep::read(m, l, n * keys_per_step, &block);
        (m, l) = (step.m_new, step.l_new);
        steps.push(step);
    }
    steps
}

/// The weights from the walk's end, e^(xⱼ − m) / ℓ with the final m and ℓ: softmax's formula
/// with the maximum and the sum the walk found. (FlashAttention needs no such second look at the
/// scores: it divides the weighted values by ℓ instead, see [`super::tiled`].)
pub fn online_weights(scores: &ArrayView1<f32>, last: &OnlineStep) -> Array1<f32> {
    scores.mapv(|x| libm::expf(x - last.m_new) / last.l_new)
}
// ANCHOR_END: online_softmax
