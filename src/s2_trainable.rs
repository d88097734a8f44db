//! Stage 2: §3.4 of the book, "Implementing self-attention with trainable weights".
//!
//! Stage 1 compared the inputs with each other directly. Here three trainable matrices first
//! project every input into a query, a key and a value (of size d_out = 2, so the projection is
//! visible), the scores are queries · keys scaled by 1/√d_k, and the context vectors weight the
//! values. §3.4.1 walks through it for the query x⁽²⁾ with `torch.rand` weights at seed 123
//! ([`WalkThrough`]); §3.4.2 packs it into [`SelfAttentionV1`] and then into [`SelfAttentionV2`],
//! whose [`Linear`] layers draw their weights as `nn.Linear` does (at seed 789). [`Scaling`] shows
//! on random vectors why the scores are divided by √d_k, which the book explains in words. The
//! chapter's exercises: the book's Exercise 3.1 shows the two classes compute the same thing
//! ([`SelfAttentionV1::from_v2`]), and [`SelfAttentionV2::without_key_bias`] that a bias on the
//! keys changes nothing.
//!
//! [`run`] prints the notebook's cells #16–#23 and the exercise as the book prints them, with the
//! √d_k example after cell #20. Other [`BookSeeds`] replace 123 and 789.

use std::io::Write;

use ndarray::{Array1, Array2, ArrayView2};

use crate::BookSeeds;
use crate::print;
use crate::print::{cell, heading};
use crate::rng::torch::Generator;
use crate::s1_simple::{inputs, softmax};

/// The output size the chapter uses, smaller than d_in = 3 so that the projection is visible.
pub const D_OUT: usize = 2;

/// Every intermediate of §3.4.1, computed for the second token, x⁽²⁾ ("journey").
#[derive(Clone, Debug)]
pub struct WalkThrough {
    /// q⁽²⁾ = x⁽²⁾ W_q: (d_out).
    pub query_2: Array1<f32>,
    /// k⁽ⁱ⁾ = x⁽ⁱ⁾ W_k for every token: (T, d_out).
    pub keys: Array2<f32>,
    /// v⁽ⁱ⁾ = x⁽ⁱ⁾ W_v for every token: (T, d_out).
    pub values: Array2<f32>,
    /// ω₂₂ = q⁽²⁾ · k⁽²⁾.
    pub attn_score_22: f32,
    /// ω₂ᵢ = q⁽²⁾ · k⁽ⁱ⁾: (T).
    pub attn_scores_2: Array1<f32>,
    /// softmax(ω₂ / √d_k): (T).
    pub attn_weights_2: Array1<f32>,
    /// z⁽²⁾ = Σᵢ α₂ᵢ v⁽ⁱ⁾: (d_out).
    pub context_vec_2: Array1<f32>,
}

impl WalkThrough {
    /// Draws W_query, W_key and W_value with `torch.rand(d_in, d_out)`, in that order, and follows
    /// the query x⁽²⁾ through every step.
    pub fn new(inputs: &ArrayView2<f32>, rng: &mut Generator, d_out: usize) -> Self {
        // ANCHOR: walk_through_weights
        let d_in = inputs.ncols();
        let w_query = rng.rand((d_in, d_out)); // (d_in, d_out)
        let w_key = rng.rand((d_in, d_out)); // (d_in, d_out)
        let w_value = rng.rand((d_in, d_out)); // (d_in, d_out)
        // ANCHOR_END: walk_through_weights

        // ANCHOR: walk_through_projections
        let x_2 = inputs.row(1); // (d_in): "journey"
        let query_2 = x_2.dot(&w_query); // (d_out)
        let keys = inputs.dot(&w_key); // (T, d_out)
        let values = inputs.dot(&w_value); // (T, d_out)
        // ANCHOR_END: walk_through_projections

        // ANCHOR: walk_through_scores
        let keys_2 = keys.row(1); // (d_out)
        let attn_score_22 = query_2.dot(&keys_2);
        let attn_scores_2 = query_2.dot(&keys.t()); // (T)
        // ANCHOR_END: walk_through_scores

        // ANCHOR: walk_through_softmax
        let d_k = keys.ncols() as f32;
        let attn_weights_2 = softmax(&(&attn_scores_2 / d_k.sqrt())); // (T)
        // ANCHOR_END: walk_through_softmax

        // ANCHOR: walk_through_context
        let context_vec_2 = attn_weights_2.dot(&values); // (d_out)
        // ANCHOR_END: walk_through_context

        WalkThrough {
            query_2,
            keys,
            values,
            attn_score_22,
            attn_scores_2,
            attn_weights_2,
            context_vec_2,
        }
    }
}

