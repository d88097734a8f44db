//! Tool layer, not shown in the chapter: the command line of `cargo run --example s6_flash`, read
//! here so that the book's page reads a reader's input with the same parser and the same checks.
//!
//! Without `--bench` the example prints [`super::run_with`]: the online walk over `--scores` (the
//! chapter's "journey" by default), stage 4's layer, and the comparison at length, at `--context T`
//! in tiles of `--tile N` (the chapter's T = 256 and 64 by default), which then also prints the
//! memory each form holds. With `--backward` it prints [`super::backward`]'s three backward passes
//! at that length instead; with `--bench` it times the forms ([`super::bench`]).

use std::io::Write;

use clap::Parser;
use ndarray::Array1;

use crate::BookSeeds;
use crate::cli::SeedArgs;
use crate::s6_flash::backward;
use crate::s6_flash::bench::{self, BenchArgs, BenchError};
use crate::s6_flash::{BOOK_LENGTH, Input, Length, Report, Tiles, run_with};

/// The longest context the walk's comparison at length takes: naive attention there holds
/// 2 × 4,096² floats, 128 MiB.
pub const MAX_CONTEXT: usize = 4096;

/// Prints the online softmax of stage 1's scores of "journey", two keys at a time: the running
/// maximum m, the running sum l and the rescale e^(m_old - m_new) at each step, ending at stage 1's
/// weights. Then tiled causal attention (FlashAttention's forward) and its exact form in stage 4's
/// layer and on one head of 64 columns at T = 256, each with its largest difference from stage 4.
/// --scores walks other scores; --context and --tile set the head at length, and add the memory
/// naive and tiled attention hold there.
/// With --backward, prints instead the backward pass at that length: what the naive graph and the
/// FlashAttention node keep for it, and how far their gradients lie apart.
/// With --bench, times instead causal attention at length (12 heads of 64 columns by default), one
/// line per context and form: forward and backward milliseconds, and the memory the form holds.
#[derive(Debug, Parser)]
#[command(name = "s6_flash")]
pub struct Cli {
    #[command(flatten)]
    pub seed: SeedArgs,
    /// The scores the online softmax walks, comma-separated, e.g. 0.9,1.5,-0.3 [default: stage 1's
    /// scores of "journey"]
    #[arg(
        long,
        value_name = "X,…",
        allow_hyphen_values = true,
        conflicts_with = "bench"
    )]
    pub scores: Option<String>,
    /// Print the backward pass instead: one head of 64 columns at --context T (256) in tiles of
    /// --tile N (64), through the naive graph and the FlashAttention node's tiled and exact forms:
    /// what each keeps on the tape, Δ of the first rows, and how far each gradient lies from the
    /// naive graph's
    #[arg(long, conflicts_with_all = ["bench", "scores"])]
    pub backward: bool,
    #[command(flatten)]
    pub bench: BenchArgs,
}

/// Input the walk cannot run on, as one line: the problem, then the flag that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("--scores holds no scores; give comma-separated numbers, e.g. --scores 0.9,1.5,1.4")]
    NoScores,
    #[error(
        "--scores: score {index}, {text:?}, is not a number; give comma-separated numbers, e.g. --scores 0.9,1.5,1.4"
    )]
    NotANumber { index: usize, text: String },
    #[error(
        "--scores: score {index}, {text:?}, is not finite; give finite numbers, e.g. --scores 0.9,1.5,1.4"
    )]
    NotFinite { index: usize, text: String },
    #[error(
        "--context takes one length without --bench, not {0}; give one, e.g. --context 1000, or time several with --bench"
    )]
    Contexts(usize),
    #[error("--context 0 has no tokens; give a length of 1 to {MAX_CONTEXT}, e.g. --context 1000")]
    EmptyContext,
    #[error(
        "--context {0} is longer than the walk's comparison takes; give a length of 1 to {MAX_CONTEXT}, or time longer contexts with --bench"
    )]
    ContextTooLong(usize),
    #[error(
        "--tile {tile} does not fit T = {t}; give a tile of 1 to {t} rows, or a longer --context"
    )]
    Tile { tile: usize, t: usize },
}

/// What the example can fail with: bad input, the bench's refusals, or a failed write.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Stage(#[from] crate::Error),
}

/// `--scores` read: comma-separated finite numbers, spaces around them allowed, at least one.
pub fn parse_scores(text: &str) -> Result<Array1<f32>, InputError> {
    if text.trim().is_empty() {
        return Err(InputError::NoScores);
    }
    let score = |(index, part): (usize, &str)| {
        let text = part.trim().to_string();
        match text.parse::<f32>() {
            Ok(x) if x.is_finite() => Ok(x),
            Ok(_) => Err(InputError::NotFinite { index, text }),
            Err(_) => Err(InputError::NotANumber { index, text }),
        }
    };
    let scores: Result<Vec<f32>, _> = text.split(',').enumerate().map(score).collect();
    Ok(Array1::from(scores?))
}

impl Cli {
    /// The walk's input, every flag checked: the scores, and the head at length where `--context`
    /// or `--tile` is given.
    pub fn input(&self) -> Result<Input, InputError> {
        let scores = self.scores.as_deref().map(parse_scores).transpose()?;
        let length = self.length()?;
        Ok(Input { scores, length })
    }

    /// `--context T --tile N`: T from 1 to [`MAX_CONTEXT`] (the chapter's 256 without it), tiles
    /// of 1 to T rows (the chapter's 64 without it); `None` if neither is given.
    fn length(&self) -> Result<Option<Length>, InputError> {
        let (context, tile) = (&self.bench.context, self.bench.tile);
        if context.is_empty() && tile.is_none() {
            return Ok(None);
        }
        let t = match context[..] {
            [] => BOOK_LENGTH.t,
            [0] => return Err(InputError::EmptyContext),
            [t] if t > MAX_CONTEXT => return Err(InputError::ContextTooLong(t)),
            [t] => t,
            _ => return Err(InputError::Contexts(context.len())),
        };
        let tile = tile.unwrap_or(BOOK_LENGTH.tiles.br);
        if !(1..=t).contains(&tile) {
            return Err(InputError::Tile { tile, t });
        }
        let tiles = Tiles::new(tile, tile);
        Ok(Some(Length { t, tiles }))
    }

    /// The walk on this command line's input, printed to `out`, and what it printed as numbers.
    pub fn walk(&self, out: &mut impl Write) -> Result<Report, AppError> {
        let input = self.input()?;
        let seeds = BookSeeds::new(self.seed.seed);
        Ok(run_with(out, seeds, &input)?)
    }

    /// What the example does: the bench with `--bench`, the backward pass with `--backward`,
    /// else the walk.
    pub fn run(&self, out: &mut impl Write, progress: &mut impl Write) -> Result<(), AppError> {
        if self.bench.bench {
            return Ok(bench::run(&self.bench, out, progress)?);
        }
        if self.backward {
            let length = self.length()?.unwrap_or(BOOK_LENGTH);
            let seeds = BookSeeds::new(self.seed.seed);
            backward::run_backward(out, seeds.seed_123, length).map_err(crate::Error::from)?;
            return Ok(());
        }
        self.walk(out).map(|_| ())
    }
}
