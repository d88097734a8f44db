//! Lesson layer. Stage 7's KV cache, part of the sequel's model: each block keeps the keys and
//! values of the tokens it has seen, so that writing one more token computes one row of the
//! attention instead of the whole window. The chapter `s7_variants` shows it.
//!
//! [`generate_cached`] gives the characters [`generate`](super::generate::generate) gives, bit for
//! bit: the window is computed whole (the **prefill**) at the start and whenever recomputing would
//! give the cached rows other bits, and one token at a time in between ([`GptCache::extends`] says
//! when).

use super::beyond::{Attention, Block, Gpt};
use super::data::CharDataset;
use super::error::GptError;
use super::flash::AttentionForm;
use super::generate::{Sampling, last_row, probabilities, prompt_tokens, sums_like_one_shorter};
use super::latent::{Absorbed, Cached, absorb, absorbed_attention};
use super::ops::{MASK_VALUE, PAIRWISE_BLOCK, pairwise_sum, pairwise_sum_behind};
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

// ANCHOR: layer_cache
/// One block's cache: for each tensor the block keeps (the keys and the values, or latent
/// attention's latent and rotary key) and each of its heads, the rows of the tokens it keeps,
/// oldest first. With a window of W it keeps the W newest.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LayerCache {
    pub kept: Vec<Kept>,
}

/// One kept tensor: each head's rows, (L, D) as one run of values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    pub heads: Vec<Vec<f32>>,
    /// The shape of the new rows as the tape made them: (1, K, n, D), or (1, n, C) for one head.
    shape: Vec<usize>,
}

impl Kept {
    /// Adds the n new rows of each head of `new`, and forgets the rows a `window` no longer holds.
    fn keep(&mut self, new: &Tensor, window: Option<usize>) {
        let (heads, _, d) = new.matrices(); // (K, n, D)
        self.heads.resize(heads, vec![]);
        let chunks = new.data.chunks_exact(new.data.len() / heads);
        for (rows, head) in self.heads.iter_mut().zip(chunks) {
            rows.extend_from_slice(head);
            let old = rows.len() / d - window.unwrap_or(usize::MAX).min(rows.len() / d);
            rows.drain(..old * d); // (min(L, W), D)
        }
        self.shape = new.shape.clone();
    }

    /// The rows each head keeps.
    fn len(&self) -> usize {
        let d = self.shape.last().copied().unwrap_or(1);
        self.heads.first().map_or(0, |rows| rows.len() / d)
    }

    /// The kept rows as an input of the tape, (1, K, L, D), or (1, L, C).
    fn input(&self, tape: &mut Tape) -> NodeId {
        let mut shape = self.shape.clone();
        let n = shape.len();
        shape[n - 2] = self.len();
        tape.input(Tensor::new(&shape, self.heads.concat()))
    }
}

impl LayerCache {
    /// Adds the new rows of each tensor in `new`, the window's newest kept.
    fn keep(&mut self, new: &[&Tensor], window: Option<usize>) {
        self.kept.resize(new.len(), Kept::default());
        for (kept, new) in self.kept.iter_mut().zip(new) {
            kept.keep(new, window);
        }
    }

    /// The rows each head keeps.
    pub fn len(&self) -> usize {
        self.kept.first().map_or(0, Kept::len)
    }

    /// Whether the cache holds no row yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The kept tensors as inputs of the tape.
    fn inputs(&self, tape: &mut Tape) -> Vec<NodeId> {
        self.kept.iter().map(|kept| kept.input(tape)).collect()
    }
}
// ANCHOR_END: layer_cache

// ANCHOR: attention_cached
impl Attention {
    /// (1, n, C) → (1, n, C) for the tokens at positions `position`..: the whole window at
    /// position 0 (the prefill, exactly [`Attention::forward`]), then one token at a time, whose
    /// query reads every key the cache keeps.
    pub fn forward_cached(
        &self,
        tape: &mut Tape,
        x: NodeId,
        cache: &mut LayerCache,
        position: usize,
    ) -> NodeId {
        let (q, kept) = self.project_kept(tape, x, position); // q (1, H, n, D), keys and values
        let new: Vec<&Tensor> = kept.iter().map(|&y| tape.value(y)).collect();
        cache.keep(&new, self.window);
        if position == 0 {
            let [k, v] = self.unfold(tape, &kept); // (1, K, n, D) each
            return self.attend(tape, [q, k, v], None); // (1, n, C)
        }
        let kept = cache.inputs(tape); // every token the cache keeps
        let [k, v] = self.unfold(tape, &kept).map(|y| self.repeat_kv(tape, y)); // (1, H, L', D)
        let kt = tape.transpose(k); // (1, H, D, L')
        let scores = tape.matmul(q, kt); // (1, H, 1, L'): no future to mask
        let scores = tape.scale(scores, self.scale()); // (1, H, 1, L')
        let forgotten = position + 1 - cache.len(); // keys the window no longer holds
        let weights = match forgotten {
            0 => tape.softmax(scores), // (1, H, 1, L')
            _ => softmax_behind(tape, scores, forgotten, self.mask_value), // (1, H, 1, L')
        };
        let context = tape.matmul(weights, v); // (1, H, 1, D)
        let context = self.merge_heads(tape, context); // (1, 1, C)
        self.out.forward(tape, context) // (1, 1, C)
    }
}
// ANCHOR_END: attention_cached