// ANCHOR: scaling
/// Why the scores are divided by √d_k, shown on random vectors: one query and six keys of size
/// `d_k`, every component drawn uniformly from [−√3, √3), which has mean 0 and variance 1. Each
/// score q·k is then a sum of d_k products of variance 1, so its variance is d_k, and dividing by
/// √d_k brings it back to 1.
#[derive(Clone, Debug)]
pub struct Scaling {
    /// q·k⁽ⁱ⁾ for the six keys: (T).
    pub scores: Array1<f32>,
    /// softmax(scores), without the scaling: (T).
    pub unscaled_weights: Array1<f32>,
    /// softmax(scores / √d_k): (T).
    pub weights: Array1<f32>,
}

impl Scaling {
    /// Draws the query, then the keys, from `rng`
    /// (`torch.empty(d_k).uniform_(-3**0.5, 3**0.5)`, then the same for `(6, d_k)`).
    pub fn new(rng: &mut Generator, d_k: usize) -> Self {
        let bound = 3f64.sqrt();
        let query = rng.uniform(d_k, -bound, bound); // (d_k)
        let keys = rng.uniform((6, d_k), -bound, bound); // (T, d_k)
        let scores = keys.dot(&query); // (T)
        let unscaled_weights = softmax(&scores); // (T)
        let weights = softmax(&(&scores / (d_k as f32).sqrt())); // (T)
        Scaling {
            scores,
            unscaled_weights,
            weights,
        }
    }
}

/// How fast a softmax weight still follows its own score: ∂αᵢ/∂ωᵢ = αᵢ(1 − αᵢ), at most 0.25 (at αᵢ
/// = 0.5). Returns the largest over `weights`; near 0, the gradient that trains the scores
/// vanishes.
pub fn largest_self_gradient(weights: &Array1<f32>) -> f32 {
    weights.iter().map(|a| a * (1.0 - a)).fold(0.0, f32::max)
}
// ANCHOR_END: scaling

// ANCHOR: self_attention_v1
/// `SelfAttention_v1`: the three projections are plain `(d_in, d_out)` matrices drawn by
/// `torch.rand`, and `x @ W` projects.
#[derive(Clone, Debug)]
pub struct SelfAttentionV1 {
    /// (d_in, d_out)
    pub w_query: Array2<f32>,
    /// (d_in, d_out)
    pub w_key: Array2<f32>,
    /// (d_in, d_out)
    pub w_value: Array2<f32>,
}

impl SelfAttentionV1 {
    /// Draws W_query, W_key and W_value with `torch.rand(d_in, d_out)`, in that order.
    pub fn new(rng: &mut Generator, d_in: usize, d_out: usize) -> Self {
        SelfAttentionV1 {
            w_query: rng.rand((d_in, d_out)),
            w_key: rng.rand((d_in, d_out)),
            w_value: rng.rand((d_in, d_out)),
        }
    }

