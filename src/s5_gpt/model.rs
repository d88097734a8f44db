//! Lesson layer. The chapter's model: the tutorial's `GPTEmbedding`, `GPTAttention`,
//! `GPTFeedForward`, `GPTTransformer`, `GPTOutput` and `GPT` (GPTmini's chapter on causal attention,
//! the notebook `04-causal-attention.ipynb`), with its initialisation replayed from
//! `np.random.seed(42)`. This is what the chapter `s5_gpt` shows.
//!
//! The tutorial's model is deliberately bare: single-head causal attention with **no** query, key
//! or value projections, then a feed-forward network, twice, with no residual connections,
//! LayerNorm or dropout. With V = 65, T = 32, C = 64 and 2 blocks it has 84,929 parameters.
//! [`TutorialGpt`] is that model and nothing else. The sequel's model, which adds back what the
//! tutorial leaves out, is [`super::beyond::Gpt`]; it is built from the pieces here.
//!
//! The fields take the names a checkpoint gives the parameters (`tok_emb`, `pos_emb`, `head`, …,
//! minGPT's), so that a field and its tensor in a saved file read alike.

use super::data::Batch;
use super::ops::MASK_VALUE;
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

// ANCHOR: init
/// `Embedding(V, C)`: `randn(V, C)` as float32, times 0.02 in float32.
pub fn embedding_table(tape: &mut Tape, rng: &mut NumpyRandom, rows: usize, cols: usize) -> NodeId {
    let data = rng
        .randn(rows * cols)
        .into_iter()
        .map(|z| z as f32 * 0.02f32)
        .collect();
    tape.param(Tensor::new(&[rows, cols], data))
}

/// `Linear(in, out)`: W (out, in) = `randn(out, in)` as float32 times √(2/in) (He initialisation).
/// NumPy multiplies by a float64 scalar, so the product is float64 and is rounded once when stored.
/// b = 0.
#[derive(Clone, Copy, Debug)]
pub struct Linear {
    pub weight: NodeId,
    pub bias: NodeId,
}

impl Linear {
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, n_in: usize, n_out: usize) -> Self {
        let gain = (2.0 / n_in as f64).sqrt();
        let w = rng
            .randn(n_out * n_in)
            .into_iter()
            .map(|z| (f64::from(z as f32) * gain) as f32);
        let weight = tape.param(Tensor::new(&[n_out, n_in], w.collect()));
        let bias = tape.param(Tensor::new(&[n_out], vec![0.0; n_out]));
        Linear { weight, bias }
    }

    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        tape.linear(x, self.weight, self.bias)
    }
}
// ANCHOR_END: init

// ANCHOR: embed
/// `GPTEmbedding`: each token's row of the token table (V, C) plus its position's row of the
/// position table (T, C). `ids` are (B, T), row-major, with `batch` rows.
pub fn embed(tape: &mut Tape, tables: [NodeId; 2], ids: &[usize], batch: usize) -> NodeId {
    let [token_table, position_table] = tables;
    let t = ids.len() / batch;
    let positions: Vec<usize> = (0..t).collect();
    let token = tape.embedding(token_table, ids, &[batch, t]); // (B, T, C)
    let position = tape.embedding(position_table, &positions, &[t]); // (T, C)
    tape.add(token, position) // (B, T, C): the position's row added to every window alike
}
// ANCHOR_END: embed

// ANCHOR: causal_weights
/// `GPTAttention` up to its softmax: token i's weights over the tokens j ≤ i, softmax of
/// x_i·x_j/√C, with `mask_value` written over the scores of the future (the tutorial's
/// [`MASK_VALUE`], −1e9). The tokens attend with themselves: no query, key or value projection.
pub fn causal_weights(tape: &mut Tape, x: NodeId, mask_value: f32) -> NodeId {
    let c = tape.value(x).last_dim();
    let xt = tape.transpose(x); // (B, C, T)
    let scores = tape.matmul(x, xt); // (B, T, T)
    let scores = tape.scale(scores, attention_scale(c)); // (B, T, T)
    let masked = tape.tril(scores, mask_value); // (B, T, T)
    tape.softmax(masked) // (B, T, T), each row sums to 1
}

/// 1/√D as a float32 for D channels: 0.125 for the tutorial's D = C = 64.
pub fn attention_scale(d: usize) -> f32 {
    (1.0 / (d as f64).sqrt()) as f32
}
// ANCHOR_END: causal_weights

// ANCHOR: tutorial_block
/// `GPTTransformer`: causal attention with its output layer, then the feed-forward network. No
/// residual connection: each part replaces x.
#[derive(Clone, Copy, Debug)]
pub struct TutorialBlock {
    /// `GPTAttention.output`, C → C.
    pub attn_out: Linear,
    /// `GPTFeedForward`.
    pub ff: FeedForward,
}

impl TutorialBlock {
    /// (B, T, C) → (B, T, C).
    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let weights = causal_weights(tape, x, MASK_VALUE); // (B, T, T)
        let context = tape.matmul(weights, x); // (B, T, C): q = k = v = x
        let h = self.attn_out.forward(tape, context); // (B, T, C)
        self.ff.forward(tape, h) // (B, T, C)
    }
}
// ANCHOR_END: tutorial_block

