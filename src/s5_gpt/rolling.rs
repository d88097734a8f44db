//! Lesson layer. Stage 7's rolling cache: generation that keeps going past the context, for a
//! model with rotary positions and a sliding window of W keys (Mistral's rolling buffer). The
//! chapter `s7_variants` shows it.
//!
//! Such a model has no position table to run out of, and each token reads only the W newest keys,
//! so a block's cache needs only W rows: a ring written at a moving pointer. Generation past the
//! context is defined as the whole sequence under the band mask, each token at its own position.
//! A row's softmax sums the weights of its band alone (the W keys, or all of them near the start):
//! summed over the whole row, as the training graph does, NumPy's pairwise grouping of a row would
//! change as the sequence grows, and no row could be kept. Each row is then computed once, and a
//! step costs O(W) in the attention, however long the sequence.
//!
//! Without a cache the same bits come from recomputing only the last n·(W − 1) + 1 tokens, at
//! their positions (n blocks): the newest token reads W rows of the block below, each of which
//! read W rows of the block below it, and so on ([`reach`]).

use super::beyond::{Attention, Gpt};
use super::data::CharDataset;
use super::error::GptError;
use super::flash::AttentionForm;
use super::generate::{Sampling, last_row, probabilities, prompt_tokens};
use super::ops::{MASK_VALUE, dot, softmax_forward};
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

// ANCHOR: ring
/// One kept tensor of one block: each head's W newest rows, in a ring. Row `next` is the next to
/// be written, over the oldest once the ring is full.
#[derive(Clone, Debug, PartialEq)]
pub struct Ring {
    /// Each head's rows, (W, D) as one run of values.
    heads: Vec<Vec<f32>>,
    /// W, the rows a head keeps.
    window: usize,
    next: usize,
    len: usize,
    /// The new rows' shape as the tape made them: (1, K, n, D), or (1, n, C) for one head.
    shape: Vec<usize>,
}

impl Ring {
    /// Head `h`'s kept rows, oldest first: from the pointer to the end, then from the start.
    fn rows(&self, h: usize) -> impl Iterator<Item = &[f32]> {
        let d = self.shape.last().copied().unwrap_or(1);
        let start = if self.len < self.window { 0 } else { self.next };
        let rows = self
            .heads
            .get(h)
            .map_or(&[][..], |r| &r[..])
            .chunks_exact(d);
        rows.clone()
            .skip(start)
            .chain(rows.take(start))
            .take(self.len)
    }

    /// Writes each head's n new rows of `new`, each over the oldest once the ring is full.
    pub fn push(&mut self, new: &Tensor) {
        let (heads, n, d) = new.matrices(); // (K, n, D)
        self.heads.resize(heads, vec![0.0; self.window * d]);
        for (h, rows) in new.data.chunks_exact(n * d).enumerate() {
            for (r, row) in rows.chunks_exact(d).enumerate() {
                let at = (self.next + r) % self.window;
                self.heads[h][at * d..][..d].copy_from_slice(row);
            }
        }
        self.next = (self.next + n) % self.window;
        self.len = (self.len + n).min(self.window);
        self.shape = new.shape.clone();
    }

    /// The kept rows, oldest first, then the new rows of `new`: (1, K, L + n, D) as an input of
    /// the tape.
    fn with(&self, tape: &mut Tape, new: NodeId) -> NodeId {
        let new = tape.value(new);
        let (heads, n, d) = new.matrices(); // (K, n, D)
        let mut data = Vec::with_capacity(heads * (self.len + n) * d);
        for (h, rows) in new.data.chunks_exact(n * d).enumerate() {
            self.rows(h).for_each(|row| data.extend_from_slice(row));
            data.extend_from_slice(rows);
        }
        let mut shape = new.shape.clone();
        let rows_axis = shape.len() - 2;
        shape[rows_axis] = self.len + n;
        tape.input(Tensor::new(&shape, data))
    }
}
// ANCHOR_END: ring

impl Ring {
    /// An empty ring of `window` rows per head.
    pub fn new(window: usize) -> Self {
        assert!(window > 0, "a window keeps at least one key");
        Ring {
            heads: vec![],
            window,
            next: 0,
            len: 0,
            shape: vec![],
        }
    }

