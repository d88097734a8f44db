//! Fast layer. The FlashAttention op's tiled form ([`crate::s5_gpt::flash::tiled_forward`] and
//! [`crate::s5_gpt::flash::tiled_backward`]) without dropout, in register tiles: the lesson's bits.
//!
//! The lesson walks one query row at a time through the key tiles of its block. Here sixteen rows
//! of a block go together, one per vector lane ([`L`]), and every lane does its row's operations
//! in the lesson's order:
//!
//! * **scores** (`dots`): lane r of key j holds `fma(q[r][D−1], k[j][D−1], … fma(q[r][0],
//!   k[j][0], 0))`, the lesson's `dot`, with the sixteen rows of Q transposed into D vectors so
//!   that each step over d is one vector of queries times one broadcast key value, for sixteen keys
//!   at once (K transposed in panels of sixteen keys, so that those sixteen values are adjacent and
//!   a group's D steps one run of memory; with AVX-512 the sixteen sums stay in registers, written
//!   with the CPU's own fused multiply-add intrinsics). Then × scale, or the mask's value where
//!   j > i, chosen per lane.
//! * **softmax statistics**: per lane the running maximum folded over the tile's keys in order,
//!   `expf` from [`super::kernels::expf_non_positive`] (with AVX2, its vector form
//!   [`super::kernels::expf_non_positive_avx2`]; the library's own call where it does not cover, 0
//!   where the library gives exactly 0), the sum `sum += p` over the keys in order: the
//!   lanes are the rows, so each row keeps its sequential order for free.
//! * **products with V, K, Q or dO** (`group_times`, `keys_times`): four rows (six with AVX2)
//!   by up to 64 columns of outputs held in registers while the contraction runs, each output
//!   getting its terms by one fused multiply-add each, in the lesson's order: O\[i\] and dQ\[i\]
//!   over the keys j in increasing order, dV\[j\] and dK\[j\] over the queries i in increasing
//!   order (query blocks in order, a block's rows in order).
//!
//! The tiles are the lesson's: its query blocks of Br, and for each block the same key tiles (the
//! last visible one cut at the block's end, the masked future ones computed exactly when the lesson
//! computes them), so every row sees the same tile boundaries and every visited pair the same
//! operations, masked pairs included. Work is shared out by whole outputs only: the forward pass by
//! pieces of query blocks (each writes only its own rows), the backward pass by matrices of the
//! (…, T, D) stack (each writes only its own gradients), so any number of threads gives the same
//! bits. Only the order of independent work differs from the lesson's, to keep what is read in the
//! cache: in the forward pass each key tile goes through every row group of a piece's blocks before
//! the next tile (the rows' states are independent); in the backward pass the keys go in panels,
//! each through the query blocks in order, so that each gradient row still takes its terms in the
//! lesson's order (`backward_matrix`). `tests/s6_fast.rs` compares every output with the lesson's.

use std::borrow::Cow;
use std::ops::Range;

use super::exp_is_zero;
use super::kernels::{self, Piece, vectorised};
use super::team;
use crate::s5_gpt::flash::Tiles;
use crate::s5_gpt::flash::{Causal, FlashForm, FlashNode, key_tiles, masked_keys};
use crate::s5_gpt::tensor::Tensor;

/// Query rows per group: one per lane of a sixteen-wide vector (one AVX-512 register, two AVX2
/// ones).
pub const L: usize = 16;
/// One value per row of a group.
type Lanes = [f32; L];
/// Output rows (or key rows) of a register tile of products.
const R: usize = 4;
/// Vectors of L columns of a register tile of products (64 columns).
const C: usize = 4;

/// Whether this node runs here: the tiled form without dropout. Everything else runs the lesson's
/// functions.
pub fn runs(node: &FlashNode) -> bool {
    matches!(node.form, FlashForm::Tiled(_)) && node.dropout.is_none()
}

/// The node's forward pass into `out` (…, T, D), its log-sum-exp kept in the node, as
/// [`FlashNode::forward`] does for the tiled form.
pub fn forward(node: &mut FlashNode, values: &[Tensor], out: &mut [f32]) {
    let FlashForm::Tiled(tiles) = node.form else {
        panic!("the fast FlashAttention kernel runs the tiled form only")
    };
    let qkv = node.qkv.map(|x| &values[x.0].data[..]);
    node.lse = vec![0.0; out.len() / node.causal.d];
    tiled_forward((out, &mut node.lse), qkv, node.causal, tiles);
}

/// The node's backward pass: (dV, dQ, dK) from the output and its gradient, as
/// [`FlashNode::backward`] does for the tiled form.
pub fn backward(
    node: &FlashNode,
    values: &[Tensor],
    (out, d_out): (&[f32], &[f32]),
    d: [&mut [f32]; 3],
) {
    let FlashForm::Tiled(tiles) = node.form else {
        panic!("the fast FlashAttention kernel runs the tiled form only")
    };
    let qkv = node.qkv.map(|x| &values[x.0].data[..]);
    tiled_backward(d, d_out, (out, &node.lse), qkv, node.causal, tiles);
}

/// A (T, D) matrix copied with its rows `dp` wide (D rounded up to a multiple of [`L`], zeros
/// after D) and [`L`] rows of zeros after T, so that a vector of columns, or a group of sixteen
/// keys that runs past the last one, always reads inside it. (T + L, Dp).
fn padded(x: &[f32], c: Causal, dp: usize) -> Vec<f32> {
    let mut out = vec![0.0; (c.t + L) * dp];
    for (row, x) in out.chunks_exact_mut(dp).zip(x.chunks_exact(c.d)) {
        row[..c.d].copy_from_slice(x);
    }
    out
}

/// A (T, D) matrix transposed in panels of [`L`] rows (keys): panel n holds keys nL to nL + L − 1
/// as a (D, L) matrix, so that the [`dots`] kernel reads a group of sixteen keys as D·L
/// consecutive values. Kᵀ whole, its D rows T apart, would put each of a group's D rows in a page
/// of its own at long lengths, a stride the hardware neither prefetches nor keeps in its page
/// table's cache. Zeros after T, and one panel of them more, so that a group of sixteen keys that
/// runs past the last one reads zeros.
#[derive(Clone, Default)]
struct Panels {
    data: Vec<f32>,
    d: usize,
}

impl Panels {
    fn new(x: &[f32], c: Causal) -> Self {
        let mut data = vec![0.0; panels_len(c.t, c.d)];
        for (j, x) in x.chunks_exact(c.d).enumerate() {
            let panel = &mut data[j / L * L * c.d..][..L * c.d];
            for (p, &x) in x.iter().enumerate() {
                panel[p * L + j % L] = x;
            }
        }
        Panels { data, d: c.d }
    }

    /// Keys `first` to `first` + L − 1 as a (D, L) matrix: a panel itself when `first` starts one
    /// (wherever the tiles start at multiples of L), else those keys of the two panels it straddles
    /// copied into `group` (D, L).
    #[inline(always)]
    fn group<'a>(&'a self, first: usize, group: &'a mut [f32]) -> &'a [f32] {
        let (n, shift, size) = (first / L, first % L, L * self.d);
        let panel = &self.data[n * size..][..size];
        if shift == 0 {
            return panel;
        }
        let next = &self.data[(n + 1) * size..][..size];
        let rows = panel.chunks_exact(L).zip(next.chunks_exact(L));
        for (row, (this, next)) in group.chunks_exact_mut(L).zip(rows) {
            row[..L - shift].copy_from_slice(&this[shift..]);
            row[L - shift..].copy_from_slice(&next[..shift]);
        }
        group
    }
}

