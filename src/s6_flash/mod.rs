//! Stage 6: attention at length. Not in rasbt's chapter 3: the stage follows FlashAttention (Dao
//! et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", 2022) and
//! the online softmax it is built on (Milakov and Gimelshein, 2018), and takes stage 4's causal
//! multi-head attention to contexts where its T × T matrix of weights no longer fits.
//!
//! 1. [`online`]: softmax in one pass over the keys, a few at a time, keeping a running maximum m
//!    and a running sum ℓ, on stage 1's scores of "journey".
//! 2. [`tiled`]: FlashAttention's forward pass for stage 4's causal heads: queries in blocks of Br
//!    rows, keys and values in tiles of Bc, the output rescaled as each tile arrives, the
//!    log-sum-exp kept per row, the tiles above the diagonal skipped. Its module docs give what
//!    each form costs.
//! 3. [`bits`]: where the online form's bits part from stage 4's, in ULPs and absolutely
//!    (`tests/s6_flash.rs` measures it up to T = 4,096 and states the bound).
//! 4. [`exact`]: the same tiles, in three passes over the keys, that give stage 4's output bit for
//!    bit; its module docs say why each step is bit-equal.
//! 5. [`backward`]: one head's gradients through the naive graph and through the FlashAttention
//!    node in both forms, on stage 5's tape, and what each keeps for the backward pass.
//! 6. [`traffic`]: the bytes the naive graph and the tiled forward move between memory and the
//!    cores, counted by walking their loops: what the tiles save as T grows.
//!
//! [`exercises`] holds the solutions of the chapter's exercises.
//!
//! [`heads`] holds stage 4's attention one head at a time, and stage 4's layer with any of these
//! forms in place of it.
//!
//! [`run`] prints the online walk step by step, then the tiled and exact forms beside stage 4's
//! layer, as `cargo run --example s6_flash` shows them.

pub mod app;
pub mod backward;
pub mod bench;
pub mod bits;
pub mod exact;
pub mod exercises;
pub mod heads;
pub mod online;
pub mod tiled;
pub mod traffic;

use std::io::Write;

use ndarray::{Array1, Array2, ArrayView1};

use crate::print::{self, cell, heading};
use crate::rng::torch::Generator;
use crate::s1_simple::{self, JOURNEY, TOKENS};
use crate::s2_trainable::D_OUT;
use crate::s3_causal::batch;
use crate::s4_multihead::MultiHeadAttention;
use crate::{BookSeeds, Error};

pub use bits::{Difference, ulp_of, ulps};
pub use exact::{KC, UnrolledSum, exact_attention};
pub use heads::{multi_head_forward, naive_attention};
pub use online::{OnlineStep, online_softmax, online_weights};
pub use tiled::{TiledForward, Tiles, naive_held_bytes, score_tile, tiled_attention};

/// The online softmax of the chapter reads two keys per step.
pub const KEYS_PER_STEP: usize = 2;

/// Stage 1's attention scores of the query "journey", ω₂ⱼ = x⁽ʲ⁾·x⁽²⁾: the row the online
/// softmax walks.
pub fn journey_scores() -> Array1<f32> {
    let inputs = s1_simple::inputs(); // (T, d_in)
    s1_simple::attn_scores_for(&inputs.row(JOURNEY), &inputs.view()) // (T)
}

/// Q, K and V of one head of `t` tokens and `d` columns, drawn uniformly from [−2, 2) in that
/// order: the inputs of the stage's comparisons at length.
pub fn random_head(seed: u64, t: usize, d: usize) -> [Array2<f32>; 3] {
    uniform_matrices(seed, t, d)
}

/// `N` matrices of `t` × `d`, drawn uniformly from [−2, 2) one after the other from PyTorch's
/// generator seeded with `seed`.
pub fn uniform_matrices<const N: usize>(seed: u64, t: usize, d: usize) -> [Array2<f32>; N] {
    let mut rng = Generator::manual_seed(seed);
    [(); N].map(|()| rng.uniform((t, d), -2.0, 2.0))
}

