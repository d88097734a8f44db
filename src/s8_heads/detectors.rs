//! Lesson layer. Head detectors: how much of a head's attention falls where a previous-token, a
//! duplicate-token or an induction head would put it. The patterns are TransformerLens's
//! (`transformer_lens/head_detector.py`), drawn from the tokens themselves; the score is its
//! `sum(attention × pattern) / sum(attention)`, summed over the rows where the pattern marks a key.
//! TransformerLens divides by every row, so that a perfect induction head scores about one half on
//! a sequence repeated once; here it scores 1.

use crate::s5_gpt::beyond::{Gpt, attention_maps};
use crate::s5_gpt::tape::Tape;

// ANCHOR: detector
/// The three kinds of head the chapter looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detector {
    /// Each character looks at the one just before it.
    PreviousToken,
    /// Each character looks at the earlier places where the same character stood.
    DuplicateToken,
    /// Each character looks at the character *after* each earlier copy of itself: "… A B … A →
    /// B".
    Induction,
}

impl Detector {
    pub const ALL: [Detector; 3] = [
        Detector::PreviousToken,
        Detector::DuplicateToken,
        Detector::Induction,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Detector::PreviousToken => "previous-token",
            Detector::DuplicateToken => "duplicate-token",
            Detector::Induction => "induction",
        }
    }

    /// Whether query i should look at key j < i in `tokens`.
    pub fn marks(self, tokens: &[usize], i: usize, j: usize) -> bool {
        match self {
            Detector::PreviousToken => j + 1 == i,
            Detector::DuplicateToken => j < i && tokens[j] == tokens[i],
            Detector::Induction => j > 0 && j <= i && tokens[j - 1] == tokens[i],
        }
    }
}
// ANCHOR_END: detector

// ANCHOR: score
/// The share of a head's attention `weights` (T, T), row-major, that falls on the keys `detector`
/// marks, over the rows where it marks one: 1 for a head that does exactly that, 0 for one that
/// never does. NaN when no row has a mark.
pub fn score(detector: Detector, tokens: &[usize], weights: &[f32]) -> f64 {
    let t = tokens.len();
    let (mut on_pattern, mut rows) = (0.0f64, 0.0f64);
    for (i, row) in weights.chunks_exact(t).enumerate() {
        let marked: Vec<usize> = (0..=i).filter(|&j| detector.marks(tokens, i, j)).collect();
        if marked.is_empty() {
            continue;
        }
        on_pattern += marked.iter().map(|&j| f64::from(row[j])).sum::<f64>();
        rows += row[..=i].iter().map(|&w| f64::from(w)).sum::<f64>();
    }
    on_pattern / rows
}
// ANCHOR_END: score

// ANCHOR: head_scores
/// Each head's three scores, averaged over `sequences`: `scores[block][head]` holds them in
/// [`Detector::ALL`]'s order.
pub fn head_scores(model: &Gpt, tape: &mut Tape, sequences: &[Vec<usize>]) -> Vec<Vec<[f64; 3]>> {
    let (blocks, heads) = (model.blocks.len(), model.blocks[0].attn.num_heads);
    let mut scores = vec![vec![[0.0; 3]; heads]; blocks];
    for tokens in sequences {
        let maps = attention_maps(model, tape, tokens); // [block][head]: (T, T)
        for (block, maps) in scores.iter_mut().zip(&maps) {
            for (head, weights) in block.iter_mut().zip(maps) {
                for (s, detector) in head.iter_mut().zip(Detector::ALL) {
                    *s += score(detector, tokens, weights) / sequences.len() as f64;
                }
            }
        }
    }
    scores
}
// ANCHOR_END: head_scores

// ANCHOR: hand_made
/// A (T, T) pattern whose row i puts all its weight on key `look(i)`.
pub fn pure(t: usize, look: impl Fn(usize) -> usize) -> Vec<f32> {
    let mut w = vec![0.0; t * t];
    for i in 0..t {
        w[i * t + look(i)] = 1.0;
    }
    w
}

/// The chapter's text for patterns made by hand: CAPULET written twice, seven distinct letters.
pub const HAND_MADE_TEXT: &str = "CAPULETCAPULET";

/// Three heads made by hand on a text of n characters written twice, each looking at itself
/// where it finds nothing to look for: one looks at the character before; one, in the second copy,
/// at the same character in the first; one at the character after it.
pub fn hand_made(t: usize) -> [(&'static str, Vec<f32>); 3] {
    let n = t / 2;
    [
        ("previous", pure(t, |i| i.saturating_sub(1))),
        ("duplicate", pure(t, |i| if i >= n { i - n } else { i })),
        ("induction", pure(t, |i| if i >= n { i - n + 1 } else { i })),
    ]
}
// ANCHOR_END: hand_made

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pure_head_scores_one_and_the_others_score_less() {
        let tokens = [3, 1, 4, 7, 5, 3, 1, 4, 7, 5]; // "31475" twice
        let t = tokens.len();
        let previous = pure(t, |i| i.saturating_sub(1));
        let induction = pure(t, |i| if i >= 5 { i - 4 } else { i });
        assert_eq!(score(Detector::PreviousToken, &tokens, &previous), 1.0);
        assert_eq!(score(Detector::Induction, &tokens, &induction), 1.0);
        assert!(score(Detector::Induction, &tokens, &previous) < 0.3);
        assert!(score(Detector::PreviousToken, &tokens, &induction) < 0.5);
        let uniform: Vec<f32> = (0..t * t)
            .map(|k| {
                if k % t <= k / t {
                    1.0 / (k / t + 1) as f32
                } else {
                    0.0
                }
            })
            .collect();
        let s = score(Detector::PreviousToken, &tokens, &uniform);
        assert!(s > 0.05 && s < 0.5, "{s}");
    }
}