/// Floats of the [`Panels`] of a (T, D) matrix: ⌈T / L⌉ panels and one of zeros, L·D each.
fn panels_len(t: usize, d: usize) -> usize {
    (t.div_ceil(L) + 1) * L * d
}

/// D rounded up to a multiple of [`L`].
fn padded_width(d: usize) -> usize {
    d.div_ceil(L) * L
}

/// `range` cut into ranges of `size`, the last one shorter.
fn groups(range: Range<usize>, size: usize) -> impl Iterator<Item = Range<usize>> {
    let end = range.end;
    range.step_by(size).map(move |s| s..end.min(s + size))
}

/// Bytes of K and V that the forward pass packs at a time ([`Panels`], [`padded`]): at length
/// a batch is one matrix, so the packed copies stay a few MiB, however many heads there are.
const PACK_BUDGET: usize = 4 << 20;

/// Matrices per batch of the forward pass: as many as [`PACK_BUDGET`] holds, at least one.
fn batch_matrices(c: Causal, matrices: usize) -> usize {
    let per_matrix = (panels_len(c.t, c.d) + (c.t + L) * padded_width(c.d)) * F32;
    (PACK_BUDGET / per_matrix).clamp(1, matrices.max(1))
}

/// The lesson's tiled forward pass without dropout: O (…, T, D) and each row's log-sum-exp (…, T).
/// The matrices go in batches (`batch_matrices`): a batch's K and V are packed, then each of its
/// query blocks is a piece of work for the threads, the blocks with most keys first.
pub fn tiled_forward(
    (out, lse): (&mut [f32], &mut [f32]),
    qkv: [&[f32]; 3],
    c: Causal,
    tiles: Tiles,
) {
    let n = c.t * c.d;
    if n == 0 {
        return;
    }
    let [q, k, v] = qkv;
    let batch = batch_matrices(c, out.len() / n);
    let outputs = out.chunks_mut(batch * n).zip(lse.chunks_mut(batch * c.t));
    let inputs = q
        .chunks(batch * n)
        .zip(k.chunks(batch * n))
        .zip(v.chunks(batch * n));
    for ((out, lse), ((q, k), v)) in outputs.zip(inputs) {
        forward_batch((out, lse), [q, k, v], c, tiles);
    }
}

/// [`tiled_forward`] of one batch of matrices.
fn forward_batch(
    (out, lse): (&mut [f32], &mut [f32]),
    [q, k, v]: [&[f32]; 3],
    c: Causal,
    tiles: Tiles,
) {
    let (n, dp) = (c.t * c.d, padded_width(c.d));
    let mut packed: Vec<(Panels, Vec<f32>)> = vec![Default::default(); out.len() / n];
    let matrices = packed
        .iter_mut()
        .zip(k.chunks_exact(n).zip(v.chunks_exact(n)));
    team::for_each(matrices, |(kv, (k, v))| {
        *kv = (Panels::new(k, c), padded(v, c, dp))
    });
    let mut pieces: Vec<(usize, Piece)> = vec![];
    let outputs = out.chunks_exact_mut(n).zip(lse.chunks_exact_mut(c.t));
    for (((out, lse), q), (kt, v)) in outputs.zip(q.chunks_exact(n)).zip(&packed) {
        let keys = Keys { kt, v, dp };
        let outputs = out.chunks_mut(tiles.br * c.d).zip(lse.chunks_mut(tiles.br));
        let mut blocks: Vec<_> = tiles.query_blocks(c.t).zip(outputs).collect();
        while !blocks.is_empty() {
            let rest = blocks.split_off(blocks.len().min(blocks_per_piece(tiles)));
            let piece = std::mem::replace(&mut blocks, rest);
            let end = piece.last().map_or(0, |(rows, _)| rows.end);
            let piece = move || {
                vectorised(
                    #[inline(always)]
                    || forward_blocks(piece, q, keys, c, tiles),
                )
            };
            pieces.push((end, Box::new(piece)));
        }
    }
    pieces.sort_by_key(|(end, _)| std::cmp::Reverse(*end));
    kernels::run(pieces.into_iter().map(|(_, p)| p).collect());
}

/// Bytes of a float32.
const F32: usize = std::mem::size_of::<f32>();

/// A range of keys in a list of tiles, in float32s.
const RANGE: usize = std::mem::size_of::<Range<usize>>() / F32;

/// The most memory these kernels allocate while they run, beyond the node's inputs, output, saved
/// log-sum-exp and gradients, for `matrices` (T, D) matrices on `threads` threads: in the forward
/// pass a batch's packed K and V plus each thread's query blocks (m, ℓ, O and Q transposed of each,
/// its list of key tiles, a tile of scores and one of weights, a group of keys); in the backward
/// pass each thread's matrix (K and V in panels, Δᵢ, each block's future keys, and the copies that
/// D and T call for) and its block's rows, list of tiles and group of keys. Read off the
/// allocations above; `s6_flash --bench` prints it.
pub fn workspace_bytes(
    (t, d): (usize, usize),
    matrices: usize,
    tiles: Tiles,
    (threads, backward): (usize, bool),
) -> usize {
    let c = Causal::of(&[t, d], 1.0, 0.0);
    let (dp, tp, rows) = (padded_width(d), t + L, tiles.br.div_ceil(L) * L);
    let bcp = tiles.bc.div_ceil(L) * L;
    let tile_lists = t.div_ceil(tiles.bc) * RANGE;
    let per_block = 2 * rows + rows * dp + rows * d + tile_lists;
    let per_piece = blocks_per_piece(tiles) * per_block + 2 * bcp * L + d * L;
    let packed = panels_len(t, d) + tp * dp;
    let forward = batch_matrices(c, matrices) * packed + threads * per_piece;
    // Q, K and dO are copied, and dV, dK and dQ added up apart, only where D is not a multiple
    // of L (dQ also where T or Br is not); see `rows_dp` and `GradRows`.
    let whole_groups = t.is_multiple_of(L) && tiles.br.is_multiple_of(L);
    let copies = if d == dp { 0 } else { 5 } + usize::from(!(d == dp && whole_groups));
    let per_matrix = 2 * panels_len(t, d) + t + copies * tp * dp + t.div_ceil(tiles.br) * 2 * RANGE;
    let per_block = rows * (2 * d + 2 * bcp) + bcp * L + d * L + tile_lists;
    let back = threads.min(matrices.max(1)) * (per_matrix + per_block);
    F32 * if backward { forward.max(back) } else { forward }
}

/// One matrix's K, in panels ([`Panels`]), and V, padded ([`padded`]), for the forward pass.
#[derive(Clone, Copy)]
struct Keys<'a> {
    kt: &'a Panels,
    v: &'a [f32],
    dp: usize,
}

/// Query rows that go through the key tiles together in the forward pass: each tile of K and V is
/// read from memory once for all of their blocks (`run_tiles`).
const PIECE_ROWS: usize = 64;

/// Query blocks per piece of work in the forward pass: [`PIECE_ROWS`] rows' worth, at least one.
fn blocks_per_piece(tiles: Tiles) -> usize {
    (PIECE_ROWS / tiles.br).max(1)
}

/// A query block's running state: per row m and ℓ, and O (rows rounded up to groups of [`L`], Dp).
struct Running {
    m: Vec<f32>,
    l: Vec<f32>,
    o: Vec<f32>,
}

/// A query block's rows of the output (Br, D) and of the log-sum-exp (Br).
type BlockOut<'a> = (&'a mut [f32], &'a mut [f32]);

