//! Stage 1: §3.3 of the book, "Attending to different parts of the input with self-attention".
//!
//! §3.3.1 builds one context vector, z⁽²⁾, for the second token "journey" in three steps, each
//! first as a loop: the scores ω (dot products with the query), the weights α (the scores
//! normalised to sum to 1, by the sum and then by softmax), and the context vector (the inputs
//! weighted by α). §3.3.2 does the same for every token at once, and shows that the loops are
//! matrix products. Nothing here is trained and nothing is random, so a seed changes nothing in
//! this stage.
//!
//! [`run`] prints the notebook's cells #2–#13 as the book prints them. The chapter's exercises are
//! [`context_vector_by_loops`], [`softmaxes_of_scaled_scores`] and [`cosine_attention_weights`];
//! [`torch_sum`], [`torch_row_sums`] and [`printed_row_sum`] only add in the order the book's sums
//! were added, so that the printed sums are the book's.

use std::io::Write;

use ndarray::{Array, Array1, Array2, ArrayView1, ArrayView2, Axis, Dimension, arr2};

use crate::print::{self, cell, heading, python_float};

/// The words of the chapter's six-token sentence, in order.
pub const TOKENS: [&str; 6] = ["Your", "journey", "starts", "with", "one", "step"];

// ANCHOR: inputs
/// One 3-dimensional embedding per token of "Your journey starts with one step", as chapter 2 would
/// have produced them (the book picks small numbers so that each vector fits on a line).
pub const INPUTS: [[f32; 3]; 6] = [
    [0.43, 0.15, 0.89], // Your     (x^1)
    [0.55, 0.87, 0.66], // journey  (x^2)
    [0.57, 0.85, 0.64], // starts   (x^3)
    [0.22, 0.58, 0.33], // with     (x^4)
    [0.77, 0.25, 0.10], // one      (x^5)
    [0.05, 0.80, 0.55], // step     (x^6)
];

/// [`INPUTS`] as a tensor: (T, d_in) = (6, 3).
pub fn inputs() -> Array2<f32> {
    arr2(&INPUTS)
}
// ANCHOR_END: inputs

/// The sentence the inputs embed.
pub fn sentence() -> String {
    TOKENS.join(" ")
}

// ANCHOR: scores_loop
/// Step 1: the attention scores ω₂ᵢ = x⁽ⁱ⁾·q for one query, one dot product per input token.
pub fn attn_scores_for(query: &ArrayView1<f32>, inputs: &ArrayView2<f32>) -> Array1<f32> {
    let mut attn_scores = Array1::zeros(inputs.nrows()); // (T)
    for (i, x_i) in inputs.rows().into_iter().enumerate() {
        attn_scores[i] = x_i.dot(query);
    }
    attn_scores
}
// ANCHOR_END: scores_loop

// ANCHOR: dot_loop
/// A dot product spelled out: multiply element by element and add up, as `torch.dot` does.
pub fn dot_loop(a: &ArrayView1<f32>, b: &ArrayView1<f32>) -> f32 {
    let mut res = 0.0;
    for (x, y) in a.iter().zip(b) {
        res += x * y;
    }
    res
}
// ANCHOR_END: dot_loop

// ANCHOR: torch_sum
/// `x.sum()` (or `x.sum(dim=-1)` on one row) in the order PyTorch's CPU kernel adds, for rows
/// shorter than 8.
///
/// The order decides the last bit, and the last bit decides how torch prints a sum: `tensor(1.)`
/// when it is exactly 1 and `tensor(1.0000)` otherwise. Summed left to right, the weights of
/// [`softmax_naive`] give 1.0000001, but the book prints `Sum: tensor(1.)`. PyTorch's
/// `cascade_sum` (ATen `native/cpu/SumKernel.cpp`) takes its scalar path for a row shorter than one
/// vector register (8 floats with AVX2 or NEON, 16 with AVX-512): `row_sum` reads the row as rows
/// of 4 and keeps four running sums, adds the leftover elements to the first, and then adds the
/// other three to it. For six values that is `((((x0 + x4) + x5) + x1) + x2) + x3`, all in f32,
/// which gives 1.0 for [`softmax_naive`] and still 1.0000001 for [`normalize_by_sum`].
pub fn torch_sum(row: &ArrayView1<f32>) -> f32 {
    assert!(
        row.len() < 8,
        "torch_sum replays PyTorch's scalar path, which it takes only for rows shorter than 8"
    );
    let mut partial = [0.0f32; 4];
    let whole = row.len() / 4 * 4;
    for (k, &x) in row.iter().take(whole).enumerate() {
        partial[k % 4] += x;
    }
    for &x in row.iter().skip(whole) {
        partial[0] += x;
    }
    partial[1..].iter().fold(partial[0], |sum, &p| sum + p)
}
// ANCHOR_END: torch_sum