/// What the stage runs on: the scores the online walk reads, and the comparison at length. The
/// default is the chapter's: "journey"'s scores, and one head at T = 256 in tiles of 64 × 64.
#[derive(Clone, Debug, Default)]
pub struct Input {
    /// The scores the walk reads, at least one, each finite; `None`: [`journey_scores`].
    pub scores: Option<Array1<f32>>,
    /// T and the tiles of the comparison at length, which then also prints the memory each form
    /// holds; `None`: the chapter's, T = 256 in tiles of 64 × 64, without it.
    pub length: Option<Length>,
}

/// One head of 64 columns at `t` tokens in `tiles`: `t` ≥ 1, Br and Bc from 1 to `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Length {
    pub t: usize,
    pub tiles: Tiles,
}

/// What [`run_with`] printed, as numbers, for a page that draws it: the walk's steps and the
/// comparison at length.
#[derive(Clone, Debug)]
pub struct Report {
    /// Each step of the walk, as printed: its cell's lines, the label line first.
    pub steps: Vec<Vec<String>>,
    /// The comparison at length.
    pub at_length: AtLength,
}

/// The comparison at length: its head, how far the tiled and exact forms are from stage 4's
/// attention, and the bytes naive and tiled attention hold beyond Q, K, V and O.
#[derive(Clone, Copy, Debug)]
pub struct AtLength {
    pub length: Length,
    pub tiled: Difference,
    pub exact: Difference,
    pub naive_bytes: usize,
    pub tiled_bytes: usize,
}

/// Prints the online softmax of "journey"'s scores step by step and its weights beside stage 1's,
/// then the tiled and the exact forms in stage 4's layer, then both at length.
pub fn run<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    run_with(out, seeds, &Input::default()).map(|_| ())
}

/// [`run`] on `input`: the walk over its scores, stage 4's layer, and the comparison at its length.
/// Panics if the input breaks what [`Input`] and [`Length`] ask of it.
pub fn run_with<W: Write>(out: &mut W, seeds: BookSeeds, input: &Input) -> Result<Report, Error> {
    let steps = match &input.scores {
        Some(scores) => online_walk(out, scores)?,
        None => online_walk(out, &journey_scores())?,
    };
    chapter_layer(out, seeds)?;
    let at_length = at_length(out, seeds, input.length)?;
    Ok(Report { steps, at_length })
}

/// The walk: the scores, one cell per step, and the weights it ends at. The keys are named by
/// their tokens where the scores are "journey"'s, by their index only otherwise. Returns the
/// steps' cells.
fn online_walk<W: Write>(out: &mut W, scores: &Array1<f32>) -> std::io::Result<Vec<Vec<String>>> {
    let bits = |a: &Array1<f32>| a.mapv(f32::to_bits);
    let journey = bits(scores) == bits(&journey_scores());
    let (what, prints, words) = match journey {
        true => (
            "the scores of \"journey\"",
            "attn_scores_2",
            Some(&TOKENS[..]),
        ),
        false => ("the scores given", "scores", None),
    };
    heading(out, &format!("Online softmax: {what}, two keys at a time"))?;
    cell(out, "scores", prints, &[print::tensor(scores)])?;
    let steps = online_softmax(&scores.view(), KEYS_PER_STEP);
    let mut cells = Vec::with_capacity(steps.len());
    for (n, step) in steps.iter().enumerate() {
        let (tag, label) = (format!("step {}", n + 1), keys_label(step, words));
        let lines = step_lines(step);
        cell(out, &tag, &label, &lines)?;
        cells.push([vec![format!("[{tag}] {label}")], lines].concat());
    }
    let last = steps.last().expect("the walk reads at least one score");
    weights_cell(out, &scores.view(), last)?;
    Ok(cells)
}

/// `keys 0–1: Your, journey` with the chapter's `words`, `keys 0–1` without; `key 6` for a step of
/// one key.
fn keys_label(step: &OnlineStep, words: Option<&[&str]>) -> String {
    let (start, last) = (step.keys.start, step.keys.end - 1);
    let keys = match start == last {
        true => format!("key {start}"),
        false => format!("keys {start}–{last}"),
    };
    match words {
        Some(words) => format!("{keys}: {}", words[step.keys.clone()].join(", ")),
        None => keys,
    }
}

