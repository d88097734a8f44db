//! Stage 4: §3.6 of the book, "Extending single-head attention to multi-head attention".
//!
//! One causal attention layer looks at the tokens one way. Multi-head attention runs several of
//! them side by side and concatenates what they find. §3.6 builds it twice:
//!
//! 1. §3.6.1 [`MultiHeadAttentionWrapper`]: a list of stage 3's [`CausalAttention`] layers, run one
//!    after the other, their outputs concatenated along the last axis.
//! 2. §3.6.2 [`MultiHeadAttention`]: one query, one key and one value projection of width `d_out`,
//!    whose outputs are split into `H` heads of `D = d_out / H` columns. A single batched matrix
//!    product over a `(B, H, T, D)` array then computes every head at once, and an output
//!    projection mixes the heads.
//!
//! The two are the same computation: with the wrapper's head weights stacked into the big
//! projections and an identity output projection ([`MultiHeadAttention::from_wrapper`]), they give
//! the same numbers (the stage's tests check this).
//!
//! The chapter's exercises are the book's Exercise 3.2 ([`two_dimensional_wrapper`]) and
//! Exercise 3.3 ([`gpt2_sized`], [`MultiHeadAttention::num_parameters`]), and
//! [`MultiHeadAttention::from_wrapper`].

use std::io::Write;

use ndarray::{Array1, Array2, Array3, Array4, ArrayView2, ArrayView3, Axis, s};

use crate::print::{cell, heading};
use crate::rng::torch::Generator;
use crate::s1_simple::softmax;
use crate::s2_trainable::{D_OUT, Linear};
use crate::s3_causal::{CausalAttention, CausalMask, batch, mask_future, matmul, project};
use crate::{BookSeeds, Error, print};

// ANCHOR: wrapper
/// `MultiHeadAttentionWrapper`: `num_heads` independent causal attention layers whose outputs are
/// concatenated. Simple, but each head does its own small matrix products, one after the other.
#[derive(Clone, Debug)]
pub struct MultiHeadAttentionWrapper {
    pub heads: Vec<CausalAttention>,
}

impl MultiHeadAttentionWrapper {
    /// Draws head 0's W_query, W_key and W_value, then head 1's, and so on, as `nn.ModuleList`
    /// creates them.
    pub fn new(
        rng: &mut Generator,
        d_in: usize,
        d_out: usize,
        context_length: usize,
        dropout: f64,
        num_heads: usize,
        qkv_bias: bool,
    ) -> Self {
        assert!(num_heads > 0, "a multi-head layer needs at least one head");
        let heads = (0..num_heads)
            .map(|_| CausalAttention::new(rng, d_in, d_out, context_length, dropout, qkv_bias))
            .collect();
        MultiHeadAttentionWrapper { heads }
    }

    /// (B, T, d_in) -> (B, T, H·d_out). With dropout, each head draws its mask in turn.
    pub fn forward(&self, x: &ArrayView3<f32>, rng: &mut Generator) -> Result<Array3<f32>, Error> {
        let outputs = self
            .heads
            .iter()
            .map(|head| head.forward(x, rng)) // H × (B, T, d_out)
            .collect::<Result<Vec<_>, _>>()?;
        let views: Vec<_> = outputs.iter().map(|o| o.view()).collect();
        let concatenated = ndarray::concatenate(Axis(2), &views); // (B, T, H·d_out)
        Ok(concatenated.expect("every head has the same (B, T)"))
    }
}
// ANCHOR_END: wrapper

// ANCHOR: multi_head_attention
/// D = d_out / num_heads, the width of one head. Every head gets the same number of columns, so
/// d_out must be a multiple of num_heads.
pub fn head_dim(d_out: usize, num_heads: usize) -> Result<usize, Error> {
    if num_heads == 0 || !d_out.is_multiple_of(num_heads) {
        return Err(Error::HeadsDontDivide { d_out, num_heads });
    }
    Ok(d_out / num_heads)
}

/// `MultiHeadAttention`: the heads share three wide projections; their columns are split into
/// heads, every head is attended to in one batched product, and `out_proj` mixes the heads'
/// outputs.
#[derive(Clone, Debug)]
pub struct MultiHeadAttention {
    /// (d_out, d_in): the `H` heads' query weights stacked, `D` rows each.
    pub w_query: Linear,
    pub w_key: Linear,
    pub w_value: Linear,
    /// (d_out, d_out), with a bias: combines what the heads found.
    pub out_proj: Linear,
    pub num_heads: usize,
    /// The probability with which dropout zeroes each attention weight. 0 draws nothing.
    pub dropout: f64,
    pub mask: CausalMask,
}

