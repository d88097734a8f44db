//! Stage 3's outputs: the snapshot of everything `cargo run --example s3_causal` prints, the book's numbers
//! cell by cell, the dropout masks, and the behaviour of `CausalAttention`.

use attention_from_scratch::rng::torch::Generator;
use attention_from_scratch::s2_trainable::{D_OUT, SelfAttentionV2};
use attention_from_scratch::s3_causal::{
    self, CausalAttention, CausalMask, allclose, mask_future, matmul, mean_of_dropouts,
    on_first_tokens, renormalise, tril_ones, weights_with_fill,
};
use attention_from_scratch::{BookSeeds, Error, print};
use ndarray::{Array2, Array3, Axis, s};

mod common;

use common::{Block, blocks, cell, cells};

fn run_stage(seeds: BookSeeds) -> String {
    common::printed(s3_causal::run, seeds)
}

/// What the book's notebook prints in cells #24–#33 (the `grad_fn=<…>` suffixes left out).
const BOOK_CELLS: [(&str, &str); 10] = [
    (
        "#24",
        r"tensor([[0.1921, 0.1646, 0.1652, 0.1550, 0.1721, 0.1510],
        [0.2041, 0.1659, 0.1662, 0.1496, 0.1665, 0.1477],
        [0.2036, 0.1659, 0.1662, 0.1498, 0.1664, 0.1480],
        [0.1869, 0.1667, 0.1668, 0.1571, 0.1661, 0.1564],
        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.1585],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])",
    ),
    (
        "#25",
        r"tensor([[1., 0., 0., 0., 0., 0.],
        [1., 1., 0., 0., 0., 0.],
        [1., 1., 1., 0., 0., 0.],
        [1., 1., 1., 1., 0., 0.],
        [1., 1., 1., 1., 1., 0.],
        [1., 1., 1., 1., 1., 1.]])",
    ),
    (
        "#26",
        r"tensor([[0.1921, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.2041, 0.1659, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.2036, 0.1659, 0.1662, 0.0000, 0.0000, 0.0000],
        [0.1869, 0.1667, 0.1668, 0.1571, 0.0000, 0.0000],
        [0.1830, 0.1669, 0.1670, 0.1588, 0.1658, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])",
    ),
    (
        "#27",
        r"tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])",
    ),
    (
        "#28",
        r"tensor([[0.2899,   -inf,   -inf,   -inf,   -inf,   -inf],
        [0.4656, 0.1723,   -inf,   -inf,   -inf,   -inf],
        [0.4594, 0.1703, 0.1731,   -inf,   -inf,   -inf],
        [0.2642, 0.1024, 0.1036, 0.0186,   -inf,   -inf],
        [0.2183, 0.0874, 0.0882, 0.0177, 0.0786,   -inf],
        [0.3408, 0.1270, 0.1290, 0.0198, 0.1290, 0.0078]])",
    ),
    (
        "#29",
        r"tensor([[1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.3800, 0.3097, 0.3103, 0.0000, 0.0000, 0.0000],
        [0.2758, 0.2460, 0.2462, 0.2319, 0.0000, 0.0000],
        [0.2175, 0.1983, 0.1984, 0.1888, 0.1971, 0.0000],
        [0.1935, 0.1663, 0.1666, 0.1542, 0.1666, 0.1529]])",
    ),
    (
        "#30",
        r"tensor([[2., 2., 0., 2., 2., 0.],
        [0., 0., 0., 2., 0., 2.],
        [2., 2., 2., 2., 0., 2.],
        [0., 2., 2., 0., 0., 2.],
        [0., 2., 0., 2., 0., 2.],
        [0., 2., 2., 2., 2., 0.]])",
    ),
    (
        "#31",
        r"tensor([[2.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.7599, 0.6194, 0.6206, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.4921, 0.4925, 0.0000, 0.0000, 0.0000],
        [0.0000, 0.3966, 0.0000, 0.3775, 0.0000, 0.0000],
        [0.0000, 0.3327, 0.3331, 0.3084, 0.3331, 0.0000]])",
    ),
    ("#32", r"torch.Size([2, 6, 3])"),
    (
        "#33",
        r"tensor([[[-0.4519,  0.2216],
         [-0.5874,  0.0058],
         [-0.6300, -0.0632],
         [-0.5675, -0.0843],
         [-0.5526, -0.0981],
         [-0.5299, -0.1081]],

        [[-0.4519,  0.2216],
         [-0.5874,  0.0058],
         [-0.6300, -0.0632],
         [-0.5675, -0.0843],
         [-0.5526, -0.0981],
         [-0.5299, -0.1081]]])
