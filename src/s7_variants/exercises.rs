//! The solutions of stage 7's exercises; `tests/s7_variants.rs` runs each.

use super::kv::KvShape;
use crate::s5_gpt::variants::rope_angles;

// ANCHOR: interleaved_rope
/// Exercise 1: RoPE in the interleaved form of the original paper (and of GPT-J and Meta's first
/// Llama code): pair i is coordinates 2i and 2i + 1, not i and i + D/2. One row of D values at
/// position `p`.
pub fn rope_interleaved(x: &[f32], p: usize) -> Vec<f32> {
    let d = x.len();
    let (cos, sin) = rope_angles(p..p + 1, d); // (1, D/2)
    let mut out = vec![0.0; d];
    for (i, (pair, out)) in x.chunks_exact(2).zip(out.chunks_exact_mut(2)).enumerate() {
        out[0] = pair[0] * cos[i] + (-pair[1]) * sin[i];
        out[1] = pair[1] * cos[i] + pair[0] * sin[i];
    }
    out
}

/// The split-halves layout of an interleaved row: coordinates 0, 2, 4, … then 1, 3, 5, …
pub fn to_split_halves(x: &[f32]) -> Vec<f32> {
    let evens = x.iter().step_by(2);
    let odds = x.iter().skip(1).step_by(2);
    evens.chain(odds).copied().collect()
}
// ANCHOR_END: interleaved_rope

// ANCHOR: mqa_memory
/// Exercise 2: the KV cache of the chapter's model (2 blocks, 4 heads of 16, float32) at its
/// context of 32 tokens, with K key/value heads: MHA at K = 4, MQA at K = 1.
pub fn chapter_model_cache(kv_heads: usize) -> u64 {
    let shape = KvShape {
        layers: 2,
        heads: 4,
        kv_heads,
        head_dim: 16,
        window: None,
        latent: None,
        bytes: 4,
    };
    shape.total_bytes(1, 32)
}
// ANCHOR_END: mqa_memory

// ANCHOR: other_window
/// Exercise 3: the keys a query sees under the other convention, where the window W counts the
/// keys before the query and the query itself comes on top (W + 1 keys): this crate's window of
/// W + 1.
pub fn window_seeing_w_before(w: usize) -> usize {
    w + 1
}
// ANCHOR_END: other_window
