//! Lesson layer. The sequel's model, what the chapter `s5_beyond` shows: [`Gpt`] is the tutorial's
//! model ([`super::model`]) with an [`Architecture`] that adds back what the tutorial leaves out,
//! each piece from the stage that built it: stage 2's projections, stage 3's dropout, stage 4's
//! heads, and GPT-2's residual connections and LayerNorm.
//!
//! The trainer, the tool and the book's page run [`Gpt`]; with `Architecture::default()` it
//! computes the same bits as [`TutorialGpt`](super::model::TutorialGpt) (`tests/s5_gpt.rs` checks
//! logits, loss, gradients and training steps).

use serde::{Deserialize, Serialize};

use super::backend::Op;
use super::error::GptError;
use super::flash::{AttentionForm, FlashForm};
use super::latent::{Latent, rotary_width};
use super::model::{FeedForward, Linear, Model, attention_scale, embedding_table};
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
    /// H, the attention heads, each D = C/H wide (stage 4's `MultiHeadAttention`). Asking for
    /// heads turns on `qkv` too; without projections the heads would split the tokens themselves.
    pub heads: usize,
    /// x + attention(x) and x + feed_forward(x): each block adds to its input.
    pub residual: bool,
    /// LayerNorm before the attention, the feed-forward network and the output (pre-LN, GPT-2's).
    pub layer_norm: bool,
    /// Stage 3's dropout on the attention weights while training: the probability of zeroing each.
    pub dropout: f64,
    /// What `Tril` writes above the diagonal: the tutorial's −1e9, or 0 for its closing exercise.
    pub mask_value: f32,
    /// How the attention is computed: the tutorial's graph of six ops, or one FlashAttention node,
    /// tiled or exact (stage 6). A checkpoint leaves out the naive graph, so it reads as before.
    #[serde(skip_serializing_if = "AttentionForm::is_naive")]
    pub attention: AttentionForm,
    /// Stage 7's grouped-query attention: K key/value heads, each shared by H/K query heads
    /// (K = 1 is multi-query attention). `None` is K = H, stage 4's heads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<usize>,
    /// Stage 7's sliding window: each token sees the W newest keys, itself included. `None` sees
    /// them all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<usize>,
    /// Stage 7's rotary positions in place of the position table: queries and keys turned by an
    /// angle that grows with the position.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub rope: bool,
    /// Stage 7's multi-head latent attention: keys and values unfolded from a latent L wide, which
    /// is all the cache keeps. `None` projects them from x.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latent: Option<usize>,
    /// Stage 8's attention-only model: blocks without the feed-forward network.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attention_only: bool,
    /// Stage 8's key offset: half of each key is the key of the character before it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub key_offset: bool,
}
// ANCHOR_END: architecture

