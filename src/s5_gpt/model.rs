//! Lesson layer. The chapter's model: the tutorial's `GPTEmbedding`, `GPTAttention`,
//! `GPTFeedForward`, `GPTTransformer`, `GPTOutput` and `GPT` (GPTmini's chapter on causal attention,
//! the notebook `04-causal-attention.ipynb`), with its initialisation replayed from
//! `np.random.seed(42)`.
//!
//! The tutorial's model is deliberately bare: single-head causal attention with **no** query, key
//! or value projections, then a feed-forward network, twice, with no residual connections,
//! LayerNorm or dropout. With V = 65, T = 32, C = 64 and 2 blocks it has 84,929 parameters.
//! [`TutorialGpt`] is that model and nothing else; it is what the book shows.
//!
//! [`Gpt`] is the same model with an [`Architecture`] that adds back what the tutorial leaves out,
//! each piece from the stage that built it: stage 2's projections, stage 3's dropout, stage 4's
//! heads, and GPT-2's residual connections and LayerNorm. The trainer, the tool and the book's page
//! run [`Gpt`]; with `Architecture::default()` it computes the same bits as [`TutorialGpt`]
//! (`tests/s5_gpt.rs` checks logits, loss, gradients and training steps).

use serde::{Deserialize, Serialize};

use super::backend::Op;
use super::data::Batch;
use super::error::GptError;
use super::ops::MASK_VALUE;
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;
use crate::s4_multihead::head_dim;

// ANCHOR: architecture
/// What the model adds to the tutorial's. `Architecture::default()` is the tutorial's model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Architecture {
    /// Query, key and value projections before the attention (stage 2's `Linear`, C → C each).
    pub qkv: bool,
    /// H, the attention heads, each D = C/H wide (stage 4's `MultiHeadAttention`). The flag
    /// `--heads` turns on `qkv` too; without projections the heads would split the tokens
    /// themselves.
    pub heads: usize,
    /// x + attention(x) and x + feed_forward(x): each block adds to its input instead of replacing
    /// it.
    pub residual: bool,
    /// LayerNorm before the attention, the feed-forward network and the output layer (pre-LN, as
    /// GPT-2).
    pub layer_norm: bool,
    /// Stage 3's dropout on the attention weights, while training: each is zeroed with this
    /// probability.
    pub dropout: f64,
    /// What `Tril` writes above the diagonal: the tutorial's −1e9, or 0 for its closing exercise.
    pub mask_value: f32,
}

impl Default for Architecture {
    fn default() -> Self {
        Architecture {
            qkv: false,
            heads: 1,
            residual: false,
            layer_norm: false,
            dropout: 0.0,
            mask_value: MASK_VALUE,
        }
    }
}
// ANCHOR_END: architecture

impl Architecture {
    /// Everything the tutorial's model leaves out: the projections, `heads` heads, residual
    /// connections and LayerNorm, with `dropout` (the sequel's fullest rows).
    pub fn everything(heads: usize, dropout: f64) -> Self {
        Architecture {
            qkv: true,
            heads,
            residual: true,
            layer_norm: true,
            dropout,
            ..Architecture::default()
        }
    }

    /// D, the width of one head, for width C: stage 4's rule and error (the heads must divide C).
    pub fn head_dim(&self, c: usize) -> Result<usize, GptError> {
        head_dim(c, self.heads).map_err(GptError::HeadsDontDivide)
    }

    /// Settings no model can be built or trained with, as a one-line error.
    pub fn check(&self, c: usize) -> Result<(), GptError> {
        self.head_dim(c)?;
        if !(0.0..1.0).contains(&self.dropout) {
            let p = self.dropout;
            let why = format!(
                "--dropout {p} is out of range; use a probability from 0 up to (not including) 1"
            );
            return Err(GptError::Config(why));
        }
        if self.mask_value.is_nan() || self.mask_value == f32::INFINITY {
            let why = format!(
                "--mask-value {} is not a score; use a number such as -1e9 or 0",
                self.mask_value
            );
            return Err(GptError::Config(why));
        }
        Ok(())
    }
}

