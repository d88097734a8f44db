//! Tiled causal attention, FlashAttention's forward pass: the online softmax of [`super::online`]
//! run on blocks of queries against tiles of keys, with the values weighted as each tile arrives,
//! so that no T × T matrix is ever held.
//!
//! What each form costs, for one head of T tokens and D columns, queries in blocks of Br rows and
//! keys in tiles of Bc; n = the tiles computed, ⌈T/Br⌉·(⌈T/Br⌉ + 1)/2 when Br = Bc:
//!
//! | form | exponentials | reads of K | reads of V | holds beyond Q, K, V and O |
//! |---|---|---|---|---|
//! | naive (stage 4) | T², the masked −∞ too | 1 | 1 | the T × T scores and weights |
//! | tiled (here) | n·(Br·Bc + Br): a tile's scores, each row's rescale | 1 per query block | 1 per query block | a Br × Bc tile; m, ℓ per row |
//! | exact ([`super::exact`]) | about 2·n·Br·Bc: each score's twice | 3 per query block | 1 per query block | a Br × Bc tile, a Br × 256 chunk; m, ℓ per row |
//!
//! At T = 4,096 with Br = Bc = 64 (n = 2,080): 16,777,216 exponentials naive, 8,652,800 tiled,
//! 17,039,360 exact; the exact form also computes each score Q·Kᵀ three times. A read of K or V
//! per query block covers only the keys up to the block's last query.

use std::ops::Range;

use ndarray::linalg::general_mat_mul;
use ndarray::{Array1, Array2, ArrayView2, s};

pub use crate::s5_gpt::flash::Tiles;
pub(super) use crate::s5_gpt::flash::blocks;

/// How many bytes a float32 takes.
const F32: usize = std::mem::size_of::<f32>();

impl Tiles {
    /// The bytes the tiled forward holds beyond Q, K, V and O while it runs: one (Br, Bc) tile of
    /// scores, which becomes the tile's weights in place, and m and ℓ for each of the block's Br
    /// rows. The same at every T.
    pub fn held_bytes(&self) -> usize {
        (self.br * self.bc + 2 * self.br) * F32
    }
}

/// The bytes naive attention (stage 4's) holds beyond Q, K, V and O for one head of `t` tokens: its
/// (T, T) scores and its (T, T) weights, 2·T² floats.
pub fn naive_held_bytes(t: usize) -> usize {
    2 * t * t * F32
}

// ANCHOR: score_tile
/// The scores of query block `rows` against key tile `keys`, as stage 4 computes them:
/// Q·Kᵀ / √D, with −∞ where a key comes after its query. (Br, D) · (D, Bc) -> (Br, Bc).
///
/// Each score is the same number as stage 4's: ndarray's `dot` hands both to matrixmultiply, which
/// adds the D products of one score in the same order however many rows and columns the product
/// has.
pub fn score_tile(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    rows: &Range<usize>,
    keys: &Range<usize>,
) -> Array2<f32> {
    let sqrt_d = (q.ncols() as f32).sqrt();
    let q_block = q.slice(s![rows.clone(), ..]); // (Br, D)
    let k_tile = k.slice(s![keys.clone(), ..]); // (Bc, D)
    let mut scores = q_block.dot(&k_tile.t()); // (Br, Bc)
    for ((r, c), score) in scores.indexed_iter_mut() {
        let future = keys.start + c > rows.start + r;
        *score = if future {
            f32::NEG_INFINITY
        } else {
            *score / sqrt_d
        };
    }
    scores
}
// ANCHOR_END: score_tile

// ANCHOR: tiled_forward
/// What the tiled forward pass returns.
#[derive(Clone, Debug)]
pub struct TiledForward {
    /// (T, D): softmax(Q·Kᵀ/√D)·V, causal.
    pub output: Array2<f32>,
    /// (T): the log-sum-exp of each row of scores, m + ln ℓ. The backward pass recomputes a row's
    /// weights from it, e^(s − lse), without the T × T matrix.
    pub lse: Array1<f32>,
    /// The tiles computed: those on or below the diagonal.
    pub tiles_computed: usize,
    /// The tiles skipped: those entirely above the diagonal.
    pub tiles_skipped: usize,
}