    /// (T, d_in) -> (T, d_out)
    pub fn forward(&self, x: &ArrayView2<f32>) -> Array2<f32> {
        let keys = x.dot(&self.w_key); // (T, d_out)
        let queries = x.dot(&self.w_query); // (T, d_out)
        let values = x.dot(&self.w_value); // (T, d_out)
        let attn_scores = queries.dot(&keys.t()); // (T, T)
        let d_k = keys.ncols() as f32;
        let attn_weights = softmax(&(attn_scores / d_k.sqrt())); // (T, T)
        attn_weights.dot(&values) // (T, d_out)
    }
}
// ANCHOR_END: self_attention_v1

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
    /// Draws the weight, then the bias, from `rng`, as `nn.Linear(d_in, d_out, bias)` does: uniform
    /// in ±1/√d_in, which keeps the outputs near the size of the inputs (`torch.rand`'s [0, 1) does
    /// not).
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
/// `SelfAttention_v2`: the query, key and value projections are `Linear` layers, without bias
/// unless `qkv_bias` asks for one.
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

// ANCHOR: exercise_3_1
impl SelfAttentionV1 {
    /// Exercise 3.1: a `SelfAttentionV1` that computes exactly what `v2` computes. `nn.Linear`
    /// keeps its weight as `(d_out, d_in)` and multiplies by its transpose, so v1's `(d_in, d_out)`
    /// matrices are v2's weights transposed
    /// (`sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T)`).
    pub fn from_v2(v2: &SelfAttentionV2) -> Self {
        let transposed = |linear: &Linear| {
            assert!(
                linear.bias.is_none(),
                "SelfAttentionV1 has no bias; build the SelfAttentionV2 with qkv_bias = false"
            );
            linear.weight.t().to_owned() // (d_in, d_out)
        };
        SelfAttentionV1 {
            w_query: transposed(&v2.w_query),
            w_key: transposed(&v2.w_key),
            w_value: transposed(&v2.w_value),
        }
    }
}
// ANCHOR_END: exercise_3_1

// ANCHOR: exercise_key_bias
impl SelfAttentionV2 {
    /// Exercise: the same layer without the bias of its keys, which changes nothing in its output.
    /// A key bias b adds q⁽ⁱ⁾·b to every score of row i, the same amount for every key, and softmax
    /// ignores what a whole row shares: e^(ωᵢⱼ + c) / Σₖ e^(ωᵢₖ + c) = e^ωᵢⱼ / Σₖ e^ωᵢₖ.
    pub fn without_key_bias(&self) -> Self {
        let mut layer = self.clone();
        layer.w_key.bias = None;
        layer
    }
}
// ANCHOR_END: exercise_key_bias

/// §3.4.1, cells #16–#21: the walk-through with `torch.rand` weights at `seed`.
fn print_3_4_1<W: Write>(out: &mut W, seed: u64) -> std::io::Result<()> {
    heading(out, "3.4.1 Computing the attention weights step by step")?;
    let mut rng = Generator::manual_seed(seed);
    let step = WalkThrough::new(&inputs().view(), &mut rng, D_OUT);
    cell(out, "#16", "query_2", &[print::tensor(&step.query_2)])?;
    let shapes = [
        format!("keys.shape: {}", print::size(step.keys.shape())),
        format!("values.shape: {}", print::size(step.values.shape())),
    ];
    cell(out, "#17", "keys.shape; values.shape", &shapes)?;
    cell(
        out,
        "#18",
        "attn_score_22",
        &[print::scalar(step.attn_score_22)],
    )?;
    cell(
        out,
        "#19",
        "attn_scores_2",
        &[print::tensor(&step.attn_scores_2)],
    )?;
    cell(
        out,
        "#20",
        "attn_weights_2",
        &[print::tensor(&step.attn_weights_2)],
    )?;
    print_scaling(out, seed)?;
    cell(
        out,
        "#21",
        "context_vec_2",
        &[print::tensor(&step.context_vec_2)],
    )
}