// ANCHOR: normalize_by_sum
/// Step 2, first try: divide the scores by their sum, so the weights add up to 1.
///
/// [`torch_sum`] is the plain sum, added in the order PyTorch adds, so that the last bit (and so
/// the printed sum) is the book's.
pub fn normalize_by_sum(attn_scores: &ArrayView1<f32>) -> Array1<f32> {
    attn_scores / torch_sum(attn_scores)
}
// ANCHOR_END: normalize_by_sum

// ANCHOR: softmax_naive
/// Softmax as the formula reads, exp(xᵢ) / Σⱼ exp(xⱼ). A score of 89 already overflows f32's `exp`,
/// which is why [`softmax`] subtracts the maximum first.
pub fn softmax_naive(x: &ArrayView1<f32>) -> Array1<f32> {
    let exp = x.mapv(libm::expf);
    let sum = torch_sum(&exp.view()); // the sum, in PyTorch's order
    exp / sum
}
// ANCHOR_END: softmax_naive

// ANCHOR: softmax
/// Softmax over the last axis, with the row maximum subtracted first so that `exp` cannot overflow
/// (what `torch.softmax(x, dim=-1)` computes).
///
/// The result is the same as [`softmax_naive`]'s, because exp(xᵢ − m) / Σⱼ exp(xⱼ − m) cancels the
/// e⁻ᵐ.
pub fn softmax<D: Dimension>(x: &Array<f32, D>) -> Array<f32, D> {
    let last = Axis(x.ndim() - 1);
    let mut out = x.clone();
    for mut row in out.lanes_mut(last) {
        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| libm::expf(v - max));
        let sum: f32 = row.sum();
        row.mapv_inplace(|v| v / sum);
    }
    out
}
// ANCHOR_END: softmax

// ANCHOR: context_loop
/// Step 3: the context vector z = Σᵢ αᵢ·x⁽ⁱ⁾, the inputs weighted by the attention weights.
pub fn context_vector(attn_weights: &ArrayView1<f32>, inputs: &ArrayView2<f32>) -> Array1<f32> {
    let mut context_vec = Array1::zeros(inputs.ncols()); // (d_in)
    for (i, x_i) in inputs.rows().into_iter().enumerate() {
        context_vec += &(&x_i * attn_weights[i]);
    }
    context_vec
}
// ANCHOR_END: context_loop

// ANCHOR: all_scores_loop
/// Step 1 for every query at once: ωᵢⱼ = x⁽ⁱ⁾·x⁽ʲ⁾ by two loops, (T, d_in) -> (T, T).
pub fn attn_scores_loops(inputs: &ArrayView2<f32>) -> Array2<f32> {
    let t = inputs.nrows();
    let mut attn_scores = Array2::zeros((t, t)); // (T, T)
    for (i, x_i) in inputs.rows().into_iter().enumerate() {
        for (j, x_j) in inputs.rows().into_iter().enumerate() {
            attn_scores[[i, j]] = x_i.dot(&x_j);
        }
    }
    attn_scores
}
// ANCHOR_END: all_scores_loop

// ANCHOR: matrix_form
/// All three steps for every token as matrix products: `inputs @ inputs.T`, a softmax over each
/// row, and `attn_weights @ inputs`. Returns (scores, weights, context vectors).
///
/// The product adds the same three terms as [`attn_scores_loops`], but a matrix-product kernel may
/// fuse each multiply into its add, so a few scores differ from the loops' in the last bit. Both
/// print the same four decimals, in the book as here.
pub fn simple_attention(inputs: &ArrayView2<f32>) -> (Array2<f32>, Array2<f32>, Array2<f32>) {
    let attn_scores = inputs.dot(&inputs.t()); // (T, T)
    let attn_weights = softmax(&attn_scores); // (T, T)
    let all_context_vecs = attn_weights.dot(inputs); // (T, d_in)
    (attn_scores, attn_weights, all_context_vecs)
}
// ANCHOR_END: matrix_form

