//! Lesson layer. In-context learning, measured two ways: the loss on the second copy of a repeated
//! random text against the first, and Olsson et al.'s score on real text, the loss late in the
//! context minus the loss early in it (*In-context Learning and Induction Heads*, 2022, which
//! takes the 500th token against the 50th of 512).

use crate::s5_gpt::beyond::Gpt;
use crate::s5_gpt::data::{CharDataset, Split};
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::tensor::Tensor;

// ANCHOR: position_losses
/// The cross-entropy at every position of (B, T) logits `logits` for targets (B, T), averaged over
/// the B rows, in double precision: (T).
pub fn position_losses(logits: &Tensor, targets: &[usize]) -> Vec<f64> {
    let [rows, t, v] = logits.shape[..] else {
        panic!("logits are (B, T, V), not {:?}", logits.shape)
    };
    let mut losses = vec![0.0f64; t];
    for (n, (row, &target)) in logits.data.chunks_exact(v).zip(targets).enumerate() {
        let max = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, &z| m.max(f64::from(z)));
        let sum: f64 = row.iter().map(|&z| (f64::from(z) - max).exp()).sum();
        losses[n % t] += (max + sum.ln() - f64::from(row[target])) / rows as f64;
    }
    losses
}
// ANCHOR_END: position_losses

// ANCHOR: copy_losses
/// The mean loss on the first and on the second copy of `sequences`, each n characters written
/// twice: positions 1..n against n + 1..2n, the same characters predicted. The first's
/// character before cannot tell the next (near ln V); the second's copy can.
pub fn copy_losses(model: &Gpt, tape: &mut Tape, sequences: &[Vec<usize>]) -> (f64, f64) {
    let n = sequences[0].len() / 2;
    let x: Vec<usize> = sequences
        .iter()
        .flat_map(|s| &s[..2 * n - 1])
        .copied()
        .collect();
    let y: Vec<usize> = sequences.iter().flat_map(|s| &s[1..]).copied().collect();
    tape.reset();
    let logits = model.forward(tape, &x, sequences.len(), None); // (B, 2n − 1, V)
    let losses = position_losses(tape.value(logits), &y); // (2n − 1)
    tape.reset();
    let mean = |r: std::ops::Range<usize>| losses[r.clone()].iter().sum::<f64>() / r.len() as f64;
    (mean(0..n - 1), mean(n..2 * n - 1))
}
// ANCHOR_END: copy_losses

// ANCHOR: icl_score
/// Olsson's in-context learning score on `k` fixed test batches of `dataset`: the mean loss at
/// the context's last position minus the mean loss at position T/8. Negative when the model
/// predicts better with more context.
pub fn icl_score(model: &Gpt, tape: &mut Tape, dataset: &CharDataset, k: usize) -> f64 {
    let n = dataset.len(Split::Test);
    let t = dataset.context_size;
    let (mut early, mut late) = (0.0, 0.0);
    for i in 0..k {
        let batch = dataset.batch(Split::Test, i * n / k);
        tape.reset();
        let logits = model.forward(tape, &batch.x, batch.rows, None); // (B, T, V)
        let losses = position_losses(tape.value(logits), &batch.y); // (T)
        early += losses[t / 8] / k as f64;
        late += losses[t - 1] / k as f64;
    }
    tape.reset();
    late - early
}
// ANCHOR_END: icl_score
