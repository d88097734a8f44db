//! The chapter "What the tutorial's model leaves out": a short version of its tables, locked. Each model
//! trains 300 steps instead of 31,368, so the losses are early ones; `examples/ablation.rs` writes the
//! book's full-length tables with the same code.

use std::sync::atomic::AtomicBool;

use attention_from_scratch::figures::ablation::{
    ALL_OF_THEM, TUTORIAL, mask_table, table, variants,
};
use attention_from_scratch::lang::Lang;
use attention_from_scratch::s5_gpt::app::ablation::{mask_value_0, measure};
use attention_from_scratch::s5_gpt::app::args::Cli;

const STEPS: usize = 300;

#[test]
fn short_ablation() {
    let rows: Vec<_> = variants()
        .iter()
        .map(|v| {
            measure(v, Some(STEPS), false)
                .expect("Tiny Shakespeare: run data/fetch.sh")
                .1
        })
        .collect();
    let (tutorial, everything) = (&rows[TUTORIAL], &rows[ALL_OF_THEM]);
    assert!(rows.iter().all(|r| r.steps == STEPS));
    assert_eq!(tutorial.parameters, 84_929);
    assert_eq!(
        everything.variant.flags,
        "--heads 4 --residual --layer-norm"
    );
    let zero = [
        mask_value_0(&tutorial.variant, Some(STEPS), false).unwrap(),
        mask_value_0(&everything.variant, Some(STEPS), false).unwrap(),
    ];
    // A mask of 0 lets each character see the ones after it, the next one among them: with the future in
    // view the loss falls below the causal model's, and once it is hidden, as it is when the model
    // generates, it rises far above.
    for (causal, zero) in [tutorial, everything].into_iter().zip(&zero) {
        assert!(zero.measured.test_loss < causal.test_loss);
        assert!(zero.test_loss_future_hidden > causal.test_loss);
    }
    let text = format!(
        "{STEPS} steps per model\n\n{}\n{}",
        table(Lang::En, &rows, false),
        mask_table(Lang::En, &[(tutorial, &zero[0]), (everything, &zero[1])])
    );
    insta::assert_snapshot!(text);
}

/// What `s5_gpt ARGS…` prints (on stdout; `--quiet` hides the progress bar on stderr).
fn s5_gpt(args: &[&str]) -> String {
    let argv = std::iter::once("s5_gpt").chain(args.iter().copied());
    let cli = Cli::try_parse_args(argv).expect("the test's flags parse");
    let mut out = Vec::new();
    cli.run(&mut out, &AtomicBool::new(false))
        .unwrap_or_else(|e| panic!("s5_gpt {args:?}: {e}"));
    String::from_utf8(out).unwrap()
}

/// The chapter's "Try it": the model with heads, residual connections and LayerNorm, and the tutorial's,
/// each trained for 3,000 steps.
#[test]
fn try_it_for_3000_steps() {
    let everything = ["--heads", "4", "--residual", "--layer-norm"];
    let steps = ["--max-steps", "3000", "--quiet"];
    insta::assert_snapshot!(
        "try_it_everything",
        s5_gpt(&[&everything[..], &steps].concat())
    );
    insta::assert_snapshot!("try_it_tutorial", s5_gpt(&steps));
}
