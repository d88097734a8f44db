//! Memory traffic: the bytes one causal head moves between memory and the cores in its forward
//! pass, naive and tiled, counted by walking each form's own loops. The FlashAttention papers call
//! it IO, and their argument is about it: cores compute far faster than memory feeds them, so the
//! bytes a form does not move count for more than the arithmetic it does not do.
//!
//! The model, for one head of T tokens and D columns in float32 (4 bytes a number): a number
//! counts once each time it is read from memory into the cores, and once each time it is written
//! back. What a core holds while it works (in its registers and caches) is not counted.
//!
//! - **Naive**: the tape's six nodes, transpose, matmul, scale, tril, softmax, matmul. Each node
//!   reads each of its inputs once and writes its output once. It must write its output, a new
//!   tensor that the next node reads back, and a T × T matrix (4 MiB at T = 1,024) does not stay
//!   in a core's cache between two nodes. Once per input is the least a node can read: a product
//!   of matrices larger than the cache reads its operands more often, so the count is a floor.
//! - **Tiled** (`tiled_attention`, the tape's `tiled_forward`): each query block reads its
//!   queries once and, for each key tile it sees, that tile of K and of V once; its scores,
//!   weights, m, ℓ and running output stay in the cores (a Br × Bc tile, 2·Br numbers and a
//!   Br × D block) until it writes its output and its log-sum-exp, once. The tiles above the
//!   diagonal are never read.
//!
//! Neither count includes the backward pass. The naive graph's matrices grow as T², and so do the
//! tiled form's reads of K and V, one pass over the visible keys per query block: about D·T²/Br
//! numbers in all, so larger query blocks save more.

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use super::Tiles;

/// How many bytes a float32 takes.
const F32: usize = std::mem::size_of::<f32>();

// ANCHOR: traffic
/// Bytes moved between memory and the cores: read into them, and written back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    pub read: usize,
    pub written: usize,
}

impl Traffic {
    /// The bytes of `read` float32s read and `written` ones written.
    pub fn floats(read: usize, written: usize) -> Self {
        Traffic {
            read: read * F32,
            written: written * F32,
        }
    }

    /// Bytes read and written together.
    pub fn total(&self) -> usize {
        self.read + self.written
    }
}