/// The softmax of the kept keys' scores, each row (1, H, 1, L') the end of the whole window's
/// band row of L = n + L' scores whose first `n` are the mask's `value`, with that row's bits.
/// Their weights are exactly 0, so the row is never built: the sum skips the zeros
/// ([`pairwise_sum_behind`]), and a step costs O(L'), not O(L). Inference only: the new node is an
/// input, without a gradient.
fn softmax_behind(tape: &mut Tape, scores: NodeId, n: usize, value: f32) -> NodeId {
    let x = tape.value(scores);
    let mut weights = x.data.clone();
    for row in weights.chunks_exact_mut(x.last_dim()) {
        let max = row.iter().fold(value, |m, &v| m.max(v)); // the whole row's maximum
        let forgotten = libm::expf(value - max); // 0, unless every score is near the mask's
        row.iter_mut().for_each(|s| *s = libm::expf(*s - max));
        let sum = if forgotten == 0.0 {
            pairwise_sum_behind(n, row)
        } else {
            pairwise_sum(&[vec![forgotten; n], row.to_vec()].concat())
        };
        row.iter_mut().for_each(|w| *w /= sum);
    }
    tape.input(Tensor::new(&x.shape, weights))
}

// ANCHOR: gpt_cache
/// The sequel's model's cache: one [`LayerCache`] per block, and the tokens it has seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GptCache {
    pub layers: Vec<LayerCache>,
    pub len: usize,
}

impl Gpt {
    /// Logits (1, n, V) of the n tokens `ids` that follow the `cache.len` the cache has seen: the
    /// whole window into an empty cache, then one token at a time.
    pub fn forward_cached(&self, tape: &mut Tape, ids: &[usize], cache: &mut GptCache) -> NodeId {
        let position = cache.len;
        let layers = &mut cache.layers;
        layers.resize(self.blocks.len(), LayerCache::default());
        let logits = self.forward_from(tape, ids, position, |b, attn, tape, h| {
            attn.forward_cached(tape, h, &mut layers[b], position) // (1, n, C)
        }); // (1, n, V)
        cache.len += ids.len();
        logits
    }
}
// ANCHOR_END: gpt_cache

// ANCHOR: forward_absorbed
impl Gpt {
    /// Logits (1, 1, V) of the token `id` after the `cache.len` a prefill and earlier steps have
    /// cached, each block's latent attention reading the cached latents through `absorbed`, one
    /// [`Absorbed`] per block ([`Gpt::absorb`]).
    pub fn forward_absorbed(
        &self,
        tape: &mut Tape,
        id: usize,
        cache: &mut GptCache,
        absorbed: &[Absorbed],
    ) -> NodeId {
        let (position, layers) = (cache.len, &mut cache.layers);
        let logits = self.forward_from(tape, &[id], position, |b, attn, tape, h| {
            attn.forward_absorbed(tape, h, &mut layers[b], position, &absorbed[b]) // (1, 1, C)
        }); // (1, 1, V)
        cache.len += 1;
        logits
    }

    /// Each block's latent attention with its up-projections folded away ([`absorb`]); `None`
    /// for a model without latent attention.
    pub fn absorb(&self, tape: &Tape) -> Option<Vec<Absorbed>> {
        let fold = |b: &Block| {
            let [query, key, value] = b.attn.qkv?;
            b.attn.latent?;
            Some(absorb(
                tape,
                [query, key, value, b.attn.out],
                b.attn.num_heads,
            ))
        };
        self.blocks.iter().map(fold).collect()
    }
}