/// One query block of the forward pass: its rows, running state, its groups' rows of Q transposed
/// (Br / L, D, L), and the key tiles it goes through next.
struct Block {
    rows: Range<usize>,
    state: Running,
    qt: Vec<Lanes>,
    tiles: Vec<Range<usize>>,
}

impl Block {
    /// Nothing seen yet (m = −∞, ℓ = 0, O = 0), and the block's visible key tiles next.
    #[inline(always)]
    fn new(rows: Range<usize>, q: &[f32], dp: usize, c: Causal, tiles: Tiles) -> Self {
        let padded_rows = rows.len().div_ceil(L) * L;
        let mut qt = vec![[0.0; L]; padded_rows / L * c.d];
        for (g, group) in groups(rows.clone(), L).enumerate() {
            transpose_group(&mut qt[g * c.d..][..c.d], q, &group, c.d);
        }
        Block {
            state: Running {
                m: vec![f32::NEG_INFINITY; padded_rows],
                l: vec![0.0; padded_rows],
                o: vec![0.0; padded_rows * dp],
            },
            qt,
            tiles: tiles.visible_key_tiles(&rows).collect(),
            rows,
        }
    }

    /// O / ℓ and m + ln ℓ into the block's rows of `out` (Br, D) and `lse` (Br).
    #[inline(always)]
    fn finish(&self, (out, lse): BlockOut, dp: usize, d: usize) {
        for (r, (out, lse)) in out.chunks_exact_mut(d).zip(lse).enumerate() {
            let (o, l) = (&self.state.o[r * dp..][..d], self.state.l[r]);
            out.iter_mut().zip(o).for_each(|(out, o)| *out = o / l);
            *lse = self.state.m[r] + libm::logf(l);
        }
    }
}

/// Query blocks `blocks` (their rows, and their rows of `out` (Br, D) and `lse` (Br)) of the
/// forward pass, each as the lesson's `tiled_forward` runs it: each group of sixteen rows through
/// the visible key tiles, then (when some row of the block gives the mask weight) through the
/// future ones, then O / ℓ and m + ln ℓ.
#[inline(always)]
fn forward_blocks(
    blocks: Vec<(Range<usize>, BlockOut)>,
    q: &[f32],
    kv: Keys,
    c: Causal,
    tiles: Tiles,
) {
    let mut work: Vec<Block> = blocks
        .iter()
        .map(|(rows, _)| Block::new(rows.clone(), q, kv.dp, c, tiles))
        .collect();
    let bcp = tiles.bc.div_ceil(L) * L;
    let mut buffers = TileBuffers {
        s: vec![[0.0; L]; bcp],
        p: vec![[0.0; L]; bcp],
        group: vec![0.0; c.d * L],
    };
    run_tiles(&mut work, kv, &mut buffers, c);
    for b in &mut work {
        let future = masked_keys(&b.rows, &b.state.m[..b.rows.len()], c);
        b.tiles = key_tiles(future, tiles.bc).collect();
    }
    run_tiles(&mut work, kv, &mut buffers, c);
    for (b, (_, out)) in work.iter().zip(blocks) {
        b.finish(out, kv.dp, c.d);
    }
}

/// Each block through its key tiles in order, every block's k-th tile before any block's next:
/// the blocks' k-th tiles are the same keys (but where a block's rows end), so each tile is read
/// from memory once for all of them. Each tile goes through every row group of a block; the groups'
/// states are independent, and each row still takes its block's tiles in the lesson's order.
#[inline(always)]
fn run_tiles(work: &mut [Block], kv: Keys, buffers: &mut TileBuffers, c: Causal) {
    let most = work.iter().map(|b| b.tiles.len()).max().unwrap_or(0);
    for k in 0..most {
        for b in work.iter_mut() {
            let Some(keys) = b.tiles.get(k) else { continue };
            for (g, group) in groups(b.rows.clone(), L).enumerate() {
                let qt = &b.qt[g * c.d..][..c.d];
                fold(
                    &mut b.state,
                    g,
                    (&group, keys.clone()),
                    (qt, kv),
                    buffers,
                    c,
                );
            }
        }
    }
}

/// Rows `group` of `x` (T, d) transposed into `xt` (d, L), zeros in the lanes past the group's end.
#[inline(always)]
fn transpose_group(xt: &mut [Lanes], x: &[f32], group: &Range<usize>, d: usize) {
    for (p, lanes) in xt.iter_mut().enumerate() {
        for (r, lane) in lanes.iter_mut().enumerate() {
            *lane = if r < group.len() {
                x[(group.start + r) * d + p]
            } else {
                0.0
            };
        }
    }
}

/// A piece's buffers for the tile in hand: a row group's scores and weights (Bc, L), and a group
/// of keys (D, L) where one straddles two panels ([`Panels::group`]).
struct TileBuffers {
    s: Vec<Lanes>,
    p: Vec<Lanes>,
    group: Vec<f32>,
}

/// The scores of a row group against key tile `keys`, into `s` (Bc, L): per lane (row i) and key
/// j, the lesson's `Causal::score`: `dot(q_i, k_j) × scale`, or the mask's value where j > i.
/// `buffer` (D, L) holds a group of keys that straddles two panels.
#[inline(always)]
fn score_tile(
    s: &mut [Lanes],
    qt: &[Lanes],
    (kt, buffer): (&Panels, &mut [f32]),
    (group, keys): (&Range<usize>, &Range<usize>),
    (scale, mask): (f32, f32),
) {
    for (g, s) in s[..keys.len().div_ceil(L) * L]
        .chunks_exact_mut(L)
        .enumerate()
    {
        let first = keys.start + g * L;
        let scores = Scores {
            first,
            row: group.start,
            scale,
            mask,
        };
        dots(s, qt, kt.group(first, buffer), Some(scores));
    }
}

/// Folds key tile `keys` into row group `g`'s running state, per lane as the lesson's
/// `Running::fold` does per row: scores, m_new = the fold of max over the keys in order, rescale =
/// e^(m_old − m_new), P = e^(S − m_new) with `sum += p` in key order, O ← O·rescale + P·V, ℓ ←
/// ℓ·rescale + sum.
#[inline(always)]
fn fold(
    state: &mut Running,
    g: usize,
    (group, keys): (&Range<usize>, Range<usize>),
    (qt, kv): (&[Lanes], Keys),
    buffers: &mut TileBuffers,
    c: Causal,
) {
    let (nk, dp) = (keys.len(), kv.dp);
    let (s, p) = (&mut buffers.s, &mut buffers.p);
    let kt = (kv.kt, &mut buffers.group[..]);
    score_tile(s, qt, kt, (group, &keys), (c.scale, c.mask_value));
    let m_old: Lanes = state.m[g * L..][..L].try_into().unwrap();
    let mut m_new = m_old;
    for s in &s[..nk] {
        for (m, &s) in m_new.iter_mut().zip(s) {
            *m = larger(*m, s);
        }
    }
    let rescale = rescale(std::array::from_fn(|r| m_old[r] - m_new[r]));
    let sum = exp_tile(&mut p[..nk], &s[..nk], &m_new);
    let o = &mut state.o[g * L * dp..][..L * dp];
    let v = &kv.v[keys.start * dp..];
    group_times(o, dp, (&rescale, &p[..nk]), group.len(), v);
    let l = &mut state.l[g * L..][..L];
    for (r, l) in l.iter_mut().enumerate() {
        *l = *l * rescale[r] + sum[r];
    }
    state.m[g * L..][..L].copy_from_slice(&m_new);
}

/// e^(m_old − m_new) per lane, as [`exp_lanes`] gives it; at once where every difference is 0
/// (the tile left every row's maximum as it was), since e^(±0) = 1 exactly.
#[inline(always)]
fn rescale(x: Lanes) -> Lanes {
    if x == [0.0; L] {
        [1.0; L]
    } else {
        exp_lanes(x)
    }
}