/// The naive graph's nodes for one head of `t` tokens and `d` columns, in the order the tape
/// records them, each with its name and what it moves: its inputs read once, its output written
/// once.
pub fn naive_nodes(t: usize, d: usize) -> [(&'static str, Traffic); 6] {
    let (matrix, scores) = (t * d, t * t); // (T, D) and (T, T)
    [
        ("transpose", Traffic::floats(matrix, matrix)), // K (T, D) -> Kᵀ (D, T)
        ("matmul", Traffic::floats(2 * matrix, scores)), // Q, Kᵀ -> S (T, T)
        ("scale", Traffic::floats(scores, scores)),     // (T, T) -> (T, T)
        ("tril", Traffic::floats(scores, scores)),      // (T, T) -> (T, T)
        ("softmax", Traffic::floats(scores, scores)),   // (T, T) -> W (T, T)
        ("matmul", Traffic::floats(scores + matrix, matrix)), // W, V (T, D) -> O (T, D)
    ]
}

/// What the naive graph moves for one head of `t` tokens and `d` columns: its six nodes'.
pub fn naive_traffic(t: usize, d: usize) -> Traffic {
    naive_nodes(t, d).into_iter().map(|(_, moved)| moved).sum()
}

/// What the tiled forward pass moves for one head of `t` tokens and `d` columns in `tiles`, walking
/// its loops: per query block its queries read, each visible key tile of K and of V read, then its
/// output and log-sum-exp written.
pub fn tiled_traffic(t: usize, d: usize, tiles: Tiles) -> Traffic {
    let mut moved = Traffic::default();
    for rows in tiles.query_blocks(t) {
        moved += Traffic::floats(rows.len() * d, 0); // Q's block (Br, D)
        for keys in tiles.visible_key_tiles(&rows) {
            moved += Traffic::floats(2 * keys.len() * d, 0); // K's and V's tile (Bc, D) each
        }
        moved += Traffic::floats(0, rows.len() * d + rows.len()); // O's block (Br, D), lse (Br)
    }
    moved
}
// ANCHOR_END: traffic

impl Add for Traffic {
    type Output = Traffic;

    fn add(self, other: Traffic) -> Traffic {
        Traffic {
            read: self.read + other.read,
            written: self.written + other.written,
        }
    }
}

impl AddAssign for Traffic {
    fn add_assign(&mut self, other: Traffic) {
        *self = *self + other;
    }
}

impl Sum for Traffic {
    fn sum<I: Iterator<Item = Traffic>>(iter: I) -> Traffic {
        iter.fold(Traffic::default(), Add::add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s5_gpt::ops::MASK_VALUE;
    use crate::s5_gpt::{Tape, Tensor};

    #[test]
    fn the_naive_graph_at_four_tokens_counted_by_hand() {
        // T = 4, D = 2: Q, K, V and O hold 8 numbers each, a (T, T) matrix 16.
        // transpose 8 → 8, matmul 8 + 8 → 16, scale, tril and softmax 16 → 16 each,
        // matmul 16 + 8 → 8: 96 numbers read, 80 written.
        assert_eq!(naive_traffic(4, 2), Traffic::floats(96, 80));
        assert_eq!(naive_traffic(4, 2).total(), 4 * 176);
    }

    #[test]
    fn the_tiled_pass_at_four_and_five_tokens_counted_by_hand() {
        let tiles = Tiles::new(2, 2);
        // T = 4, D = 2: Q 8 read; block 0–1 sees key tile 0–1 (K 4, V 4), block 2–3 tiles 0–1
        // and 2–3 (K 8, V 8): 8 + 8 + 16 = 32 read; O 8 and the lse 4 written.
        assert_eq!(tiled_traffic(4, 2, tiles), Traffic::floats(32, 12));
        // T = 5: a last block of one row, 4, sees keys 0–4 in tiles 0–1, 2–3 and 4 (K 10, V 10):
        // Q 10 + K and V (2·2 + 2·4 + 2·5)·2 = 44, so 54 read; O 10 and the lse 5 written.
        assert_eq!(tiled_traffic(5, 2, tiles), Traffic::floats(54, 15));
    }

    #[test]
    fn the_tiled_pass_reads_the_keys_up_to_each_block_once() {
        // With Br = Bc dividing T into n blocks, block b reads keys 0..(b + 1)·Br of K and of V.
        let (t, d, br) = (256, 64, 16);
        let n = t / br;
        let keys_read = br * n * (n + 1) / 2;
        let expected = Traffic::floats(t * d + 2 * keys_read * d, t * d + t);
        assert_eq!(tiled_traffic(t, d, Tiles::new(br, br)), expected);
    }

    #[test]
    fn each_naive_node_moves_its_inputs_and_its_output_as_the_tape_records_them() {
        let (t, d) = (5, 3);
        let mut tape = Tape::new();
        let [q, k, v] = [(); 3].map(|()| tape.input(Tensor::new(&[t, d], vec![0.5; t * d])));
        let kt = tape.transpose(k); // (D, T)
        let product = tape.matmul(q, kt); // (T, T)
        let scaled = tape.scale(product, 1.0 / (d as f32).sqrt()); // (T, T)
        let masked = tape.tril(scaled, MASK_VALUE); // (T, T)
        let weights = tape.softmax(masked); // (T, T)
        let out = tape.matmul(weights, v); // (T, D)
        let size = |id| tape.value(id).data.len();
        let recorded: Vec<Traffic> = [kt, product, scaled, masked, weights, out]
            .into_iter()
            .map(|id| {
                let read = tape.op(id).inputs().into_iter().map(size).sum();
                Traffic::floats(read, size(id))
            })
            .collect();
        let counted: Vec<Traffic> = naive_nodes(t, d).iter().map(|(_, m)| *m).collect();
        assert_eq!(recorded, counted);
    }
}
