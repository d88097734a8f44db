//! Lesson layer. The solutions of the chapter's exercises; `tests/s8_heads.rs` runs each.

use super::circuits::{HeadWeights, Matrix, k_composition};
use super::detectors::{Detector, pure, score};

// ANCHOR: positional_induction
/// The induction score of a head built by position on "ROMEO" written twice: in the second copy
/// it looks one after the same place in the first, and at itself before that.
pub fn positional_induction_on_romeo() -> f64 {
    let tokens: Vec<usize> = "ROMEOROMEO".chars().map(|c| c as usize).collect();
    let t = tokens.len();
    let weights = pure(t, |i| if i >= t / 2 { i - t / 2 + 1 } else { i });
    score(Detector::Induction, &tokens, &weights)
}
// ANCHOR_END: positional_induction

// ANCHOR: identity_composition
/// The K-composition of two heads whose W_QK and W_OV are both the identity of width C (each
/// weight the identity, D = C): ‖I·I‖ / (‖I‖·‖I‖) = √C / C = 1/√C.
pub fn identity_composition(c: usize) -> f64 {
    let eye = Matrix {
        rows: c,
        cols: c,
        data: (0..c * c)
            .map(|k| f64::from(u8::from(k % (c + 1) == 0)))
            .collect(),
    };
    let head = HeadWeights {
        query: eye.clone(),
        key: eye.clone(),
        value: eye.clone(),
        out: eye,
    };
    k_composition(&head, &head)
}
// ANCHOR_END: identity_composition