/// The lesson's `m.max(s)` as one `vmaxps` per vector: `s` where it is larger, else `m`. Both
/// keep `m` for a NaN score (m itself is never NaN: it starts at −∞ and takes only larger scores),
/// and both give m or s where they are equal; they may differ only in which of +0 and −0 they
/// keep, and that sign is lost wherever m is used: s − m, m_old − m_new and mask − m are +0 or −0
/// alike, each with e^x = 1, and m + ln ℓ adds ln ℓ ≥ +0 (ℓ ≥ 1: the largest score's weight is 1).
/// `f32::max` in a loop compiles to a comparison for NaN and a blend besides.
#[inline(always)]
fn larger(m: f32, s: f32) -> f32 {
    if s > m { s } else { m }
}

/// P = e^(S − m) per lane for each key of a tile, into `p`, as [`exp_lanes`] gives it, and per
/// lane the sum of P over the keys in order. The loop runs [`kernels::expf_non_positive`] alone
/// (m is at least every score: the tile's maximum in the forward pass, the log-sum-exp in the
/// backward) and notes any lane it does not cover; in the rare tile with one (a NaN, a score 87 to
/// 104 below m, or one above m, which the argument above rules out but the check keeps exact) the
/// tile runs again with [`exp_lanes`]. So the common loop has no call to the library in it, and
/// its vectors stay in registers.
#[inline(always)]
fn exp_tile(p: &mut [Lanes], s: &[Lanes], m: &Lanes) -> Lanes {
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx2 {
        assert_eq!(p.len(), s.len());
        // SAFETY: the CPU has AVX2 and FMA (checked by `lanes`); `p` and `s` have the same length.
        if let Some(sum) = unsafe { exp_tile_avx2(p, s, m) } {
            return sum;
        }
        return exp_each(p, s, m, exp_lanes);
    }
    let mut rare = [false; L];
    let sum = exp_each(
        p,
        s,
        m,
        #[inline(always)]
        |x| {
            for (rare, &x) in rare.iter_mut().zip(&x) {
                *rare |= needs_library(x) | (x > 0.0);
            }
            exp_covered(x)
        },
    );
    if rare.contains(&true) {
        exp_each(p, s, m, exp_lanes)
    } else {
        sum
    }
}

/// [`exp_tile`]'s common loop in AVX2 registers, each key's sixteen lanes as two vectors: P = e^(S
/// − m) by [`kernels::expf_non_positive_avx2`] (0 where the library gives exactly 0), and the sums
/// in key order. Compiled from lanes of `[f32; 16]`, the loop kept its checks as arrays of bools
/// and its constants in memory. `None` where some lane is not covered, or above 0 (the caller then
/// takes [`exp_lanes`] for the tile).
///
/// # Safety
/// The CPU has AVX2 and FMA; `p` is as long as `s`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn exp_tile_avx2(p: &mut [Lanes], s: &[Lanes], m: &Lanes) -> Option<Lanes> {
    use std::arch::x86_64::*;
    let large = _mm256_set1_ps(f32::from_bits(kernels::EXPF_LARGE));
    let zero_below = _mm256_set1_ps(super::EXP_ZERO_BELOW);
    let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
    let mut fine = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    let mut sum = [_mm256_setzero_ps(); 2];
    for (p, s) in p.iter_mut().zip(s) {
        for (half, sum) in sum.iter_mut().enumerate() {
            // SAFETY: each row of `s` and `p`, and `m`, is sixteen floats.
            let (s, m) = unsafe {
                let at = |x: &Lanes| x.as_ptr().add(8 * half);
                (_mm256_loadu_ps(at(s)), _mm256_loadu_ps(at(m)))
            };
            let x = _mm256_sub_ps(s, m);
            // Covered (|x| below the library's large cases; false for NaN) or exactly 0, and not
            // above 0.
            let covers = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_and_ps(x, abs), large);
            let zero = _mm256_cmp_ps::<_CMP_LT_OQ>(x, zero_below);
            let above = _mm256_cmp_ps::<_CMP_GT_OQ>(x, _mm256_setzero_ps());
            fine = _mm256_and_ps(fine, _mm256_andnot_ps(above, _mm256_or_ps(covers, zero)));
            // SAFETY: the CPU has AVX2 and FMA (the caller's promise).
            let e = _mm256_andnot_ps(zero, unsafe { kernels::expf_non_positive_avx2(x) });
            // SAFETY: as for the loads above.
            unsafe { _mm256_storeu_ps(p.as_mut_ptr().add(8 * half), e) };
            *sum = _mm256_add_ps(*sum, e);
        }
    }
    if _mm256_movemask_ps(fine) != 0xff {
        return None;
    }
    let mut out = [0.0; L];
    // SAFETY: `out` is sixteen floats.
    unsafe {
        _mm256_storeu_ps(out.as_mut_ptr(), sum[0]);
        _mm256_storeu_ps(out.as_mut_ptr().add(8), sum[1]);
    }
    Some(out)
}

/// [`exp_tile`] with the exponential `exp`.
#[inline(always)]
fn exp_each(p: &mut [Lanes], s: &[Lanes], m: &Lanes, mut exp: impl FnMut(Lanes) -> Lanes) -> Lanes {
    let mut sum = [0.0; L];
    for (p, s) in p.iter_mut().zip(s) {
        *p = exp(std::array::from_fn(|r| s[r] - m[r]));
        for (sum, &p) in sum.iter_mut().zip(&*p) {
            *sum += p;
        }
    }
    sum
}

/// Whether `libm::expf(x)` needs the library's own call: [`kernels::expf`] does not cover `x`
/// and the library does not give exactly 0.
#[inline(always)]
fn needs_library(x: f32) -> bool {
    !kernels::expf_covers(x) & !exp_is_zero(x)
}

/// [`exp_lanes`] where no lane [`needs_library`] and every lane is at most 0 (a score less a
/// maximum that covers it; a NaN lane needs the library).
#[inline(always)]
fn exp_covered(x: Lanes) -> Lanes {
    let mut out = [0.0; L];
    for (o, &x) in out.iter_mut().zip(&x) {
        *o = if exp_is_zero(x) {
            0.0
        } else {
            kernels::expf_non_positive(x)
        };
    }
    out
}

/// `libm::expf` of each lane: [`kernels::expf`] where it covers, 0 where the library gives exactly
/// 0, and the library's own call for the rest (near underflow, NaN).
#[inline(always)]
fn exp_lanes(x: Lanes) -> Lanes {
    let mut rare = false;
    let mut out = [0.0; L];
    for (o, &x) in out.iter_mut().zip(&x) {
        let zero = exp_is_zero(x);
        rare |= !kernels::expf_covers(x) & !zero;
        *o = if zero { 0.0 } else { kernels::expf(x) };
    }
    if rare {
        for (o, &x) in out.iter_mut().zip(&x) {
            if !kernels::expf_covers(x) && !exp_is_zero(x) {
                *o = libm::expf(x);
            }
        }
    }
    out
}