impl Default for Architecture {
    fn default() -> Self {
        Architecture {
            qkv: false,
            heads: 1,
            residual: false,
            layer_norm: false,
            dropout: 0.0,
            mask_value: MASK_VALUE,
            attention: AttentionForm::Naive,
            kv_heads: None,
            window: None,
            rope: false,
            latent: None,
            attention_only: false,
            key_offset: false,
        }
    }
}

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
    pub fn head_dim(&self, c: usize) -> Result<usize, crate::Error> {
        head_dim(c, self.heads)
    }

    /// K, the key/value heads: `kv_heads`, or one per query head.
    pub fn kv_heads(&self) -> usize {
        self.kv_heads.unwrap_or(self.heads)
    }

    /// The scores' scale for heads D wide: 1/√D, or 1/√(D + R) with latent attention's rotary
    /// part beside each query and key.
    pub fn scale(&self, d: usize) -> f32 {
        match (self.latent, self.rope) {
            (Some(_), true) => attention_scale(d + rotary_width(d)),
            _ => attention_scale(d),
        }
    }

    /// What no model can be built with: a window of no key, or a window with a FlashAttention
    /// node, whose tiles mask only the future (the window is masked on the naive graph).
    pub fn check(&self) -> Result<(), GptError> {
        match (self.window, self.attention.flash()) {
            (Some(0), _) => Err(GptError::EmptyWindow),
            (Some(_), Some(_)) => Err(GptError::WindowInFlashNode {
                form: self.attention.name(),
            }),
            _ => Ok(()),
        }
    }

    /// The width W_key and W_value read: the latent's L, or C.
    pub fn key_source_width(&self, c: usize) -> usize {
        self.latent.unwrap_or(c)
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

// ANCHOR: attention
/// `GPTAttention`: causal self-attention, then a Linear C→C. The tutorial's attends with the tokens
/// themselves (q = k = v = x) in one head; with projections and heads it is stage 4's
/// `MultiHeadAttention`.
#[derive(Clone, Debug)]
pub struct Attention {
    /// W_query, W_key and W_value (stage 4's names), or `None`: the tutorial's q = k = v = x.
    pub qkv: Option<[Linear; 3]>,
    pub num_heads: usize,
    /// Stage 7's variants: K key/value heads, a window of W keys, rotary positions.
    pub kv_heads: usize,
    pub window: Option<usize>,
    pub rope: bool,
    /// Stage 7's latent attention: W_key and W_value read the latent c instead of x.
    pub latent: Option<Latent>,
    /// Stage 8's one-position key offset.
    pub key_offset: bool,
    /// 1/√D as a float32 (0.125 for the tutorial's D = C = 64).
    scale: f32,
    pub mask_value: f32,
    pub dropout: f64,
    pub attention: AttentionForm,
    /// Stage 4's `out_proj`.
    pub out: Linear,
}

impl Attention {
    /// (B, T, C) → (B, T, C). `masks` is `Some` while training; dropout draws from it.
    pub fn forward(&self, tape: &mut Tape, x: NodeId, masks: Option<&mut NumpyRandom>) -> NodeId {
        let qkv = self.project(tape, x, 0); // (B, H, T, D), (B, K, T, D) twice
        self.attend(tape, qkv, masks) // (B, T, C)
    }
}
// ANCHOR_END: attention

// ANCHOR: attend
impl Attention {
    /// Causal attention of the queries over the keys and values, then the output layer: (B, T, C).
    pub fn attend(
        &self,
        tape: &mut Tape,
        [q, k, v]: [NodeId; 3],
        masks: Option<&mut NumpyRandom>,
    ) -> NodeId {
        let [k, v] = [k, v].map(|y| self.repeat_kv(tape, y)); // (B, H, T, D)
        if let Some(form) = self.attention.flash() {
            return self.flash(tape, [q, k, v], form, masks); // stage 6: the lines below as one node
        }
        let kt = tape.transpose(k); // (B, H, D, T)
        let scores = tape.matmul(q, kt); // (B, H, T, T)
        let scores = tape.scale(scores, self.scale); // (B, H, T, T)
        let masked = tape.tril(scores, self.mask_value); // (B, H, T, T)
        let masked = self.slide(tape, masked); // (B, H, T, T): stage 7's window, if any
        let mut weights = tape.softmax(masked); // (B, H, T, T)
        if let Some(rng) = masks.filter(|_| self.dropout > 0.0) {
            weights = tape.dropout(weights, self.dropout, rng); // (B, H, T, T)
        }
        let context = tape.matmul(weights, v); // (B, H, T, D)
        let context = self.merge_heads(tape, context); // (B, T, C)
        self.out.forward(tape, context) // (B, T, C)
    }
}
// ANCHOR_END: attend

impl Attention {
    /// Stage 6's FlashAttention node in place of the naive graph's transpose, matmul, scale, tril,
    /// softmax, dropout and matmul, with the same dropout mask; then the heads merged and the
    /// output layer, as in `forward`.
    fn flash(
        &self,
        tape: &mut Tape,
        [q, k, v]: [NodeId; 3],
        form: FlashForm,
        masks: Option<&mut NumpyRandom>,
    ) -> NodeId {
        assert!(
            self.window.is_none(),
            "Architecture::check refuses a window here"
        );
        let settings = (self.scale, self.mask_value);
        let context = match masks.filter(|_| self.dropout > 0.0) {
            Some(rng) => {
                tape.flash_attention_dropout([q, k, v], settings, form, (self.dropout, rng))
            }
            None => tape.flash_attention(q, k, v, self.scale, self.mask_value, form),
        }; // (B, H, T, D)
        let context = self.merge_heads(tape, context); // (B, T, C)
        self.out.forward(tape, context) // (B, T, C)
    }
}

// ANCHOR: split_heads
impl Attention {
    /// Stage 4's `MultiHeadAttention` of width `c` alone: W_query, W_key, W_value, `out_proj`.
    pub fn multi_head(
        tape: &mut Tape,
        rng: &mut NumpyRandom,
        c: usize,
        arch: Architecture,
    ) -> Self {
        let d = arch.head_dim(c).expect("the heads divide C");
        let kv = arch.kv_heads() * d;
        let mut linear = |n_out| Linear::new(tape, rng, c, n_out);
        let qkv = Some([linear(c), linear(kv), linear(kv)]);
        Attention {
            qkv,
            num_heads: arch.heads,
            kv_heads: arch.kv_heads(),
            window: arch.window,
            rope: arch.rope,
            latent: None,
            key_offset: arch.key_offset,
            scale: attention_scale(d),
            mask_value: arch.mask_value,
            dropout: arch.dropout,
            attention: arch.attention,
            out: linear(c),
        }
    }

    /// (B, T, H·D) → (B, H, T, D) for `heads` heads; one head of one is the tutorial's (B, T, C) as
    /// it is.
    fn split_heads(&self, tape: &mut Tape, y: NodeId, heads: usize) -> NodeId {
        match self.num_heads {
            1 => y,
            _ => tape.split_heads(y, heads),
        }
    }

    /// (B, H, T, D) → (B, T, C).
    pub fn merge_heads(&self, tape: &mut Tape, y: NodeId) -> NodeId {
        match self.num_heads {
            1 => y,
            _ => tape.merge_heads(y),
        }
    }
}
// ANCHOR_END: split_heads

// ANCHOR: project
impl Attention {
    /// The queries (B, H, T, D) and the keys and values (B, K, T, D) of the T tokens at positions
    /// `offset`.. of x (B, T, C): projected, split into heads and, with RoPE, turned.
    pub fn project(&self, tape: &mut Tape, x: NodeId, offset: usize) -> [NodeId; 3] {
        if self.latent.is_some() {
            let (q, kept) = self.project_kept(tape, x, offset); // stage 7: through the latent
            let [k, v] = self.unfold(tape, &kept);
            return [q, k, v];
        }
        let [q, k, v] = match &self.qkv {
            Some(w) => w.map(|w| w.forward(tape, x)), // (B, T, C), (B, T, K·D) twice
            None => [x; 3],
        };
        let q = self.split_heads(tape, q, self.num_heads); // (B, H, T, D)
        let [k, v] = [k, v].map(|y| self.split_heads(tape, y, self.kv_heads)); // (B, K, T, D)
        let [q, k] = self.rotate(tape, [q, k], offset); // stage 7: RoPE, or as they were
        let k = self.offset_keys(tape, k); // stage 8: the key offset, or as they were
        [q, k, v]
    }
}
// ANCHOR_END: project

// ANCHOR: latent_attention
/// Stage 7's latent attention, and what the KV cache keeps.
impl Attention {
    /// The queries (B, H, T, D) of the tokens at positions `offset`.. of x (B, T, C), and what the
    /// cache keeps of them: their keys and values, or the latent (B, T, L), with latent attention's
    /// rotary parts beside the queries and kept.
    pub fn project_kept(&self, tape: &mut Tape, x: NodeId, offset: usize) -> (NodeId, Vec<NodeId>) {
        let (Some(latent), Some([query, ..])) = (&self.latent, &self.qkv) else {
            let [q, k, v] = self.project(tape, x, offset);
            return (q, vec![k, v]);
        };
        let q = query.forward(tape, x); // (B, T, C)
        let q = self.split_heads(tape, q, self.num_heads); // (B, H, T, D)
        let q = latent.rotary_queries(tape, q, x, offset); // (B, H, T, D + R)
        (q, latent.compress(tape, x, offset))
    }

    /// The keys and values from what the cache keeps: as they are, or unfolded from the latent by
    /// W_key and W_value, (B, H, T, D + R) and (B, H, T, D).
    pub fn unfold(&self, tape: &mut Tape, kept: &[NodeId]) -> [NodeId; 2] {
        let (Some(latent), Some([_, key, value])) = (&self.latent, &self.qkv) else {
            return [kept[0], kept[1]];
        };
        let [k, v] = [key, value].map(|w| {
            let y = w.forward(tape, kept[0]); // (B, T, C)
            self.split_heads(tape, y, self.num_heads) // (B, H, T, D)
        });
        [latent.rotary_keys(tape, k, kept), v]
    }
}
// ANCHOR_END: latent_attention

// ANCHOR: variants
/// Stage 7's variants, each a node or two on the tape, and nothing at all when it is off.
impl Attention {
    /// RoPE on the queries and the keys (B, H, T, D) of tokens at positions `offset`..; the
    /// tutorial's q = k = x is turned once.
    fn rotate(&self, tape: &mut Tape, [q, k]: [NodeId; 2], offset: usize) -> [NodeId; 2] {
        if !self.rope {
            return [q, k];
        }
        let q_turned = tape.rope(q, offset); // (B, H, T, D)
        let k_turned = match k == q {
            true => q_turned,
            false => tape.rope(k, offset), // (B, K, T, D)
        };
        [q_turned, k_turned]
    }

    /// Stage 8's key offset on the keys (B, K, T, D) of a whole sequence from position 0.
    fn offset_keys(&self, tape: &mut Tape, k: NodeId) -> NodeId {
        match self.key_offset {
            true => tape.key_offset(k), // (B, K, T, D)
            false => k,
        }
    }

    /// 1/√D, the scores' scale.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// (B, K, T, D) → (B, H, T, D): each key/value head shared by H/K query heads.
    pub fn repeat_kv(&self, tape: &mut Tape, y: NodeId) -> NodeId {
        match self.num_heads / self.kv_heads {
            1 => y,
            groups => tape.repeat_kv(y, groups),
        }
    }

    /// (B, H, T, T) → (B, H, T, T): the scores older than the window masked like the future.
    fn slide(&self, tape: &mut Tape, masked: NodeId) -> NodeId {
        let t = tape.value(masked).last_dim();
        match self.window {
            Some(w) if w < t => tape.window(masked, w, self.mask_value),
            _ => masked, // every key is in the window
        }
    }
}
// ANCHOR_END: variants

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
    pub attn: Attention,
    /// The feed-forward network; `None` in stage 8's attention-only model.
    pub ff: Option<FeedForward>,
    /// GPT-2's `ln_1`, before the attention.
    pub ln1: Option<LayerNorm>,
    /// GPT-2's `ln_2`, before the feed-forward network.
    pub ln2: Option<LayerNorm>,
    pub residual: bool,
}

