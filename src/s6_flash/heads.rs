//! Stage 4's causal attention one head at a time, and stage 4's multi-head layer with any form of
//! that attention in its place, so that the tiled and exact forms can be compared with it.

use ndarray::{Array2, Array3, ArrayView2, ArrayView3, s};

use crate::Error;
use crate::s1_simple::softmax;
use crate::s3_causal::{CausalMask, mask_future, project};
use crate::s4_multihead::MultiHeadAttention;

// ANCHOR: naive_attention
/// Stage 4's attention for one head, written out: softmax(mask(Q·Kᵀ) / √D)·V with the (T, T)
/// scores and weights in memory. Q, K, V (T, D) -> (T, D). The same operations, in the same order,
/// as [`MultiHeadAttention::attn_weights`] and `forward` apply to each head, so the same bits
/// (`tests/s6_flash.rs` checks the whole layer).
pub fn naive_attention(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    v: &ArrayView2<f32>,
) -> Array2<f32> {
    let t = q.nrows();
    let mask = CausalMask::new(t);
    let future = mask.for_tokens(t).expect("the mask is built for T tokens"); // (T, T)
    let scores = q.dot(&k.t()); // (T, T)
    let d = q.ncols() as f32;
    let weights = softmax(&(mask_future(scores, &future) / d.sqrt())); // (T, T)
    weights.dot(v) // (T, D)
}
// ANCHOR_END: naive_attention

// ANCHOR: multi_head_forward
/// Stage 4's [`MultiHeadAttention::forward`] without dropout, with `attend` computing each head's
/// causal attention from its Q, K, V (T, D): the same projections, head h taking columns
/// h·D..(h+1)·D, and the heads side by side into `out_proj`. (B, T, d_in) -> (B, T, d_out).
/// An input longer than the layer's context is refused as stage 4 refuses it.
pub fn multi_head_forward<F>(
    mha: &MultiHeadAttention,
    x: &ArrayView3<f32>,
    attend: F,
) -> Result<Array3<f32>, Error>
where
    F: Fn(&ArrayView2<f32>, &ArrayView2<f32>, &ArrayView2<f32>) -> Array2<f32>,
{
    let (batch, tokens, _) = x.dim();
    mha.mask.for_tokens(tokens)?;
    let q = project(&mha.w_query, x); // (B, T, d_out)
    let k = project(&mha.w_key, x); // (B, T, d_out)
    let v = project(&mha.w_value, x); // (B, T, d_out)
    let d = mha.head_dim();
    let mut context = Array3::zeros(q.dim()); // (B, T, d_out)
    for b in 0..batch {
        for h in 0..mha.num_heads {
            let head = s![b, .., h * d..(h + 1) * d];
            let o = attend(&q.slice(head), &k.slice(head), &v.slice(head)); // (T, D)
            context.slice_mut(head).assign(&o);
        }
    }
    Ok(project(&mha.out_proj, &context.view())) // (B, T, d_out)
}
// ANCHOR_END: multi_head_forward