/// For L keys (the columns of `bt` (d, L), a group of [`Panels`]) and the L rows whose columns
/// are `at` (d, L), into `out` (L, L): lane r of key n is `fma(a[r][d−1], b[n][d−1], …
/// fma(a[r][0], b[n][0], 0))`, the lesson's `dot`.
#[inline(always)]
fn dots(out: &mut [Lanes], at: &[Lanes], bt: &[f32], scores: Option<Scores>) {
    let d = at.len();
    assert!(out.len() >= L && bt.len() >= d * L);
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx512 {
        // SAFETY: the CPU has AVX-512 (checked by `lanes`), and the bounds are asserted above.
        return unsafe { dots_avx512(out, at, bt, scores) };
    }
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx2 {
        // SAFETY: the CPU has AVX2 and FMA (checked by `lanes`), and the bounds are asserted above.
        return unsafe { dots_avx2(out, at, bt, scores) };
    }
    let mut acc = [[0.0; L]; L];
    for (a, b) in at.iter().zip(bt.chunks_exact(L)) {
        for (acc, &b) in acc.iter_mut().zip(b) {
            for l in 0..L {
                acc[l] = a[l].mul_add(b, acc[l]);
            }
        }
    }
    out[..L].copy_from_slice(&acc);
    if let Some(x) = scores {
        for (n, out) in out[..L].iter_mut().enumerate() {
            let masked = x.masked_lanes(n);
            for (r, out) in out.iter_mut().enumerate() {
                *out = if r < masked { x.mask } else { *out * x.scale };
            }
        }
    }
}

/// How [`dots`] turns its sums into scores, as `Causal::score` does: key `first + n` of the group
/// whose first row is `row` is masked (the mask's value) in the lanes of earlier rows, and scaled
/// (dot × scale) in the others.
#[derive(Clone, Copy)]
struct Scores {
    first: usize,
    row: usize,
    scale: f32,
    mask: f32,
}

impl Scores {
    /// How many lanes, from the first, key `first + n` comes after: j > i for rows i < that.
    #[inline(always)]
    fn masked_lanes(self, n: usize) -> usize {
        (self.first + n).saturating_sub(self.row).min(L)
    }
}

/// [`dots`] for sixteen keys in AVX-512 registers: the same fused multiply-adds in the same order
/// (`_mm512_fmadd_ps` rounds each lane's a·b + c once, as `mul_add` does), the sixteen sums kept
/// in registers for the whole of d.
///
/// # Safety
/// The CPU has AVX-512F; `out` holds L rows and `bt` d·L values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dots_avx512(out: &mut [Lanes], at: &[Lanes], bt: &[f32], scores: Option<Scores>) {
    use std::arch::x86_64::{__m512, _mm512_fmadd_ps, _mm512_loadu_ps, _mm512_set1_ps};
    use std::arch::x86_64::{_mm512_mask_mov_ps, _mm512_mul_ps};
    use std::arch::x86_64::{_mm512_setzero_ps, _mm512_storeu_ps};
    let mut acc: [__m512; L] = [_mm512_setzero_ps(); L];
    for (p, a) in at.iter().enumerate() {
        // SAFETY: `a` is sixteen floats; p·L + n < d·L ≤ bt.len() (the caller's bounds).
        unsafe {
            let a = _mm512_loadu_ps(a.as_ptr());
            let b = bt.as_ptr().add(p * L);
            for (n, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(a, _mm512_set1_ps(*b.add(n)), *acc);
            }
        }
    }
    // Only a tile on the diagonal has masked lanes: key first + L − 1 comes after the group's
    // first row.
    let diagonal = scores.is_some_and(|x| x.masked_lanes(L - 1) > 0);
    for (n, (out, mut acc)) in out.iter_mut().zip(acc).enumerate() {
        if let Some(x) = scores {
            // Scaled, then the mask's value in the lanes of the rows key n comes after.
            acc = _mm512_mul_ps(acc, _mm512_set1_ps(x.scale));
            if diagonal {
                let masked = (1u32 << x.masked_lanes(n)) - 1;
                acc = _mm512_mask_mov_ps(acc, masked as u16, _mm512_set1_ps(x.mask));
            }
        }
        // SAFETY: `out` is sixteen floats.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), acc) };
    }
}

/// [`dots`] with AVX2: each key's sixteen lanes in two registers, six keys at a time (twelve
/// sums, two vectors of queries and a broadcast key value: 15 of the 16 registers), so that
/// nothing spills; the same fused multiply-adds in the same order.
///
/// # Safety
/// The CPU has AVX2 and FMA; `out` holds L rows and `bt` d·L values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_avx2(out: &mut [Lanes], at: &[Lanes], bt: &[f32], scores: Option<Scores>) {
    // SAFETY: the caller's promise, for keys 0..6, 6..12 and 12..16.
    unsafe {
        dots_avx2_keys::<6>(out, at, bt, 0, scores);
        dots_avx2_keys::<6>(out, at, bt, 6, scores);
        dots_avx2_keys::<4>(out, at, bt, 12, scores);
    }
}

/// [`dots_avx2`] for the N keys from `first`.
///
/// # Safety
/// As [`dots_avx2`], and `first + N ≤ L`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn dots_avx2_keys<const N: usize>(
    out: &mut [Lanes],
    at: &[Lanes],
    bt: &[f32],
    first: usize,
    scores: Option<Scores>,
) {
    use std::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); 2]; N];
    for (p, a) in at.iter().enumerate() {
        // SAFETY: `a` is sixteen floats; p·L + first + n < d·L ≤ bt.len() (the caller's bounds).
        unsafe {
            let a = [
                _mm256_loadu_ps(a.as_ptr()),
                _mm256_loadu_ps(a.as_ptr().add(8)),
            ];
            let b = bt.as_ptr().add(p * L + first);
            for (n, acc) in acc.iter_mut().enumerate() {
                let b = _mm256_broadcast_ss(&*b.add(n));
                acc[0] = _mm256_fmadd_ps(a[0], b, acc[0]);
                acc[1] = _mm256_fmadd_ps(a[1], b, acc[1]);
            }
        }
    }
    let lane = [
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15),
    ];
    // Only a tile on the diagonal has masked lanes (as in `dots_avx512`).
    let diagonal = scores.is_some_and(|x| x.masked_lanes(L - 1) > 0);
    for (n, acc) in acc.into_iter().enumerate() {
        let out = &mut out[first + n];
        for (half, mut sums) in acc.into_iter().enumerate() {
            if let Some(x) = scores {
                // Scaled, then the mask's value in the lanes of the rows key n comes after.
                sums = _mm256_mul_ps(sums, _mm256_set1_ps(x.scale));
            }
            if let Some(x) = scores.filter(|_| diagonal) {
                let masked = _mm256_set1_epi32(x.masked_lanes(first + n) as i32);
                let masked = _mm256_castsi256_ps(_mm256_cmpgt_epi32(masked, lane[half]));
                sums = _mm256_blendv_ps(sums, _mm256_set1_ps(x.mask), masked);
            }
            // SAFETY: `out` is sixteen floats.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(8 * half), sums) };
        }
    }
}

/// The L values of `x` from index `at`.
///
/// # Safety
/// `at + L <= x.len()`.
#[inline(always)]
unsafe fn load(x: &[f32], at: usize) -> Lanes {
    debug_assert!(at + L <= x.len());
    // SAFETY: the caller keeps the L values inside `x`; `read_unaligned` needs no alignment.
    unsafe { x.as_ptr().add(at).cast::<Lanes>().read_unaligned() }
}

/// Writes `lanes` into `x` from index `at`.
///
/// # Safety
/// `at + L <= x.len()`.
#[inline(always)]
unsafe fn store(x: &mut [f32], at: usize, lanes: Lanes) {
    debug_assert!(at + L <= x.len());
    // SAFETY: the caller keeps the L values inside `x`; `write_unaligned` needs no alignment.
    unsafe {
        x.as_mut_ptr()
            .add(at)
            .cast::<Lanes>()
            .write_unaligned(lanes)
    }
}

