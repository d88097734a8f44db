//! Lesson layer. The simplest model of the next character, as a yardstick for the GPT: how often
//! each character followed each other one in the training text. A GPT whose held-out loss is not
//! below this one has learned no more than pairs of letters.

use super::data::{CharDataset, Split};

// ANCHOR: bigram
/// A bigram model: p(b | a) from the counts of "a then b" in the training part, with one added to
/// every count (Laplace smoothing), so that a pair the training text never shows is unlikely, not
/// impossible.
#[derive(Clone, Debug)]
pub struct Bigram {
    vocab_size: usize,
    /// counts[a · V + b]: how often b follows a in the training part, plus one. (V, V)
    counts: Vec<f64>,
    /// Σ_b counts[a · V + b], for each a. (V)
    totals: Vec<f64>,
}

impl Bigram {
    /// Counts every pair of neighbours in the training part (the text before `split_at`).
    pub fn fit(dataset: &CharDataset) -> Self {
        let v = dataset.vocab_size();
        let mut counts = vec![1.0; v * v];
        for pair in dataset.tokens[..dataset.split_at].windows(2) {
            counts[pair[0] * v + pair[1]] += 1.0;
        }
        let totals = counts
            .chunks(v.max(1))
            .map(|row| row.iter().sum())
            .collect();
        Bigram {
            vocab_size: v,
            counts,
            totals,
        }
    }

    /// −ln p(b | a): the cross-entropy of predicting `b` after `a`.
    pub fn loss(&self, a: usize, b: usize) -> f64 {
        -(self.counts[a * self.vocab_size + b] / self.totals[a]).ln()
    }
}
// ANCHOR_END: bigram

impl Bigram {
    /// The mean loss over `split`'s batches, averaged as [`test`](super::train::test) averages the
    /// GPT's: each batch's mean over its B × T targets, then the mean over the batches.
    pub fn mean_loss(&self, dataset: &CharDataset, split: Split) -> f64 {
        let batches = dataset.len(split);
        let batch_mean = |i| {
            let batch = dataset.batch(split, i);
            let sum: f64 = (batch.x.iter().zip(&batch.y))
                .map(|(&a, &b)| self.loss(a, b))
                .sum();
            sum / batch.y.len() as f64
        };
        (0..batches).map(batch_mean).sum::<f64>() / batches as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_that_always_repeats_its_pairs_is_cheap_to_predict() {
        // "ab" repeated: after a always b, after b always a; the last 10 % is the test part.
        let text = "ab".repeat(200);
        let dataset = CharDataset::from_text(&text, 2, 4);
        let bigram = Bigram::fit(&dataset);
        // Counts + 1: a→b seen 180 times of 360 training characters' pairs, a→a never.
        assert!(bigram.loss(0, 1) < 0.01, "{}", bigram.loss(0, 1));
        assert!(bigram.loss(0, 0) > 4.0, "{}", bigram.loss(0, 0));
        let test = bigram.mean_loss(&dataset, Split::Test);
        assert!(test > 0.0 && test < 0.01, "{test}");
    }
}
