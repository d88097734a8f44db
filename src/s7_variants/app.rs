//! Tool layer, not shown in the chapter: the command line of `cargo run --example s7_variants`.
//! Without flags it prints the chapter's outputs ([`super::run`]); `--bench` times generation with
//! and without the KV cache ([`mod@super::bench`]); `--weigh` trains each variant ([`mod@super::weigh`]);
//! `--weights PROMPT` prints each variant's first block on a prompt ([`super::weights`]).

use std::io::Write;

use super::bench::{self, CONTEXTS, short_name};
use super::bench_rolling::run_rolling;
use super::kv::{KvShape, calculator_lines};
use super::weights::{FirstBlock, first_block, lines};
use super::{LINE, variants};
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::error::GptError;

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
    /// Times each generation N times, 1 to 100, the ways taking turns, and prints every round
    #[arg(long, value_name = "N", default_value_t = 3, requires = "bench")]
    pub repeat: usize,
    /// With --bench: time instead the rolling cache of RoPE with a window, 3,200 characters past a
    /// context of 32, against recomputing and against the cache of the chapter's windows
    #[arg(long, requires = "bench")]
    pub rolling: bool,
    /// Train the sequel's fullest model and each variant on Tiny Shakespeare instead, one line
    /// each: parameters, losses, ms per step, KV bytes per token
    #[arg(long, conflicts_with = "bench")]
    pub weigh: bool,
    /// With --weigh: train N steps per model instead of the tutorial's two epochs
    #[arg(long, value_name = "N", requires = "weigh")]
    pub max_steps: Option<usize>,
    /// Print each variant's first block on PROMPT instead: which keys each query may see, and each
    /// head's weights (the chapter's model, untrained, from np.random.seed(42))
    #[arg(long, value_name = "PROMPT", conflicts_with_all = ["bench", "weigh", "kv"])]
    pub weights: Option<String>,
    /// With --weights: only the variant NAME, as --bench names it (full, gqa, …) [default: each]
    #[arg(long, value_name = "NAME", requires = "weights")]
    pub variant: Option<String>,
    #[command(flatten)]
    pub kv: KvArgs,
}

/// The KV-memory calculator: `--kv` and the model's sizes (the defaults are rasbt's Llama-sized
/// example with 8 key/value heads).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "The KV-memory calculator")]
pub struct KvArgs {
    /// Print what a model of these sizes keeps in its KV cache instead
    #[arg(long, conflicts_with_all = ["bench", "weigh"])]
    pub kv: bool,
    /// Layers (transformer blocks)
    #[arg(long, value_name = "N", default_value_t = 32, requires = "kv")]
    pub layers: usize,
    /// H, the query heads
    #[arg(long, value_name = "H", default_value_t = 32, requires = "kv")]
    pub heads: usize,
    /// K, the key/value heads (a divisor of H: H for multi-head, 1 for multi-query)
    #[arg(long, value_name = "K", default_value_t = 8, requires = "kv")]
    pub kv_heads: usize,
    /// D, the width of a head
    #[arg(long, value_name = "D", default_value_t = 128, requires = "kv")]
    pub head_dim: usize,
    /// The tokens of the sequence
    #[arg(long, value_name = "T", default_value_t = 32_768, requires = "kv")]
    pub tokens: usize,
    /// A sliding window: only the W newest tokens are kept [default: all]
    #[arg(long, value_name = "W", requires = "kv")]
    pub window: Option<usize>,
    /// A latent of L values per token and layer in place of the keys and values (latent attention)
    #[arg(long, value_name = "L", requires = "kv")]
    pub latent: Option<usize>,
    /// Bytes per value: 4 for float32, 2 for bfloat16, 1 for 8 bits
    #[arg(long, value_name = "B", default_value_t = 2, requires = "kv")]
    pub bytes: usize,
}

impl KvArgs {
    /// The model's shape, or one line naming what is wrong and the fix.
    pub fn shape(&self) -> Result<KvShape, BenchError> {
        let bad = |why: String| Err(BenchError::Settings(why));
        let sizes = [
            ("--layers", self.layers),
            ("--heads", self.heads),
            ("--kv-heads", self.kv_heads),
            ("--head-dim", self.head_dim),
            ("--tokens", self.tokens),
            ("--bytes", self.bytes),
            ("--window", self.window.unwrap_or(1)),
            ("--latent", self.latent.unwrap_or(1)),
        ];
        if let Some((flag, n)) = sizes.iter().find(|(_, n)| !(1..=MAX_SIZE).contains(n)) {
            return bad(format!("{flag} {n} is out of range; use 1 to {MAX_SIZE}"));
        }
        let (h, k) = (self.heads, self.kv_heads);
        if !h.is_multiple_of(k) || k > h {
            return bad(format!(
                "--kv-heads {k} does not divide --heads {h}; use a divisor of {h}, such as 1 (multi-query) or {h}"
            ));
        }
        // Counted in 128 bits; the calculator counts in 64 on every machine (and in the page's
        // 32-bit WebAssembly).
        let wide = |n: usize| n as u128;
        let per_layer = self.latent.map_or(2 * wide(k) * wide(self.head_dim), wide);
        let kept = wide(self.window.map_or(self.tokens, |w| w.min(self.tokens)));
        if per_layer * wide(self.layers) * wide(self.bytes) * kept > u64::MAX as u128 {
            return bad(
                "the cache would hold more bytes than this machine can count; use smaller sizes"
                    .to_string(),
            );
        }
        Ok(KvShape {
            layers: self.layers,
            heads: h,
            kv_heads: k,
            head_dim: self.head_dim,
            window: self.window,
            latent: self.latent,
            bytes: self.bytes,
        })
    }
}

