//! Lesson layer. The chapter's `generate`: sample one character at a time from the trained model.

use super::data::CharDataset;
use super::error::GptError;
use super::model::Gpt;
use super::ops::pairwise_sum;
use super::tape::Tape;
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
    model: &Gpt,
    dataset: &CharDataset,
    prompt: &str,
    steps: usize,
    rng: &mut NumpyRandom,
    sampling: Sampling,
) -> Result<String, GptError> {
    let mut tokens = dataset.encode(prompt)?;
    if tokens.is_empty() {
        return Err(GptError::EmptyPrompt);
    }
    let v = model.config.vocab_size;
    for _ in 0..steps {
        let window = &tokens[tokens.len().saturating_sub(model.config.context_size)..];
        tape.reset();
        let logits = model.forward(tape, window, 1, None); // (1, L, V)
        let logits = tape.value(logits);
        let last = &logits.data[logits.data.len() - v..]; // (V)
        tokens.push(rng.choice(&probabilities(last, sampling)));
    }
    tape.reset();
    Ok(dataset.decode(&tokens))
}

// ANCHOR_END: generate

// ANCHOR: probabilities
/// softmax(logits / temperature), with the characters outside the top k set to 0 before the sum.
/// With the default [`Sampling`] this is the chapter's softmax bit for bit: x / 1 is x.
fn probabilities(logits: &[f32], sampling: Sampling) -> Vec<f64> {
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
