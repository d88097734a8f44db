//! Stage 3: §3.5 of the book, "Hiding future words with causal attention".
//!
//! A language model predicts the next token, so while it reads token `t` it must not look at tokens
//! after `t`. This stage takes stage 2's [`SelfAttentionV2`] and hides the future from it, as §3.5
//! of the book does:
//!
//! 1. §3.5.1 masks the attention weights twice over. First the simple way: softmax, zero the
//!    weights above the diagonal, divide each row by its new sum. Then the efficient way: put
//!    `-inf` above the diagonal of the *scores*, so softmax gives those entries zero weight and
//!    each row already sums to 1. Both give the same weights.
//! 2. §3.5.2 applies dropout to the weights: each one is zeroed with probability `p` and the rest
//!    are scaled by `1/(1−p)`, so a row's expected sum is unchanged.
//! 3. §3.5.3 packs it all into [`CausalAttention`], which takes a batch `(B, T, C)` and slices a
//!    mask built once for `context_length` tokens down to the `T` tokens it is given.
//! 4. Dropout is for training only: [`CausalAttention::eval`] switches it off for inference, as
//!    PyTorch's `model.eval()` does. The book says so in words; [`run`] shows it after cell #33.
//!
//! The chapter's exercises are [`weights_with_fill`] (a fill of 0 instead of −∞, the question that
//! ends GPTmini's chapter on causal attention), [`mean_of_dropouts`] (dropout keeps the expected
//! value) and [`on_first_tokens`] (a mask longer than the input). [`matmul`] and [`project`] only
//! give ndarray the batched products that PyTorch has built in.
//!
//! The dropout masks come from [`Generator::dropout`], PyTorch's default CPU path, so the two
//! dropout cells print the book's masks. PyTorch 2.4 and older on Linux x86-64 with an Intel CPU
//! drew dropout masks through MKL instead and print different ones there; that is the platform, not
//! an error in the port.

use std::io::Write;

use ndarray::linalg::general_mat_mul;
use ndarray::{
    Array, Array2, Array3, ArrayD, ArrayView, ArrayView2, ArrayView3, ArrayViewD, ArrayViewMutD,
    Axis, Dimension, Ix2, s,
};

use crate::print::{cell, heading};
use crate::rng::torch::Generator;
use crate::s1_simple::{inputs, softmax};
use crate::s2_trainable::{D_OUT, Linear, SelfAttentionV2};
use crate::{BookSeeds, Error, print};

// ANCHOR: batch
/// The book's batch, `torch.stack((inputs, inputs), dim=0)`: two copies of the six tokens.
pub fn batch() -> Array3<f32> {
    let inputs = inputs(); // (T, C)
    let copies = [inputs.view(), inputs.view()];
    ndarray::stack(Axis(0), &copies).expect("equal shapes stack") // (B, T, C) = (2, 6, 3)
}
// ANCHOR_END: batch

// ANCHOR: mask_after_softmax
/// `torch.tril(torch.ones(n, n))`: 1 where token `i` may attend to token `j` (`j ≤ i`), 0 in the
/// future.
pub fn tril_ones(n: usize) -> Array2<f32> {
    Array2::from_shape_fn((n, n), |(i, j)| if j <= i { 1.0 } else { 0.0 })
}

/// Divides each row by its sum. After the future weights are zeroed, a row no longer sums to 1;
/// dividing by what is left gives the attention the remaining tokens would have had if the future
/// had never been there.
pub fn renormalise(masked: &Array2<f32>) -> Array2<f32> {
    let row_sums = masked.sum_axis(Axis(1)).insert_axis(Axis(1)); // (T, 1)
    masked / &row_sums // (T, T)
}
// ANCHOR_END: mask_after_softmax

// ANCHOR: causal_mask
/// The causal mask a layer builds once for `context_length` tokens: `true` above the diagonal,
/// where token `i` would look at a later token `j > i` (the book's
/// `torch.triu(torch.ones(n, n), diagonal=1).bool()`).
///
/// Like the book's `register_buffer`, it holds no weights and draws no random numbers.
#[derive(Clone, Debug)]
pub struct CausalMask {
    /// (context_length, context_length)
    future: Array2<bool>,
}

