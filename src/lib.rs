#![doc = include_str!("../README.md")]

pub mod cli;
pub mod error;
pub mod figures;
pub mod lang;
pub mod print;
pub mod rng;
pub mod s1_simple;
pub mod s2_trainable;
pub mod s3_causal;
pub mod s4_multihead;
pub mod s5_gpt;
pub mod s6_flash;
pub mod s7_variants;
pub mod s8_heads;

pub use error::Error;

/// The seeds chapter 3 sets with `torch.manual_seed`. A reader's `--seed N` replaces both with `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BookSeeds {
    /// The seed of the `torch.rand` weights, the dropout demos, `CausalAttention` and both
    /// multi-head layers.
    pub seed_123: u64,
    /// The seed of `SelfAttention_v2` and of the weights §3.5.1 masks.
    pub seed_789: u64,
}

impl BookSeeds {
    /// The book's seeds, or `seed` in place of both.
    pub fn new(seed: Option<u64>) -> Self {
        match seed {
            Some(seed) => BookSeeds {
                seed_123: seed,
                seed_789: seed,
            },
            None => Self::default(),
        }
    }
}

impl Default for BookSeeds {
    fn default() -> Self {
        BookSeeds {
            seed_123: 123,
            seed_789: 789,
        }
    }
}

/// The book's chapters, compiled as doctests so that their standalone Rust snippets keep working.
#[cfg(doctest)]
pub mod book {
    #[doc = include_str!("../book/src/introduction.md")]
    pub struct Introduction;
    #[doc = include_str!("../book/src/s1_simple.md")]
    pub struct S1Simple;
    #[doc = include_str!("../book/src/s2_trainable.md")]
    pub struct S2Trainable;
    #[doc = include_str!("../book/src/s3_causal.md")]
    pub struct S3Causal;
    #[doc = include_str!("../book/src/s4_multihead.md")]
    pub struct S4Multihead;
    #[doc = include_str!("../book/src/s5_gpt.md")]
    pub struct S5Gpt;
    #[doc = include_str!("../book/src/s5_tool.md")]
    pub struct S5Tool;
    #[doc = include_str!("../book/src/s5_beyond.md")]
    pub struct S5Beyond;
    #[doc = include_str!("../book/src/appendix_numbers.md")]
    pub struct AppendixNumbers;
    #[doc = include_str!("../book/src/appendix_determinism.md")]
    pub struct AppendixDeterminism;
}
