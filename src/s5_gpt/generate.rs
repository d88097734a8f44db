//! The chapter's `generate`: sample one character at a time from the trained model.

use super::data::CharDataset;
use super::error::Error;
use super::kernels::pairwise_sum;
use super::model::Gpt;
use super::tape::Tape;
use crate::rng::numpy::NumpyRandom;

// ANCHOR: generate
/// Continues `prompt` by `steps` characters and returns prompt and continuation together.
///
/// Each step feeds the last ≤ T tokens (positions 0..L−1, so the window slides once it is full), turns the
/// last position's logits into probabilities in float32, `exp(l − max) / Σ`, and draws the next token with
/// NumPy's `np.random.choice(V, p=probs)` from `rng`.
pub fn generate(
    tape: &mut Tape,
    model: &Gpt,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
) -> Result<String, Error> {
    let mut tokens = dataset.encode(prompt)?;
    if tokens.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    let v = model.config.vocab_size;
    for _ in 0..steps {
        let window = &tokens[tokens.len().saturating_sub(model.config.context_size)..];
        tape.reset();
        let logits = model.forward(tape, window, 1); // (1, L, V)
        let logits = tape.value(logits);
        let last = &logits.data[logits.data.len() - v..]; // (V)
        let max = last.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
        let exp: Vec<f32> = last.iter().map(|&l| libm::expf(l - max)).collect();
        let sum = pairwise_sum(&exp);
        let probs: Vec<f64> = exp.iter().map(|&e| f64::from(e / sum)).collect();
        tokens.push(rng.choice(&probs));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}
// ANCHOR_END: generate