// ANCHOR: dropout_masks
/// The generator of training step `step`'s dropout masks: `np.random.RandomState([seed, step])`.
///
/// Each step's masks depend on the seed and the step alone. A resumed run therefore draws the masks
/// an uninterrupted one would, and the chapter's own stream (the initial weights, then the
/// sampling) is left as it is.
pub fn dropout_masks(seed: u32, step: usize) -> NumpyRandom {
    let step = u32::try_from(step).expect("a step number fits in 32 bits");
    NumpyRandom::seed_array(&[seed, step])
}
// ANCHOR_END: dropout_masks

/// The model's sizes: the tutorial's `GPT(vocab_size, context_size, embedding_size, blocks)`, and
/// what it adds to the tutorial's model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GptConfig {
    /// V: distinct characters (65 for Tiny Shakespeare).
    pub vocab_size: usize,
    /// T: the longest input; also the number of position embeddings.
    pub context_size: usize,
    /// C: the width of every token vector.
    pub embedding_size: usize,
    /// Transformer blocks, each attention then feed-forward.
    pub blocks: usize,
    pub architecture: Architecture,
}

// ANCHOR: init
/// `Embedding(V, C)`: `randn(V, C)` as float32, times 0.02 in float32.
fn embedding_table(tape: &mut Tape, rng: &mut NumpyRandom, rows: usize, cols: usize) -> NodeId {
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
    fn new(tape: &mut Tape, rng: &mut NumpyRandom, n_in: usize, n_out: usize) -> Self {
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
    pub attention_output: Linear,
    pub feed_forward: FeedForward,
}

impl TutorialBlock {
    /// (B, T, C) → (B, T, C).
    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let weights = causal_weights(tape, x, MASK_VALUE); // (B, T, T)
        let context = tape.matmul(weights, x); // (B, T, C): q = k = v = x
        let h = self.attention_output.forward(tape, context); // (B, T, C)
        self.feed_forward.forward(tape, h) // (B, T, C)
    }
}
// ANCHOR_END: tutorial_block

// ANCHOR: tutorial_gpt
/// The tutorial's `GPT`: embeddings, the blocks, the output layer, and `GPTLoss`. The parameters
/// live on the [`Tape`]; the fields name them.
#[derive(Clone, Debug)]
pub struct TutorialGpt {
    pub token_embedding: NodeId,    // (V, C)
    pub position_embedding: NodeId, // (T, C)
    pub blocks: Vec<TutorialBlock>,
    /// `GPTOutput`, C → V: a score (logit) for every character of the vocabulary.
    pub output: Linear,
    /// T: the longest input, and the rows of the position table.
    pub context_size: usize,
}