/// The step's scores and how it moves m and ℓ.
fn step_lines(step: &OnlineStep) -> Vec<String> {
    let scores = Array1::from(step.scores.clone());
    vec![
        format!("scores             {}", print::tensor(&scores)),
        format!("m                  {:.4} → {:.4}", step.m_old, step.m_new),
        format!("e^(m_old − m_new)  {:.4}", step.rescale),
        format!("ℓ                  {:.4} → {:.4}", step.l_old, step.l_new),
    ]
}

/// The walk's weights e^(xⱼ − m) / ℓ, stage 1's softmax of the same scores, and whether they agree
/// to the bit.
fn weights_cell<W: Write>(
    out: &mut W,
    scores: &ArrayView1<f32>,
    last: &OnlineStep,
) -> std::io::Result<()> {
    let online = online_weights(scores, last); // (T)
    let stage_1 = s1_simple::softmax(&scores.to_owned()); // (T)
    let same_bits = online
        .iter()
        .zip(&stage_1)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    let lines = [
        format!("online   {}", print::tensor(&online)),
        format!("stage 1  {}", print::tensor(&stage_1)),
        format!("bit for bit the same: {same_bits}"),
    ];
    cell(out, "weights", "e^(x − m) / ℓ; stage 1's softmax", &lines)
}

/// The tiles of the chapter's layer: 2 × 2 of its 6 × 6 scores.
pub const BOOK_TILES: Tiles = Tiles { br: 2, bc: 2 };

/// The grid of `t × t` scores in `tiles`, a row of tiles per query block: `■` computed, `·`
/// skipped.
pub fn tile_grid(tiles: Tiles, t: usize) -> Vec<String> {
    let columns = t.div_ceil(tiles.bc);
    let grid_row = |rows: std::ops::Range<usize>| {
        let computed = tiles.visible_key_tiles(&rows).count();
        let cells: Vec<&str> = (0..columns)
            .map(|c| if c < computed { "■" } else { "·" })
            .collect();
        cells.join(" ")
    };
    tiles.query_blocks(t).map(grid_row).collect()
}

/// The widest grid the stage draws, in tiles; a wider one would fill the screen with dots.
pub const GRID_TILES: usize = 32;

/// The tiles a causal pass computes and skips, and their grid where it is at most [`GRID_TILES`]
/// tiles across and down.
fn tiles_lines(tiles: Tiles, t: usize) -> Vec<String> {
    let (computed, skipped) = tiles.count(t);
    let mut lines = vec![format!(
        "T = {t}, Br = {}, Bc = {}: {computed} tiles computed, {skipped} skipped",
        tiles.br, tiles.bc
    )];
    let (down, across) = (t.div_ceil(tiles.br), t.div_ceil(tiles.bc));
    if down.max(across) <= GRID_TILES {
        lines.extend(tile_grid(tiles, t));
    } else {
        lines.push(format!(
            "(the grid of {down} × {across} tiles is not drawn: more than {GRID_TILES} across)"
        ));
    }
    lines
}

/// `3 ULPs, 3.0e-8 absolutely, 0.5 ULPs of the largest output`.
fn difference_line(what: &str, difference: Difference) -> String {
    format!(
        "{what}: {} ULPs, {:.1e} absolutely, {:.1} ULPs of the largest output",
        difference.ulps, difference.absolute, difference.scaled_ulps
    )
}

