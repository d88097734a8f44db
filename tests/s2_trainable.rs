//! Stage 2: what `cargo run --example s2_trainable` prints, locked as a snapshot and checked line by line
//! against the book; the walk-through's numbers; exercise 3.1's equivalence; and `--seed`.

use attention_from_scratch::BookSeeds;
use attention_from_scratch::print;
use attention_from_scratch::rng::torch::Generator;
use attention_from_scratch::s1_simple::inputs;
use attention_from_scratch::s2_trainable::{
    self, D_OUT, Linear, Scaling, SelfAttentionV1, SelfAttentionV2, WalkThrough,
    largest_self_gradient,
};
use ndarray::{Array2, Axis, arr1, arr2};

mod common;

use common::{Block, assert_close, blocks, cells, structure};

fn output(seeds: BookSeeds) -> String {
    common::printed(s2_trainable::run, seeds)
}

/// Every line the chapter 3 notebook prints in cells #16–#23 (`reference/book_ch03_outputs.md`, without
/// the `grad_fn` suffixes), then the two outputs of exercise 3.1 in the chapter's exercise-solutions
/// notebook.
const BOOK: &str = "\
tensor([0.4306, 1.4551])
keys.shape: torch.Size([6, 2])
values.shape: torch.Size([6, 2])
tensor(1.8524)
tensor([1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440])
tensor([0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
tensor([0.3061, 0.8210])
tensor([[0.2996, 0.8053],
        [0.3061, 0.8210],
        [0.3058, 0.8203],
        [0.2948, 0.7939],
        [0.2927, 0.7891],
        [0.2990, 0.8040]])
tensor([[-0.0739,  0.0713],
        [-0.0748,  0.0703],
        [-0.0749,  0.0702],
        [-0.0760,  0.0685],
        [-0.0763,  0.0679],
        [-0.0754,  0.0693]])
tensor([[-0.5337, -0.1051],
        [-0.5323, -0.1080],
        [-0.5323, -0.1079],
        [-0.5297, -0.1076],
        [-0.5311, -0.1066],
        [-0.5299, -0.1081]])
tensor([[-0.5337, -0.1051],
        [-0.5323, -0.1080],
        [-0.5323, -0.1079],
        [-0.5297, -0.1076],
        [-0.5311, -0.1066],
        [-0.5299, -0.1081]])";

fn walk_through(seed: u64) -> WalkThrough {
    WalkThrough::new(&inputs().view(), &mut Generator::manual_seed(seed), D_OUT)
}

/// The chapter's output blocks, each shown right after the code that computes it: the snapshot's name
/// and the cells it holds.
const BLOCKS: [Block; 9] = [
    ("walk_through_projections", &["#16", "#17"]),
    ("walk_through_scores", &["#18", "#19"]),
    ("walk_through_softmax", &["#20"]),
    ("scaling_d_k_2", &["d_k = 2"]),
    ("scaling_d_k_512", &["d_k = 512"]),
    ("walk_through_context", &["#21"]),
    ("self_attention_v1", &["#22"]),
    ("self_attention_v2", &["#23"]),
    ("exercise_3_1", &["exercise #4", "exercise #5"]),
];

#[test]
fn output_snapshot() {
    let output = output(BookSeeds::default());
    insta::assert_snapshot!("output", output);
}

#[test]
fn output_blocks_of_the_chapter() {
    for (name, text) in blocks(&output(BookSeeds::default()), &BLOCKS) {
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn prints_exactly_the_books_lines() {
    // The two √d_k cells are the crate's own; every other printed line is the book's.
    let printed: Vec<String> = cells(&output(BookSeeds::default()))
        .into_iter()
        .filter(|(tag, _)| !tag.starts_with("d_k"))
        .map(|(_, lines)| lines)
        .collect();
    assert_eq!(printed.join("\n"), BOOK);
}

/// The claim behind the √d_k example: with components of mean 0 and variance 1, a score's variance is
/// d_k, and the scaled score's is 1, whatever d_k is.
#[test]
fn scores_have_variance_d_k_and_scaled_scores_variance_one() {
    let mut rng = Generator::manual_seed(1);
    for d_k in [2usize, 64, 512] {
        let scores: Vec<f32> = (0..400)
            .flat_map(|_| Scaling::new(&mut rng, d_k).scores.to_vec())
            .collect();
        let n = scores.len() as f64;
        let variance = scores.iter().map(|&s| f64::from(s).powi(2)).sum::<f64>() / n;
        let ratio = variance / d_k as f64;
        assert!(
            (0.9..1.1).contains(&ratio),
            "d_k = {d_k}: variance {variance}"
        );
    }
}

#[test]
fn without_the_scaling_a_large_d_k_saturates_the_softmax() {
    let mut rng = Generator::manual_seed(123);
    let small = Scaling::new(&mut rng, 2);
    let large = Scaling::new(&mut rng, 512);
    // d_k = 2: the scaling changes little, and every weight keeps a gradient.
    assert!(largest_self_gradient(&small.unscaled_weights) > 0.1);
    assert!(largest_self_gradient(&small.weights) > 0.1);
    // d_k = 512: one weight takes (almost) everything, and its gradient is gone.
    assert!(large.unscaled_weights.iter().any(|&w| w > 0.999_99));
    assert!(largest_self_gradient(&large.unscaled_weights) < 1e-5);
    // Divided by √512, the same scores give weights a gradient can move again.
    assert!(large.weights.iter().all(|&w| w < 0.5));
    assert!(largest_self_gradient(&large.weights) > 0.2);
    assert_eq!(largest_self_gradient(&ndarray::arr1(&[0.5, 0.5])), 0.25);
}

#[test]
fn labels_every_cell_under_its_section() {
    let output = output(BookSeeds::default());
    let expected = [
        "## 3.4.1 Computing the attention weights step by step",
        "[#16",
        "[#17",
        "[#18",
        "[#19",
        "[#20",
        "[d_k = 2",
        "[d_k = 512",
        "[#21",
        "## 3.4.2 Implementing a compact SelfAttention class",
        "[#22",
        "[#23",
        "## Exercise 3.1 Comparing SelfAttention_v1 and SelfAttention_v2",
        "[exercise #4",
        "[exercise #5",
    ];
    assert_eq!(structure(&output), expected);
}

#[test]
fn the_walk_through_is_the_books() {
    let step = walk_through(123);
    assert_close(step.query_2.view(), &[0.4306, 1.4551]);
    assert_eq!(step.keys.dim(), (6, 2));
    assert_eq!(step.values.dim(), (6, 2));
    assert!((step.attn_score_22 - 1.8524).abs() <= 5e-5);
    assert_eq!(step.attn_score_22, step.attn_scores_2[1]);
    assert_close(
        step.attn_scores_2.view(),
        &[1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],
    );
    assert_close(
        step.attn_weights_2.view(),
        &[0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820],
    );
    assert_close(step.context_vec_2.view(), &[0.3061, 0.8210]);
}

/// `SelfAttention_v1` at seed 123 draws the walk-through's three matrices, so its second row is z⁽²⁾.
#[test]
fn self_attention_v1_packs_the_walk_through() {
    let sa_v1 = SelfAttentionV1::new(&mut Generator::manual_seed(123), 3, D_OUT);
    let context = sa_v1.forward(&inputs().view());
    let step = walk_through(123);
    for (a, b) in context.row(1).iter().zip(&step.context_vec_2) {
        assert!((a - b).abs() <= 1e-6, "{a} vs {b}");
    }
    assert_close(context.row(0), &[0.2996, 0.8053]);
    assert_close(context.row(5), &[0.2990, 0.8040]);
}

#[test]
fn self_attention_v2_is_the_books() {
    let sa_v2 = SelfAttentionV2::new(&mut Generator::manual_seed(789), 3, D_OUT, false);
    let context = sa_v2.forward(&inputs().view());
    assert_close(context.row(0), &[-0.0739, 0.0713]);
    // The tightest value of the chapter: PyTorch computes 0.06845010, 1e-7 above the rounding boundary.
    assert!(
        context[[3, 1]] > 0.06845 && (context[[3, 1]] - 0.0684501).abs() < 5e-7,
        "{}",
        context[[3, 1]]
    );
}

#[test]
fn exercise_3_1_v1_with_v2s_weights_transposed_computes_the_same() {
    for seed in [123, 789, 7] {
        let sa_v2 = SelfAttentionV2::new(&mut Generator::manual_seed(seed), 3, D_OUT, false);
        let sa_v1 = SelfAttentionV1::from_v2(&sa_v2);
        assert_eq!(sa_v1.w_query, sa_v2.w_query.weight.t());
        assert_eq!(sa_v1.w_key, sa_v2.w_key.weight.t());
        assert_eq!(sa_v1.w_value, sa_v2.w_value.weight.t());
        let x = inputs();
        assert_eq!(sa_v1.forward(&x.view()), sa_v2.forward(&x.view()));
    }
}

#[test]
fn v1_with_its_own_weights_differs_from_v2() {
    let x = inputs();
    let sa_v2 = SelfAttentionV2::new(&mut Generator::manual_seed(123), 3, D_OUT, false);
    let sa_v1 = SelfAttentionV1::new(&mut Generator::manual_seed(123), 3, D_OUT);
    assert_ne!(sa_v1.forward(&x.view()), sa_v2.forward(&x.view()));
}

#[test]
#[should_panic(expected = "qkv_bias = false")]
fn v1_cannot_take_a_bias() {
    let sa_v2 = SelfAttentionV2::new(&mut Generator::manual_seed(123), 3, D_OUT, true);
    SelfAttentionV1::from_v2(&sa_v2);
}

#[test]
fn linear_multiplies_by_the_transposed_weight_and_adds_the_bias() {
    let linear = Linear {
        weight: arr2(&[[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]]), // (d_out, d_in) = (2, 3)
        bias: Some(arr1(&[0.5, -0.5])),
    };
    let x = arr2(&[[1.0f32, 1.0, 1.0], [2.0, 0.0, -2.0]]); // (T, d_in)
    let expected: Array2<f32> = arr2(&[[6.5, -1.0], [-3.5, -1.5]]);
    assert_eq!(linear.forward(&x.view()), expected);
    let no_bias = Linear {
        bias: None,
        ..linear
    };
    assert_eq!(no_bias.forward(&x.view()), expected - arr1(&[0.5, -0.5]));
}

#[test]
fn linear_draws_within_one_over_root_fan_in() {
    let linear = Linear::new(&mut Generator::manual_seed(789), 3, 2, true);
    let bound = 1.0 / 3f32.sqrt();
    assert_eq!(linear.weight.dim(), (2, 3));
    assert_eq!(linear.bias.as_ref().map(|b| b.len()), Some(2));
    assert!(linear.weight.iter().all(|w| w.abs() <= bound));
    // The weight comes first: without a bias the same seed gives the same weight.
    let no_bias = Linear::new(&mut Generator::manual_seed(789), 3, 2, false);
    assert_eq!(no_bias.weight, linear.weight);
    assert!(no_bias.bias.is_none());
}

#[test]
fn the_seed_replaces_123_and_789() {
    let book = output(BookSeeds::default());
    let seven = output(BookSeeds::new(Some(7)));
    assert_eq!(seven, output(BookSeeds::new(Some(7))), "deterministic");
    assert_ne!(seven, book);
    // Only the values change: the shapes and the labels stay.
    assert!(seven.contains("keys.shape: torch.Size([6, 2])"));
    let labels = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with('[') || l.starts_with("## "))
            .map(String::from)
            .collect()
    };
    assert_eq!(labels(&seven), labels(&book));
    // Each seed on its own moves the cells that use it.
    let only_123 = output(BookSeeds {
        seed_123: 7,
        seed_789: 789,
    });
    assert!(
        only_123.contains("[-0.0760,  0.0685]"),
        "#23 keeps seed 789"
    );
    assert!(!only_123.contains("tensor([0.4306, 1.4551])"));
    let only_789 = output(BookSeeds {
        seed_123: 123,
        seed_789: 7,
    });
    assert!(
        only_789.contains("tensor([0.4306, 1.4551])"),
        "#16 keeps seed 123"
    );
    assert!(!only_789.contains("[-0.0760,  0.0685]"));
}

/// Exercise: the keys' bias shifts each row of scores by one amount, which softmax ignores, so the layer
/// computes the same without it; the queries' bias changes the output, and the values' bias moves every
/// context vector by itself.
#[test]
fn exercise_a_key_bias_changes_nothing() {
    let x = inputs();
    for seed in [789, 123, 7] {
        let sa = SelfAttentionV2::new(&mut Generator::manual_seed(seed), 3, D_OUT, true);
        let no_key_bias = sa.without_key_bias();
        assert!(sa.w_key.bias.is_some() && no_key_bias.w_key.bias.is_none());
        // Each row of scores moves by one amount, q⁽ⁱ⁾·b, which is not zero.
        let shift = sa.scores(&x.view()) - no_key_bias.scores(&x.view()); // (T, T)
        for row in shift.rows() {
            assert!(row[0].abs() > 1e-3, "seed {seed}: {row}");
            assert!(row.iter().all(|&s| (s - row[0]).abs() <= 1e-5), "{row}");
        }
        let with = sa.forward(&x.view());
        let without = no_key_bias.forward(&x.view());
        for (a, b) in with.iter().zip(&without) {
            assert!((a - b).abs() <= 1e-6, "seed {seed}: {a} vs {b}");
        }
        // The queries' bias moves each score by another amount, and so changes the output.
        let mut no_query_bias = sa.clone();
        no_query_bias.w_query.bias = None;
        let changed = &with - &no_query_bias.forward(&x.view());
        assert!(changed.iter().any(|d| d.abs() > 1e-4), "{changed}");
        // The values' bias moves every context vector by itself: each row of weights sums to 1.
        let mut no_value_bias = sa.clone();
        no_value_bias.w_value.bias = None;
        let b_v = sa.w_value.bias.clone().unwrap();
        let moved = &with - &no_value_bias.forward(&x.view()); // (T, d_out)
        for row in moved.axis_iter(Axis(0)) {
            assert_close(row, &b_v.to_vec());
        }
    }
    let sa = SelfAttentionV2::new(&mut Generator::manual_seed(789), 3, D_OUT, true);
    let text = format!(
        "{}\n\n{}",
        print::tensor(&sa.forward(&x.view())),
        print::tensor(&sa.without_key_bias().forward(&x.view()))
    );
    insta::assert_snapshot!("exercise_key_bias", text);
}