/// Why the book divides by √d_k: random scores for a small and a large key size, before and after
/// the scaling, at `seed`. Not a cell of the book: the book explains this in words.
fn print_scaling<W: Write>(out: &mut W, seed: u64) -> std::io::Result<()> {
    let mut rng = Generator::manual_seed(seed);
    for d_k in [2, 512] {
        let demo = Scaling::new(&mut rng, d_k);
        let lines = [
            format!("scores: {}", print::tensor(&demo.scores)),
            format!("softmax(scores): {}", print::tensor(&demo.unscaled_weights)),
            format!("softmax(scores / √{d_k}): {}", print::tensor(&demo.weights)),
            format!(
                "largest α(1−α), unscaled and scaled: {}",
                print::tensor(&ndarray::arr1(&[
                    largest_self_gradient(&demo.unscaled_weights),
                    largest_self_gradient(&demo.weights),
                ]))
            ),
        ];
        let label = "Scaling::new(&mut rng, d_k), then largest_self_gradient";
        cell(out, &format!("d_k = {d_k}"), label, &lines)?;
    }
    Ok(())
}

/// §3.4.2, cells #22–#23: `SelfAttention_v1` at `seeds.seed_123`, `SelfAttention_v2` at
/// `seeds.seed_789`.
fn print_3_4_2<W: Write>(out: &mut W, seeds: BookSeeds) -> std::io::Result<()> {
    heading(out, "3.4.2 Implementing a compact SelfAttention class")?;
    let inputs = inputs(); // (T, d_in)
    let d_in = inputs.ncols();
    // ANCHOR: self_attention_v1_usage
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let sa_v1 = SelfAttentionV1::new(&mut rng, d_in, D_OUT);
    let context = sa_v1.forward(&inputs.view()); // (T, d_out)
    // ANCHOR_END: self_attention_v1_usage
    cell(out, "#22", "sa_v1(inputs)", &[print::tensor(&context)])?;
    // ANCHOR: self_attention_v2_usage
    let mut rng = Generator::manual_seed(seeds.seed_789);
    let sa_v2 = SelfAttentionV2::new(&mut rng, d_in, D_OUT, false);
    let context = sa_v2.forward(&inputs.view()); // (T, d_out)
    // ANCHOR_END: self_attention_v2_usage
    cell(out, "#23", "sa_v2(inputs)", &[print::tensor(&context)])
}

/// Exercise 3.1, as the chapter's exercise-solutions notebook runs it: `SelfAttention_v2` at seed
/// 123, its weights transposed into a `SelfAttention_v1`, and both applied to the inputs (its cells
/// #4 and #5).
fn print_exercise_3_1<W: Write>(out: &mut W, seed: u64) -> std::io::Result<()> {
    heading(
        out,
        "Exercise 3.1 Comparing SelfAttention_v1 and SelfAttention_v2",
    )?;
    let inputs = inputs(); // (T, d_in)
    // ANCHOR: exercise_3_1_usage
    let mut rng = Generator::manual_seed(seed);
    let sa_v2 = SelfAttentionV2::new(&mut rng, inputs.ncols(), D_OUT, false);
    let sa_v1 = SelfAttentionV1::from_v2(&sa_v2);
    let v1 = sa_v1.forward(&inputs.view()); // (T, d_out)
    let v2 = sa_v2.forward(&inputs.view()); // (T, d_out)
    // ANCHOR_END: exercise_3_1_usage
    let label = "sa_v1(inputs), with W_query = sa_v2.W_query.weight.T and so on";
    cell(out, "exercise #4", label, &[print::tensor(&v1)])?;
    cell(out, "exercise #5", "sa_v2(inputs)", &[print::tensor(&v2)])
}

/// Writes cells #16–#23 of the chapter and exercise 3.1 in order, as the book prints them, and the
/// √d_k example after cell #20. The `torch.rand` weights, the √d_k example and the exercise use
/// `seeds.seed_123`, `SelfAttention_v2` in #23 uses `seeds.seed_789`.
pub fn run<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), crate::Error> {
    print_3_4_1(out, seeds.seed_123)?;
    print_3_4_2(out, seeds)?;
    print_exercise_3_1(out, seeds.seed_123)?;
    Ok(())
}