impl CausalMask {
    /// The mask for inputs of up to `context_length` tokens.
    pub fn new(context_length: usize) -> Self {
        CausalMask {
            future: Array2::from_shape_fn((context_length, context_length), |(i, j)| j > i),
        }
    }

    /// The longest input the mask covers.
    pub fn context_length(&self) -> usize {
        self.future.nrows()
    }

    /// The top-left `tokens × tokens` corner (`mask.bool()[:T, :T]`), so that one mask serves every
    /// shorter input. An input longer than the context has no mask rows: that is an error, not a
    /// panic.
    pub fn for_tokens(&self, tokens: usize) -> Result<ArrayView2<'_, bool>, Error> {
        let context_length = self.context_length();
        if tokens > context_length {
            return Err(Error::ContextTooLong {
                tokens,
                context_length,
            });
        }
        Ok(self.future.slice(s![..tokens, ..tokens])) // (T, T)
    }
}

/// `scores.masked_fill(future, -inf)`: softmax turns `-inf` into a weight of exactly 0, and the
/// remaining weights of each row sum to 1 without a second normalisation. The `(T, T)` mask is
/// broadcast over any leading batch and head axes.
pub fn mask_future<D: Dimension>(
    mut scores: Array<f32, D>,
    future: &ArrayView2<bool>,
) -> Array<f32, D> {
    // ndarray has no `masked_fill`; `zip_mut_with` visits each score with its mask entry.
    scores.zip_mut_with(future, |score, &is_future| {
        if is_future {
            *score = f32::NEG_INFINITY;
        }
    });
    scores
}
// ANCHOR_END: causal_mask

// ANCHOR: batched_helpers
// Why these exist: ndarray's `dot` multiplies 2-D matrices only, while PyTorch's `@` also batches
// over the leading axes.
/// `a @ b` over the last two axes, for any number of leading batch axes (B, or B and H) of equal
/// sizes, as `torch.matmul` does: each `(T, K)` matrix of `a` is multiplied by the matching
/// `(K, N)` matrix of `b`.
pub fn matmul<D: Dimension>(a: &ArrayView<f32, D>, b: &ArrayView<f32, D>) -> Array<f32, D> {
    let (a, b) = (a.view().into_dyn(), b.view().into_dyn());
    let ndim = a.ndim();
    assert!(
        ndim >= 2 && b.ndim() == ndim,
        "matmul needs two arrays with the same number (≥ 2) of axes"
    );
    assert_eq!(
        a.shape()[..ndim - 2],
        b.shape()[..ndim - 2],
        "matmul needs equal batch axes"
    );
    let mut shape = a.shape().to_vec();
    shape[ndim - 1] = b.shape()[ndim - 1];
    let mut product = ArrayD::zeros(shape); // (…, T, N)
    matmul_into(&a, &b, product.view_mut());
    product
        .into_dimensionality()
        .expect("the product has as many axes as its factors")
}

/// Recurses over the leading axes down to the matrices, and multiplies those in place.
fn matmul_into(a: &ArrayViewD<f32>, b: &ArrayViewD<f32>, mut product: ArrayViewMutD<f32>) {
    if a.ndim() == 2 {
        let a = a.view().into_dimensionality::<Ix2>().expect("2 axes");
        let b = b.view().into_dimensionality::<Ix2>().expect("2 axes");
        let mut c = product.into_dimensionality::<Ix2>().expect("2 axes");
        general_mat_mul(1.0, &a, &b, 0.0, &mut c);
        return;
    }
    for ((a, b), product) in a
        .outer_iter()
        .zip(b.outer_iter())
        .zip(product.outer_iter_mut())
    {
        matmul_into(&a, &b, product);
    }
}

// Why this exists: `nn.Linear` accepts any leading axes, while stage 2's `Linear` takes a `(T, C)`
// matrix.
/// `linear(x)` on a batch: stage 2's `Linear` works on `(T, C)`, and a batch of `B` such matrices
/// is one `(B·T, C)` matrix, which is all `nn.Linear` does with the extra axis. (B, T, C) -> (B, T,
/// C').
pub fn project(linear: &Linear, x: &ArrayView3<f32>) -> Array3<f32> {
    let (b, t, c) = x.dim();
    let x = x.as_standard_layout(); // row-major, so the batch flattens without reordering
    let rows = x
        .view()
        .into_shape_with_order((b * t, c))
        .expect("row-major"); // (B·T, C)
    let y = linear.forward(&rows); // (B·T, C')
    let c_out = y.ncols();
    y.into_shape_with_order((b, t, c_out)).expect("row-major") // (B, T, C')
}
// ANCHOR_END: batched_helpers