impl MultiHeadAttention {
    /// `MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias)`: draws
    /// W_query, W_key, W_value, then `out_proj`'s weight and bias. Each head gets
    /// `d_out / num_heads` columns, so `d_out` must be a multiple of `num_heads`; otherwise nothing
    /// is drawn and the error says so.
    pub fn new(
        rng: &mut Generator,
        d_in: usize,
        d_out: usize,
        context_length: usize,
        dropout: f64,
        num_heads: usize,
        qkv_bias: bool,
    ) -> Result<Self, Error> {
        head_dim(d_out, num_heads)?;
        Ok(MultiHeadAttention {
            w_query: Linear::new(rng, d_in, d_out, qkv_bias),
            w_key: Linear::new(rng, d_in, d_out, qkv_bias),
            w_value: Linear::new(rng, d_in, d_out, qkv_bias),
            out_proj: Linear::new(rng, d_out, d_out, true),
            num_heads,
            dropout,
            mask: CausalMask::new(context_length),
        })
    }

    /// D, the width of one head.
    pub fn head_dim(&self) -> usize {
        self.w_query.weight.nrows() / self.num_heads
    }

    /// Every head's causal attention weights, before dropout: (B, T, d_in) -> (B, H, T, T).
    pub fn attn_weights(&self, x: &ArrayView3<f32>) -> Result<Array4<f32>, Error> {
        let (_, tokens, _) = x.dim(); // (B, T, C)
        let future = self.mask.for_tokens(tokens)?; // (T, T)
        let queries = self.split_heads(project(&self.w_query, x)); // (B, H, T, D)
        let keys = self.split_heads(project(&self.w_key, x)); // (B, H, T, D)
        let keys_t = keys.view().permuted_axes([0, 1, 3, 2]); // (B, H, D, T)
        let scores = matmul(&queries.view(), &keys_t); // (B, H, T, T)
        let d = self.head_dim() as f32;
        Ok(softmax(&(mask_future(scores, &future) / d.sqrt()))) // (B, H, T, T)
    }

    /// (B, T, d_in) -> (B, T, d_out). With dropout, one mask is drawn over all heads' weights.
    pub fn forward(&self, x: &ArrayView3<f32>, rng: &mut Generator) -> Result<Array3<f32>, Error> {
        let weights = rng.dropout(&self.attn_weights(x)?, self.dropout); // (B, H, T, T)
        let values = self.split_heads(project(&self.w_value, x)); // (B, H, T, D)
        let context = merge_heads(matmul(&weights.view(), &values.view())); // (B, T, d_out)
        Ok(project(&self.out_proj, &context.view())) // (B, T, d_out)
    }

    /// Gives each head its own `D` columns and moves the head axis in front of the tokens, so that
    /// a batched matrix product treats every (batch item, head) pair as one matrix. (B, T, d_out)
    /// -> (B, H, T, D).
    fn split_heads(&self, y: Array3<f32>) -> Array4<f32> {
        let (b, t, _) = y.dim();
        let heads = (b, t, self.num_heads, self.head_dim());
        let y = y.into_shape_with_order(heads).expect("d_out = H·D"); // (B, T, H, D)
        y.permuted_axes([0, 2, 1, 3]) // (B, H, T, D)
    }
}

/// Puts the heads side by side again: `transpose(1, 2)` then `view(b, T, d_out)`. (B, H, T, D) ->
/// (B, T, H·D).
fn merge_heads(context: Array4<f32>) -> Array3<f32> {
    let (b, h, t, d) = context.dim();
    let context = context.permuted_axes([0, 2, 1, 3]); // (B, T, H, D)
    let context = context.as_standard_layout().into_owned(); // `.contiguous()`
    context
        .into_shape_with_order((b, t, h * d))
        .expect("row-major") // (B, T, H·D)
}
// ANCHOR_END: multi_head_attention

// ANCHOR: exercise_from_wrapper
impl MultiHeadAttention {
    /// Exercise: the split-heads layer that computes what `wrapper` computes. Head h owns rows
    /// h·D..(h+1)·D of each wide projection, so the heads' `(D, d_in)` weights are stacked in
    /// order; `out_proj` becomes the identity, which passes the concatenated heads through. (With
    /// dropout the two still differ: the wrapper draws one mask per head.)
    pub fn from_wrapper(wrapper: &MultiHeadAttentionWrapper) -> Self {
        let heads = &wrapper.heads;
        let d_out = heads[0].qkv.w_query.weight.nrows() * heads.len(); // H·D
        MultiHeadAttention {
            w_query: stack_rows(heads.iter().map(|head| &head.qkv.w_query)),
            w_key: stack_rows(heads.iter().map(|head| &head.qkv.w_key)),
            w_value: stack_rows(heads.iter().map(|head| &head.qkv.w_value)),
            out_proj: Linear {
                weight: Array2::eye(d_out), // (d_out, d_out)
                bias: Some(Array1::zeros(d_out)),
            },
            num_heads: heads.len(),
            dropout: heads[0].dropout,
            mask: heads[0].mask.clone(),
        }
    }
}