/// The running state of one query block: per row the largest score so far m, the sum so far ℓ =
/// Σ e^(s − m), and the weighted values so far O = Σ e^(s − m)·v, all measured from the current m.
struct Running {
    /// (Br)
    m: Array1<f32>,
    /// (Br)
    l: Array1<f32>,
    /// (Br, D)
    o: Array2<f32>,
}

impl Running {
    fn new(rows: usize, d: usize) -> Self {
        Running {
            m: Array1::from_elem(rows, f32::NEG_INFINITY),
            l: Array1::zeros(rows),
            o: Array2::zeros((rows, d)),
        }
    }

    /// Folds in one tile: each row's new maximum, the rescale e^(m_old − m_new) of what it held,
    /// the tile's weights P = e^(S − m_new), then ℓ ← ℓ·rescale + ΣP and O ← O·rescale + P·V.
    /// `scores` (Br, Bc) becomes P; `v_tile` is (Bc, D).
    ///
    /// The first tile a row sees holds key 0, which every query may see, so m is finite from then
    /// on and m_old − m_new is never −∞ − (−∞).
    fn fold(&mut self, mut scores: Array2<f32>, v_tile: &ArrayView2<f32>) {
        let rows = scores.rows_mut().into_iter().zip(self.o.rows_mut());
        for ((mut p, mut o), (m, l)) in rows.zip(self.m.iter_mut().zip(self.l.iter_mut())) {
            let m_new = p.fold(*m, |a, &x| a.max(x));
            let rescale = libm::expf(*m - m_new);
            p.mapv_inplace(|x| libm::expf(x - m_new)); // e^(−∞) = 0 where masked
            *l = *l * rescale + p.sum();
            o *= rescale;
            *m = m_new;
        }
        general_mat_mul(1.0, &scores, v_tile, 1.0, &mut self.o); // O += P·V
    }

    /// O / ℓ and the log-sum-exp m + ln ℓ, per row.
    fn finish(self) -> (Array2<f32>, Array1<f32>) {
        let Running { m, l, mut o } = self;
        for (mut o, &l) in o.rows_mut().into_iter().zip(&l) {
            o /= l;
        }
        let lse = &m + &l.mapv(libm::logf);
        (o, lse)
    }
}

/// FlashAttention's forward pass for one causal head: Q, K, V (T, D) -> O (T, D) and the
/// log-sum-exp (T), reading each key and value tile once per query block and skipping the tiles
/// above the diagonal. Equal to stage 4's attention up to rounding (see `tests/s6_flash.rs` for
/// how far apart they are).
pub fn tiled_attention(
    q: &ArrayView2<f32>,
    k: &ArrayView2<f32>,
    v: &ArrayView2<f32>,
    tiles: Tiles,
) -> TiledForward {
    let (t, d) = q.dim();
    let mut output = Array2::zeros((t, d)); // (T, D)
    let mut lse = Array1::zeros(t); // (T)
    for rows in tiles.query_blocks(t) {
        let mut running = Running::new(rows.len(), d);
        for keys in tiles.visible_key_tiles(&rows) {
            let scores = score_tile(q, k, &rows, &keys); // (Br, Bc)
            running.fold(scores, &v.slice(s![keys, ..]));
        }
        let (o, block_lse) = running.finish();
        output.slice_mut(s![rows.clone(), ..]).assign(&o);
        lse.slice_mut(s![rows]).assign(&block_lse);
    }
    let (tiles_computed, tiles_skipped) = tiles.count(t);
    TiledForward {
        output,
        lse,
        tiles_computed,
        tiles_skipped,
    }
}
// ANCHOR_END: tiled_forward
