//! Tool layer. `s5_gpt generate`: a sample from a checkpoint, with a temperature and top-k.

use std::io::Write;

use super::super::args::GenerateArgs;
use super::super::checkpoint;
use super::super::sample::{probs, sample};
use crate::s5_gpt::app::error::ToolError;

/// `s5_gpt generate`: a sample from a checkpoint, or with `--probs` the distribution it draws the
/// first character from.
pub fn run(args: GenerateArgs, out: &mut impl Write) -> Result<(), ToolError> {
    let saved = checkpoint::load(&args.checkpoint)?;
    let text = if args.probs {
        probs(&saved, &args)?
    } else {
        sample(&saved, &args)?
    };
    writeln!(out, "{text}")?;
    Ok(())
}
