//! Running `s5_gpt` in-process, as the command line would: what the tool tests share.

use std::sync::atomic::AtomicBool;

use attention_from_scratch::s5_gpt::app::args::Cli;
use attention_from_scratch::s5_gpt::app::command::Outcome;
use attention_from_scratch::s5_gpt::app::error::ToolError;

/// Runs `s5_gpt ARGS…` in-process; returns how it ended and what it printed.
pub fn s5_gpt(args: &[&str]) -> Result<(Outcome, String), ToolError> {
    let argv = std::iter::once("s5_gpt").chain(args.iter().copied());
    let cli = Cli::try_parse_args(argv).expect("the test's flags parse");
    let mut out = Vec::new();
    let outcome = cli.run(&mut out, &AtomicBool::new(false))?;
    Ok((outcome, String::from_utf8(out).unwrap()))
}

/// The output of a run that must succeed.
pub fn ok(args: &[&str]) -> String {
    s5_gpt(args)
        .unwrap_or_else(|e| panic!("s5_gpt {args:?}: {e}"))
        .1
}

/// The message of a run that must fail, checked to be one line.
pub fn fails(args: &[&str]) -> String {
    let err = s5_gpt(args).expect_err("this input must be rejected");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "not one line: {msg}");
    msg
}