// ANCHOR: causal_attention
/// `CausalAttention`: stage 2's self-attention over a batch, with the future masked out and dropout
/// on the attention weights.
#[derive(Clone, Debug)]
pub struct CausalAttention {
    /// W_query, W_key and W_value: stage 2's layer, drawn in the same order.
    pub qkv: SelfAttentionV2,
    /// The probability with which dropout zeroes each attention weight. 0 leaves them alone and
    /// draws no random numbers.
    pub dropout: f64,
    /// Whether dropout is on: `true` while training (the default), `false` at inference.
    pub training: bool,
    /// Built once for `context_length` tokens.
    pub mask: CausalMask,
}

impl CausalAttention {
    /// `CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)`: draws W_query, W_key and
    /// W_value from `rng`, in that order. The mask and the dropout layer draw nothing.
    pub fn new(
        rng: &mut Generator,
        d_in: usize,
        d_out: usize,
        context_length: usize,
        dropout: f64,
        qkv_bias: bool,
    ) -> Self {
        CausalAttention {
            qkv: SelfAttentionV2::new(rng, d_in, d_out, qkv_bias),
            dropout,
            training: true,
            mask: CausalMask::new(context_length),
        }
    }

    /// The causal attention weights, before dropout: (B, T, d_in) -> (B, T, T). Row `i` of each
    /// matrix holds token `i`'s weights over tokens `0..=i`; the future gets exactly 0.
    pub fn attn_weights(&self, x: &ArrayView3<f32>) -> Result<Array3<f32>, Error> {
        let (_, tokens, _) = x.dim(); // (B, T, C)
        let future = self.mask.for_tokens(tokens)?; // (T, T)
        let queries = project(&self.qkv.w_query, x); // (B, T, d_out)
        let keys = project(&self.qkv.w_key, x); // (B, T, d_out)
        let keys_t = keys.view().permuted_axes([0, 2, 1]); // (B, d_out, T)
        let scores = matmul(&queries.view(), &keys_t); // (B, T, T)
        let d_k = keys.dim().2 as f32;
        Ok(softmax(&(mask_future(scores, &future) / d_k.sqrt()))) // (B, T, T)
    }

    /// (B, T, d_in) -> (B, T, d_out). While training, dropout draws its mask from `rng`, after
    /// every weight was drawn, as PyTorch's global generator does; with `dropout == 0`, or at
    /// inference, nothing is drawn.
    pub fn forward(&self, x: &ArrayView3<f32>, rng: &mut Generator) -> Result<Array3<f32>, Error> {
        let p = if self.training { self.dropout } else { 0.0 };
        let weights = rng.dropout(&self.attn_weights(x)?, p); // (B, T, T)
        let values = project(&self.qkv.w_value, x); // (B, T, d_out)
        Ok(matmul(&weights.view(), &values.view())) // (B, T, d_out)
    }
}
// ANCHOR_END: causal_attention

// ANCHOR: eval
impl CausalAttention {
    /// `ca.eval()`: switches dropout off, for inference. Every weight then counts in full, and the
    /// output no longer depends on a random mask.
    pub fn eval(&mut self) {
        self.training = false;
    }

    /// `ca.train()`: switches dropout back on.
    pub fn train(&mut self) {
        self.training = true;
    }
}
// ANCHOR_END: eval

// ANCHOR: exercise_fill
/// Exercise: the causal weights with `fill` written above the diagonal of the `(T, T)` scores in
/// place of −∞, then scaled and softmaxed as [`CausalAttention`] does. −1e9 gives the weights of
/// −∞, since `exp(−1e9)` is 0 in `f32`; 0 does not, since `exp(0)` is 1.
pub fn weights_with_fill(scores: &Array2<f32>, d_k: f32, fill: f32) -> Array2<f32> {
    let mut filled = scores.clone(); // (T, T)
    for ((i, j), score) in filled.indexed_iter_mut() {
        if j > i {
            *score = fill; // token i would look at a later token j
        }
    }
    softmax(&(filled / d_k.sqrt())) // (T, T)
}
// ANCHOR_END: exercise_fill

