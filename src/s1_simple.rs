//! Stage 1 (§3.3, "A simple self-attention mechanism without trainable weights").

use ndarray::{Array, Axis, Dimension};

/// Softmax over the last axis, with the row maximum subtracted first so that `exp` cannot overflow
/// (what `torch.softmax(x, dim=-1)` computes).
pub fn softmax<D: Dimension>(x: &Array<f32, D>) -> Array<f32, D> {
    let last = Axis(x.ndim() - 1);
    let mut out = x.clone();
    for mut row in out.lanes_mut(last) {
        let max = row.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| libm::expf(v - max));
        let sum: f32 = row.sum();
        row.mapv_inplace(|v| v / sum);
    }
    out
}

/// Placeholder: prints the stage's cells.
pub fn run<W: std::io::Write>(out: &mut W, _seeds: crate::BookSeeds) -> Result<(), crate::Error> {
    writeln!(
        out,
        "{}",
        crate::print::tensor(&softmax(&ndarray::arr1(&[1.0f32, 2.0])))
    )?;
    Ok(())
}
