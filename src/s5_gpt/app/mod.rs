//! Tool layer. Stage 5 as a program: `s5_gpt`, which runs the chapter, or trains, samples and
//! evaluates with checkpoints. It builds on the lesson and the fast layer and adds what a user
//! needs around them: flags and their limits, progress bars, checkpoints, Ctrl-C, the loss CSV and
//! curve, the corpus download and the benchmark.
//!
//! | module | what it holds |
//! |---|---|
//! | [`command`] | `main`, and the subcommands `train`, `generate`, `eval` |
//! | [`args`] | the flags, each declared once |
//! | [`config`] | the one `Config` a run is built from, and the limits of every number |
//! | [`chapter`] | the chapter run and its report |
//! | [`estimates`] | `--eval-every`: the loss on fixed train and held-out batches |
//! | [`checkpoint`] | saving and loading a run in safetensors files |
//! | [`sample`] | `generate`'s checks and sample from a checkpoint |
//! | [`files`] | whole-or-nothing writes, sha256 checks and the loss CSV's lines |
//! | [`fetch`] | downloading Tiny Shakespeare on first use |
//! | [`progress`] | the progress bar |
//! | [`bench`](mod@bench) | `--bench`: time per step and per op |
//! | [`ablation`] | the chapter "What the tutorial's model leaves out": its measuring and attention maps (the tables are [`crate::figures::ablation`]) |
//!
//! The book's page (`book/play/`) runs on WebAssembly, where there is no terminal, no signal, no
//! network client and no second thread. It reads the flags with [`args`], checks them with
//! [`config`]'s limits, reads the trained model with [`checkpoint`] and samples with [`sample`], so
//! that it accepts what the command line accepts and answers bad input with the same line; the
//! modules that need a terminal, Ctrl-C, the download or the clock are left out of that build.

pub mod args;
pub mod checkpoint;
pub mod config;
pub mod error;
#[cfg(not(target_arch = "wasm32"))]
pub mod estimates;
pub mod files;
pub mod sample;

#[cfg(not(target_arch = "wasm32"))]
pub mod ablation;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
#[cfg(not(target_arch = "wasm32"))]
pub mod chapter;
#[cfg(not(target_arch = "wasm32"))]
pub mod command;
#[cfg(not(target_arch = "wasm32"))]
pub mod fetch;
#[cfg(not(target_arch = "wasm32"))]
pub mod progress;

#[cfg(not(target_arch = "wasm32"))]
pub use chapter::{Report, run, run_and};
#[cfg(not(target_arch = "wasm32"))]
pub use command::main;
pub use config::Config;