/// The heads' `(D, d_in)` layers as one `(H·D, d_in)` layer: head h's rows become rows
/// h·D..(h+1)·D, and its biases the same entries of the bias.
fn stack_rows<'a>(layers: impl Iterator<Item = &'a Linear>) -> Linear {
    let layers: Vec<&Linear> = layers.collect();
    let weights: Vec<_> = layers.iter().map(|l| l.weight.view()).collect(); // H × (D, d_in)
    let biases: Option<Vec<_>> = layers
        .iter()
        .map(|l| Some(l.bias.as_ref()?.view()))
        .collect();
    let same_width = "every head has the same width";
    Linear {
        weight: ndarray::concatenate(Axis(0), &weights).expect(same_width), // (H·D, d_in)
        bias: biases.map(|b| ndarray::concatenate(Axis(0), &b).expect(same_width)), // (H·D)
    }
}
// ANCHOR_END: exercise_from_wrapper

/// Prints the cells of §3.6 (#34–#37) and exercises 3.2 and 3.3, in the book's order.
pub fn run<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    stacking_heads(out, seeds)?;
    weight_splits(out, seeds)?;
    exercise_3_2(out, seeds)?;
    exercise_3_3(out, seeds)
}

/// The book's `context_vecs` and its shape, as cells #33–#35 print them.
fn context_vecs_lines(context_vecs: &Array3<f32>) -> [String; 2] {
    [
        print::tensor(context_vecs),
        format!("context_vecs.shape: {}", print::size(context_vecs.shape())),
    ]
}

/// §3.6.1, cell #34: two stage-3 heads side by side.
fn stacking_heads<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(out, "3.6.1 Stacking multiple single-head attention layers")?;
    let batch = batch(); // (B, T, C)
    // ANCHOR: wrapper_usage
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let num_heads = 2;
    let mha = MultiHeadAttentionWrapper::new(
        &mut rng,
        d_in,
        D_OUT,
        context_length,
        0.0,
        num_heads,
        false,
    );
    let context_vecs = mha.forward(&batch.view(), &mut rng)?; // (B, T, H·d_out)
    // ANCHOR_END: wrapper_usage
    cell(
        out,
        "#34",
        "context_vecs; context_vecs.shape",
        &context_vecs_lines(&context_vecs),
    )?;
    Ok(())
}

/// §3.6.2, cells #35–#37: the split-heads layer, then the batched product it relies on.
fn weight_splits<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(
        out,
        "3.6.2 Implementing multi-head attention with weight splits",
    )?;
    let batch = batch(); // (B, T, C)
    // ANCHOR: multi_head_attention_usage
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let num_heads = 2;
    let mha =
        MultiHeadAttention::new(&mut rng, d_in, D_OUT, context_length, 0.0, num_heads, false)?;
    let context_vecs = mha.forward(&batch.view(), &mut rng)?; // (B, T, d_out)
    // ANCHOR_END: multi_head_attention_usage
    cell(
        out,
        "#35",
        "context_vecs; context_vecs.shape",
        &context_vecs_lines(&context_vecs),
    )?;

    // ANCHOR: batched_matmul
    // (b, num_heads, num_tokens, head_dim) = (1, 2, 3, 4)
    let a = Array4::from_shape_vec((1, 2, 3, 4), BOOK_A.concat()).expect("24 values");
    let both = matmul(&a.view(), &a.view().permuted_axes([0, 1, 3, 2])); // (1, 2, 3, 3)
    let first_head: ArrayView2<f32> = a.slice(s![0, 0, .., ..]); // (3, 4)
    let first_res = first_head.dot(&first_head.t()); // (3, 3)
    let second_head: ArrayView2<f32> = a.slice(s![0, 1, .., ..]); // (3, 4)
    let second_res = second_head.dot(&second_head.t()); // (3, 3)
    // ANCHOR_END: batched_matmul
    cell(out, "#36", "a @ a.transpose(2, 3)", &[print::tensor(&both)])?;
    // Python's print("First head:\n", first_res) puts a space between the two arguments.
    cell(
        out,
        "#37",
        "first_res; second_res",
        &[
            format!("First head:\n {}", print::tensor(&first_res)),
            format!("\nSecond head:\n {}", print::tensor(&second_res)),
        ],
    )?;
    Ok(())
}

/// The chapter's literal tensor `a`, row by row: 2 heads × 3 tokens, 4 values each.
const BOOK_A: [[f32; 4]; 6] = [
    [0.2745, 0.6584, 0.2775, 0.8573],
    [0.8993, 0.0390, 0.9268, 0.7388],
    [0.7179, 0.7058, 0.9156, 0.4340],
    [0.0772, 0.3565, 0.1479, 0.5331],
    [0.4066, 0.2318, 0.4545, 0.9737],
    [0.4606, 0.5159, 0.4220, 0.5786],
];