// ANCHOR: exercise_dropout_mean
/// Exercise: the mean of `n` dropout passes over `weights`, each with its own mask from `rng`. A
/// weight survives with probability 1 − p and is then multiplied by 1/(1 − p), so its expected
/// value is the weight itself: the mean approaches `weights` as `n` grows.
pub fn mean_of_dropouts(
    rng: &mut Generator,
    weights: &Array2<f32>,
    p: f64,
    n: usize,
) -> Array2<f32> {
    let mut sum = Array2::<f32>::zeros(weights.dim()); // (T, T)
    for _ in 0..n {
        sum += &rng.dropout(weights, p); // a new mask each pass
    }
    sum / n as f32 // (T, T)
}
// ANCHOR_END: exercise_dropout_mean

// ANCHOR: exercise_first_tokens
/// Exercise: the book's layer (no dropout) with its mask built for `context_length` tokens, run
/// on the first `tokens` of the batch's six tokens: (B, tokens, C) -> (B, tokens, d_out). Neither
/// number changes a row it computes: every mask with `context_length ≥ tokens` has the same
/// top-left corner, and token i sees only tokens 0..=i, however many follow it.
pub fn on_first_tokens(
    seed: u64,
    context_length: usize,
    tokens: usize,
) -> Result<Array3<f32>, Error> {
    let batch = batch(); // (B, T, C)
    assert!(tokens <= batch.dim().1, "the batch has 6 tokens");
    let mut rng = Generator::manual_seed(seed);
    let ca = CausalAttention::new(&mut rng, batch.dim().2, D_OUT, context_length, 0.0, false);
    ca.forward(&batch.slice(s![.., ..tokens, ..]), &mut rng) // (B, tokens, d_out)
}
// ANCHOR_END: exercise_first_tokens

/// Prints the cells of §3.5 (#24–#33) in the book's order, then dropout in training and at
/// inference.
pub fn run<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    let attn_weights = applying_a_causal_mask(out, seeds)?;
    dropout_on_the_weights(out, seeds, &attn_weights)?;
    compact_causal_attention(out, seeds)?;
    dropout_at_inference(out, seeds)
}

/// §3.5.1, cells #24–#29: both masking methods on stage 2's seed-789 weights. Returns the causal
/// weights.
fn applying_a_causal_mask<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<Array2<f32>, Error> {
    heading(out, "3.5.1 Applying a causal attention mask")?;
    let inputs = inputs(); // (T, C)
    // ANCHOR: unmasked
    let mut rng = Generator::manual_seed(seeds.seed_789);
    let sa_v2 = SelfAttentionV2::new(&mut rng, inputs.ncols(), D_OUT, false);
    let attn_scores = sa_v2.scores(&inputs.view()); // (T, T)
    let d_k = sa_v2.w_key.weight.nrows() as f32;
    let attn_weights = softmax(&(&attn_scores / d_k.sqrt())); // (T, T)
    // ANCHOR_END: unmasked
    cell(out, "#24", "attn_weights", &[print::tensor(&attn_weights)])?;

    // ANCHOR: mask_simple
    let context_length = attn_scores.nrows();
    let mask_simple = tril_ones(context_length); // (T, T)
    let masked_simple = &attn_weights * &mask_simple; // (T, T)
    let masked_simple_norm = renormalise(&masked_simple); // (T, T)
    // ANCHOR_END: mask_simple
    cell(out, "#25", "mask_simple", &[print::tensor(&mask_simple)])?;
    cell(
        out,
        "#26",
        "masked_simple",
        &[print::tensor(&masked_simple)],
    )?;
    cell(
        out,
        "#27",
        "masked_simple_norm",
        &[print::tensor(&masked_simple_norm)],
    )?;

    // ANCHOR: mask_inf
    let future = CausalMask::new(context_length);
    let masked = mask_future(attn_scores, &future.for_tokens(context_length)?); // (T, T)
    let attn_weights = softmax(&(&masked / d_k.sqrt())); // (T, T)
    // ANCHOR_END: mask_inf
    cell(out, "#28", "masked", &[print::tensor(&masked)])?;
    cell(out, "#29", "attn_weights", &[print::tensor(&attn_weights)])?;

    let same = allclose(&masked_simple_norm, &attn_weights);
    let same = if same { "True" } else { "False" };
    cell(
        out,
        "check",
        "torch.allclose(masked_simple_norm, attn_weights)",
        &[same.to_string()],
    )?;
    Ok(attn_weights)
}

