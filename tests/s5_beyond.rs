//! The chapter "What the tutorial's model leaves out": a short version of its tables, locked. Each model
//! trains 300 steps instead of 31,368, so the losses are early ones; `examples/ablation.rs` writes the
//! book's full-length tables with the same code.

use attention_from_scratch::s5_gpt::app::ablation::{
    mask_table, mask_value_0, measure, table, variants,
};

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
    let zero = mask_value_0(Some(STEPS), false).unwrap();
    let tutorial = &rows[0];
    assert!(rows.iter().all(|r| r.steps == STEPS));
    assert_eq!(tutorial.parameters, 84_929);
    // A mask of 0 lets each character see the next: the loss falls while the future is in view, and
    // rises above the tutorial's once it is hidden, as it is when the model generates.
    assert!(zero.measured.test_loss < tutorial.test_loss);
    assert!(zero.test_loss_future_hidden > tutorial.test_loss);
    let text = format!(
        "{STEPS} steps per model\n\n{}\n{}",
        table(&rows, false),
        mask_table(tutorial, &zero)
    );
    insta::assert_snapshot!(text);
}
