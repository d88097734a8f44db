//! Tool layer, not shown in the chapter: the command line of `cargo run --example s7_variants`.
//! Without flags it prints the chapter's outputs ([`super::run`]); `--bench` times generation with
//! and without the KV cache ([`super::bench`]); `--weigh` trains each variant ([`super::weigh`]).

use std::io::Write;

use super::bench::{self, CONTEXTS};
use super::weigh;
use crate::s5_gpt::app::error::ToolError;

/// Prints stage 7's outputs: what the KV cache holds for each variant, grouped-query heads, the
/// sliding window's band, rotary positions, and the variants side by side.
/// With --bench, times generation with the KV cache and without it instead, for each variant at
/// each context, one line each (run it with --release).
#[derive(Debug, clap::Parser)]
#[command(name = "s7_variants")]
pub struct Cli {
    /// Time generation with and without the KV cache instead of printing the chapter's outputs
    #[arg(long)]
    pub bench: bool,
    /// The contexts T to time, comma-separated, each from 8 to 4096
    #[arg(long, value_name = "T,…", value_delimiter = ',', default_values_t = CONTEXTS, requires = "bench")]
    pub context: Vec<usize>,
    /// Threads of the fast layer, 1 to 64
    #[arg(long, value_name = "N", default_value_t = 1, requires = "bench")]
    pub threads: usize,
    /// Times each generation N times, 1 to 100, and prints the median
    #[arg(long, value_name = "N", default_value_t = 3, requires = "bench")]
    pub repeat: usize,
    /// Train the sequel's fullest model and each variant on Tiny Shakespeare instead, one line
    /// each: parameters, losses, ms per step, KV bytes per token
    #[arg(long, conflicts_with = "bench")]
    pub weigh: bool,
    /// With --weigh: train N steps per model instead of the tutorial's two epochs
    #[arg(long, value_name = "N", requires = "weigh")]
    pub max_steps: Option<usize>,
}

impl Cli {
    /// Runs what the flags ask for, writing to `out`; bad settings are one line naming the fix.
    pub fn run<W: Write>(&self, out: &mut W) -> Result<(), BenchError> {
        if self.weigh {
            return Ok(weigh::run(out, self.max_steps, false)?);
        }
        if !self.bench {
            return Ok(super::run(out)?);
        }
        if let Some(t) = self.context.iter().find(|t| !(8..=4096).contains(*t)) {
            let why = format!("--context {t} is out of range; use contexts from 8 to 4096");
            return Err(BenchError::Settings(why));
        }
        if !(1..=64).contains(&self.threads) {
            let why = format!("--threads {} is out of range; use 1 to 64", self.threads);
            return Err(BenchError::Settings(why));
        }
        if !(1..=100).contains(&self.repeat) {
            let why = format!("--repeat {} is out of range; use 1 to 100", self.repeat);
            return Err(BenchError::Settings(why));
        }
        Ok(bench::run(out, &self.context, self.threads, self.repeat)?)
    }
}

/// What stops the example: a setting out of range, or output that cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Settings(String),
    #[error(transparent)]
    Stage(#[from] crate::Error),
    #[error(transparent)]
    Training(#[from] ToolError),
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
}