context_vecs.shape: torch.Size([2, 6, 2])",
    ),
];

/// The chapter's output blocks, each shown right after the code that computes it: the snapshot's name
/// and the cells it holds.
const BLOCKS: [Block; 12] = [
    ("unmasked_weights", &["#24"]),
    ("tril_ones", &["#25"]),
    ("masked_simple", &["#26"]),
    ("renormalise", &["#27"]),
    ("mask_future", &["#28"]),
    ("masked_weights", &["#29"]),
    ("allclose", &["check"]),
    ("dropout_ones", &["#30"]),
    ("dropout_weights", &["#31"]),
    ("batch", &["#32"]),
    ("causal_attention", &["#33"]),
    ("dropout_at_inference", &["dropout at inference"]),
];

#[test]
fn full_output_snapshot() {
    let output = run_stage(BookSeeds::default());
    insta::assert_snapshot!("output", output);
}

#[test]
fn output_blocks_of_the_chapter() {
    for (name, text) in blocks(&run_stage(BookSeeds::default()), &BLOCKS) {
        insta::assert_snapshot!(name, text);
    }
}

/// After `eval()` the layer with dropout 0.5 gives what the layer without dropout gives (cell #33), and
/// draws nothing; `train()` turns dropout back on.
#[test]
fn eval_switches_dropout_off() {
    let x = s3_causal::batch();
    let mut rng = Generator::manual_seed(123);
    let mut ca = CausalAttention::new(&mut rng, 3, 2, 6, 0.5, false);
    let without_dropout = CausalAttention {
        dropout: 0.0,
        ..ca.clone()
    };
    let mut unused = Generator::manual_seed(0);
    let expected = without_dropout.forward(&x.view(), &mut unused).unwrap();
    assert!(ca.training, "a new layer trains");
    ca.eval();
    let mut untouched = rng.clone();
    assert_eq!(ca.forward(&x.view(), &mut rng).unwrap(), expected);
    assert_eq!(rng.next_word(), untouched.next_word(), "nothing drawn");
    ca.train();
    assert_ne!(ca.forward(&x.view(), &mut rng).unwrap(), expected);

    let printed = cell(
        &cells(&run_stage(BookSeeds::default())),
        "dropout at inference",
    );
    let after_eval = printed.split("After ca.eval():\n ").nth(1).unwrap();
    // The first item of the book's cell #33.
    let book_33_first_item = "tensor([[-0.4519,  0.2216],
        [-0.5874,  0.0058],
        [-0.6300, -0.0632],
        [-0.5675, -0.0843],
        [-0.5526, -0.0981],
        [-0.5299, -0.1081]])";
    assert_eq!(after_eval, book_33_first_item);
}

#[test]
fn every_cell_prints_exactly_what_the_book_prints_in_order() {
    let printed = cells(&run_stage(BookSeeds::default()));
    let tags: Vec<&str> = printed.iter().map(|(tag, _)| tag.as_str()).collect();
    let book_tags: Vec<&str> = BOOK_CELLS.iter().map(|(tag, _)| *tag).collect();
    let numbered: Vec<&str> = tags.into_iter().filter(|t| t.starts_with('#')).collect();
    assert_eq!(numbered, book_tags, "the cells, in the book's order");
    for (tag, book) in BOOK_CELLS {
        let (_, lines) = printed.iter().find(|(t, _)| t == tag).unwrap();
        assert_eq!(lines, book, "cell {tag}");
    }
}

#[test]
fn the_output_says_both_masking_methods_agree() {
    let printed = cells(&run_stage(BookSeeds::default()));
    let (_, check) = printed.iter().find(|(t, _)| t == "check").unwrap();
    assert_eq!(check, "True");
}

#[test]
fn the_output_warns_about_the_mkl_dropout_path() {
    let out = run_stage(BookSeeds::default());
    let note = out.lines().find(|l| l.starts_with("Note:")).unwrap();
    assert!(
        note.contains("PyTorch 2.4") && note.contains("MKL"),
        "{note}"
    );
}

