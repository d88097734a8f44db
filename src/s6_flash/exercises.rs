//! The solutions of the chapter's exercises: the largest square tile that fits a level-1 cache,
//! causal skipping's saving as a formula, and the tiles a sliding window of keys leaves.

use std::ops::Range;

use super::tiled::{Tiles, blocks};

// ANCHOR: l1_tile
/// The bytes of one f32.
pub const F32_BYTES: usize = 4;

/// The bytes of the tiles one step of the tiled forward holds at once, for square tiles
/// Br = Bc = `b` of heads `d` columns wide: the query block Q (b, d), the key and value tiles K and
/// V (b, d) each, the block's running output O (b, d) and the scores S (b, b), all f32.
pub fn tile_bytes(b: usize, d: usize) -> usize {
    (4 * b * d + b * b) * F32_BYTES
}

/// The largest square tile whose Q, K, V, O and S fit in `cache` bytes, for heads `d` columns
/// wide: 28 for a 32 KiB L1 and d = 64, since 4·28·64 + 28² = 7,952 floats fit in 8,192 and
/// 4·29·64 + 29² = 8,265 do not.
pub fn largest_square_tile(cache: usize, d: usize) -> usize {
    (1..)
        .take_while(|&b| tile_bytes(b, d) <= cache)
        .last()
        .unwrap_or(0)
}
// ANCHOR_END: l1_tile

// ANCHOR: causal_saving
/// (computed, skipped) of a causal pass over `t` tokens in square tiles of `b`, as a formula: with
/// n = ⌈T/b⌉ blocks a side, the tiles on or below the diagonal are n(n + 1)/2 and those above it
/// n(n − 1)/2, so the share skipped, (n − 1)/(2n), tends to one half as T/b grows.
pub fn causal_tile_counts(t: usize, b: usize) -> (usize, usize) {
    let n = t.div_ceil(b);
    (n * (n + 1) / 2, n * (n - 1) / 2)
}
// ANCHOR_END: causal_saving

// ANCHOR: sliding_window
/// The key tiles query block `rows` needs when each query i sees only the `w` keys
/// i − w + 1 ..= i (w ≥ 1): from the tile holding the block's first query's first key to the tile
/// holding its last query. A tile before them holds only keys more than w behind every query of the
/// block, so the window skips it on top of the tiles above the diagonal.
pub fn window_key_tiles(
    tiles: Tiles,
    rows: &Range<usize>,
    w: usize,
) -> impl Iterator<Item = Range<usize>> {
    let first_key = (rows.start + 1).saturating_sub(w);
    let first_tile = first_key / tiles.bc;
    blocks(rows.end, tiles.bc).skip(first_tile)
}

/// How many tiles a sliding window of `w` keys computes over `t` tokens.
pub fn window_tile_count(tiles: Tiles, t: usize, w: usize) -> usize {
    tiles
        .query_blocks(t)
        .map(|rows| window_key_tiles(tiles, &rows, w).count())
        .sum()
}
// ANCHOR_END: sliding_window