/// Runs `wide` on each run of [`C`] vectors of columns of a row `dp` wide and `narrow` on each
/// vector left over, with the offset of its first column.
#[inline(always)]
fn each_chunk(
    dp: usize,
    out: &mut [f32],
    mut wide: impl FnMut(&mut [f32], usize),
    mut narrow: impl FnMut(&mut [f32], usize),
) {
    let chunks = dp / L;
    let mut c = 0;
    while c + C <= chunks {
        wide(out, c * L);
        c += C;
    }
    while c < chunks {
        narrow(out, c * L);
        c += 1;
    }
}

/// Rows 0..`rows` of a row group's (L, dp) block `out`: each row r times `pre[r]`, then for each
/// key j in order `o = fma(w[j][r], x[j], o)` elementwise, x's rows `dp` apart: O·rescale + P·V in
/// the forward pass, dQ += dS·K in the backward. The rows go [`R`] at a time through
/// [`rows_times`]; with AVX2 six at a time (then four), so that twelve sums are in flight, half
/// as many again as the FMA units' latency needs, where eight left none to spare for the tile's
/// loads and stores of O.
#[inline(always)]
fn group_times(out: &mut [f32], dp: usize, (pre, w): (&Lanes, &[Lanes]), rows: usize, x: &[f32]) {
    assert!(rows <= L && out.len() >= L * dp && x.len() >= w.len() * dp);
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx2 {
        let vectors = dp / L;
        // SAFETY: the CPU has AVX2 and FMA (checked by `lanes`); rows r0 to r0 + 5 (or + 3) of the
        // L rows, dp wide, lie in `out`, and each of w's keys has a row of x, both asserted above.
        unsafe {
            if rows > 0 {
                let w6 = w.iter().map(|w| &w[..6]);
                times_avx2::<6>(out, dp, pre[..6].try_into().unwrap(), w6, (x, dp), vectors);
            }
            if rows > 6 {
                let w6 = w.iter().map(|w| &w[6..12]);
                let pre = pre[6..12].try_into().unwrap();
                times_avx2::<6>(&mut out[6 * dp..], dp, pre, w6, (x, dp), vectors);
            }
            if rows > 12 {
                let w4 = w.iter().map(|w| &w[12..]);
                let pre = pre[12..].try_into().unwrap();
                times_avx2::<4>(&mut out[12 * dp..], dp, pre, w4, (x, dp), vectors);
            }
        }
        return;
    }
    for r0 in (0..rows).step_by(R) {
        let pre: [f32; R] = std::array::from_fn(|r| pre[r0 + r]);
        each_chunk(
            dp,
            &mut out[r0 * dp..],
            #[inline(always)]
            |o, c0| rows_times::<C>(&mut o[c0..], dp, pre, w, r0, &x[c0..]),
            #[inline(always)]
            |o, c0| rows_times::<1>(&mut o[c0..], dp, pre, w, r0, &x[c0..]),
        );
    }
}

/// Output rows r0..r0+R (of a row group's (L, dp) block `out`, from `out`'s start), W vectors of
/// columns: each row times `pre[r]`, then for each key j in order `o = fma(w[j][r0 + r], x[j], o)`
/// elementwise, x's rows `dp` apart: O·rescale + P·V in the forward pass, dQ += dS·K in the
/// backward. Where every `pre` is 1 (the backward pass, and the forward pass's tiles that leave
/// the rows' maxima as they were) the rows are taken as they are: o·1 = o exactly.
// Index loops over the register tile's rows and columns, as in the product kernel.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn rows_times<const W: usize>(
    out: &mut [f32],
    dp: usize,
    pre: [f32; R],
    w: &[Lanes],
    r0: usize,
    x: &[f32],
) {
    assert!(r0 + R <= L && out.len() >= (R - 1) * dp + W * L);
    assert!(w.is_empty() || x.len() >= (w.len() - 1) * dp + W * L);
    let mut acc = [[[0.0f32; L]; W]; R];
    for r in 0..R {
        for c in 0..W {
            // SAFETY: r·dp + c·L + L ≤ (R − 1)·dp + W·L ≤ out.len(), asserted above.
            acc[r][c] = unsafe { load(out, r * dp + c * L) };
        }
    }
    if pre != [1.0; R] {
        for r in 0..R {
            for c in 0..W {
                acc[r][c].iter_mut().for_each(|o| *o *= pre[r]);
            }
        }
    }
    for (j, w) in w.iter().enumerate() {
        // SAFETY: j·dp + c·L + L ≤ (w.len() − 1)·dp + W·L ≤ x.len(), asserted above.
        let x: [Lanes; W] = std::array::from_fn(|c| unsafe { load(x, j * dp + c * L) });
        for r in 0..R {
            let w = w[r0 + r];
            for c in 0..W {
                for l in 0..L {
                    acc[r][c][l] = w.mul_add(x[c][l], acc[r][c][l]);
                }
            }
        }
    }
    for r in 0..R {
        for c in 0..W {
            // SAFETY: as for the loads above.
            unsafe { store(out, r * dp + c * L, acc[r][c]) };
        }
    }
}

/// Output rows 0..K of `out` (keys, `dp` apart), W vectors of columns: for each query i < `rows`
/// in order, `o = fma(w_i[key], x[i], o)` elementwise, x's rows `dp` apart: dV += Pᵀ·dO and dK +=
/// dSᵀ·Q. Query i's weights are lane i mod L of row group i / L, whose keys start `bcp` after the
/// previous group's in `w`.
// Index loops over the register tile's rows and columns, as in the product kernel.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn keys_times<const K: usize, const W: usize>(
    out: &mut [f32],
    dp: usize,
    (w, bcp): (&[Lanes], usize),
    rows: usize,
    x: &[f32],
) {
    assert!(out.len() >= (K - 1) * dp + W * L && K <= bcp);
    assert!(rows == 0 || x.len() >= (rows - 1) * dp + W * L);
    assert!(rows == 0 || w.len() >= (rows - 1) / L * bcp + K);
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx2 {
        let w = (0..rows).map(|i| {
            let w = &w[i / L * bcp..][..K];
            std::array::from_fn::<f32, K, _>(|r| w[r][i % L])
        });
        // SAFETY: the CPU has AVX2 and FMA (checked by `lanes`), and the bounds are asserted above.
        return unsafe { times_avx2::<K>(out, dp, [1.0; K], w, (x, dp), W) };
    }
    let mut acc = [[[0.0f32; L]; W]; K];
    for r in 0..K {
        for c in 0..W {
            // SAFETY: r·dp + c·L + L ≤ (K − 1)·dp + W·L ≤ out.len(), asserted above.
            acc[r][c] = unsafe { load(out, r * dp + c * L) };
        }
    }
    for i in 0..rows {
        // SAFETY: i·dp + c·L + L ≤ (rows − 1)·dp + W·L ≤ x.len(), asserted above.
        let x: [Lanes; W] = std::array::from_fn(|c| unsafe { load(x, i * dp + c * L) });
        let w = &w[i / L * bcp..][..K];
        for r in 0..K {
            let w = w[r][i % L];
            for c in 0..W {
                for l in 0..L {
                    acc[r][c][l] = w.mul_add(x[c][l], acc[r][c][l]);
                }
            }
        }
    }
    for r in 0..K {
        for c in 0..W {
            // SAFETY: as for the loads above.
            unsafe { store(out, r * dp + c * L, acc[r][c]) };
        }
    }
}