// ANCHOR: tutorial_gpt
/// The tutorial's `GPT`: embeddings, the blocks, the output layer, and `GPTLoss`. The parameters
/// live on the [`Tape`]; the fields name them.
#[derive(Clone, Debug)]
pub struct TutorialGpt {
    pub tok_emb: NodeId, // (V, C)
    pub pos_emb: NodeId, // (T, C)
    pub blocks: Vec<TutorialBlock>,
    /// `GPTOutput`, C → V: a score (logit) for every character of the vocabulary.
    pub head: Linear,
    /// T: the longest input, and the rows of the position table.
    pub context_size: usize,
}

impl TutorialGpt {
    /// Logits (B, T, V) for token ids (B, T), row-major, with `batch` rows.
    pub fn forward(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId {
        let mut x = embed(tape, [self.tok_emb, self.pos_emb], ids, batch); // (B, T, C)
        for block in &self.blocks {
            x = block.forward(tape, x); // (B, T, C)
        }
        self.head.forward(tape, x) // (B, T, V)
    }

    /// `GPTLoss`: the mean cross-entropy of the next character over the batch's B·T positions.
    pub fn loss(&self, tape: &mut Tape, batch: &Batch) -> NodeId {
        let logits = self.forward(tape, &batch.x, batch.rows); // (B, T, V)
        tape.cross_entropy(logits, &batch.y) // ()
    }
}
// ANCHOR_END: tutorial_gpt

// ANCHOR: tutorial_new
impl TutorialGpt {
    /// `GPT(vocab_size, context_size, embedding_size, blocks)`: every weight drawn from `rng` in
    /// the tutorial's order (84,096 normals for its sizes).
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, sizes: [usize; 4]) -> Self {
        let [v, t, c, blocks] = sizes; // V, T, C and the number of blocks
        let tok_emb = embedding_table(tape, rng, v, c);
        let pos_emb = embedding_table(tape, rng, t, c);
        let blocks = (0..blocks)
            .map(|_| TutorialBlock {
                attn_out: Linear::new(tape, rng, c, c),
                ff: FeedForward::new(tape, rng, c),
            })
            .collect();
        let head = Linear::new(tape, rng, c, v);
        TutorialGpt {
            tok_emb,
            pos_emb,
            blocks,
            head,
            context_size: t,
        }
    }
}
// ANCHOR_END: tutorial_new

// ANCHOR: exercise_mask_value
/// Exercise 1: the first block's attention weights (T, T) on the characters `ids`, with
/// `mask_value` over the future's scores: the tutorial's −1e9, or the exercise's 0. Row i holds
/// character i's weights over all T characters.
pub fn first_block_weights(
    model: &TutorialGpt,
    tape: &mut Tape,
    ids: &[usize],
    mask_value: f32,
) -> Vec<f32> {
    tape.reset();
    let x = embed(tape, [model.tok_emb, model.pos_emb], ids, 1); // (1, T, C)
    let weights = causal_weights(tape, x, mask_value); // (1, T, T)
    tape.value(weights).data.clone()
}

/// Exercise 1: how far the first block's context of character 0 moves, at most, when the last
/// character becomes `other`. 0 means that character 0 cannot see the last one.
pub fn first_context_moves(
    model: &TutorialGpt,
    tape: &mut Tape,
    ids: &[usize],
    other: usize,
    mask_value: f32,
) -> f32 {
    let mut context_0 = |ids: &[usize]| {
        tape.reset();
        let x = embed(tape, [model.tok_emb, model.pos_emb], ids, 1); // (1, T, C)
        let weights = causal_weights(tape, x, mask_value); // (1, T, T)
        let context = tape.matmul(weights, x); // (1, T, C)
        let c = tape.value(context).last_dim();
        tape.value(context).data[..c].to_vec() // character 0's row, (C)
    };
    let before = context_0(ids);
    let changed = [&ids[..ids.len() - 1], &[other]].concat();
    let after = context_0(&changed);
    let moves = before.iter().zip(&after).map(|(a, b)| (a - b).abs());
    moves.fold(0.0, f32::max)
}
// ANCHOR_END: exercise_mask_value

/// What testing and generating ask of a model: [`TutorialGpt`] and the sequel's
/// [`Gpt`](super::beyond::Gpt) are both one. (Training
/// takes the model's forward pass and loss as a closure: see [`train_step`](super::train::train_step).)
pub trait Model {
    /// Logits (B, T, V) for token ids (B, T), row-major, with `batch` rows; no dropout.
    fn logits(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId;

    /// T: the longest input, and the window [`generate`](super::generate::generate) slides.
    fn context_size(&self) -> usize;
}

impl Model for TutorialGpt {
    fn logits(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId {
        self.forward(tape, ids, batch)
    }

    fn context_size(&self) -> usize {
        self.context_size
    }
}

// ANCHOR: feed_forward
/// `GPTFeedForward`: Linear C→4C, GELU, Linear 4C→C.
#[derive(Clone, Copy, Debug)]
pub struct FeedForward {
    /// `ff.in` in a checkpoint (`in` is a Rust keyword).
    pub input: Linear,
    /// `ff.out` in a checkpoint.
    pub output: Linear,
}

impl FeedForward {
    /// Its input then its output layer, drawn in that order.
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, c: usize) -> Self {
        FeedForward {
            input: Linear::new(tape, rng, c, 4 * c),
            output: Linear::new(tape, rng, 4 * c, c),
        }
    }

    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let h = self.input.forward(tape, x); // (B, T, 4C)
        let h = tape.gelu(h); // (B, T, 4C)
        self.output.forward(tape, h) // (B, T, C)
    }
}
// ANCHOR_END: feed_forward