#[test]
fn dropout_masks_at_seed_123_are_the_books() {
    let ones = Array2::<f32>::ones((6, 6));
    let dropped = Generator::manual_seed(123).dropout(&ones, 0.5);
    let rows: Vec<String> = dropped
        .rows()
        .into_iter()
        .map(|row| {
            row.iter()
                .map(|&v| if v == 2.0 { '1' } else { '0' })
                .collect()
        })
        .collect();
    assert_eq!(
        rows,
        ["110110", "000101", "111101", "011001", "010101", "011110"]
    );
    assert!(dropped.iter().all(|&v| v == 0.0 || v == 2.0));
}

#[test]
fn both_masking_methods_give_the_same_weights_for_any_scores() {
    for seed in [1, 789, 2024] {
        let scores = Generator::manual_seed(seed).rand((5, 5)) * 4.0 - 2.0; // (T, T)
        let weights = attention_from_scratch::s1_simple::softmax(&scores);
        let method_1 = renormalise(&(&weights * &tril_ones(5)));
        let mask = CausalMask::new(5);
        let method_2 = attention_from_scratch::s1_simple::softmax(&mask_future(
            scores,
            &mask.for_tokens(5).unwrap(),
        ));
        assert!(allclose(&method_1, &method_2), "seed {seed}");
        for ((i, j), &w) in method_2.indexed_iter() {
            assert_eq!(w == 0.0, j > i, "only the future is zero, at ({i}, {j})");
        }
    }
}

#[test]
fn the_mask_is_the_strict_upper_triangle() {
    let mask = CausalMask::new(4);
    assert_eq!(mask.context_length(), 4);
    let corner = mask.for_tokens(3).unwrap();
    let expected = ndarray::arr2(&[
        [false, true, true],
        [false, false, true],
        [false, false, false],
    ]);
    assert_eq!(corner, expected);
}

fn random_batch(seed: u64, b: usize, t: usize, c: usize) -> Array3<f32> {
    Generator::manual_seed(seed).rand((b, t, c))
}

#[test]
fn an_input_longer_than_the_context_is_an_error() {
    let mut rng = Generator::manual_seed(123);
    let ca = CausalAttention::new(&mut rng, 3, 2, 4, 0.0, false);
    let x = random_batch(1, 2, 6, 3);
    let err = ca.forward(&x.view(), &mut rng).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ContextTooLong {
                tokens: 6,
                context_length: 4
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains('6') && message.contains('4'), "{message}");
    assert!(CausalMask::new(4).for_tokens(5).is_err());
    assert!(ca.forward(&x.slice(s![.., ..4, ..]), &mut rng).is_ok());
}

#[test]
fn earlier_tokens_never_see_later_ones() {
    // Causality: the first t outputs depend only on the first t inputs, whatever follows them.
    let mut rng = Generator::manual_seed(5);
    let ca = CausalAttention::new(&mut rng, 4, 3, 8, 0.0, true);
    let x = random_batch(6, 3, 8, 4);
    let full = ca.forward(&x.view(), &mut rng).unwrap(); // (B, T, d_out)
    let mut changed = x.clone();
    changed.slice_mut(s![.., 5.., ..]).fill(9.0);
    let with_other_future = ca.forward(&changed.view(), &mut rng).unwrap();
    assert_eq!(
        full.slice(s![.., ..5, ..]),
        with_other_future.slice(s![.., ..5, ..])
    );
    assert_ne!(full, with_other_future);
    let short = ca.forward(&x.slice(s![.., ..5, ..]), &mut rng).unwrap();
    assert!(allclose(&short, &full.slice(s![.., ..5, ..]).to_owned()));
}

#[test]
fn each_batch_item_is_attended_to_on_its_own() {
    let mut rng = Generator::manual_seed(11);
    let ca = CausalAttention::new(&mut rng, 3, 2, 6, 0.0, false);
    let x = random_batch(12, 3, 6, 3);
    let batched = ca.forward(&x.view(), &mut rng).unwrap();
    for (i, item) in x.outer_iter().enumerate() {
        let alone = ca.forward(&item.insert_axis(Axis(0)), &mut rng).unwrap();
        assert!(allclose(
            &alone.index_axis(Axis(0), 0).to_owned(),
            &batched.index_axis(Axis(0), i).to_owned()
        ));
    }
}