/// [`group_times`] and [`keys_times`] with AVX2: N output rows (`dp` apart), `vectors` vectors of
/// L columns, one vector at a time so that its 2·N sums stay in registers (twelve of the sixteen
/// for N = 6, eight for N = 4): each row times `pre[r]` unless all are 1, then for each term j in
/// order `o = fma(w_j[r], x[j], o)`, x's rows `x.1` apart. The same fused multiply-adds in the same order.
///
/// # Safety
/// The CPU has AVX2 and FMA; `out` holds (N − 1)·dp + vectors·L values, and `x` a row of
/// vectors·L values for each of `w`'s terms.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn times_avx2<const N: usize>(
    out: &mut [f32],
    dp: usize,
    pre: [f32; N],
    w: impl Iterator<Item = impl AsRef<[f32]>> + Clone,
    (x, x_step): (&[f32], usize),
    vectors: usize,
) {
    use std::arch::x86_64::*;
    let (out, x) = (out.as_mut_ptr(), x.as_ptr());
    let rescaled = pre != [1.0; N];
    for c in 0..vectors {
        // SAFETY (this block): every offset lies inside the caller's bounds.
        unsafe {
            let at = |r: usize, half: usize| out.add(r * dp + c * L + 8 * half);
            let mut acc = [[_mm256_setzero_ps(); 2]; N];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = [_mm256_loadu_ps(at(r, 0)), _mm256_loadu_ps(at(r, 1))];
            }
            if rescaled {
                for (acc, &pre) in acc.iter_mut().zip(&pre) {
                    let pre = _mm256_set1_ps(pre);
                    *acc = [_mm256_mul_ps(acc[0], pre), _mm256_mul_ps(acc[1], pre)];
                }
            }
            for (j, w) in w.clone().enumerate() {
                let x = x.add(j * x_step + c * L);
                let x = [_mm256_loadu_ps(x), _mm256_loadu_ps(x.add(8))];
                for (acc, w) in acc.iter_mut().zip(w.as_ref()) {
                    let w = _mm256_set1_ps(*w);
                    acc[0] = _mm256_fmadd_ps(w, x[0], acc[0]);
                    acc[1] = _mm256_fmadd_ps(w, x[1], acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(at(r, 0), acc[0]);
                _mm256_storeu_ps(at(r, 1), acc[1]);
            }
        }
    }
}

/// dV += Pᵀ·dO (or dK += dSᵀ·Q) for one tile and a block's `rows`: `out` from the tile's first
/// key, `w` the tile's weights of each row group ((groups, bcp, L), `keys` of each used), `x` the
/// block's rows: four keys at a time (with AVX2 six first, twelve sums in flight), then one.
#[inline(always)]
fn add_keys(out: &mut [f32], dp: usize, w: (&[Lanes], usize, usize), rows: usize, x: &[f32]) {
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if kernels::lanes() == kernels::Lanes::Avx2 {
        j = add_keys_by::<6>(j, out, dp, w, rows, x);
    }
    j = add_keys_by::<R>(j, out, dp, w, rows, x);
    add_keys_by::<1>(j, out, dp, w, rows, x);
}

/// [`add_keys`] from key `j`, K keys at a time while K are left; the next key.
#[inline(always)]
fn add_keys_by<const K: usize>(
    mut j: usize,
    out: &mut [f32],
    dp: usize,
    (w, bcp, keys): (&[Lanes], usize, usize),
    rows: usize,
    x: &[f32],
) -> usize {
    while j + K <= keys {
        let (o, w) = (&mut out[j * dp..], (&w[j..], bcp));
        each_chunk(
            dp,
            o,
            #[inline(always)]
            |o, c0| keys_times::<K, C>(&mut o[c0..], dp, w, rows, &x[c0..]),
            #[inline(always)]
            |o, c0| keys_times::<K, 1>(&mut o[c0..], dp, w, rows, &x[c0..]),
        );
        j += K;
    }
    j
}

/// The lesson's tiled backward pass without dropout: `d` is (dV, dQ, dK). Each matrix of the stack
/// is a piece of work for the threads.
pub fn tiled_backward(
    d: [&mut [f32]; 3],
    d_out: &[f32],
    (out, lse): (&[f32], &[f32]),
    qkv: [&[f32]; 3],
    c: Causal,
    tiles: Tiles,
) {
    let n = c.t * c.d;
    if n == 0 {
        return;
    }
    let [d_v, d_q, d_k] = d.map(|d| d.chunks_exact_mut(n));
    let grads = d_v.zip(d_q).zip(d_k).map(|((v, q), k)| [v, q, k]);
    let [q, k, v] = qkv.map(|x| x.chunks_exact(n));
    let inputs = q.zip(k).zip(v).map(|((q, k), v)| [q, k, v]);
    let given = d_out
        .chunks_exact(n)
        .zip(out.chunks_exact(n))
        .zip(lse.chunks_exact(c.t));
    let mut pieces: Vec<Piece> = vec![];
    for ((d, qkv), ((d_out, out), lse)) in grads.zip(inputs).zip(given) {
        pieces.push(Box::new(move || {
            vectorised(
                #[inline(always)]
                || backward_matrix(d, (d_out, out, lse), qkv, c, tiles),
            )
        }));
    }
    kernels::run(pieces);
}

/// One matrix's inputs for the backward pass: Q, K and dO with rows Dp wide ([`rows_dp`]), K and
/// V in panels ([`Panels`]), and Δᵢ per row.
struct Given<'a> {
    q: Cow<'a, [f32]>,
    k: Cow<'a, [f32]>,
    kt: Panels,
    vt: Panels,
    d_out: Cow<'a, [f32]>,
    delta: Vec<f32>,
    dp: usize,
}

/// A (T, D) matrix with its rows `dp` wide: itself when D is already a multiple of [`L`] (the
/// kernels read no row past T of Q, K or dO), else a [`padded`] copy.
fn rows_dp(x: &[f32], c: Causal, dp: usize) -> Cow<'_, [f32]> {
    if c.d == dp {
        Cow::Borrowed(x)
    } else {
        Cow::Owned(padded(x, c, dp))
    }
}

