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
//! | [`checkpoint`] | saving and loading a run in safetensors files |
//! | [`files`] | whole-or-nothing writes and sha256 checks |
//! | [`fetch`] | downloading Tiny Shakespeare on first use |
//! | [`progress`] | the progress bar |
//! | [`bench`](mod@bench) | `--bench`: time per step and per op |
//! | [`ablation`] | the chapter "What the tutorial's model leaves out": its tables and attention maps |

pub mod ablation;
pub mod args;
pub mod bench;
pub mod chapter;
pub mod checkpoint;
pub mod command;
pub mod config;
pub mod fetch;
pub mod files;
pub mod progress;

pub use chapter::{Report, run};
pub use command::main;
pub use config::Config;