    /// The rows each head keeps, at most W.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the ring holds no row yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// ANCHOR: band_row
/// One query's attention over its band's keys and values, oldest first: the scores q·k scaled,
/// their softmax over the band alone, the values weighted in the same order. (D) → (Dv).
///
/// Each score, weight and output is the naive graph's number (the same dot products, the same
/// softmax), except the softmax's sum, which adds the band's weights and not the whole row's.
pub fn band_row(q: &[f32], keys: &[&[f32]], values: &[&[f32]], scale: f32, out: &mut [f32]) {
    let scores: Vec<f32> = keys
        .iter()
        .map(|k| dot(q.iter().copied(), k.iter().copied()) * scale)
        .collect(); // (L')
    let mut weights = vec![0.0; scores.len()];
    softmax_forward(&mut weights, &scores, scores.len()); // (L')
    for (d, o) in out.iter_mut().enumerate() {
        *o = dot(weights.iter().copied(), values.iter().map(|v| v[d])); // Σ w·v, oldest first
    }
}

/// The band attention of the n newest of m tokens: query row r (token m − n + r) reads the keys
/// and values of the `window` tokens up to itself. q (H, n, D), k (K, m, D), v (K, m, Dv) →
/// (H, n, Dv), shaped as q is.
pub fn band_attention(q: &Tensor, [k, v]: [&Tensor; 2], scale: f32, window: usize) -> Tensor {
    let (heads, n, d) = q.matrices();
    let ((kv_heads, m, _), dv) = (k.matrices(), v.last_dim());
    let mut out = vec![0.0; heads * n * dv];
    for (h, out) in out.chunks_exact_mut(n * dv).enumerate() {
        let g = h * kv_heads / heads; // the key/value head this query head shares
        let (keys, values) = (head_rows(k, g), head_rows(v, g)); // (m, D), (m, Dv)
        for (r, out) in out.chunks_exact_mut(dv).enumerate() {
            let i = m - n + r; // this query's token among the m
            let band = i + 1 - window.min(i + 1)..i + 1;
            let q = &q.data[(h * n + r) * d..][..d];
            band_row(q, &keys[band.clone()], &values[band], scale, out);
        }
    }
    let mut shape = q.shape.clone();
    *shape.last_mut().expect("q has axes") = dv;
    Tensor::new(&shape, out)
}

/// Head `g`'s rows of a stack (…, m, D).
fn head_rows(x: &Tensor, g: usize) -> Vec<&[f32]> {
    let (_, m, d) = x.matrices();
    x.data[g * m * d..][..m * d].chunks_exact(d).collect()
}
// ANCHOR_END: band_row

// ANCHOR: attention_rolling
impl Attention {
    /// (1, n, C) → (1, n, C) for the n tokens at positions `position`..: each reads the keys its
    /// window holds, from the rings and among the n, then the n join the rings.
    pub fn forward_rolling(
        &self,
        tape: &mut Tape,
        x: NodeId,
        rings: &mut Vec<Ring>,
        position: usize,
    ) -> NodeId {
        let w = self
            .window
            .expect("a rolling cache is for a model with a window");
        let (q, kept) = self.project_kept(tape, x, position); // q (1, H, n, D), kept rows
        rings.resize_with(kept.len(), || Ring::new(w));
        let all: Vec<NodeId> = (rings.iter().zip(&kept))
            .map(|(ring, &new)| ring.with(tape, new))
            .collect(); // (1, K, L + n, D): the kept rows, then the new
        let [k, v] = self.unfold(tape, &all); // (1, K, L + n, D) each
        let [q_, k_, v_] = [q, k, v].map(|y| tape.value(y));
        let context = band_attention(q_, [k_, v_], self.scale(), w); // (1, H, n, D)
        for (ring, &new) in rings.iter_mut().zip(&kept) {
            ring.push(tape.value(new));
        }
        let context = tape.input(context); // inference only: no gradient
        let context = self.merge_heads(tape, context); // (1, n, C)
        self.out.forward(tape, context) // (1, n, C)
    }
}
// ANCHOR_END: attention_rolling

// ANCHOR: gpt_rolling
/// The rolling cache of a model: one ring per kept tensor of each block, and the tokens seen.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RollingCache {
    pub layers: Vec<Vec<Ring>>,
    pub len: usize,
}