impl TutorialGpt {
    /// Logits (B, T, V) for token ids (B, T), row-major, with `batch` rows.
    pub fn forward(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId {
        let tables = [self.token_embedding, self.position_embedding];
        let mut x = embed(tape, tables, ids, batch); // (B, T, C)
        for block in &self.blocks {
            x = block.forward(tape, x); // (B, T, C)
        }
        self.output.forward(tape, x) // (B, T, V)
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
        let token_embedding = embedding_table(tape, rng, v, c);
        let position_embedding = embedding_table(tape, rng, t, c);
        let blocks = (0..blocks)
            .map(|_| TutorialBlock {
                attention_output: Linear::new(tape, rng, c, c),
                feed_forward: FeedForward::new(tape, rng, c),
            })
            .collect();
        let output = Linear::new(tape, rng, c, v);
        TutorialGpt {
            token_embedding,
            position_embedding,
            blocks,
            output,
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
    let tables = [model.token_embedding, model.position_embedding];
    let x = embed(tape, tables, ids, 1); // (1, T, C)
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
        let tables = [model.token_embedding, model.position_embedding];
        let x = embed(tape, tables, ids, 1); // (1, T, C)
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

/// What testing and generating ask of a model: [`TutorialGpt`] and [`Gpt`] are both one. (Training
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

// ANCHOR: attention
/// `GPTAttention`: causal self-attention, then a Linear C→C. The tutorial's attends with the tokens
/// themselves (q = k = v = x) in one head; with projections and heads it is stage 4's
/// `MultiHeadAttention`.
#[derive(Clone, Debug)]
pub struct Attention {
    /// W_query, W_key and W_value (stage 4's names), or `None`: the tutorial's q = k = v = x.
    pub qkv: Option<[Linear; 3]>,
    pub num_heads: usize,
    /// 1/√D as a float32 (0.125 for the tutorial's D = C = 64).
    scale: f32,
    pub mask_value: f32,
    pub dropout: f64,
    /// Stage 4's `out_proj`.
    pub output: Linear,
}

impl Attention {
    /// (B, T, C) → (B, T, C). `masks` is `Some` while training; dropout draws from it.
    pub fn forward(&self, tape: &mut Tape, x: NodeId, masks: Option<&mut NumpyRandom>) -> NodeId {
        let [q, k, v] = match &self.qkv {
            Some(w) => w.map(|w| w.forward(tape, x)), // (B, T, C) each
            None => [x; 3],
        };
        let [q, k, v] = [q, k, v].map(|y| self.split_heads(tape, y)); // (B, H, T, D)
        let kt = tape.transpose(k); // (B, H, D, T)
        let scores = tape.matmul(q, kt); // (B, H, T, T)
        let scores = tape.scale(scores, self.scale); // (B, H, T, T)
        let masked = tape.tril(scores, self.mask_value); // (B, H, T, T)
        let mut weights = tape.softmax(masked); // (B, H, T, T)
        if let Some(rng) = masks.filter(|_| self.dropout > 0.0) {
            weights = tape.dropout(weights, self.dropout, rng); // (B, H, T, T)
        }
        let context = tape.matmul(weights, v); // (B, H, T, D)
        let context = self.merge_heads(tape, context); // (B, T, C)
        self.output.forward(tape, context) // (B, T, C)
    }
}
// ANCHOR_END: attention

// ANCHOR: split_heads
impl Attention {
    /// (B, T, C) → (B, H, T, D); one head is the tutorial's (B, T, C) as it is.
    fn split_heads(&self, tape: &mut Tape, y: NodeId) -> NodeId {
        match self.num_heads {
            1 => y,
            h => tape.split_heads(y, h),
        }
    }

    /// (B, H, T, D) → (B, T, C).
    fn merge_heads(&self, tape: &mut Tape, y: NodeId) -> NodeId {
        match self.num_heads {
            1 => y,
            _ => tape.merge_heads(y),
        }
    }
}
// ANCHOR_END: split_heads

// ANCHOR: feed_forward
/// `GPTFeedForward`: Linear C→4C, GELU, Linear 4C→C.
#[derive(Clone, Copy, Debug)]
pub struct FeedForward {
    pub input: Linear,
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

// ANCHOR: layer_norm
/// LayerNorm(C): scale w (C) starts at 1 and shift b (C) at 0; nothing is drawn.
#[derive(Clone, Copy, Debug)]
pub struct LayerNorm {
    pub weight: NodeId,
    pub bias: NodeId,
}

impl LayerNorm {
    fn new(tape: &mut Tape, c: usize) -> Self {
        let weight = tape.param(Tensor::new(&[c], vec![1.0; c]));
        let bias = tape.param(Tensor::new(&[c], vec![0.0; c]));
        LayerNorm { weight, bias }
    }

    /// (B, T, C) → (B, T, C); no LayerNorm passes x on as it is.
    pub fn forward(norm: Option<&Self>, tape: &mut Tape, x: NodeId) -> NodeId {
        match norm {
            Some(ln) => tape.layer_norm(x, ln.weight, ln.bias),
            None => x,
        }
    }
}
// ANCHOR_END: layer_norm

// ANCHOR: block
/// `GPTTransformer`: attention, then feed-forward. The tutorial's has no residual connection and no
/// LayerNorm; GPT-2's adds each sublayer's output to its input, and normalises the sublayer's
/// input.
#[derive(Clone, Debug)]
pub struct Block {
    pub attention: Attention,
    pub feed_forward: FeedForward,
    /// GPT-2's `ln_1` and `ln_2`, before the attention and before the feed-forward network.
    pub ln: Option<[LayerNorm; 2]>,
    pub residual: bool,
}

impl Block {
    pub fn forward(&self, tape: &mut Tape, x: NodeId, masks: Option<&mut NumpyRandom>) -> NodeId {
        let ln = |i: usize| self.ln.as_ref().map(|ln| &ln[i]);
        let h = LayerNorm::forward(ln(0), tape, x); // (B, T, C)
        let h = self.attention.forward(tape, h, masks); // (B, T, C)
        let x = self.add_residual(tape, x, h); // (B, T, C)
        let h = LayerNorm::forward(ln(1), tape, x); // (B, T, C)
        let h = self.feed_forward.forward(tape, h); // (B, T, C)
        self.add_residual(tape, x, h) // (B, T, C)
    }

    /// x + h with residual connections; the tutorial's block keeps only h.
    fn add_residual(&self, tape: &mut Tape, x: NodeId, h: NodeId) -> NodeId {
        if self.residual { tape.add(x, h) } else { h }
    }
}
// ANCHOR_END: block

// ANCHOR: block_new
impl Block {
    /// The tutorial's block: its attention-out, ff-in and ff-out weights, drawn in that order.
    fn new(tape: &mut Tape, rng: &mut NumpyRandom, c: usize, arch: Architecture) -> Self {
        let d = arch
            .head_dim(c)
            .expect("the heads divide C (Architecture::check)");
        Block {
            attention: Attention {
                qkv: None,
                num_heads: arch.heads,
                scale: attention_scale(d),
                mask_value: arch.mask_value,
                dropout: arch.dropout,
                output: Linear::new(tape, rng, c, c),
            },
            feed_forward: FeedForward::new(tape, rng, c),
            ln: None,
            residual: arch.residual,
        }
    }

    /// What the tutorial's block leaves out: W_query, W_key and W_value, drawn in that order, and
    /// `ln_1` and `ln_2`, which draw nothing.
    fn add_the_rest(
        &mut self,
        tape: &mut Tape,
        rng: &mut NumpyRandom,
        c: usize,
        arch: Architecture,
    ) {
        let mut linear = || Linear::new(tape, rng, c, c);
        self.attention.qkv = arch.qkv.then(|| [linear(), linear(), linear()]);
        self.ln = arch
            .layer_norm
            .then(|| [LayerNorm::new(tape, c), LayerNorm::new(tape, c)]);
    }
}
// ANCHOR_END: block_new

// ANCHOR: gpt
/// `GPT`: embeddings, the blocks, and the output layer. The parameters live on the [`Tape`].
#[derive(Clone, Debug)]
pub struct Gpt {
    pub config: GptConfig,
    pub token_embedding: NodeId,
    pub position_embedding: NodeId,
    pub blocks: Vec<Block>,
    /// GPT-2's `ln_f`, before the output layer.
    pub ln_f: Option<LayerNorm>,
    pub output: Linear,
}

impl Gpt {
    /// Logits (B, T, V) for token ids (B, T), given row-major as `ids` with `batch` rows. `masks`
    /// is the dropout masks' generator while training ([`dropout_masks`]), `None` otherwise.
    pub fn forward(
        &self,
        tape: &mut Tape,
        ids: &[usize],
        batch: usize,
        mut masks: Option<&mut NumpyRandom>,
    ) -> NodeId {
        let t = ids.len() / batch;
        assert!(
            t <= self.config.context_size,
            "input of {t} tokens is longer than the context"
        );
        let tables = [self.token_embedding, self.position_embedding];
        let mut x = embed(tape, tables, ids, batch); // (B, T, C)
        for block in &self.blocks {
            x = block.forward(tape, x, masks.as_deref_mut()); // (B, T, C)
        }
        let x = LayerNorm::forward(self.ln_f.as_ref(), tape, x); // (B, T, C)
        self.output.forward(tape, x) // (B, T, V)
    }
}
// ANCHOR_END: gpt

impl Model for Gpt {
    fn logits(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId {
        self.forward(tape, ids, batch, None)
    }

    fn context_size(&self) -> usize {
        self.config.context_size
    }
}

// ANCHOR: gpt_new
impl Gpt {
    /// Builds the parameters on `tape`, drawing from `rng` in the tutorial's constructor order:
    /// token table, position table, per block attention-out, ff-in and ff-out weights, then the
    /// output weight (84,096 normals for the tutorial's sizes). What the tutorial leaves out comes
    /// after all of that, so its weights stay the same: per block W_query, W_key, W_value, `ln_1`
    /// and `ln_2`, then `ln_f`.
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, config: GptConfig) -> Self {
        let GptConfig {
            vocab_size: v,
            context_size: t,
            embedding_size: c,
            blocks,
            architecture: arch,
        } = config;
        let token_embedding = embedding_table(tape, rng, v, c);
        let position_embedding = embedding_table(tape, rng, t, c);
        let mut blocks: Vec<Block> = (0..blocks)
            .map(|_| Block::new(tape, rng, c, arch))
            .collect();
        let output = Linear::new(tape, rng, c, v);
        for block in &mut blocks {
            block.add_the_rest(tape, rng, c, arch);
        }
        let ln_f = arch.layer_norm.then(|| LayerNorm::new(tape, c));
        Gpt {
            config,
            token_embedding,
            position_embedding,
            blocks,
            ln_f,
            output,
        }
    }
}
// ANCHOR_END: gpt_new

/// What the book draws of a model.
impl Gpt {
    /// The attention weights of every head of every block on one sequence of tokens `ids` (at most
    /// T): for block b and head h, `maps[b][h]` is a (T, T) matrix, row-major, row i holding token
    /// i's weights over the tokens 0..=i. They are the softmax nodes of the graph, one per block,
    /// in order.
    pub fn attention_maps(&self, tape: &mut Tape, ids: &[usize]) -> Vec<Vec<Vec<f32>>> {
        tape.reset();
        self.forward(tape, ids, 1, None); // (1, T, V)
        let t = ids.len();
        let maps = (0..tape.len())
            .map(NodeId)
            .filter(|&id| matches!(tape.op(id), Op::Softmax { .. }))
            .map(|id| {
                tape.value(id)
                    .data
                    .chunks(t * t)
                    .map(<[f32]>::to_vec)
                    .collect()
            }) // (H, T, T)
            .collect();
        tape.reset();
        maps
    }
}

/// Names for the checkpoint files.
impl Gpt {
    /// Every parameter in the order it sits on the tape, with the name it has in a checkpoint: the
    /// tutorial's `tok_emb.weight`, `pos_emb.weight`, `blocks.{i}.attn.out.weight`,
    /// `blocks.{i}.ff.in.bias`, …, `head.weight` and `head.bias`; then what an [`Architecture`]
    /// adds, `blocks.{i}.attn.query.weight` (and `key`, `value`), `blocks.{i}.ln1.weight`,
    /// `blocks.{i}.ln2.bias`, …, `ln_f.weight` and `ln_f.bias`. i counts from 0.
    pub fn named_parameters(&self) -> Vec<(String, NodeId)> {
        let mut out = vec![
            ("tok_emb.weight".to_string(), self.token_embedding),
            ("pos_emb.weight".to_string(), self.position_embedding),
        ];
        let mut pair = |name: String, (weight, bias): (NodeId, NodeId)| {
            out.push((format!("{name}.weight"), weight));
            out.push((format!("{name}.bias"), bias));
        };
        let linear = |l: &Linear| (l.weight, l.bias);
        for (i, b) in self.blocks.iter().enumerate() {
            pair(format!("blocks.{i}.attn.out"), linear(&b.attention.output));
            pair(format!("blocks.{i}.ff.in"), linear(&b.feed_forward.input));
            pair(format!("blocks.{i}.ff.out"), linear(&b.feed_forward.output));
        }
        pair("head".to_string(), linear(&self.output));
        let norm = |n: &LayerNorm| (n.weight, n.bias);
        for (i, b) in self.blocks.iter().enumerate() {
            for (name, w) in ["query", "key", "value"]
                .iter()
                .zip(b.attention.qkv.iter().flatten())
            {
                pair(format!("blocks.{i}.attn.{name}"), linear(w));
            }
            for (name, n) in ["ln1", "ln2"].iter().zip(b.ln.iter().flatten()) {
                pair(format!("blocks.{i}.{name}"), norm(n));
            }
        }
        if let Some(n) = &self.ln_f {
            pair("ln_f".to_string(), norm(n));
        }
        out
    }
}
