//! Lesson layer. Ablation: take one head out and see what the model loses. A head adds
//! W_O·z to the stream, z its (T, D) output; zero ablation puts 0 in place of z, mean ablation
//! the mean z̄ of its outputs on reference text. Both are edits of the output layer's weights:
//! head h's columns of W_O set to 0, and, for the mean, W_O·z̄ added to its bias.

use crate::s5_gpt::backend::Op;
use crate::s5_gpt::beyond::Gpt;
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::tensor::NodeId;

// ANCHOR: ablation
/// What a head's output is replaced with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ablation {
    Zero,
    Mean,
}

/// Head `h` of block `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadId {
    pub block: usize,
    pub head: usize,
}

/// Every parameter of `model` as it sits on `tape`, with `head` ablated. `reference` (B, T) ids,
/// with B `rows`, are the text whose mean output mean ablation writes in.
pub fn ablated_params(
    model: &Gpt,
    tape: &mut Tape,
    (head, ablation): (HeadId, Ablation),
    (reference, rows): (&[usize], usize),
) -> Vec<Vec<f32>> {
    let mean = match ablation {
        Ablation::Zero => None,
        Ablation::Mean => Some(mean_output(model, tape, head, (reference, rows))),
    };
    let mut params: Vec<Vec<f32>> = tape.params().iter().map(|p| p.data.clone()).collect();
    ablate(model, &mut params, head, mean.as_deref());
    params
}

/// Runs `f` with the tape's parameters set to `params`, then puts the tape's own back.
pub fn with_params<R>(tape: &mut Tape, params: &[Vec<f32>], f: impl FnOnce(&mut Tape) -> R) -> R {
    let kept: Vec<Vec<f32>> = tape.params().iter().map(|p| p.data.clone()).collect();
    tape.set_params(params.iter().map(Vec::as_slice));
    let result = f(tape);
    tape.set_params(kept.iter().map(Vec::as_slice));
    result
}

/// Head `head`'s columns of W_O zeroed in `params`, and W_O·z̄ added to its bias for a mean z̄.
fn ablate(model: &Gpt, params: &mut [Vec<f32>], head: HeadId, mean: Option<&[f64]>) {
    let out = &model.blocks[head.block].attn.out;
    let c = model.config.embedding_size;
    let d = c / model.blocks[head.block].attn.num_heads;
    let columns = head.head * d..(head.head + 1) * d;
    let mut weight = std::mem::take(&mut params[out.weight.0]); // (C, C)
    for (row, bias) in weight.chunks_exact_mut(c).zip(&mut params[out.bias.0]) {
        if let Some(z) = mean {
            let w = &row[columns.clone()];
            let written: f64 = w.iter().zip(z).map(|(&w, z)| f64::from(w) * z).sum();
            *bias += written as f32;
        }
        row[columns.clone()].fill(0.0);
    }
    params[out.weight.0] = weight;
}

/// z̄: head `head`'s output (D), averaged over every position of `reference`.
fn mean_output(
    model: &Gpt,
    tape: &mut Tape,
    head: HeadId,
    (ids, rows): (&[usize], usize),
) -> Vec<f64> {
    tape.reset();
    model.forward(tape, ids, rows, None);
    let z = tape.value(head_outputs(tape)[head.block]); // (B, H, T, D)
    let [b, h, t, d] = z.shape[..] else {
        panic!("head outputs are (B, H, T, D), not {:?}", z.shape)
    };
    let mut mean = vec![0.0f64; d];
    for row in 0..b {
        let one = &z.data[(row * h + head.head) * t * d..][..t * d];
        for position in one.chunks_exact(d) {
            for (m, &x) in mean.iter_mut().zip(position) {
                *m += f64::from(x) / (b * t) as f64;
            }
        }
    }
    tape.reset();
    mean
}

/// The heads' outputs z (B, H, T, D) of every block of the graph on `tape`: the inputs of its
/// `MergeHeads` nodes, in order.
pub fn head_outputs(tape: &Tape) -> Vec<NodeId> {
    (0..tape.len())
        .filter_map(|id| match tape.op(NodeId(id)) {
            Op::MergeHeads { x } => Some(*x),
            _ => None,
        })
        .collect()
}
// ANCHOR_END: ablation