// ANCHOR: row_sums
/// `attn_weights.sum(dim=-1)`: one [`torch_sum`] per row, (T, T) -> (T).
pub fn torch_row_sums(x: &ArrayView2<f32>) -> Array1<f32> {
    x.rows().into_iter().map(|row| torch_sum(&row)).collect()
}

/// The book's `row_2_sum`: it adds the row as it printed it, `sum([0.1385, 0.2379, ...])`, so this
/// rounds each weight to the four printed decimals and adds them as Python floats (f64).
pub fn printed_row_sum(row: &ArrayView1<f32>) -> f64 {
    let printed = |w: &f32| {
        format!("{w:.4}")
            .parse::<f64>()
            .expect("a formatted f32 parses")
    };
    row.iter().map(printed).fold(0.0, |sum, w| sum + w)
}
// ANCHOR_END: row_sums

// ANCHOR: exercise_context_by_loops
/// Exercise: the context vector of any query, `query` = 0 to 5, by the three steps of §3.3.1. It is
/// row `query` of [`simple_attention`]'s context vectors, up to the last bit (the matrix product
/// may round differently).
pub fn context_vector_by_loops(inputs: &ArrayView2<f32>, query: usize) -> Array1<f32> {
    let attn_scores = attn_scores_for(&inputs.row(query), inputs); // (T)
    let attn_weights = softmax(&attn_scores); // (T)
    context_vector(&attn_weights.view(), inputs) // (d_in)
}
// ANCHOR_END: exercise_context_by_loops

// ANCHOR: exercise_large_scores
/// Exercise: the naive and the stable softmax of the scores multiplied by `factor`.
///
/// `expf` overflows to infinity above 88.7 (f32 holds nothing above 3.4·10³⁸). At ×100 the
/// largest score is about 150, so the naive sum is infinite and each weight is x/∞ = 0 or ∞/∞ =
/// NaN. The stable softmax first subtracts that largest score: its largest exponential is e⁰ = 1,
/// and the sum lies between 1 and the number of tokens.
pub fn softmaxes_of_scaled_scores(
    attn_scores: &ArrayView1<f32>,
    factor: f32,
) -> (Array1<f32>, Array1<f32>) {
    let scaled = attn_scores * factor; // (T)
    (softmax_naive(&scaled.view()), softmax(&scaled))
}
// ANCHOR_END: exercise_large_scores

// ANCHOR: exercise_cosine
/// Exercise: the attention weights when the scores are cosine similarities, dot products of the
/// inputs scaled to length 1. A token's score with itself is then cos 0 = 1, the largest a
/// cosine can be, so every token attends most to itself.
pub fn cosine_attention_weights(inputs: &ArrayView2<f32>) -> Array2<f32> {
    let lengths = inputs.map_axis(Axis(1), |x| x.dot(&x).sqrt()); // (T)
    let unit = inputs / &lengths.insert_axis(Axis(1)); // (T, d_in), every row of length 1
    let cosines = unit.dot(&unit.t()); // (T, T)
    softmax(&cosines) // (T, T)
}
// ANCHOR_END: exercise_cosine

