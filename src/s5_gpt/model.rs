//! Lesson layer. The chapter's model: `GPTEmbedding`, `GPTAttention`, `GPTFeedForward`, `GPTTransformer`, `GPTOutput`
//! and `GPT`, with the tutorial's initialisation replayed from `np.random.seed(42)`.
//!
//! The model is deliberately bare: single-head causal attention with **no** query, key or value
//! projections, then a feed-forward network, twice, with no residual connections, LayerNorm or dropout.
//! With V = 65, T = 32, C = 64 and 2 blocks it has 84,929 parameters.

use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

/// The model's sizes: the tutorial's `GPT(vocab_size, context_size, embedding_size, blocks)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GptConfig {
    /// V: distinct characters (65 for Tiny Shakespeare).
    pub vocab_size: usize,
    /// T: the longest input; also the number of position embeddings.
    pub context_size: usize,
    /// C: the width of every token vector.
    pub embedding_size: usize,
    /// Transformer blocks, each attention then feed-forward.
    pub blocks: usize,
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

/// `Linear(in, out)`: W (out, in) = `randn(out, in)` as float32 times √(2/in) (He initialisation). NumPy
/// multiplies by a float64 scalar, so the product is float64 and is rounded once when stored. b = 0.
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

// ANCHOR: attention
/// `GPTAttention`: causal self-attention of x with itself, then a Linear C→C.
#[derive(Clone, Copy, Debug)]
pub struct Attention {
    /// 1/√C as a float32 (0.125 for C = 64).
    scale: f32,
    pub output: Linear,
}

impl Attention {
    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let xt = tape.transpose(x); // (B, C, T)
        let scores = tape.matmul(x, xt); // (B, T, T)
        let scores = tape.scale(scores, self.scale); // (B, T, T)
        let masked = tape.tril(scores); // (B, T, T)
        let weights = tape.softmax(masked); // (B, T, T)
        let context = tape.matmul(weights, x); // (B, T, C)
        self.output.forward(tape, context) // (B, T, C)
    }
}
// ANCHOR_END: attention

// ANCHOR: feed_forward
/// `GPTFeedForward`: Linear C→4C, GELU, Linear 4C→C.
#[derive(Clone, Copy, Debug)]
pub struct FeedForward {
    pub input: Linear,
    pub output: Linear,
}

impl FeedForward {
    pub fn forward(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let h = self.input.forward(tape, x); // (B, T, 4C)
        let h = tape.gelu(h); // (B, T, 4C)
        self.output.forward(tape, h) // (B, T, C)
    }
}
// ANCHOR_END: feed_forward

/// `GPTTransformer`: attention, then feed-forward; no residual connection and no normalisation.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    pub attention: Attention,
    pub feed_forward: FeedForward,
}

// ANCHOR: gpt
/// `GPT`: embeddings, the blocks, and the output layer. The parameters live on the [`Tape`].
#[derive(Clone, Debug)]
pub struct Gpt {
    pub config: GptConfig,
    pub token_embedding: NodeId,
    pub position_embedding: NodeId,
    pub blocks: Vec<Block>,
    pub output: Linear,
}

impl Gpt {
    /// Logits (B, T, V) for token ids (B, T), given row-major as `ids` with `batch` rows.
    pub fn forward(&self, tape: &mut Tape, ids: &[usize], batch: usize) -> NodeId {
        let t = ids.len() / batch;
        assert!(
            t <= self.config.context_size,
            "input of {t} tokens is longer than the context"
        );
        let positions: Vec<usize> = (0..t).collect();
        let token = tape.embedding(self.token_embedding, ids, &[batch, t]); // (B, T, C)
        let position = tape.embedding(self.position_embedding, &positions, &[t]); // (T, C)
        let mut x = tape.add(token, position); // (B, T, C)
        for block in &self.blocks {
            x = block.attention.forward(tape, x); // (B, T, C)
            x = block.feed_forward.forward(tape, x); // (B, T, C)
        }
        self.output.forward(tape, x) // (B, T, V)
    }
}
// ANCHOR_END: gpt

// ANCHOR: gpt_new
impl Gpt {
    /// Builds the parameters on `tape`, drawing from `rng` in the tutorial's constructor order:
    /// token table, position table, then per block attention-out, ff-in and ff-out weights, then the
    /// output weight. That is 84,096 normals for the tutorial's sizes.
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, config: GptConfig) -> Self {
        let GptConfig {
            vocab_size: v,
            context_size: t,
            embedding_size: c,
            blocks,
        } = config;
        let token_embedding = embedding_table(tape, rng, v, c);
        let position_embedding = embedding_table(tape, rng, t, c);
        let scale = (1.0 / (c as f64).sqrt()) as f32;
        let blocks = (0..blocks)
            .map(|_| Block {
                attention: Attention {
                    scale,
                    output: Linear::new(tape, rng, c, c),
                },
                feed_forward: FeedForward {
                    input: Linear::new(tape, rng, c, 4 * c),
                    output: Linear::new(tape, rng, 4 * c, c),
                },
            })
            .collect();
        let output = Linear::new(tape, rng, c, v);
        Gpt {
            config,
            token_embedding,
            position_embedding,
            blocks,
            output,
        }
    }
}
// ANCHOR_END: gpt_new

/// Names for the checkpoint files.
impl Gpt {
    /// Every parameter in the tutorial's order (`model.parameters`), with the name it has in a checkpoint:
    /// `tok_emb.weight`, `pos_emb.weight`, `blocks.{i}.attn.out.weight`, `blocks.{i}.ff.in.bias`, …,
    /// `head.weight` and `head.bias`, with i counted from 0.
    pub fn named_parameters(&self) -> Vec<(String, NodeId)> {
        let mut out = vec![
            ("tok_emb.weight".to_string(), self.token_embedding),
            ("pos_emb.weight".to_string(), self.position_embedding),
        ];
        let mut linear = |name: String, l: &Linear| {
            out.push((format!("{name}.weight"), l.weight));
            out.push((format!("{name}.bias"), l.bias));
        };
        for (i, b) in self.blocks.iter().enumerate() {
            linear(format!("blocks.{i}.attn.out"), &b.attention.output);
            linear(format!("blocks.{i}.ff.in"), &b.feed_forward.input);
            linear(format!("blocks.{i}.ff.out"), &b.feed_forward.output);
        }
        linear("head".to_string(), &self.output);
        out
    }
}