/// Stage 4's layer of §3.6.2 (two heads of one column, on the chapter's batch), its attention
/// computed naively, tiled and exactly.
fn chapter_layer<W: Write>(out: &mut W, seeds: BookSeeds) -> Result<(), Error> {
    heading(out, "Tiled causal attention in stage 4's layer")?;
    let batch = batch(); // (B, T, C)
    let (_, t, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let mha = MultiHeadAttention::new(&mut rng, d_in, D_OUT, t, 0.0, 2, false)?;
    let stage_4 = mha.forward(&batch.view(), &mut rng)?; // (B, T, d_out)
    cell(out, "tiles", "tile_grid", &tiles_lines(BOOK_TILES, t))?;
    let tiled = multi_head_forward(&mha, &batch.view(), |q, k, v| {
        tiled_attention(q, k, v, BOOK_TILES).output
    })?; // (B, T, d_out)
    let exact = multi_head_forward(&mha, &batch.view(), |q, k, v| {
        exact_attention(q, k, v, BOOK_TILES)
    })?; // (B, T, d_out)
    let lines = [
        print::tensor(&tiled),
        difference_line("tiled vs stage 4", Difference::between(&tiled, &stage_4)),
        difference_line("exact vs stage 4", Difference::between(&exact, &stage_4)),
    ];
    cell(out, "tiled", "context_vecs, tiled", &lines)?;
    Ok(())
}

/// The width of the one head the stage's comparisons at length run on.
pub const HEAD_WIDTH: usize = 64;

/// The length and tiles of the stage's printed comparison at length: one head of 64 columns.
const LENGTH: (usize, usize, Tiles) = (256, HEAD_WIDTH, Tiles { br: 64, bc: 64 });

/// The chapter's comparison at length, T = 256 in tiles of 64 × 64.
pub const BOOK_LENGTH: Length = Length {
    t: LENGTH.0,
    tiles: LENGTH.2,
};

/// One head of 64 columns at `length` (the chapter's where `None`, which prints no memory lines):
/// the online and exact forms against stage 4's attention.
fn at_length<W: Write>(
    out: &mut W,
    seeds: BookSeeds,
    length: Option<Length>,
) -> Result<AtLength, Error> {
    let d = LENGTH.1;
    let Length { t, tiles } = length.unwrap_or(BOOK_LENGTH);
    heading(
        out,
        &format!("Where the bits part: one head of {d} columns, T = {t}"),
    )?;
    let [q, k, v] = random_head(seeds.seed_123, t, d);
    let (q, k, v) = (q.view(), k.view(), v.view());
    let naive = naive_attention(&q, &k, &v); // (T, D)
    let tiled = tiled_attention(&q, &k, &v, tiles);
    let exact = exact_attention(&q, &k, &v, tiles); // (T, D)
    let report = AtLength {
        length: Length { t, tiles },
        tiled: Difference::between(&tiled.output, &naive),
        exact: Difference::between(&exact, &naive),
        naive_bytes: naive_held_bytes(t),
        tiled_bytes: tiles.held_bytes(),
    };
    let mut lines = tiles_lines(tiles, t);
    lines.push(difference_line("tiled vs stage 4", report.tiled));
    lines.push(difference_line("exact vs stage 4", report.exact));
    if length.is_some() {
        lines.extend(memory_lines(&report));
    }
    cell(out, "length", "tiled_attention; exact_attention", &lines)?;
    Ok(report)
}

/// What naive and tiled attention hold beyond Q, K, V and O, in floats and bytes.
fn memory_lines(report: &AtLength) -> [String; 2] {
    let Length { t, tiles } = report.length;
    let Tiles { br, bc } = tiles;
    [
        format!(
            "naive holds its T × T scores and weights: 2 × {t} × {t} floats, {}",
            bytes(report.naive_bytes)
        ),
        format!(
            "tiled holds one Br × Bc tile, m and ℓ per row: {br} × {bc} + 2 × {br} floats, {}",
            bytes(report.tiled_bytes)
        ),
    ]
}

/// `8000000 bytes (7.63 MiB)`, in KiB below a MiB.
fn bytes(n: usize) -> String {
    let (kib, mib) = (n as f64 / 1024.0, n as f64 / (1024.0 * 1024.0));
    match n < 1 << 20 {
        true => format!("{n} bytes ({kib:.2} KiB)"),
        false => format!("{n} bytes ({mib:.2} MiB)"),
    }
}
