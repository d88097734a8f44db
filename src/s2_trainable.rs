//! Stage 2 (§3.4, "Implementing self-attention with trainable weights").

use ndarray::{Array1, Array2, ArrayView2};

use crate::rng::torch::Generator;
use crate::s1_simple::softmax;

// ANCHOR: linear
/// `nn.Linear`: `y = x·Wᵀ + b`, with the weight stored `(d_out, d_in)` as PyTorch stores it.
#[derive(Clone, Debug)]
pub struct Linear {
    /// (d_out, d_in)
    pub weight: Array2<f32>,
    /// (d_out), when the layer has a bias.
    pub bias: Option<Array1<f32>>,
}

impl Linear {
    /// Draws the weight, then the bias, from `rng`, as `nn.Linear(d_in, d_out, bias)` does.
    pub fn new(rng: &mut Generator, d_in: usize, d_out: usize, bias: bool) -> Self {
        let (weight, bias) = rng.linear(d_in, d_out, bias);
        Linear { weight, bias }
    }

    /// (T, d_in) -> (T, d_out)
    pub fn forward(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let y = x.dot(&self.weight.t()); // (T, d_out)
        match &self.bias {
            Some(b) => y + b,
            None => y,
        }
    }
}
// ANCHOR_END: linear

// ANCHOR: self_attention_v2
/// `SelfAttention_v2`: the query, key and value projections are `Linear` layers without bias.
#[derive(Clone, Debug)]
pub struct SelfAttentionV2 {
    pub w_query: Linear,
    pub w_key: Linear,
    pub w_value: Linear,
}

impl SelfAttentionV2 {
    /// Draws W_query, W_key and W_value in that order.
    pub fn new(rng: &mut Generator, d_in: usize, d_out: usize, qkv_bias: bool) -> Self {
        SelfAttentionV2 {
            w_query: Linear::new(rng, d_in, d_out, qkv_bias),
            w_key: Linear::new(rng, d_in, d_out, qkv_bias),
            w_value: Linear::new(rng, d_in, d_out, qkv_bias),
        }
    }

    /// The unnormalised scores ω = Q·Kᵀ: (T, d_in) -> (T, T).
    pub fn scores(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let queries = self.w_query.forward(x); // (T, d_out)
        let keys = self.w_key.forward(x); // (T, d_out)
        queries.dot(&keys.t()) // (T, T)
    }

    /// (T, d_in) -> (T, d_out)
    pub fn forward(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let d_k = self.w_key.weight.nrows() as f32;
        let weights = softmax(&(self.scores(x) / d_k.sqrt())); // (T, T)
        weights.dot(&self.w_value.forward(x)) // (T, d_out)
    }
}
// ANCHOR_END: self_attention_v2