// ANCHOR: exercise_3_2
/// Exercise 3.2: the book's wrapper of two heads with `d_out = 1` per head, so that its context
/// vectors have 2 columns, as many as `MultiHeadAttention`'s with `d_out = 2`. Only the argument
/// changes: the width of the output is the heads' widths added up.
pub fn two_dimensional_wrapper(
    rng: &mut Generator,
    d_in: usize,
    context_length: usize,
) -> MultiHeadAttentionWrapper {
    let d_out = 1; // per head: two heads give 2 columns
    MultiHeadAttentionWrapper::new(rng, d_in, d_out, context_length, 0.0, 2, false)
}
// ANCHOR_END: exercise_3_2

/// Exercise 3.2 on the batch: context vectors of 2 columns.
fn exercise_3_2<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(
        out,
        "Exercise 3.2 Returning two-dimensional embedding vectors",
    )?;
    let batch = batch(); // (B, T, C)
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let mha = two_dimensional_wrapper(&mut rng, d_in, context_length);
    let context_vecs = mha.forward(&batch.view(), &mut rng)?; // (B, T, 2)
    cell(
        out,
        "exercise 3.2",
        "context_vecs; context_vecs.shape",
        &context_vecs_lines(&context_vecs),
    )?;
    Ok(())
}

// ANCHOR: exercise_3_3
/// Exercise 3.3: a layer of the smallest GPT-2's size, 768 wide with 12 heads of 64 columns, for
/// a context of 1,024 tokens.
pub fn gpt2_sized(rng: &mut Generator) -> Result<MultiHeadAttention, Error> {
    MultiHeadAttention::new(rng, 768, 768, 1024, 0.0, 12, false)
}

impl MultiHeadAttention {
    /// The number of weights and biases, counted from the arrays
    /// (`sum(p.numel() for p in mha.parameters())`).
    pub fn num_parameters(&self) -> usize {
        [&self.w_query, &self.w_key, &self.w_value, &self.out_proj]
            .iter()
            .map(|l| l.weight.len() + l.bias.as_ref().map_or(0, |b| b.len()))
            .sum()
    }
}
// ANCHOR_END: exercise_3_3

/// Exercise 3.3: the GPT-2-sized layer's parameter count.
fn exercise_3_3<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(
        out,
        "Exercise 3.3 Initializing GPT-2 size attention modules",
    )?;
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let num_parameters = gpt2_sized(&mut rng)?.num_parameters();
    cell(
        out,
        "exercise 3.3",
        "count_parameters(mha)",
        &[num_parameters.to_string()],
    )?;
    Ok(())
}

// ANCHOR: head_0_both_ways
/// Head 0 of the chapter's queries (seed 123, first batch item), split into heads two ways: as
/// `MultiHeadAttention` splits them, `view` to (B, T, H, D) then `transpose(1, 2)`, and by a
/// straight reshape to (B, H, T, D). Each row of head 0 is printed with the entry of Q it came
/// from: its token, its column, and the head that column belongs to. Not in the book: it shows
/// why the split needs the transpose.
pub fn head_0_both_ways(seeds: BookSeeds) -> Result<String, Error> {
    let batch = batch(); // (B, T, C)
    let (_, t, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let mha = MultiHeadAttention::new(&mut rng, d_in, 2, t, 0.0, 2, false)?;
    let (h, d) = (mha.num_heads, mha.head_dim());
    let q = project(&mha.w_query, &batch.view()).index_axis_move(Axis(0), 0); // (T, d_out)
    // Each entry with where it came from, moved by the same reshapes as the numbers.
    let entries = Array2::from_shape_fn(q.dim(), |(token, column)| {
        (token, column, q[(token, column)])
    });
    let viewed = entries
        .clone()
        .into_shape_with_order((t, h, d))
        .expect("T·H·D entries"); // (T, H, D)
    let split = viewed.permuted_axes([1, 0, 2]); // (H, T, D)
    let reshaped = entries
        .into_shape_with_order((h, t, d))
        .expect("H·T·D entries"); // (H, T, D)
    let mut lines = vec![];
    for (how, heads) in [
        ("view, then transpose(1, 2)", split),
        ("reshape to (B, H, T, D)", reshaped),
    ] {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.push(format!("head 0 after {how}:"));
        for &(token, column, value) in heads.index_axis(Axis(0), 0).iter() {
            let word = crate::s1_simple::TOKENS[token];
            let owner = column / d;
            lines.push(format!(
                "  {word:<8} Q[{token}, {column}] = {value:7.4}  (head {owner})"
            ));
        }
    }
    Ok(lines.join("\n"))
}
// ANCHOR_END: head_0_both_ways
