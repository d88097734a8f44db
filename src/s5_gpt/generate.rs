//! Lesson layer. The chapter's `generate`: sample one character at a time from the trained model.

use super::data::CharDataset;
use super::error::GptError;
use super::model::{Model, TutorialGpt, attention_scale, embed};
use super::ops::pairwise_sum;
use super::tape::Tape;
use super::tensor::{NodeId, Tensor};
use crate::rng::numpy::NumpyRandom;

/// How the next character is drawn from the last position's logits. The default is the chapter's:
/// the softmax of the logits as they are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// The logits are divided by it first: below 1 the likely characters get likelier, above 1 less
    /// so.
    pub temperature: f32,
    /// Draw only among the k likeliest characters (and any tied with the k-th); `None` draws among
    /// all.
    pub top_k: Option<usize>,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            top_k: None,
        }
    }
}

// ANCHOR: generate
/// Continues `prompt` by `steps` characters and returns prompt and continuation together.
///
/// Each step feeds the last ≤ T tokens (positions 0..L−1, so the window slides once it is full),
/// turns the last position's logits into probabilities in float32, `exp(l − max) / Σ`, and draws
/// the next token with NumPy's `np.random.choice(V, p=probs)` from `rng`.
pub fn generate(
    tape: &mut Tape,
    model: &impl Model,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
    sampling: Sampling,
) -> Result<String, GptError> {
    let mut tokens = prompt_tokens(dataset, prompt)?;
    for _ in 0..steps {
        let window = &tokens[tokens.len().saturating_sub(model.context_size())..];
        tape.reset();
        let logits = model.logits(tape, window, 1); // (1, L, V)
        let last = last_row(tape.value(logits)); // (V)
        tokens.push(rng.choice(&probabilities(last, sampling)));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}

/// The prompt's tokens, or the error of an empty prompt or of a character outside the vocabulary.
pub fn prompt_tokens(dataset: &CharDataset, prompt: &str) -> Result<Vec<usize>, GptError> {
    let tokens = dataset.encode(prompt)?;
    match tokens.is_empty() {
        true => Err(GptError::EmptyPrompt),
        false => Ok(tokens),
    }
}

/// The last row of logits (…, V): the scores of the character after the last one.
pub fn last_row(logits: &Tensor) -> &[f32] {
    &logits.data[logits.data.len() - logits.last_dim()..]
}
// ANCHOR_END: generate

// ANCHOR: next_char
/// The distribution [`generate`] draws the character after `prompt` from, with `sampling`'s
/// temperature and top-k: (character, probability) for each character whose probability is above
/// 0, the likeliest first (ties in vocabulary order).
pub fn next_char_probabilities(
    tape: &mut Tape,
    model: &impl Model,
    dataset: &CharDataset,
    prompt: &str,
    sampling: Sampling,
) -> Result<Vec<(char, f64)>, GptError> {
    let tokens = dataset.encode(prompt)?;
    if tokens.is_empty() {
        return Err(GptError::EmptyPrompt);
    }
    let window = &tokens[tokens.len().saturating_sub(model.context_size())..];
    tape.reset();
    let logits = model.logits(tape, window, 1); // (1, L, V)
    let probs = probabilities(last_row(tape.value(logits)), sampling); // (V)
    tape.reset();
    let mut next: Vec<(char, f64)> = (dataset.vocab.iter().copied().zip(probs))
        .filter(|&(_, p)| p > 0.0)
        .collect();
    next.sort_by(|a, b| b.1.total_cmp(&a.1)); // a stable sort: ties keep vocabulary order
    Ok(next)
}
// ANCHOR_END: next_char

// ANCHOR: exercise_kv_cache
/// Exercise 2: what the tutorial's attention needs of the earlier positions, kept from one
/// generated character to the next. Its keys and values are the block's input rows themselves
/// (q = k = v = x), so the cache keeps each block's input rows.
#[derive(Clone, Debug, Default)]
pub struct KvCache {
    /// For each block, the input rows of positions 0..len, (len, C) row-major.
    pub rows: Vec<Vec<f32>>,
    pub len: usize,
}

impl KvCache {
    /// Logits (1, 1, V) of token `id` at position `len`, the only row computed: each block's
    /// attention reads the cached rows of the earlier positions, and the new row joins them.
    pub fn forward_one(&mut self, tape: &mut Tape, model: &TutorialGpt, id: usize) -> NodeId {
        let token = tape.embedding(model.tok_emb, &[id], &[1, 1]); // (1, 1, C)
        let position = tape.embedding(model.pos_emb, &[self.len], &[1]); // (1, C)
        let mut x = tape.add(token, position); // (1, 1, C)
        let (c, l) = (tape.value(x).last_dim(), self.len + 1);
        for (block, rows) in model.blocks.iter().zip(&mut self.rows) {
            rows.extend_from_slice(&tape.value(x).data); // (L, C)
            let kv = tape.input(Tensor::new(&[1, l, c], rows.clone())); // (1, L, C)
            let kt = tape.transpose(kv); // (1, C, L)
            let scores = tape.matmul(x, kt); // (1, 1, L)
            let scores = tape.scale(scores, attention_scale(c)); // (1, 1, L): no future to mask
            let weights = tape.softmax(scores); // (1, 1, L)
            let context = tape.matmul(weights, kv); // (1, 1, C)
            let h = block.attn_out.forward(tape, context); // (1, 1, C)
            x = block.ff.forward(tape, h); // (1, 1, C)
        }
        self.len = l;
        model.head.forward(tape, x) // (1, 1, V)
    }
}
// ANCHOR_END: exercise_kv_cache

// ANCHOR: exercise_kv_whole
impl KvCache {
    /// Logits (1, L, V) of a whole window, as [`TutorialGpt::forward`] computes them; the cache
    /// starts again, from the window's rows.
    pub fn forward_all(
        &mut self,
        tape: &mut Tape,
        model: &TutorialGpt,
        window: &[usize],
    ) -> NodeId {
        let tables = [model.tok_emb, model.pos_emb];
        let mut x = embed(tape, tables, window, 1); // (1, L, C)
        self.rows.clear();
        for block in &model.blocks {
            self.rows.push(tape.value(x).data.clone()); // (L, C)
            x = block.forward(tape, x); // (1, L, C)
        }
        self.len = window.len();
        model.head.forward(tape, x) // (1, L, V)
    }
}

/// Whether a softmax row of width `l` adds up its first `l − 1` values as a row of width `l − 1`
/// does (the last value, and the masked zeros, come on top). [`pairwise_sum`], NumPy's sum, keeps
/// eight running sums over the first multiple of 8 values and adds the rest one by one, so the
/// grouping changes when `l` reaches a multiple of 8; above 128 values it splits the row in two,
/// and this answers no.
pub fn sums_like_one_shorter(l: usize) -> bool {
    l < 8 || (l <= 128 && !l.is_multiple_of(8))
}
// ANCHOR_END: exercise_kv_whole

// ANCHOR: exercise_kv_generate
/// Exercise 2: [`generate`] with a [`KvCache`], the same characters to the bit. While the window
/// grows, only the newest position is computed; the whole window is, when the window slides or
/// when the softmax would group the earlier rows' sums anew ([`sums_like_one_shorter`]).
pub fn generate_cached(
    tape: &mut Tape,
    model: &TutorialGpt,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
) -> Result<String, GptError> {
    let mut tokens = dataset.encode(prompt)?;
    if tokens.is_empty() {
        return Err(GptError::EmptyPrompt);
    }
    let mut cache = KvCache::default();
    for _ in 0..steps {
        let start = tokens.len().saturating_sub(model.context_size);
        let window = &tokens[start..]; // (L)
        let l = window.len();
        tape.reset();
        let grew_by_one = start == 0 && l > 1 && cache.len + 1 == l;
        let logits = if grew_by_one && sums_like_one_shorter(l) {
            cache.forward_one(tape, model, window[l - 1]) // (1, 1, V)
        } else {
            cache.forward_all(tape, model, window) // (1, L, V)
        };
        let last = last_row(tape.value(logits)); // (V)
        tokens.push(rng.choice(&probabilities(last, Sampling::default())));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}
// ANCHOR_END: exercise_kv_generate

// ANCHOR: probabilities
/// softmax(logits / temperature), with the characters outside the top k set to 0 before the sum.
/// With the default [`Sampling`] this is the chapter's softmax bit for bit: x / 1 is x.
pub fn probabilities(logits: &[f32], sampling: Sampling) -> Vec<f64> {
    let scaled: Vec<f32> = logits.iter().map(|&l| l / sampling.temperature).collect();
    let max = scaled.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    let mut exp: Vec<f32> = scaled.iter().map(|&l| libm::expf(l - max)).collect();
    if let Some(k) = sampling.top_k.filter(|&k| k < scaled.len()) {
        let mut sorted = scaled.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k.max(1) - 1];
        for (e, &l) in exp.iter_mut().zip(&scaled) {
            if l < kth {
                *e = 0.0;
            }
        }
    }
    let sum = pairwise_sum(&exp);
    exp.iter().map(|&e| f64::from(e / sum)).collect()
}
// ANCHOR_END: probabilities

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_the_k_likeliest() {
        let logits = [1.0, 3.0, 2.0, 0.5];
        let top_2 = Sampling {
            top_k: Some(2),
            ..Sampling::default()
        };
        let p = probabilities(&logits, top_2);
        assert_eq!((p[0], p[3]), (0.0, 0.0));
        assert!(p[1] > p[2] && p[2] > 0.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-6);
    }

    #[test]
    fn low_temperature_sharpens() {
        let logits = [1.0, 2.0];
        let p = |temperature| {
            let s = Sampling {
                temperature,
                top_k: None,
            };
            probabilities(&logits, s)[1]
        };
        assert!(p(0.5) > p(1.0) && p(1.0) > p(2.0));
    }
}