impl Block {
    pub fn forward(&self, tape: &mut Tape, x: NodeId, masks: Option<&mut NumpyRandom>) -> NodeId {
        self.forward_with(tape, x, |attn, tape, h| attn.forward(tape, h, masks))
    }

    /// The block with `attend` in place of the attention's forward pass (stage 7's cache).
    pub fn forward_with(
        &self,
        tape: &mut Tape,
        x: NodeId,
        attend: impl FnOnce(&Attention, &mut Tape, NodeId) -> NodeId,
    ) -> NodeId {
        let h = LayerNorm::forward(self.ln1.as_ref(), tape, x); // (B, T, C)
        let h = attend(&self.attn, tape, h); // (B, T, C)
        let x = self.add_residual(tape, x, h); // (B, T, C)
        let Some(ff) = &self.ff else {
            return x; // stage 8: attention only
        };
        let h = LayerNorm::forward(self.ln2.as_ref(), tape, x); // (B, T, C)
        let h = ff.forward(tape, h); // (B, T, C)
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
    /// The tutorial's block: its attention-out, ff-in and ff-out weights, drawn in that order. An
    /// attention-only block draws the feed-forward weights all the same and drops them, so that
    /// every other weight is the one the full model starts from.
    fn new(tape: &mut Tape, rng: &mut NumpyRandom, c: usize, arch: Architecture) -> Self {
        let d = arch.head_dim(c).expect("the heads divide C");
        arch.check().expect("a model Architecture::check accepts");
        Block {
            attn: Attention {
                qkv: None,
                num_heads: arch.heads,
                kv_heads: arch.kv_heads(),
                window: arch.window,
                rope: arch.rope,
                latent: None,
                key_offset: arch.key_offset,
                scale: arch.scale(d),
                mask_value: arch.mask_value,
                dropout: arch.dropout,
                attention: arch.attention,
                out: Linear::new(tape, rng, c, c),
            },
            ff: feed_forward(tape, rng, c, arch.attention_only),
            ln1: None,
            ln2: None,
            residual: arch.residual,
        }
    }

    /// What the tutorial's block leaves out: W_query, W_key and W_value, drawn in that order (W_key
    /// and W_value read the latent with latent attention, whose own layers come next), and `ln_1`
    /// and `ln_2`, which draw nothing.
    fn add_the_rest(
        &mut self,
        tape: &mut Tape,
        rng: &mut NumpyRandom,
        c: usize,
        arch: Architecture,
    ) {
        let d = c / arch.heads;
        let kv = arch.kv_heads() * d; // K·D, C unless the heads are grouped
        let source = arch.key_source_width(c); // C, or the latent's L
        self.attn.qkv = arch.qkv.then(|| {
            let query = Linear::new(tape, rng, c, c);
            [
                query,
                Linear::new(tape, rng, source, kv),
                Linear::new(tape, rng, source, kv),
            ]
        });
        self.attn.latent = arch
            .latent
            .map(|l| Latent::new(tape, rng, (c, l, d), arch.heads, arch.rope));
        if arch.layer_norm {
            self.ln1 = Some(LayerNorm::new(tape, c));
            self.ln2 = self.ff.is_some().then(|| LayerNorm::new(tape, c));
        }
    }
}

/// A block's feed-forward network, or, attention only, `None`: its 2 · 4C · C normals drawn and
/// dropped.
fn feed_forward(
    tape: &mut Tape,
    rng: &mut NumpyRandom,
    c: usize,
    attention_only: bool,
) -> Option<FeedForward> {
    if attention_only {
        rng.randn(4 * c * c); // W_in (4C, C)
        rng.randn(4 * c * c); // W_out (C, 4C)
        return None;
    }
    Some(FeedForward::new(tape, rng, c))
}
// ANCHOR_END: block_new

// ANCHOR: gpt
/// `GPT`: embeddings, the blocks, and the output layer. The parameters live on the [`Tape`].
#[derive(Clone, Debug)]
pub struct Gpt {
    pub config: GptConfig,
    pub tok_emb: NodeId, // (V, C)
    /// The position table (T, C); `None` with stage 7's rotary positions.
    pub pos_emb: Option<NodeId>,
    pub blocks: Vec<Block>,
    /// GPT-2's `ln_f`, before the output layer.
    pub ln_f: Option<LayerNorm>,
    /// The output layer, C → V.
    pub head: Linear,
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
        let mut x = self.embed(tape, ids, batch, 0); // (B, T, C)
        for block in &self.blocks {
            x = block.forward(tape, x, masks.as_deref_mut()); // (B, T, C)
        }
        self.output(tape, x) // (B, T, V)
    }

