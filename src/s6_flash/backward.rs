//! Stage 6, "The backward pass": one head's gradients through stage 5's tape three ways, the naive
//! graph of six nodes and the FlashAttention node in its tiled and exact forms, with what each
//! keeps from its forward pass for its backward pass, counted on the tape.

use std::io::Write;

use ndarray::{Array1, Array2};

use crate::print::{self, cell, heading};
use crate::s5_gpt::backend::Op;
use crate::s5_gpt::flash::FlashForm;
use crate::s5_gpt::model::attention_scale;
use crate::s5_gpt::ops::{MASK_VALUE, dot};
use crate::s5_gpt::{NodeId, Tape, Tensor};

use super::Length;

/// Rows of Δ the output prints.
const DELTA_ROWS: usize = 6;

/// One way through the tape: the floats it kept for the backward pass, and dQ, dK, dV.
#[derive(Clone, Debug)]
pub struct Pass {
    pub kept: usize,
    pub grads: [Vec<f32>; 3],
}

/// The three ways on one head, and Δᵢ = Σ_d dO_id·O_id of each row (from the naive graph's O).
#[derive(Clone, Debug)]
pub struct Backward {
    pub naive: Pass,
    pub tiled: Pass,
    pub exact: Pass,
    pub delta: Array1<f32>,
}

fn tensor(x: &Array2<f32>) -> Tensor {
    Tensor::new(x.shape(), x.iter().copied().collect())
}

/// The attention of `form` (the naive graph for `None`) on a fresh tape, its backward pass from
/// `d_out`, the floats the tape kept beyond Q, K and V (every node's value, and the node's
/// log-sum-exp), and the output.
fn pass(qkv: &[Array2<f32>; 3], d_out: &Array2<f32>, form: Option<FlashForm>) -> (Pass, Vec<f32>) {
    let mut tape = Tape::new();
    let [q, k, v] = qkv.each_ref().map(|x| tape.param(tensor(x)));
    let scale = attention_scale(qkv[0].ncols());
    let out = match form {
        None => {
            let kt = tape.transpose(k); // (D, T)
            let scores = tape.matmul(q, kt); // (T, T)
            let scores = tape.scale(scores, scale);
            let masked = tape.tril(scores, MASK_VALUE);
            let weights = tape.softmax(masked);
            tape.matmul(weights, v) // (T, D)
        }
        Some(form) => tape.flash_attention(q, k, v, scale, MASK_VALUE, form),
    };
    let kept = (3..tape.len()).map(NodeId).map(|id| {
        let lse = match tape.op(id) {
            Op::FlashAttention(node) => node.lse.len(),
            _ => 0,
        };
        tape.value(id).data.len() + lse
    });
    let kept = kept.sum();
    let o = tape.value(out).data.clone();
    tape.backward_from(out, d_out.iter().copied().collect());
    let grads = [q, k, v].map(|x| tape.grad(x).expect("a parameter has a gradient").to_vec());
    (Pass { kept, grads }, o)
}

/// One head of 64 columns at `length`: its gradients the three ways, drawn from `seed`.
pub fn backward(seed: u64, length: Length) -> Backward {
    // Q, K and V as `random_head` draws them, then the output's gradient dO: (T, D) each.
    let [q, k, v, d_out] = super::uniform_matrices(seed, length.t, super::HEAD_WIDTH);
    let qkv = [q, k, v];
    let (naive, o) = pass(&qkv, &d_out, None);
    let (tiled, _) = pass(&qkv, &d_out, Some(FlashForm::Tiled(length.tiles)));
    let (exact, _) = pass(&qkv, &d_out, Some(FlashForm::Exact));
    let rows = d_out.rows().into_iter().zip(o.chunks(super::HEAD_WIDTH));
    let delta = rows.map(|(g, o)| dot(g.iter().copied(), o.iter().copied())); // as the node sums it
    Backward {
        naive,
        tiled,
        exact,
        delta: delta.collect(),
    }
}

/// max |a − b| / max |b|: how far `a` is from `b`, as a share of `b`'s largest value.
pub fn relative_difference(a: &[f32], b: &[f32]) -> f64 {
    let largest = b.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    let worst = a.iter().zip(b).map(|(&a, &b)| f64::from(a - b).abs());
    worst.fold(0.0, f64::max) / largest
}

/// How many values of `a` differ in any bit from `b`'s.
fn values_apart(a: &[f32], b: &[f32]) -> usize {
    a.iter()
        .zip(b)
        .filter(|(a, b)| a.to_bits() != b.to_bits())
        .count()
}

/// Prints [`backward`] at `length`: what each way kept, Δ's first rows, and how far the node's
/// gradients lie from the naive graph's.
pub fn run_backward<W: Write>(out: &mut W, seed: u64, length: Length) -> std::io::Result<Backward> {
    let b = backward(seed, length);
    let (t, tiles) = (length.t, length.tiles);
    heading(
        out,
        &format!(
            "The backward pass: one head of {} columns at T = {t}, tiles of {} × {}",
            super::HEAD_WIDTH,
            tiles.br,
            tiles.bc
        ),
    )?;
    let floats = |p: &Pass| print::thousands(p.kept);
    let kept = [
        format!("naive graph  {:>12}", floats(&b.naive)),
        format!("tiled node   {:>12}", floats(&b.tiled)),
        format!("exact node   {:>12}", floats(&b.exact)),
    ];
    cell(
        out,
        "kept",
        "floats the forward pass leaves on the tape",
        &kept,
    )?;
    let first = b.delta.slice(ndarray::s![..DELTA_ROWS.min(t)]);
    let delta = [format!("Δ  {}", print::tensor(&first))];
    cell(
        out,
        "delta",
        "Δᵢ = Σ_d dO_id · O_id, the first rows",
        &delta,
    )?;
    let apart = |p: &Pass| {
        let parts = p.grads.iter().zip(&b.naive.grads);
        let shares = parts.map(|(g, n)| match relative_difference(g, n) {
            0.0 => format!("{:>9}", 0),
            share => format!("{share:>9.1e}"),
        });
        shares.collect::<Vec<_>>().join(" ")
    };
    let differ: usize = (b.exact.grads.iter().zip(&b.naive.grads))
        .map(|(g, n)| values_apart(g, n))
        .sum();
    let lines = [
        "                    dQ        dK        dV".to_string(),
        format!("tiled node  {}", apart(&b.tiled)),
        format!("exact node  {}", apart(&b.exact)),
        format!("exact node: values whose bits differ from the naive graph's: {differ}"),
    ];
    let label = "largest difference from the naive graph's, over its largest value";
    cell(out, "gradients", label, &lines)?;
    Ok(b)
}
