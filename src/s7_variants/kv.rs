//! What a KV cache holds: the keys and values every earlier token left behind, for every layer,
//! and how each of stage 7's variants shrinks it. One formula, the one rasbt's memory estimators in
//! `ch04/04_gqa` … `ch04/06_swa` print, and the page's calculator computes the same.

use crate::print::{thousands, thousands_wide};
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::latent::rotary_width;

// ANCHOR: kv_memory
/// A model's attention, as far as its cache is concerned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KvShape {
    /// Layers (transformer blocks), each with its own cache.
    pub layers: usize,
    /// H, the query heads.
    pub heads: usize,
    /// K, the key/value heads: H for multi-head, fewer for grouped-query, 1 for multi-query.
    pub kv_heads: usize,
    /// D, the width of one head.
    pub head_dim: usize,
    /// W, the newest tokens a sliding window keeps, or `None` to keep them all.
    pub window: Option<usize>,
    /// L, the width of a latent that replaces the keys and values (multi-head latent attention),
    /// with the rotary key kept beside it if there is one, or `None`.
    pub latent: Option<usize>,
    /// Bytes per stored value: 4 for float32, 2 for bfloat16.
    pub bytes: usize,
}

impl KvShape {
    /// The cache of a model of `arch` with `layers` blocks of width `c`, `bytes` per value.
    pub fn of(arch: &Architecture, layers: usize, c: usize, bytes: usize) -> Self {
        KvShape {
            layers,
            heads: arch.heads,
            kv_heads: arch.kv_heads(),
            head_dim: c / arch.heads,
            window: arch.window,
            latent: arch
                .latent
                .map(|l| l + arch.rope as usize * rotary_width(c / arch.heads)),
            bytes,
        }
    }

    /// Bytes one token adds to the cache, over all layers: a key and a value per K/V head
    /// (2·K·D values per layer), or the latent alone (L values per layer). Counted in 64 bits,
    /// whatever the width of `usize` (the page's WebAssembly has 32).
    pub fn bytes_per_token(&self) -> u64 {
        let per_layer = match self.latent {
            Some(latent) => latent as u64,
            None => 2 * self.kv_heads as u64 * self.head_dim as u64,
        };
        self.layers as u64 * per_layer * self.bytes as u64
    }

    /// Bytes the cache holds for `batch` sequences of `context` tokens: a window keeps at most
    /// W tokens however long the context grows.
    pub fn total_bytes(&self, batch: usize, context: usize) -> u64 {
        let kept = self.window.map_or(context, |w| w.min(context));
        batch as u64 * kept as u64 * self.bytes_per_token()
    }
}
// ANCHOR_END: kv_memory

/// Bytes as rasbt's estimators print them: decimal gigabytes with two decimals, "17.18 GB".
pub fn gigabytes(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// rasbt's examples, each a model, a context and the figure its estimator prints: multi-head and
/// grouped-query attention for 32 heads of 128 in 32 layers at a context of 32,768 in bfloat16
/// (`ch04/04_gqa`), and multi-head latent attention of latent 1,024 for 24 heads of 2,048 / 24 in
/// 48 layers at 8,192 (`ch04/05_mla`).
pub fn rasbt_examples() -> Vec<(&'static str, KvShape, usize)> {
    let llama = KvShape {
        layers: 32,
        heads: 32,
        kv_heads: 32,
        head_dim: 4096 / 32,
        window: None,
        latent: None,
        bytes: 2,
    };
    let deepseek = KvShape {
        layers: 48,
        heads: 24,
        kv_heads: 24,
        head_dim: 2048 / 24,
        latent: Some(1024),
        ..llama
    };
    vec![
        ("MHA", llama, 32_768),
        (
            "GQA, 8 K/V heads",
            KvShape {
                kv_heads: 8,
                ..llama
            },
            32_768,
        ),
        (
            "MQA",
            KvShape {
                kv_heads: 1,
                ..llama
            },
            32_768,
        ),
        (
            "SWA, W 4,096",
            KvShape {
                window: Some(4096),
                ..llama
            },
            32_768,
        ),
        ("MLA, latent 1,024", deepseek, 8192),
    ]
}

// ANCHOR: calculator
/// The calculator's lines for one sequence of `context` tokens: what a token adds, and the whole
/// cache, in bytes and in rasbt's gigabytes.
pub fn calculator_lines(shape: &KvShape, context: usize) -> Vec<String> {
    let per_layer = match shape.latent {
        Some(l) => format!("a latent of {l}"),
        None => format!("2 × {} K/V heads × {}", shape.kv_heads, shape.head_dim),
    };
    let kept = shape.window.map_or(context, |w| w.min(context));
    let (per_token, total) = (shape.bytes_per_token(), shape.total_bytes(1, context));
    vec![
        format!(
            "per token: {} bytes ({per_layer} values × {} layers × {} bytes)",
            thousands_wide(per_token),
            shape.layers,
            shape.bytes
        ),
        format!("tokens kept: {} of {}", thousands(kept), thousands(context)),
        format!(
            "the cache: {} bytes, {}",
            thousands_wide(total),
            gigabytes(total)
        ),
    ]
}

// ANCHOR_END: calculator