    /// `GPTOutput`: (B, T, C) → (B, T, V), after `ln_f`.
    pub fn output(&self, tape: &mut Tape, x: NodeId) -> NodeId {
        let x = LayerNorm::forward(self.ln_f.as_ref(), tape, x); // (B, T, C)
        self.head.forward(tape, x) // (B, T, V)
    }

    /// Logits (1, n, V) of the n tokens `ids` at positions `position`.., with block b's attention
    /// computed by `attend(b, attention, tape, h)`: how stage 7's caches run the model.
    pub fn forward_from(
        &self,
        tape: &mut Tape,
        ids: &[usize],
        position: usize,
        mut attend: impl FnMut(usize, &Attention, &mut Tape, NodeId) -> NodeId,
    ) -> NodeId {
        let mut x = self.embed(tape, ids, 1, position); // (1, n, C)
        for (b, block) in self.blocks.iter().enumerate() {
            x = block.forward_with(tape, x, |attn, tape, h| attend(b, attn, tape, h)); // (1, n, C)
        }
        self.output(tape, x) // (1, n, V)
    }

    /// `GPTEmbedding` for tokens at positions `offset`..: each token's row plus its position's, or,
    /// with RoPE, the token's row alone (the attention places it).
    pub fn embed(&self, tape: &mut Tape, ids: &[usize], batch: usize, offset: usize) -> NodeId {
        let t = ids.len() / batch;
        let token = tape.embedding(self.tok_emb, ids, &[batch, t]); // (B, T, C)
        let Some(table) = self.pos_emb else {
            return token;
        };
        let positions: Vec<usize> = (offset..offset + t).collect();
        let position = tape.embedding(table, &positions, &[t]); // (T, C)
        tape.add(token, position) // (B, T, C)
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
    /// after all of that, so its weights stay the same: per block W_query, W_key, W_value (with
    /// latent attention, W_DKV and the rotary layers after them), `ln_1` and `ln_2`, then `ln_f`.
    pub fn new(tape: &mut Tape, rng: &mut NumpyRandom, config: GptConfig) -> Self {
        let GptConfig {
            vocab_size: v,
            context_size: t,
            embedding_size: c,
            blocks,
            architecture: arch,
        } = config;
        let tok_emb = embedding_table(tape, rng, v, c);
        let pos_emb = position_table(tape, rng, t, c, arch.rope);
        let mut blocks: Vec<Block> = (0..blocks)
            .map(|_| Block::new(tape, rng, c, arch))
            .collect();
        let head = Linear::new(tape, rng, c, v);
        for block in &mut blocks {
            block.add_the_rest(tape, rng, c, arch);
        }
        let ln_f = arch.layer_norm.then(|| LayerNorm::new(tape, c));
        Gpt {
            config,
            tok_emb,
            pos_emb,
            blocks,
            ln_f,
            head,
        }
    }
}
// ANCHOR_END: gpt_new

/// The position table (T, C), or, with RoPE, `None`: its values are drawn all the same and dropped,
/// so that every other weight is the one the model without RoPE starts from.
fn position_table(
    tape: &mut Tape,
    rng: &mut NumpyRandom,
    t: usize,
    c: usize,
    rope: bool,
) -> Option<NodeId> {
    if rope {
        rng.randn(t * c);
        return None;
    }
    Some(embedding_table(tape, rng, t, c))
}

/// The parameters' names, PyTorch's `named_parameters()`.
impl Gpt {
    /// Every parameter in the order it sits on the tape, with the name it has in a checkpoint: the
    /// tutorial's `tok_emb.weight`, `pos_emb.weight`, `blocks.{i}.attn.out.weight`,
    /// `blocks.{i}.ff.in.bias`, …, `head.weight` and `head.bias`; then what an [`Architecture`]
    /// adds, `blocks.{i}.attn.query.weight` (and `key`, `value`), `blocks.{i}.ln1.weight`,
    /// `blocks.{i}.ln2.bias`, …, `ln_f.weight` and `ln_f.bias`. i counts from 0.
    pub fn named_parameters(&self) -> Vec<(String, NodeId)> {
        let mut out = vec![("tok_emb.weight".to_string(), self.tok_emb)];
        if let Some(pos_emb) = self.pos_emb {
            out.push(("pos_emb.weight".to_string(), pos_emb));
        }
        let mut pair = |name: String, (weight, bias): (NodeId, NodeId)| {
            out.push((format!("{name}.weight"), weight));
            out.push((format!("{name}.bias"), bias));
        };
        let linear = |l: &Linear| (l.weight, l.bias);
        for (i, b) in self.blocks.iter().enumerate() {
            pair(format!("blocks.{i}.attn.out"), linear(&b.attn.out));
            if let Some(ff) = &b.ff {
                pair(format!("blocks.{i}.ff.in"), linear(&ff.input));
                pair(format!("blocks.{i}.ff.out"), linear(&ff.output));
            }
        }
        pair("head".to_string(), linear(&self.head));
        let norm = |n: &LayerNorm| (n.weight, n.bias);
        for (i, b) in self.blocks.iter().enumerate() {
            for (name, w) in ["query", "key", "value"]
                .iter()
                .zip(b.attn.qkv.iter().flatten())
            {
                pair(format!("blocks.{i}.attn.{name}"), linear(w));
            }
            if let Some(latent) = &b.attn.latent {
                pair(format!("blocks.{i}.attn.latent"), linear(&latent.down));
                for (name, w) in ["query_rope", "key_rope"]
                    .iter()
                    .zip(latent.rotary.iter().flatten())
                {
                    pair(format!("blocks.{i}.attn.{name}"), linear(w));
                }
            }
            for (name, n) in [("ln1", &b.ln1), ("ln2", &b.ln2)] {
                if let Some(n) = n {
                    pair(format!("blocks.{i}.{name}"), norm(n));
                }
            }
        }
        if let Some(n) = &self.ln_f {
            pair("ln_f".to_string(), norm(n));
        }
        out
    }
}

// ANCHOR: attention_maps
/// The attention weights of every head of every block of `model` on one sequence of tokens `ids`
/// (at most T): for block b and head h, `maps[b][h]` is a (T, T) matrix, row-major, row i holding
/// token i's weights over the tokens 0..=i. They are the softmax nodes of the graph, one per block,
/// in order.
pub fn attention_maps(model: &Gpt, tape: &mut Tape, ids: &[usize]) -> Vec<Vec<Vec<f32>>> {
    tape.reset();
    model.forward(tape, ids, 1, None); // (1, T, V)
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
// ANCHOR_END: attention_maps