impl RollingCache {
    /// An empty cache whose first token is at position `position`.
    pub fn at(position: usize) -> Self {
        RollingCache {
            layers: vec![],
            len: position,
        }
    }
}

impl Gpt {
    /// Logits (1, n, V) of the n tokens `ids` that follow the `cache.len` tokens the cache has
    /// seen: a prompt at once or in pieces, then one token at a time, as far as the sequence goes.
    pub fn forward_rolling(
        &self,
        tape: &mut Tape,
        ids: &[usize],
        cache: &mut RollingCache,
    ) -> NodeId {
        let (position, layers) = (cache.len, &mut cache.layers);
        layers.resize_with(self.blocks.len(), Vec::new);
        let logits = self.forward_from(tape, ids, position, |b, attn, tape, h| {
            attn.forward_rolling(tape, h, &mut layers[b], position) // (1, n, C)
        }); // (1, n, V)
        cache.len += ids.len();
        logits
    }

    /// The prefill of a rolling cache: only the last [`reach`] tokens of `tokens`, at their
    /// positions, into a cache that starts there. The ring's W rows of every block, and the last
    /// token's logits, depend on no earlier token. Logits (1, n, V).
    pub fn prefill_rolling(
        &self,
        tape: &mut Tape,
        tokens: &[usize],
        cache: &mut RollingCache,
    ) -> NodeId {
        let window = self.blocks[0].attn.window.expect("a model that rolls");
        let start = tokens
            .len()
            .saturating_sub(reach(self.blocks.len(), window));
        *cache = RollingCache::at(start);
        self.forward_rolling(tape, &tokens[start..], cache) // (1, n, V)
    }

    /// Whether the model can roll: rotary positions (no position table to run out of), a window
    /// in every block, the tutorial's mask and no tiled node.
    pub fn rolls(&self) -> bool {
        let rolls = |a: &Attention| {
            a.rope
                && a.window.is_some()
                && a.mask_value == MASK_VALUE
                && a.attention != AttentionForm::Tiled
                && !a.key_offset
        };
        self.pos_emb.is_none() && self.blocks.iter().all(|b| rolls(&b.attn))
    }
}

/// The tokens whose rows the newest token's logits depend on, for `blocks` blocks with a window of
/// `window`: n·(W − 1) + 1.
pub fn reach(blocks: usize, window: usize) -> usize {
    blocks * (window - 1) + 1
}
// ANCHOR_END: gpt_rolling

// ANCHOR: generate_rolling
/// Continues `prompt` by `steps` characters from a model that [rolls](Gpt::rolls), as far past
/// its context as asked. With `cached`, the prompt's last [`reach`] tokens are computed once
/// (the prefill) and each new token alone; without, each step computes again the last [`reach`]
/// tokens, at their positions. Both draw the same characters.
#[allow(clippy::too_many_arguments)]
pub fn generate_rolling(
    tape: &mut Tape,
    model: &Gpt,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
    sampling: Sampling,
    cached: bool,
) -> Result<String, GptError> {
    let mut tokens = prompt_tokens(dataset, prompt)?;
    let mut cache = RollingCache::default();
    for _ in 0..steps {
        tape.reset();
        let logits = match (cached, cache.len) {
            (true, 0) => model.prefill_rolling(tape, &tokens, &mut cache), // (1, ≤ reach, V)
            (true, _) => model.forward_rolling(tape, &tokens[tokens.len() - 1..], &mut cache),
            // Without a cache, every step is a prefill: the reach again, into a fresh cache.
            (false, _) => model.prefill_rolling(tape, &tokens, &mut RollingCache::default()),
        }; // (1, n, V)
        let last = last_row(tape.value(logits)); // (V)
        tokens.push(rng.choice(&probabilities(last, sampling)));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}
// ANCHOR_END: generate_rolling