impl Attention {
    /// [`Attention::forward_cached`]'s one-token step for latent attention, through the absorbed
    /// weights: the token's latent (and rotary key) are kept, and its query reads the kept latents
    /// themselves, never unfolding a key or a value. (1, 1, C) → (1, 1, C).
    pub fn forward_absorbed(
        &self,
        tape: &mut Tape,
        x: NodeId,
        cache: &mut LayerCache,
        position: usize,
        absorbed: &Absorbed,
    ) -> NodeId {
        let latent = self
            .latent
            .expect("absorbed weights are latent attention's");
        let q_r = latent.rotary_part(tape, x, position); // (1, H, 1, R), with RoPE
        let kept = latent.compress(tape, x, position); // (1, 1, L), and (1, 1, 1, R) with RoPE
        let new: Vec<&Tensor> = kept.iter().map(|&y| tape.value(y)).collect();
        cache.keep(&new, self.window);
        let q_r = q_r.map(|q| &tape.value(q).data[..]);
        let [latents, rotary_keys] = [0, 1].map(|i| cache.kept.get(i).map(|k| &k.heads[0][..]));
        let cached = Cached {
            latents: latents.expect("the latents are kept"),
            rotary: q_r.zip(rotary_keys),
        };
        let out = absorbed_attention(absorbed, &tape.value(x).data, cached, self.scale());
        tape.input(Tensor::new(&[1, 1, out.len()], out)) // (1, 1, C)
    }
}
// ANCHOR_END: forward_absorbed

// ANCHOR: extends
impl GptCache {
    /// Whether `window`, the last ≤ T tokens from `start`, is the cache's tokens and one more, and
    /// computing only that one gives the bits the whole window would.
    ///
    /// The window must not slide (positions would move) and the model must mask as the cache
    /// does. A block's keys and values after the first come from the softmax rows of the block
    /// before, which recomputing sums at the window's new width: NumPy's pairwise sum groups a
    /// row of L values like one of L − 1 only sometimes ([`sums_like_one_longer`]).
    pub fn extends(&self, model: &Gpt, window: &[usize], start: usize) -> bool {
        let l = window.len();
        let grows_by_one = start == 0 && self.len > 0 && self.len + 1 == l;
        let sums_alike = model.blocks.len() == 1 || sums_like_one_longer(l);
        grows_by_one && sums_alike && caches_like_it_computes(model)
    }
}

/// Whether NumPy's pairwise sum adds a row of `l` values whose last is 0 as it adds the row
/// without it, for any values before: the grouping of its first l − 1 values is the same.
///
/// Up to 128 values, a block: [`sums_like_one_shorter`]. Above, the row is split at half its
/// length, rounded down to a multiple of 8: the split must not move, and the right part must
/// group alike in turn.
pub fn sums_like_one_longer(l: usize) -> bool {
    let half = |n: usize| n / 2 - n / 2 % 8;
    match l {
        0..=PAIRWISE_BLOCK => sums_like_one_shorter(l),
        _ if l - 1 <= PAIRWISE_BLOCK => false, // a block becomes two halves
        _ => half(l) == half(l - 1) && sums_like_one_longer(l - half(l)),
    }
}

/// A model whose every attention masks the future with the tutorial's −1e9 and computes
/// naive attention's bits (naive, or stage 6's exact form), with no key offset (stage 8's new
/// key needs the one before it, which the cache does not hold).
pub fn caches_like_it_computes(model: &Gpt) -> bool {
    let caches = |a: &Attention| {
        a.mask_value == MASK_VALUE && a.attention != AttentionForm::Tiled && !a.key_offset
    };
    model.blocks.iter().all(|b| caches(&b.attn))
}
// ANCHOR_END: extends

// ANCHOR: generate_cached
/// [`generate`](super::generate::generate) with a [`GptCache`]: the same characters, to the bit.
pub fn generate_cached(
    tape: &mut Tape,
    model: &Gpt,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
    sampling: Sampling,
) -> Result<String, GptError> {
    let mut tokens = prompt_tokens(dataset, prompt)?;
    let mut cache = GptCache::default();
    for _ in 0..steps {
        let start = tokens.len().saturating_sub(model.config.context_size);
        let window = &tokens[start..]; // (L)
        tape.reset();
        let logits = match cache.extends(model, window, start) {
            true => model.forward_cached(tape, &window[window.len() - 1..], &mut cache), // (1, 1, V)
            false => {
                cache = GptCache::default();
                model.forward_cached(tape, window, &mut cache) // (1, L, V): the prefill
            }
        };
        let last = last_row(tape.value(logits)); // (V)
        tokens.push(rng.choice(&probabilities(last, sampling)));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}
// ANCHOR_END: generate_cached