#[test]
fn forward_without_dropout_draws_nothing_and_with_dropout_draws_one_mask() {
    let x = random_batch(3, 2, 6, 3);
    let mut rng = Generator::manual_seed(123);
    let ca = CausalAttention::new(&mut rng, 3, 2, 6, 0.0, false);
    let mut untouched = rng.clone();
    ca.forward(&x.view(), &mut rng).unwrap();
    assert_eq!(rng.next_word(), untouched.next_word());

    // With p = 0.5 the mask covers the (B, T, T) weights, drawn after every weight.
    let mut rng = Generator::manual_seed(123);
    let mut ca = CausalAttention::new(&mut rng, 3, 2, 6, 0.5, false);
    let mut replay = rng.clone();
    let dropped = ca.forward(&x.view(), &mut rng).unwrap();
    ca.dropout = 0.0;
    let mut unused = Generator::manual_seed(0);
    let plain = ca.forward(&x.view(), &mut unused).unwrap();
    assert_ne!(dropped, plain);
    let keep = replay.dropout(&ndarray::Array3::<f32>::ones((2, 6, 6)), 0.5); // (B, T, T)
    assert_eq!(rng.next_word(), replay.next_word(), "one (B, T, T) mask");
    // Recompute the output by hand from the replayed mask.
    let values = s3_causal::project(&ca.qkv.w_value, &x.view()); // (B, T, d_out)
    let mut weights = Array3::<f32>::zeros((2, 6, 6));
    for (b, item) in x.outer_iter().enumerate() {
        let scores = ca.qkv.scores(&item);
        let masked = mask_future(scores, &ca.mask.for_tokens(6).unwrap());
        let w = attention_from_scratch::s1_simple::softmax(&(masked / 2f32.sqrt()));
        weights.index_axis_mut(Axis(0), b).assign(&w);
    }
    let expected = matmul(&(weights * keep).view(), &values.view());
    assert!(allclose(&dropped, &expected));
}

#[test]
fn matmul_multiplies_each_batch_item() {
    let a = Generator::manual_seed(1).rand((2, 3, 4));
    let b = Generator::manual_seed(2).rand((2, 4, 5));
    let c = matmul(&a.view(), &b.view()); // (2, 3, 5)
    assert_eq!(c.dim(), (2, 3, 5));
    for i in 0..2 {
        let expected = a.index_axis(Axis(0), i).dot(&b.index_axis(Axis(0), i));
        assert!(allclose(&c.index_axis(Axis(0), i).to_owned(), &expected));
    }
}

#[test]
fn project_applies_the_linear_layer_to_every_token() {
    let mut rng = Generator::manual_seed(4);
    let linear = attention_from_scratch::s2_trainable::Linear::new(&mut rng, 3, 5, true);
    let x = random_batch(8, 2, 4, 3);
    let y = s3_causal::project(&linear, &x.view()); // (B, T, 5)
    let transposed = x.view().permuted_axes([1, 0, 2]); // (T, B, C): not row-major
    let y_t = s3_causal::project(&linear, &transposed);
    for i in 0..2 {
        assert_eq!(
            y.index_axis(Axis(0), i),
            linear.forward(&x.index_axis(Axis(0), i))
        );
        assert_eq!(y.index_axis(Axis(0), i), y_t.index_axis(Axis(1), i));
    }
}

#[test]
fn the_seed_flag_recomputes_every_seeded_cell() {
    let book = cells(&run_stage(BookSeeds::default()));
    let other = cells(&run_stage(BookSeeds::new(Some(7))));
    let differs = |tag: &str| {
        let find =
            |cells: &[(String, String)]| cells.iter().find(|(t, _)| t == tag).unwrap().1.clone();
        find(&book) != find(&other)
    };
    for tag in ["#24", "#26", "#27", "#28", "#29", "#30", "#31", "#33"] {
        assert!(differs(tag), "{tag} depends on the seed");
    }
    for tag in ["#25", "#32", "check"] {
        assert!(!differs(tag), "{tag} does not");
    }
}

/// The book's scores at seed 789 (before the mask) and √d_k's d_k, as §3.5.1 computes them.
fn book_scores() -> (Array2<f32>, f32) {
    let inputs = attention_from_scratch::s1_simple::inputs(); // (T, C)
    let mut rng = Generator::manual_seed(789);
    let sa_v2 = SelfAttentionV2::new(&mut rng, inputs.ncols(), D_OUT, false);
    (sa_v2.scores(&inputs.view()), D_OUT as f32)
}

/// The book's causal weights (cell #29).
fn book_causal_weights() -> Array2<f32> {
    let (scores, d_k) = book_scores();
    weights_with_fill(&scores, d_k, f32::NEG_INFINITY)
}

