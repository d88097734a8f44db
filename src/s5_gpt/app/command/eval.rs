//! Tool layer. `s5_gpt eval`: a checkpoint's mean loss on the test part of its corpus.

use std::io::Write;

use super::super::args::EvalArgs;
use super::super::chapter::test;
use super::super::checkpoint;
use super::train::same_vocabulary;
use super::warn_about_corpus;
use crate::s5_gpt::app::error::ToolError;

/// `s5_gpt eval`: the checkpoint's mean loss over the test batches of its corpus.
pub fn run(args: EvalArgs, out: &mut impl Write) -> Result<(), ToolError> {
    let saved = checkpoint::load(&args.checkpoint)?;
    let cfg = args.config(saved.config.recipe);
    warn_about_corpus(&cfg);
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        same_vocabulary(&trainer.dataset, &cfg, &saved)?;
        trainer
            .tape
            .set_params(saved.weights.iter().map(|(_, w)| &w.data[..]));
        let result = test(&mut trainer, cfg.progress);
        let (b, t) = (cfg.recipe.batch_size, cfg.recipe.context_size);
        writeln!(out, "test loss: {}", result.mean())?;
        let (batches, step) = (result.batches, saved.config.step);
        writeln!(
            out,
            "({batches} test batches of {b}×{t} characters, after {step} training steps)"
        )?;
        Ok(())
    })
}
