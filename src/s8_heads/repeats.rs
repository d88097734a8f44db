//! Lesson layer. Repeated random text, the test every induction study uses: n random characters,
//! then the same n again. The first copy cannot be predicted (its loss sits near ln V), the second
//! can, by a model that looks back for "the character after the last time this one came".
//!
//! The same idea mixed into training ([`Repeats`]): in some rows of each batch, a random stretch
//! of text written twice in a row. Tiny Shakespeare alone repeats too little for a small model to
//! need an induction head (the chapter measures both ways).

use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::data::Batch;

// ANCHOR: repeated_random
/// A whole number drawn uniformly from `range`.
pub fn uniform(rng: &mut NumpyRandom, range: std::ops::RangeInclusive<usize>) -> usize {
    let width = range.end() - range.start() + 1;
    range.start() + ((rng.random_sample() * width as f64) as usize).min(width - 1)
}

/// n characters drawn uniformly from a vocabulary of V, then the same n again: 2n tokens.
pub fn repeated_random(rng: &mut NumpyRandom, n: usize, vocab: usize) -> Vec<usize> {
    let first: Vec<usize> = (0..n).map(|_| uniform(rng, 0..=vocab - 1)).collect();
    [first.as_slice(), first.as_slice()].concat()
}
// ANCHOR_END: repeated_random

// ANCHOR: repeats
/// The training mix: every `every`-th row of a batch carries a random stretch of `lengths`
/// characters written twice in a row, at a random place.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Repeats {
    /// 2: every second row (half the rows); 1: every row.
    pub every: usize,
    /// The stretch's length, drawn uniformly; its two copies must fit in the window.
    pub lengths: (usize, usize),
}

/// The generator of training step `step`'s repeats: `np.random.RandomState([seed, step, 8])`, its
/// own stream, so that the weights, the dropout masks and the batches stay what they were.
pub fn repeats_rng(seed: u32, step: usize) -> NumpyRandom {
    let step = u32::try_from(step).expect("a step number fits in 32 bits");
    NumpyRandom::seed_array(&[seed, step, 8])
}

impl Repeats {
    /// Writes the repeats into `batch` (B rows of T inputs and T targets), drawing from `rng`.
    pub fn mix(&self, batch: &mut Batch, vocab: usize, rng: &mut NumpyRandom) {
        let t = batch.x.len() / batch.rows;
        for row in (0..batch.rows).step_by(self.every) {
            let mut text = row_text(batch, row, t); // (T + 1)
            let n = uniform(rng, self.lengths.0..=self.lengths.1.min(text.len() / 2));
            let start = uniform(rng, 0..=text.len() - 2 * n);
            let twice = repeated_random(rng, n, vocab); // (2n)
            text[start..start + 2 * n].copy_from_slice(&twice);
            batch.x[row * t..(row + 1) * t].copy_from_slice(&text[..t]);
            batch.y[row * t..(row + 1) * t].copy_from_slice(&text[1..]);
        }
    }
}

/// Row `row`'s T + 1 characters: its inputs and its last target.
fn row_text(batch: &Batch, row: usize, t: usize) -> Vec<usize> {
    let mut text = batch.x[row * t..(row + 1) * t].to_vec();
    text.push(batch.y[(row + 1) * t - 1]);
    text
}
// ANCHOR_END: repeats

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeat_is_two_copies_and_the_targets_follow_the_inputs() {
        let mut rng = NumpyRandom::seed(1);
        let twice = repeated_random(&mut rng, 5, 65);
        assert_eq!(twice[..5], twice[5..]);
        let (x, y): (Vec<usize>, Vec<usize>) = (0..2 * 16).map(|i| (i % 16, i % 16 + 1)).unzip();
        let mut batch = Batch { rows: 2, x, y };
        let repeats = Repeats {
            every: 2,
            lengths: (3, 6),
        };
        repeats.mix(&mut batch, 65, &mut rng);
        assert_eq!(batch.x[1..16], batch.y[..15]);
        assert_ne!(batch.x[..16], (0..16).collect::<Vec<_>>()[..]);
        assert_eq!(batch.x[16..], (0..16).collect::<Vec<_>>()[..]); // row 1 untouched
    }
}
