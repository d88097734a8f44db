//! Stage 5: a hand-written autograd, a tiny GPT, and its Tiny Shakespeare training run.
//!
//! This stage follows GPTmini's book 《从零开始大模型》, chapter 因果注意力 (causal attention), and its
//! notebook [`04-causal-attention.ipynb`](https://github.com/GPTmini/GPTmini/blob/main/tutorial/zh/large-language-model/02-attention/04-causal-attention.ipynb):
//! a NumPy tutorial that writes its own autograd and trains a character-level GPT on Tiny
//! Shakespeare for two epochs, then prints the test loss and a 512-character sample that starts with
//! `ROMEO:`. Every number comes from a replay of the tutorial's float32 NumPy arithmetic, seeded like
//! it with `np.random.seed(42)`.
//!
//! The stage comes in three parts, each depending only on the ones above it, as llm.c keeps its
//! clean `train_gpt2.c` beside its fast versions:
//!
//! | layer | modules | what it is |
//! |---|---|---|
//! | **lesson** (the book shows it) | [`tensor`], [`ops`], [`backend`], [`tape`], [`model`], [`beyond`], [`data`], [`optim`], [`train`], [`generate`](mod@generate), [`baseline`], [`error`] | plain single-threaded Rust that defines every bit of a run |
//! | **fast** (the default) | [`fast`] | product kernels, vector lanes, helper threads, buffer reuse and per-op timers that give the lesson's bits |
//! | **tool** | [`app`] | the `s5_gpt` command line, the chapter run, checkpoints, progress, the corpus download and the benchmark |
//!
//! The lesson's modules and the tutorial's parts:
//!
//! | module | the tutorial's part |
//! |---|---|
//! | [`tape`] | `Tensor`, `attach` and `backward()`: the autograd |
//! | [`ops`] | tensor operators and the layers `Embedding`, `Linear`, `Softmax`, `Tril`, `GELU`, `GPTLoss` |
//! | [`model`] | `GPTEmbedding`, `GPTAttention`, `GPTFeedForward`, `GPTTransformer`, `GPTOutput`, `GPT`: [`model::TutorialGpt`] |
//! | [`data`] | `CharDataset` |
//! | [`optim`] | `AdamWOptimizer`, `clip_grad_norm`, `WarmupCosineScheduler` |
//! | [`train`] | the hyperparameters and `GPTTrainer.train` and `.test` |
//! | [`generate`](mod@generate) | `GPTTrainer.generate` |
//! | [`baseline`] | (not in the tutorial) a bigram model, the yardstick of the held-out curve |
//! | [`beyond`] | (not in the tutorial) the sequel's model: [`beyond::Gpt`] |
//! | [`cache`] | (not in the tutorial) stage 7's KV cache of the sequel's model, and generation with it |
//! | [`rolling`] | (not in the tutorial) stage 7's rolling cache: a window of W keys per block in a ring, generation past the context |
//! | [`variants`] | (not in the tutorial) stage 7's ops: grouped-query heads, the sliding window, rotary positions |
//!
//! [`beyond::Gpt`] is the same model with an [`beyond::Architecture`], which adds back what the
//! tutorial's model leaves out (Q/K/V projections, heads, residual connections, LayerNorm, dropout,
//! and the mask's value); the book's chapter "What the tutorial's model leaves out" measures each,
//! with [`app::ablation`]. With `Architecture::default()` it gives [`model::TutorialGpt`]'s bits.
//!
//! A run computes on the lesson's [`backend::Lesson`] or, by default, on [`fast::Fast`] (the tool
//! picks, [`app`]). The two agree to the bit (`tests/s5_layers.rs`).
//!
//! Expected figures with the tutorial's settings (batch 4, context 32, width 64, 2 blocks, lr 1e-3,
//! 2 epochs = 31,368 steps, seed 42):
//!
//! | figure | this crate | the NumPy tutorial |
//! |---|---|---|
//! | loss at step 0 | 4.1720004 | 4.1720009 (ln 65 ≈ 4.174) |
//! | losses of steps 0–299 | within 7e-7 of a NumPy float32 re-run | |
//! | mean test loss after 31,368 steps | **2.040799** | 2.0406120 (the notebook's 0.22664792747924414 × 15,684 / 1,742), 2.0406033 (a re-run) |
//! | the sample | `ROMEO:\nFamtany at!--will and,…` | `ROMEO:\nFamtany at!--will…` |
//! | time per training step | measured in the README's Speed section | not published |
//!
//! The notebook's `test()` divides the summed losses of the 1,742 test batches by the 15,684 train
//! batches (it switches the dataset back to training first), so it prints 0.22664792747924414; the
//! mean over the test batches is that × 15,684 / 1,742. Appendix A of the book explains.
//!
//! The losses drift apart slowly because OpenBLAS adds up a matrix product in another order; the
//! sample follows NumPy's for as long as the probabilities agree closely enough to pick the same
//! characters.

pub mod app;
pub mod backend;
pub mod baseline;
pub mod beyond;
pub mod cache;
pub mod data;
pub mod error;
pub mod fast;
pub mod flash;
pub mod generate;
pub mod latent;
pub mod model;
pub mod ops;
pub mod optim;
pub mod rolling;
pub mod tape;
pub mod tensor;
pub mod train;
pub mod variants;

pub use beyond::{Gpt, GptConfig};
pub use data::{CharDataset, Split};
pub use error::GptError;
pub use generate::{Sampling, generate};
pub use model::{Model, TutorialGpt};
pub use optim::{AdamW, WarmupCosine};
pub use tape::Tape;
pub use tensor::{NodeId, Tensor};
pub use train::{Recipe, TestResult, Trainer};