/// Exercise: −1e9 masks as −∞ does, bit for bit; 0 gives every future token the weight e⁰/Σ, and
/// shrinks the past weights by the same factor, which the first method's renormalisation would undo.
#[test]
fn exercise_a_fill_of_zero_leaks_weight_to_the_future() {
    let (scores, d_k) = book_scores();
    let causal = book_causal_weights();
    let printed = cell(&cells(&run_stage(BookSeeds::default())), "#29");
    assert_eq!(print::tensor(&causal), printed, "−∞ gives cell #29");
    assert_eq!(weights_with_fill(&scores, d_k, -1e9), causal);

    let zero = weights_with_fill(&scores, d_k, 0.0); // (T, T)
    assert!(!allclose(&zero, &causal));
    for (i, row) in zero.rows().into_iter().enumerate() {
        // Σ over the row of exp(score − max), with the future's scores 0.
        let scaled: Vec<f32> = (0..6)
            .map(|j| {
                if j > i {
                    0.0
                } else {
                    scores[(i, j)] / d_k.sqrt()
                }
            })
            .collect();
        let max = scaled.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let sum: f32 = scaled.iter().map(|v| (v - max).exp()).sum();
        for j in i + 1..6 {
            let expected = (0.0 - max).exp() / sum;
            assert!((row[j] - expected).abs() <= 1e-6, "({i}, {j}): {}", row[j]);
            assert!(row[j] > 0.1, "the future gets weight at ({i}, {j})");
        }
    }
    assert!(allclose(&renormalise(&(&zero * &tril_ones(6))), &causal));
    insta::assert_snapshot!("exercise_fill_zero", print::tensor(&zero));
}

/// Exercise: dropout keeps the expected value of every weight. The mean of n masks approaches the
/// weights, within a few standard errors (a weight w with p = 0.5 has standard deviation w per mask).
#[test]
fn exercise_the_mean_of_many_dropout_masks_approaches_the_weights() {
    let weights = book_causal_weights();
    let largest_error = |n: usize| {
        let mean = mean_of_dropouts(&mut Generator::manual_seed(123), &weights, 0.5, n);
        (mean - &weights).fold(0f32, |m, d| m.max(d.abs()))
    };
    let one = mean_of_dropouts(&mut Generator::manual_seed(123), &weights, 0.5, 1);
    let printed = cell(&cells(&run_stage(BookSeeds::default())), "#31");
    assert_eq!(print::tensor(&one), printed, "one mask is cell #31");

    let n = 10_000;
    let mean = mean_of_dropouts(&mut Generator::manual_seed(123), &weights, 0.5, n);
    for ((i, j), &m) in mean.indexed_iter() {
        let w = weights[(i, j)];
        let bound = 4.0 * w / (n as f32).sqrt();
        assert!((m - w).abs() <= bound, "({i}, {j}): mean {m}, weight {w}");
    }
    let errors: Vec<f32> = [10, 100, 1_000, 10_000].map(largest_error).to_vec();
    assert!(errors[3] < errors[1] && errors[1] < errors[0], "{errors:?}");
    let mut text = String::new();
    for (n, error) in [10, 100, 1_000, 10_000].iter().zip(&errors) {
        text.push_str(&format!(
            "{n:>6} masks: largest |mean - weight| = {error:.4}\n"
        ));
    }
    text.push_str(&format!("\nmean of 10000 masks:\n{}", print::tensor(&mean)));
    insta::assert_snapshot!("exercise_dropout_mean", text);
}

/// Exercise: a mask built for more tokens than the input has, and an input shorter than the batch,
/// change no row: the first three rows are those of cell #33.
#[test]
fn exercise_a_longer_mask_and_fewer_tokens_give_the_same_rows() {
    let full = on_first_tokens(123, 6, 6).unwrap(); // (B, 6, d_out)
    let first_3 = on_first_tokens(123, 1024, 3).unwrap(); // (B, 3, d_out)
    assert_eq!(first_3.dim(), (2, 3, 2));
    assert!(allclose(&first_3, &full.slice(s![.., ..3, ..]).to_owned()));
    assert_eq!(on_first_tokens(123, 1024, 6).unwrap(), full);
    let cell_33 = cell(&cells(&run_stage(BookSeeds::default())), "#33");
    assert!(
        cell_33.starts_with(&print::tensor(&full)),
        "the layer is cell #33's"
    );
    assert!(matches!(
        on_first_tokens(123, 2, 3),
        Err(Error::ContextTooLong {
            tokens: 3,
            context_length: 2
        })
    ));
    insta::assert_snapshot!("exercise_first_tokens", print::tensor(&first_3));
}