/// The largest size the calculator takes: its products stay far below 2⁶⁴.
pub const MAX_SIZE: usize = 10_000_000;

impl Cli {
    /// Runs what the flags ask for, writing to `out`; bad settings are one line naming the fix.
    pub fn run<W: Write>(&self, out: &mut W) -> Result<(), BenchError> {
        if self.kv.kv {
            let shape = self.kv.shape()?;
            for line in calculator_lines(&shape, self.kv.tokens) {
                writeln!(out, "{line}")?;
            }
            return Ok(());
        }
        if self.weights.is_some() {
            self.first_blocks(out)?;
            return Ok(());
        }
        if self.weigh {
            #[cfg(not(target_arch = "wasm32"))]
            return Ok(super::weigh::run(out, self.max_steps, false)?);
            #[cfg(target_arch = "wasm32")]
            return Err(BenchError::Settings(
                "--weigh trains on Tiny Shakespeare from disk; run it with cargo run".to_string(),
            ));
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
        if self.rolling {
            return Ok(run_rolling(out, self.threads, self.repeat)?);
        }
        Ok(bench::run(out, &self.context, self.threads, self.repeat)?)
    }
}

/// One variant's first block: its name in the chapter, its `--variant` name, and the block.
pub type VariantBlock = (&'static str, &'static str, FirstBlock);

impl Cli {
    /// `--weights PROMPT [--variant NAME]`: prints the first block of each variant chosen, and
    /// returns them (the book's panel draws them), or one line naming what is wrong and the fix.
    pub fn first_blocks<W: Write>(&self, out: &mut W) -> Result<Vec<VariantBlock>, BenchError> {
        let prompt = self.weights.as_deref().unwrap_or_default();
        let chosen: Vec<_> = (variants().into_iter())
            .map(|(name, arch)| (name, short_name(&arch), arch))
            .filter(|(_, short, _)| self.variant.as_deref().is_none_or(|v| v == *short))
            .collect();
        if let (Some(v), true) = (&self.variant, chosen.is_empty()) {
            let names: Vec<_> = variants().iter().map(|(_, a)| short_name(a)).collect();
            let why = format!(
                "--variant {v:?} is not a variant; use one of {}",
                names.join(", ")
            );
            return Err(BenchError::Settings(why));
        }
        let ids = prompt_ids(prompt)?;
        let chars: Vec<char> = prompt.chars().collect();
        writeln!(
            out,
            "The first block on {prompt:?} of the chapter's model (context 32, width 64, 2 blocks),\n\
             untrained: its weights as np.random.seed(42) draws them\n"
        )?;
        let mut blocks = Vec::new();
        for (name, short, arch) in chosen {
            let block = first_block(arch, &ids);
            writeln!(out, "## {name} (--variant {short})\n")?;
            for line in lines(&chars, &block) {
                writeln!(out, "{line}")?;
            }
            writeln!(out)?;
            blocks.push((name, short, block));
        }
        Ok(blocks)
    }
}

/// The longest prompt `--weights` takes: the chapter's model's context.
const WEIGHTS_CONTEXT: usize = 32;

/// `prompt` as the chapter's model's tokens, or one line naming what is wrong and the fix.
fn prompt_ids(prompt: &str) -> Result<Vec<usize>, BenchError> {
    let n = prompt.chars().count();
    if n > WEIGHTS_CONTEXT {
        let why = format!(
            "--weights has {n} characters, more than the model's context of {WEIGHTS_CONTEXT}; \
             give at most {WEIGHTS_CONTEXT}"
        );
        return Err(BenchError::Settings(why));
    }
    if n == 0 {
        let why = "--weights is empty; give the prompt at least one character";
        return Err(BenchError::Settings(why.to_string()));
    }
    let vocabulary = CharDataset::from_text(LINE, 1, WEIGHTS_CONTEXT);
    vocabulary.encode(prompt).map_err(|e| {
        BenchError::Settings(match e {
            GptError::PromptCharacters { chars } => {
                let chars: Vec<_> = chars.iter().map(|c| format!("{c:?}")).collect();
                format!(
                    "--weights has characters that are not in the model's line: {}; use characters of {LINE:?}",
                    chars.join(", ")
                )
            }
            other => other.to_string(),
        })
    })
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
