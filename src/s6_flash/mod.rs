//! Stage 6: attention at length. Not in rasbt's chapter 3: the stage follows FlashAttention (Dao
//! et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", 2022) and
//! the online softmax it is built on (Milakov and Gimelshein, 2018), and takes stage 4's causal
//! multi-head attention to contexts where its T × T matrix of weights no longer fits.
//!
//! 1. [`online`]: softmax in one pass over the keys, a few at a time, keeping a running maximum m
//!    and a running sum ℓ, on stage 1's scores of "journey".
//!
//! [`run`] prints the walk step by step, as `cargo run --example s6_flash` shows it.

pub mod online;

use std::io::Write;

use ndarray::{Array1, ArrayView1};

use crate::print::{self, cell, heading};
use crate::s1_simple::{self, JOURNEY, TOKENS};
use crate::{BookSeeds, Error};

pub use online::{OnlineStep, online_softmax, online_weights};

/// The online softmax of the chapter reads two keys per step.
pub const KEYS_PER_STEP: usize = 2;

/// Stage 1's attention scores of the query "journey", ω₂ⱼ = x⁽ʲ⁾·x⁽²⁾: the row the online
/// softmax walks.
pub fn journey_scores() -> Array1<f32> {
    let inputs = s1_simple::inputs(); // (T, d_in)
    s1_simple::attn_scores_for(&inputs.row(JOURNEY), &inputs.view()) // (T)
}

/// Prints the online softmax of "journey"'s scores step by step, then its weights beside stage 1's.
pub fn run<W: Write>(out: &mut W, _seeds: BookSeeds) -> Result<(), Error> {
    online_walk(out)?;
    Ok(())
}

/// The walk: the scores, one cell per step, and the weights it ends at.
fn online_walk<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(
        out,
        "Online softmax: the scores of \"journey\", two keys at a time",
    )?;
    let scores = journey_scores(); // (T)
    cell(out, "scores", "attn_scores_2", &[print::tensor(&scores)])?;
    let steps = online_softmax(&scores.view(), KEYS_PER_STEP);
    for (n, step) in steps.iter().enumerate() {
        let tag = format!("step {}", n + 1);
        cell(out, &tag, &keys_label(step), &step_lines(step))?;
    }
    let last = steps.last().expect("six scores make three steps");
    weights_cell(out, &scores.view(), last)
}

/// `keys 0–1: Your, journey`.
fn keys_label(step: &OnlineStep) -> String {
    let words = TOKENS[step.keys.clone()].join(", ");
    format!("keys {}–{}: {words}", step.keys.start, step.keys.end - 1)
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
    cell(out, "weights", "e^(x - m) / ℓ; stage 1's softmax", &lines)
}
