//! What the book draws of a trained model: its attention weights, read off the tape.

use crate::s5_gpt::backend::Op;
use crate::s5_gpt::beyond::Gpt;
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::tensor::NodeId;

/// The attention weights of every head of every block of `model` on one sequence of tokens `ids`
/// (at most T): for block b and head h, `maps[b][h]` is a (T, T) matrix, row-major, row i holding
/// token i's weights over the tokens 0..=i. They are the softmax nodes of the graph, one per block,
/// in order.
pub fn attention_maps(model: &Gpt, tape: &mut Tape, ids: &[usize]) -> Vec<Vec<Vec<f32>>> {
    tape.reset();
    model.forward(tape, ids, 1, None); // (1, T, V)
    let t = ids.len();
    let maps = (0..tape.len())
        .map(NodeId)
        .filter(|&id| matches!(tape.op(id), Op::Softmax { .. }))
        .map(|id| {
            tape.value(id)
                .data
                .chunks(t * t)
                .map(<[f32]>::to_vec)
                .collect()
        }) // (H, T, T)
        .collect();
    tape.reset();
    maps
}