/// A gradient (T, D) that the kernels add up from 0 in rows Dp wide: the output itself where its
/// rows already are (and, for dQ, whole groups of [`L`] rows fit), else a padded buffer that
/// [`GradRows::finish`] copies into the output.
enum GradRows<'a> {
    Output(&'a mut [f32]),
    Padded(&'a mut [f32], Vec<f32>),
}

impl<'a> GradRows<'a> {
    fn new(out: &'a mut [f32], c: Causal, dp: usize, whole_groups: bool) -> Self {
        if c.d == dp && whole_groups {
            out.fill(0.0);
            GradRows::Output(out)
        } else {
            GradRows::Padded(out, vec![0.0; (c.t + L) * dp])
        }
    }

    fn rows(&mut self) -> &mut [f32] {
        match self {
            GradRows::Output(out) => out,
            GradRows::Padded(_, rows) => rows,
        }
    }

    fn finish(self, c: Causal, dp: usize) {
        if let GradRows::Padded(out, rows) = self {
            for (out, row) in out.chunks_exact_mut(c.d).zip(rows.chunks_exact(dp)) {
                out.copy_from_slice(&row[..c.d]);
            }
        }
    }
}

/// Keys per panel of the backward pass: a panel's K, Kᵀ, Vᵀ, dV and dK stay in the cache while
/// every query block that sees them goes through them.
const PANEL_KEYS: usize = 256;

/// The backward pass of one (T, D) matrix: the lesson's pairs (i, j), each with the lesson's
/// operations, each gradient element taking its terms in the lesson's order. The lesson goes
/// through the query blocks in order, each through its key tiles (visible, then the future ones
/// where it computes them). Here the keys go in panels ([`PANEL_KEYS`], a multiple of Bc), and
/// each panel through the query blocks in order, each block through its tiles that start in the
/// panel: dQ\[i\] still takes the tiles in increasing order (panel after panel), dV\[j\] and
/// dK\[j\] the blocks in increasing order (all within j's panel). Where some block computes
/// future tiles, whose edges need not fall on the panels', the keys are one panel, the lesson's
/// order itself.
#[inline(always)]
fn backward_matrix(
    [d_v, d_q, d_k]: [&mut [f32]; 3],
    (d_out, out, lse): (&[f32], &[f32], &[f32]),
    [q, k, v]: [&[f32]; 3],
    c: Causal,
    tiles: Tiles,
) {
    let dp = padded_width(c.d);
    let delta = d_out.chunks_exact(c.d).zip(out.chunks_exact(c.d));
    let delta = delta.map(|(g, o)| g.iter().zip(o).fold(0.0f32, |s, (g, o)| g.mul_add(*o, s)));
    let given = Given {
        q: rows_dp(q, c, dp),
        k: rows_dp(k, c, dp),
        kt: Panels::new(k, c),
        vt: Panels::new(v, c),
        d_out: rows_dp(d_out, c, dp),
        delta: delta.collect(),
        dp,
    };
    let whole_groups = c.t.is_multiple_of(L) && tiles.br.is_multiple_of(L);
    let mut d_vp = GradRows::new(d_v, c, dp, true);
    let mut d_kp = GradRows::new(d_k, c, dp, true);
    let mut d_qp = GradRows::new(d_q, c, dp, whole_groups);
    let groups_per_block = tiles.br.div_ceil(L);
    let mut work = Work {
        qt: vec![[0.0; L]; groups_per_block * c.d],
        gt: vec![[0.0; L]; groups_per_block * c.d],
        p: vec![[0.0; L]; groups_per_block * tiles.bc.div_ceil(L) * L],
        ds: vec![[0.0; L]; groups_per_block * tiles.bc.div_ceil(L) * L],
        s: vec![[0.0; L]; tiles.bc.div_ceil(L) * L],
        group: vec![0.0; c.d * L],
        bcp: tiles.bc.div_ceil(L) * L,
    };
    // Each query block with the future keys it computes (see `masked_keys`).
    let blocks: Vec<(Range<usize>, Range<usize>)> = tiles
        .query_blocks(c.t)
        .map(|rows| (rows.clone(), masked_keys(&rows, &lse[rows.clone()], c)))
        .collect();
    let future = blocks.iter().any(|(_, future)| !future.is_empty());
    let panel = if future {
        c.t
    } else {
        PANEL_KEYS.div_ceil(tiles.bc) * tiles.bc
    };
    let mut here = vec![];
    for panel in groups(0..c.t, panel) {
        for (rows, future) in &blocks {
            // The block's tiles that start in the panel: its visible tiles start at multiples of
            // Bc, as the panel does, and where there are future tiles the panel is all the keys.
            let visible = panel.start.min(rows.end)..panel.end.min(rows.end);
            let future = key_tiles(future.clone(), tiles.bc).filter(|t| panel.contains(&t.start));
            here.clear();
            here.extend(key_tiles(visible, tiles.bc).chain(future));
            if here.is_empty() {
                continue;
            }
            for (g, group) in groups(rows.clone(), L).enumerate() {
                transpose_group(&mut work.qt[g * c.d..][..c.d], q, &group, c.d);
                transpose_group(&mut work.gt[g * c.d..][..c.d], d_out, &group, c.d);
            }
            // Each tile through every row group while it is in the cache: dV[j] and dK[j] still
            // take the groups' rows in increasing order, dQ[i] the tiles in increasing order.
            for keys in &here {
                for (g, group) in groups(rows.clone(), L).enumerate() {
                    let d_q = d_qp.rows();
                    backward_tile(&mut work, (g, d_q), &given, lse, (&group, keys), c);
                }
                // dV += Pᵀ·dO and dK += dSᵀ·Q over all of the block's rows in order, with the
                // tile's rows of dV and dK held in registers the while.
                let (n, start) = (rows.len(), rows.start * dp);
                let d_v = &mut d_vp.rows()[keys.start * dp..];
                let (p, ds) = (&work.p[..], &work.ds[..]);
                add_keys(d_v, dp, (p, work.bcp, keys.len()), n, &given.d_out[start..]);
                let d_k = &mut d_kp.rows()[keys.start * dp..];
                add_keys(d_k, dp, (ds, work.bcp, keys.len()), n, &given.q[start..]);
            }
        }
    }
    for grad in [d_vp, d_qp, d_kp] {
        grad.finish(c, dp);
    }
}

/// A query block's buffers in the backward pass: per row group Q and dO transposed (D, L), and a
/// tile's P and dS (Bc, L); a tile of scores, and a group of keys.
struct Work {
    qt: Vec<Lanes>,
    gt: Vec<Lanes>,
    p: Vec<Lanes>,
    ds: Vec<Lanes>,
    /// One row group's scores of a tile, (Bc, L), from which `p` is taken.
    s: Vec<Lanes>,
    /// A group of keys (D, L) that straddles two panels ([`Panels::group`]).
    group: Vec<f32>,
    /// Keys per row group in `p` and `ds`: Bc rounded up to a multiple of L.
    bcp: usize,
}

/// One tile's share of the gradients for a row group, the lesson's `backward_tile` per lane: P =
/// e^(score − lse), dP = dot(dO_i, v_j), dS = 0 where j > i, else P·(dP − Δᵢ)·scale, kept in
/// the group's part of the buffers for dV and dK (added once every group of the block has its);
/// then dQ\[i\] += dS·k_j over the tile's keys in order.
#[inline(always)]
fn backward_tile(
    work: &mut Work,
    (gi, d_q): (usize, &mut [f32]),
    g: &Given,
    lse: &[f32],
    (group, keys): (&Range<usize>, &Range<usize>),
    c: Causal,
) {
    let (nk, dp, padded_keys) = (keys.len(), g.dp, keys.len().div_ceil(L) * L);
    let (qt, gt) = (&work.qt[gi * c.d..][..c.d], &work.gt[gi * c.d..][..c.d]);
    let (p, ds) = (&mut work.p[gi * work.bcp..], &mut work.ds[gi * work.bcp..]);
    let (s, buffer) = (&mut work.s, &mut work.group[..]);
    score_tile(
        s,
        qt,
        (&g.kt, buffer),
        (group, keys),
        (c.scale, c.mask_value),
    );
    let lane = |x: &[f32]| -> Lanes {
        std::array::from_fn(|r| {
            if r < group.len() {
                x[group.start + r]
            } else {
                0.0
            }
        })
    };
    let (lse, delta) = (lane(lse), lane(&g.delta));
    for (t, ds) in ds[..padded_keys].chunks_exact_mut(L).enumerate() {
        dots(ds, gt, g.vt.group(keys.start + t * L, buffer), None); // dP
    }
    exp_tile(&mut p[..padded_keys], &s[..padded_keys], &lse);
    for (n, (p, ds)) in p.iter().zip(&mut ds[..padded_keys]).enumerate() {
        // Key j = keys.start + n comes after the rows i of the lanes before `masked`.
        let masked = (keys.start + n).saturating_sub(group.start).min(L);
        for r in 0..L {
            let d_s = p[r] * (ds[r] - delta[r]) * c.scale;
            ds[r] = if r < masked { 0.0 } else { d_s };
        }
    }
    let ds = &ds[..nk];
    let rows = group.len();
    let k = &g.k[keys.start * dp..];
    let d_q = &mut d_q[group.start * dp..][..L * dp];
    group_times(d_q, dp, (&[1.0; L], ds), rows, k);
}