/// §3.3.1: scores, weights and the context vector of the query x⁽ⁱ⁾ with i = `query` + 1; the
/// chapter's is "journey", x⁽²⁾. The cells' names carry i as the notebook's carry 2.
fn print_3_3_1<W: Write>(
    out: &mut W,
    inputs: &ArrayView2<f32>,
    query: usize,
) -> std::io::Result<Array1<f32>> {
    heading(
        out,
        "3.3.1 A simple self-attention mechanism without trainable weights",
    )?;
    let i = query + 1;
    let query = inputs.row(query); // (d_in): "journey" in the chapter
    let attn_scores_2 = attn_scores_for(&query, inputs); // (T)
    let name = format!("attn_scores_{i}");
    cell(out, "#2", &name, &[print::tensor(&attn_scores_2)])?;

    let res = dot_loop(&inputs.row(0), &query);
    let torch_dot = inputs.row(0).dot(&query);
    let printed = [print::scalar(res), print::scalar(torch_dot)];
    cell(out, "#3", "res; torch.dot(inputs[0], query)", &printed)?;

    let normalizations = [
        (
            "#4",
            format!("attn_weights_{i}_tmp"),
            normalize_by_sum(&attn_scores_2.view()),
        ),
        (
            "#5",
            format!("attn_weights_{i}_naive"),
            softmax_naive(&attn_scores_2.view()),
        ),
        ("#6", format!("attn_weights_{i}"), softmax(&attn_scores_2)),
    ];
    for (number, name, weights) in &normalizations {
        let printed = [
            format!("Attention weights: {}", print::tensor(weights)),
            format!("Sum: {}", print::scalar(torch_sum(&weights.view()))),
        ];
        cell(out, number, &format!("{name}; {name}.sum()"), &printed)?;
    }

    let attn_weights_2 = &normalizations[2].2;
    let context_vec_2 = context_vector(&attn_weights_2.view(), inputs); // (d_in)
    let name = format!("context_vec_{i}");
    cell(out, "#7", &name, &[print::tensor(&context_vec_2)])?;
    Ok(context_vec_2)
}

/// §3.3.2: the same for all six tokens, by loops and as matrix products.
fn print_3_3_2<W: Write>(
    out: &mut W,
    inputs: &ArrayView2<f32>,
    context_vec_2: &Array1<f32>,
) -> std::io::Result<()> {
    heading(
        out,
        "3.3.2 Computing attention weights for all input tokens",
    )?;
    let by_loops = attn_scores_loops(inputs); // (T, T)
    cell(
        out,
        "#8",
        "attn_scores (loops)",
        &[print::tensor(&by_loops)],
    )?;

    let (attn_scores, attn_weights, all_context_vecs) = simple_attention(inputs);
    cell(
        out,
        "#9",
        "attn_scores = inputs @ inputs.T",
        &[print::tensor(&attn_scores)],
    )?;
    cell(out, "#10", "attn_weights", &[print::tensor(&attn_weights)])?;

    // ANCHOR: row_sums_usage
    let row_2_sum = printed_row_sum(&attn_weights.row(1)); // the second row, as printed
    let row_sums = torch_row_sums(&attn_weights.view()); // (T): one sum per row
    // ANCHOR_END: row_sums_usage
    let printed = [
        format!("Row 2 sum: {}", python_float(row_2_sum)),
        format!("All row sums: {}", print::tensor(&row_sums)),
    ];
    cell(out, "#11", "row_2_sum; attn_weights.sum(dim=-1)", &printed)?;

    cell(
        out,
        "#12",
        "all_context_vecs",
        &[print::tensor(&all_context_vecs)],
    )?;
    let printed = [format!(
        "Previous 2nd context vector: {}",
        print::tensor(context_vec_2)
    )];
    cell(out, "#13", "context_vec_2", &printed)?;
    Ok(())
}

/// Writes cells #2–#13 of the chapter in order, as the book prints them. Stage 1 draws no random
/// numbers, so `seeds` is unused; it is taken so that every stage runs the same way.
pub fn run<W: Write>(out: &mut W, _seeds: crate::BookSeeds) -> Result<(), crate::Error> {
    let inputs = inputs(); // (T, d_in)
    let context_vec_2 = print_3_3_1(out, &inputs.view(), JOURNEY)?;
    print_3_3_2(out, &inputs.view(), &context_vec_2)?;
    Ok(())
}

/// The chapter's query: token 1, "journey".
pub const JOURNEY: usize = 1;

/// §3.3.1 (cells #2–#7) for the query token `query` (0 to 5) instead of "journey": what the book's
/// page shows when a reader picks another token.
pub fn run_query<W: Write>(out: &mut W, query: usize) -> Result<(), crate::Error> {
    check_query(query)?;
    print_3_3_1(out, &inputs().view(), query)?;
    Ok(())
}

/// A query is one of the sentence's tokens, 0 to 5.
pub fn check_query(query: usize) -> Result<(), crate::Error> {
    let tokens = TOKENS.len();
    match query < tokens {
        true => Ok(()),
        false => Err(crate::Error::QueryOutOfRange { query, tokens }),
    }
}
