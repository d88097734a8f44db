//! Tool layer, not shown in the chapter: `cargo run --release --example s7_variants -- --weigh`.
//! Trains the sequel's fullest model and each of stage 7's variants of it on Tiny Shakespeare with
//! the tutorial's recipe (its seed, batches, schedule; 3,000 steps with `--max-steps 3000`, or the
//! two epochs), and prints one line each, the record the chapter's table is drawn from:
//!
//! `variant=gqa steps=3000 parameters=… train_loss=… test_loss=… ms_per_step=… kv_bytes_per_token=…`
//!
//! Native only: the WebAssembly build reads no corpus from disk.

use std::io::Write;

use super::bench::short_name;
use super::kv::KvShape;
use super::variants;
use crate::s5_gpt::app::ablation::measure_architecture;
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::beyond::Architecture;

/// The flags of `s5_gpt train` that make `arch`, one of the chapter's variants.
pub fn flags(arch: &Architecture) -> String {
    let mut flags = format!("--heads {} --residual --layer-norm", arch.heads);
    if let Some(k) = arch.kv_heads {
        flags += &format!(" --kv-heads {k}");
    }
    if let Some(w) = arch.window {
        flags += &format!(" --window {w}");
    }
    if arch.rope {
        flags += " --rope";
    }
    if let Some(l) = arch.latent {
        flags += &format!(" --latent {l}");
    }
    flags
}

/// The cache a token adds to a model of `arch` at the tutorial's width (64) and blocks (2), in
/// float32.
pub fn kv_bytes_per_token(arch: &Architecture) -> u64 {
    KvShape::of(arch, 2, 64, 4).bytes_per_token()
}

/// Trains each variant for `max_steps` (the two epochs if `None`) and prints its line.
pub fn run<W: Write>(
    out: &mut W,
    max_steps: Option<usize>,
    progress: bool,
) -> Result<(), ToolError> {
    for (name, arch) in variants() {
        let (_, m) = measure_architecture((name, flags(&arch)), arch, max_steps, progress)?;
        writeln!(
            out,
            "variant={} steps={} parameters={} train_loss={:.4} test_loss={:.4} ms_per_step={:.3} kv_bytes_per_token={}",
            short_name(&arch),
            m.steps,
            m.parameters,
            m.train_loss,
            m.test_loss,
            m.ms_per_step,
            kv_bytes_per_token(&arch)
        )?;
        out.flush()?;
    }
    Ok(())
}