// ANCHOR: allclose
/// `torch.allclose(a, b)` with its default tolerances: `|a − b| ≤ 1e-8 + 1e-5·|b|` everywhere.
pub fn allclose<D: Dimension>(a: &Array<f32, D>, b: &Array<f32, D>) -> bool {
    a.shape() == b.shape()
        && a.iter()
            .zip(b)
            .all(|(&a, &b)| (a - b).abs() <= 1e-8 + 1e-5 * b.abs())
}
// ANCHOR_END: allclose

/// §3.5.2, cells #30–#31: dropout on a matrix of ones, then on the causal weights.
fn dropout_on_the_weights<W: Write>(
    out: &mut W,
    seeds: BookSeeds,
    attn_weights: &Array2<f32>,
) -> Result<(), Error> {
    heading(
        out,
        "3.5.2 Masking additional attention weights with dropout",
    )?;
    writeln!(
        out,
        "Note: PyTorch 2.4 and older on Linux x86-64 (Intel CPUs) drew dropout masks through MKL \
         and print different masks in #30 and #31.\n"
    )?;
    // ANCHOR: dropout
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let example = Array2::<f32>::ones((6, 6)); // (T, T)
    let dropped = rng.dropout(&example, 0.5); // about half zeroed, the rest doubled
    // The notebook calls torch.manual_seed(123) again, so the weights see the same mask.
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let dropped_weights = rng.dropout(attn_weights, 0.5); // (T, T)
    // ANCHOR_END: dropout
    cell(out, "#30", "dropout(example)", &[print::tensor(&dropped)])?;
    cell(
        out,
        "#31",
        "dropout(attn_weights)",
        &[print::tensor(&dropped_weights)],
    )?;
    Ok(())
}

/// §3.5.3, cells #32–#33: `CausalAttention` on the batch.
fn compact_causal_attention<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(
        out,
        "3.5.3 Implementing a compact causal self-attention class",
    )?;
    let batch = batch(); // (B, T, C)
    cell(out, "#32", "batch.shape", &[print::size(batch.shape())])?;

    // ANCHOR: causal_attention_usage
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let (_, context_length, d_in) = batch.dim();
    let ca = CausalAttention::new(&mut rng, d_in, D_OUT, context_length, 0.0, false);
    let context_vecs = ca.forward(&batch.view(), &mut rng)?; // (B, T, d_out)
    // ANCHOR_END: causal_attention_usage
    cell(
        out,
        "#33",
        "context_vecs; context_vecs.shape",
        &[
            print::tensor(&context_vecs),
            format!("context_vecs.shape: {}", print::size(context_vecs.shape())),
        ],
    )?;
    Ok(())
}

/// After §3.5.3, not a cell of the book: the same `CausalAttention` with dropout 0.5, called twice
/// while training (two masks, two outputs) and once after `eval()` (no mask: cell #33's output).
fn dropout_at_inference<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    let batch = batch(); // (B, T, C)
    // ANCHOR: dropout_at_inference
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let (_, context_length, d_in) = batch.dim();
    let mut ca = CausalAttention::new(&mut rng, d_in, D_OUT, context_length, 0.5, false);
    let first = ca.forward(&batch.view(), &mut rng)?; // (B, T, d_out), one dropout mask
    let second = ca.forward(&batch.view(), &mut rng)?; // another mask, another output
    ca.eval();
    let inference = ca.forward(&batch.view(), &mut rng)?; // no mask: every weight counts
    // ANCHOR_END: dropout_at_inference
    // As Python's print("First call:\n", context_vecs[0]) writes it.
    let first_item = |y: &Array3<f32>| print::tensor(&y.index_axis(Axis(0), 0));
    let printed = [
        format!("Training, first call:\n {}", first_item(&first)),
        format!("\nTraining, second call:\n {}", first_item(&second)),
        format!("\nAfter ca.eval():\n {}", first_item(&inference)),
    ];
    let label = "ca(batch)[0] with dropout 0.5: twice in training, once after ca.eval()";
    cell(out, "dropout at inference", label, &printed)?;
    Ok(())
}
