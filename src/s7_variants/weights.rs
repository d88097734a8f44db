//! What each variant's first block attends to, for a prompt: which keys each query may see (the
//! mask), and each head's weights, for every variant of [`variants`](super::variants) or one of
//! them; the example prints them and the chapter's panel draws them.
//!
//! The model is the chapter's ([`chapter_model`](super::chapter_model)), its weights as drawn from
//! `np.random.seed(42)`, untrained: the masks are the variants' own, and the weights show how each
//! variant shares, bands and turns its heads before any training has shaped them.

use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::beyond::attention_maps;
use crate::s5_gpt::ops::{MASK_VALUE, tril_forward};
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::variants::window_forward;

/// The prompt of the chapter's panel: long enough for the window of 8 to leave keys out.
pub const PROMPT: &str = "O Romeo, Romeo!";

/// A variant's first block on a prompt of T tokens.
#[derive(Clone, Debug, PartialEq)]
pub struct FirstBlock {
    /// `mask[i][j]`: whether query i may see key j. (T, T)
    pub mask: Vec<Vec<bool>>,
    /// `heads[h][i][j]`: head h's weight of key j for query i; each row sums to 1. (H, T, T)
    pub heads: Vec<Vec<Vec<f32>>>,
}

// ANCHOR: visible
/// Which keys (columns) each of T queries (rows) may see: the causal mask, then the sliding
/// window if there is one, the model's own ops on scores that are all kept.
pub fn visible(t: usize, window: Option<usize>) -> Vec<Vec<bool>> {
    let ones = vec![1.0f32; t * t]; // (T, T) scores, all kept
    let mut masked = vec![0.0; t * t];
    tril_forward(&mut masked, &ones, t, MASK_VALUE); // (T, T): the future masked
    if let Some(w) = window {
        let causal = masked.clone();
        window_forward(&mut masked, &causal, t, w, MASK_VALUE); // (T, T): and the old past
    }
    (masked.chunks(t))
        .map(|row| row.iter().map(|&s| s == 1.0).collect())
        .collect()
}
// ANCHOR_END: visible

// ANCHOR: first_block
/// The chapter's model with `arch`, untrained, on the tokens `ids` (at most its context): the
/// first block's mask and the weights of each of its heads, the softmax nodes of its graph.
pub fn first_block(arch: Architecture, ids: &[usize]) -> FirstBlock {
    let t = ids.len();
    let mut tape = Tape::new();
    let (model, _) = super::chapter_model(&mut tape, arch);
    let maps = attention_maps(&model, &mut tape, ids); // [block][head][T·T]
    let heads = (maps[0].iter())
        .map(|w| w.chunks(t).map(<[f32]>::to_vec).collect()) // (T, T)
        .collect();
    FirstBlock {
        mask: visible(t, arch.window),
        heads,
    }
}
// ANCHOR_END: first_block

/// `block` as printed lines: the mask (`1` seen, `·` hidden), then each head's weights with four
/// decimals, each row led by its token's index and character.
pub fn lines(chars: &[char], block: &FirstBlock) -> Vec<String> {
    let row = |i: usize, cells: String| format!("{i:>3} {:<6}{cells}", format!("{:?}", chars[i]));
    let mut lines = vec!["mask: the keys (columns) each query (row) may see".to_string()];
    for (i, seen) in block.mask.iter().enumerate() {
        let cells = seen.iter().map(|&s| if s { " 1" } else { " ·" }).collect();
        lines.push(row(i, cells));
    }
    for (h, weights) in block.heads.iter().enumerate() {
        lines.push(format!("head {}: softmax weights", h + 1));
        for (i, w) in weights.iter().enumerate() {
            lines.push(row(i, w.iter().map(|x| format!(" {x:.4}")).collect()));
        }
    }
    lines
}
