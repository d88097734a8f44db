//! Stage 4's outputs: the snapshot of everything `cargo run --example s4_multihead` prints, the book's numbers
//! cell by cell, the exercises, and the wrapper and the split-heads layer computing the same thing.

use attention_from_scratch::rng::torch::Generator;
use attention_from_scratch::s3_causal::{CausalAttention, allclose, batch};
use attention_from_scratch::s4_multihead::{
    self, MultiHeadAttention, MultiHeadAttentionWrapper, gpt2_sized, two_dimensional_wrapper,
};
use attention_from_scratch::{BookSeeds, Error, print};
use ndarray::{Array3, Axis, s};

mod common;

use common::{Block, blocks, cell, cells};

fn run_stage(seeds: BookSeeds) -> String {
    common::printed(s4_multihead::run, seeds)
}

/// What the book's notebook prints in cells #34–#37 (the `grad_fn=<…>` suffixes left out).
const BOOK_CELLS: [(&str, &str); 4] = [
    (
        "#34",
        r"tensor([[[-0.4519,  0.2216,  0.4772,  0.1063],
         [-0.5874,  0.0058,  0.5891,  0.3257],
         [-0.6300, -0.0632,  0.6202,  0.3860],
         [-0.5675, -0.0843,  0.5478,  0.3589],
         [-0.5526, -0.0981,  0.5321,  0.3428],
         [-0.5299, -0.1081,  0.5077,  0.3493]],

        [[-0.4519,  0.2216,  0.4772,  0.1063],
         [-0.5874,  0.0058,  0.5891,  0.3257],
         [-0.6300, -0.0632,  0.6202,  0.3860],
         [-0.5675, -0.0843,  0.5478,  0.3589],
         [-0.5526, -0.0981,  0.5321,  0.3428],
         [-0.5299, -0.1081,  0.5077,  0.3493]]])
context_vecs.shape: torch.Size([2, 6, 4])",
    ),
    (
        "#35",
        r"tensor([[[0.3190, 0.4858],
         [0.2943, 0.3897],
         [0.2856, 0.3593],
         [0.2693, 0.3873],
         [0.2639, 0.3928],
         [0.2575, 0.4028]],

        [[0.3190, 0.4858],
         [0.2943, 0.3897],
         [0.2856, 0.3593],
         [0.2693, 0.3873],
         [0.2639, 0.3928],
         [0.2575, 0.4028]]])
context_vecs.shape: torch.Size([2, 6, 2])",
    ),
    (
        "#36",
        r"tensor([[[[1.3208, 1.1631, 1.2879],
          [1.1631, 2.2150, 1.8424],
          [1.2879, 1.8424, 2.0402]],

         [[0.4391, 0.7003, 0.5903],
          [0.7003, 1.3737, 1.0620],
          [0.5903, 1.0620, 0.9912]]]])",
    ),
    (
        "#37",
        r"First head:
 tensor([[1.3208, 1.1631, 1.2879],
        [1.1631, 2.2150, 1.8424],
        [1.2879, 1.8424, 2.0402]])

Second head:
 tensor([[0.4391, 0.7003, 0.5903],
        [0.7003, 1.3737, 1.0620],
        [0.5903, 1.0620, 0.9912]])",
    ),
];

/// The chapter's output blocks, each shown right after the code that computes it: the snapshot's name
/// and the cells it holds.
const BLOCKS: [Block; 6] = [
    ("wrapper", &["#34"]),
    ("multi_head_attention", &["#35"]),
    ("batched_matmul", &["#36"]),
    ("per_head_matmul", &["#37"]),
    ("exercise_3_2", &["exercise 3.2"]),
    ("exercise_3_3", &["exercise 3.3"]),
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

#[test]
fn every_cell_prints_exactly_what_the_book_prints_in_order() {
    let printed = cells(&run_stage(BookSeeds::default()));
    let numbered: Vec<&str> = printed
        .iter()
        .map(|(tag, _)| tag.as_str())
        .filter(|t| t.starts_with('#'))
        .collect();
    let book_tags: Vec<&str> = BOOK_CELLS.iter().map(|(tag, _)| *tag).collect();
    assert_eq!(numbered, book_tags, "the cells, in the book's order");
    for (tag, book) in BOOK_CELLS {
        assert_eq!(cell(&printed, tag), book, "cell {tag}");
    }
}

#[test]
fn exercise_3_2_gives_two_dimensional_context_vectors() {
    // Computed from the seed-123 weights, and checked against an independent float64 NumPy replay. The
    // exercise-solutions notebook shows an older output, from before its softmax-dimension fix.
    let printed = cells(&run_stage(BookSeeds::default()));
    let expected = "\
tensor([[[-0.5740,  0.2216],
         [-0.7320,  0.0155],
         [-0.7774, -0.0546],
         [-0.6979, -0.0817],
         [-0.6538, -0.0957],
         [-0.6424, -0.1065]],

        [[-0.5740,  0.2216],
         [-0.7320,  0.0155],
         [-0.7774, -0.0546],
         [-0.6979, -0.0817],
         [-0.6538, -0.0957],
         [-0.6424, -0.1065]]])
context_vecs.shape: torch.Size([2, 6, 2])";
    assert_eq!(cell(&printed, "exercise 3.2"), expected);

    // Each head is stage 3's layer with d_out = 1: head 0 is the one drawn first at seed 123.
    let batch = batch();
    let mut rng = Generator::manual_seed(123);
    let wrapper = two_dimensional_wrapper(&mut rng, 3, 6);
    let context_vecs = wrapper.forward(&batch.view(), &mut rng).unwrap();
    assert_eq!(context_vecs.dim(), (2, 6, 2));
    let mut rng = Generator::manual_seed(123);
    let head_0 = CausalAttention::new(&mut rng, 3, 1, 6, 0.0, false);
    let alone = head_0.forward(&batch.view(), &mut rng).unwrap(); // (B, T, 1)
    assert_eq!(context_vecs.slice(s![.., .., ..1]), alone);
}

#[test]
fn exercise_3_3_counts_gpt2_sized_parameters() {
    let mut rng = Generator::manual_seed(123);
    let mha = gpt2_sized(&mut rng).unwrap();
    assert_eq!(mha.head_dim(), 64);
    assert_eq!(mha.mask.context_length(), 1024);
    assert_eq!(mha.num_parameters(), 2_360_064);
    assert_eq!(mha.num_parameters(), 4 * 768 * 768 + 768);
    let printed = cells(&run_stage(BookSeeds::default()));
    assert_eq!(cell(&printed, "exercise 3.3"), "2360064");
    // The book's small layer: three (2, 3) projections and a (2, 2) out_proj with 2 biases.
    let small = MultiHeadAttention::new(&mut rng, 3, 2, 6, 0.0, 2, false).unwrap();
    assert_eq!(small.num_parameters(), 3 * 6 + 4 + 2);
    let with_bias = MultiHeadAttention::new(&mut rng, 3, 2, 6, 0.0, 2, true).unwrap();
    assert_eq!(with_bias.num_parameters(), 3 * 8 + 6);
}

#[test]
fn heads_that_do_not_divide_d_out_are_an_error_and_draw_nothing() {
    let mut rng = Generator::manual_seed(123);
    let err = MultiHeadAttention::new(&mut rng, 3, 3, 6, 0.0, 2, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::HeadsDontDivide {
                d_out: 3,
                num_heads: 2
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("divisible"), "{err}");
    assert!(matches!(
        MultiHeadAttention::new(&mut rng, 3, 4, 6, 0.0, 0, false),
        Err(Error::HeadsDontDivide { num_heads: 0, .. })
    ));
    assert!(MultiHeadAttention::new(&mut rng, 3, 0, 6, 0.0, 0, false).is_err());
    assert_eq!(rng.next_word(), Generator::manual_seed(123).next_word());
}

#[test]
fn inputs_longer_than_the_context_are_an_error() {
    let x = Generator::manual_seed(1).rand((1, 7, 3));
    let mut rng = Generator::manual_seed(123);
    let wrapper = MultiHeadAttentionWrapper::new(&mut rng, 3, 2, 6, 0.0, 2, false);
    let mha = MultiHeadAttention::new(&mut rng, 3, 2, 6, 0.0, 2, false).unwrap();
    for result in [
        wrapper.forward(&x.view(), &mut rng),
        mha.forward(&x.view(), &mut rng),
    ] {
        assert!(matches!(
            result,
            Err(Error::ContextTooLong {
                tokens: 7,
                context_length: 6
            })
        ));
    }
    assert!(mha.forward(&x.slice(s![.., ..6, ..]), &mut rng).is_ok());
}

#[test]
fn the_wrappers_first_head_is_stage_3s_causal_attention() {
    let batch = batch();
    let mut rng = Generator::manual_seed(123);
    let wrapper = MultiHeadAttentionWrapper::new(&mut rng, 3, 2, 6, 0.0, 2, false);
    let both = wrapper.forward(&batch.view(), &mut rng).unwrap(); // (B, T, 4)
    let mut rng = Generator::manual_seed(123);
    let ca = CausalAttention::new(&mut rng, 3, 2, 6, 0.0, false);
    let one = ca.forward(&batch.view(), &mut rng).unwrap(); // (B, T, 2)
    assert_eq!(both.slice(s![.., .., ..2]), one);
    assert_ne!(both.slice(s![.., .., 2..]), one);
}

#[test]
fn split_heads_equals_the_wrapper_with_the_same_weights() {
    // (d_in, head size, heads, batch, tokens, seed, qkv_bias)
    let cases = [
        (3, 1, 2, 2, 6, 123, false),
        (3, 2, 2, 2, 6, 123, false),
        (4, 3, 4, 3, 7, 1, false),
        (8, 4, 2, 1, 9, 42, true),
        (5, 2, 3, 2, 1, 7, false),
        (16, 8, 6, 2, 12, 2024, true),
    ];
    for (d_in, head_dim, num_heads, b, t, seed, qkv_bias) in cases {
        let mut rng = Generator::manual_seed(seed);
        let wrapper = MultiHeadAttentionWrapper::new(
            &mut rng,
            d_in,
            head_dim,
            t + 2,
            0.0,
            num_heads,
            qkv_bias,
        );
        let mha = MultiHeadAttention::from_wrapper(&wrapper);
        let x = rng.rand((b, t, d_in)) * 2.0 - 1.0; // (B, T, C)
        let expected = wrapper.forward(&x.view(), &mut rng).unwrap(); // (B, T, H·D)
        let actual = mha.forward(&x.view(), &mut rng).unwrap(); // (B, T, H·D)
        assert_eq!(actual.dim(), (b, t, head_dim * num_heads));
        let worst = (&actual - &expected).fold(0f32, |m, d| m.max(d.abs()));
        assert!(
            worst <= 2e-6,
            "d_in {d_in}, D {head_dim}, H {num_heads}, seed {seed}: differ by {worst}"
        );
    }
}

#[test]
fn split_heads_is_not_the_wrapper_when_the_heads_are_mixed_up() {
    // The equivalence depends on head h owning rows h·D..(h+1)·D: swapping two heads' query rows breaks it.
    let mut rng = Generator::manual_seed(3);
    let wrapper = MultiHeadAttentionWrapper::new(&mut rng, 4, 2, 6, 0.0, 2, false);
    let mut mha = MultiHeadAttention::from_wrapper(&wrapper);
    let swapped = ndarray::concatenate(
        Axis(0),
        &[
            mha.w_query.weight.slice(s![2.., ..]),
            mha.w_query.weight.slice(s![..2, ..]),
        ],
    )
    .unwrap();
    mha.w_query.weight = swapped;
    let x = rng.rand((1, 6, 4));
    let expected = wrapper.forward(&x.view(), &mut rng).unwrap();
    let actual = mha.forward(&x.view(), &mut rng).unwrap();
    assert!(!allclose(&actual, &expected));
}

#[test]
fn dropout_draws_one_mask_per_head_in_the_wrapper_and_one_in_total_in_the_split_layer() {
    let x = Generator::manual_seed(9).rand((2, 5, 3));
    let words_drawn = |forward: &dyn Fn(&mut Generator) -> Array3<f32>| {
        let mut rng = Generator::manual_seed(77);
        forward(&mut rng);
        let next = rng.next_word();
        let mut fresh = Generator::manual_seed(77);
        (0..10_000).position(|_| fresh.next_word() == next).unwrap()
    };
    let mut init = Generator::manual_seed(5);
    let wrapper = MultiHeadAttentionWrapper::new(&mut init, 3, 2, 5, 0.1, 3, false);
    let mha = MultiHeadAttention::new(&mut init, 3, 6, 5, 0.1, 3, false).unwrap();
    // Two words per weight (a 53-bit double), over (B, T, T) per head or (B, H, T, T) at once.
    let per_mask = 2 * 2 * 5 * 5;
    assert_eq!(
        words_drawn(&|rng| wrapper.forward(&x.view(), rng).unwrap()),
        3 * per_mask
    );
    assert_eq!(
        words_drawn(&|rng| mha.forward(&x.view(), rng).unwrap()),
        3 * per_mask
    );
}

#[test]
fn the_seed_flag_recomputes_every_seeded_cell() {
    let book = cells(&run_stage(BookSeeds::default()));
    let other = cells(&run_stage(BookSeeds::new(Some(7))));
    for tag in ["#34", "#35", "exercise 3.2"] {
        assert_ne!(
            cell(&book, tag),
            cell(&other, tag),
            "{tag} depends on the seed"
        );
    }
    for tag in ["#36", "#37", "exercise 3.3"] {
        assert_eq!(cell(&book, tag), cell(&other, tag), "{tag} does not");
    }
}

/// Exercise: the split-heads layer built from the book's wrapper (seed 123) gives the wrapper's
/// output, cell #34, on the book's batch.
#[test]
fn exercise_the_split_layer_with_the_wrappers_weights_gives_the_wrappers_output() {
    let batch = batch();
    let mut rng = Generator::manual_seed(123);
    let wrapper = MultiHeadAttentionWrapper::new(&mut rng, 3, 2, 6, 0.0, 2, false);
    let mha = MultiHeadAttention::from_wrapper(&wrapper);
    assert_eq!((mha.num_heads, mha.head_dim()), (2, 2));
    assert_eq!(mha.w_query.weight.dim(), (4, 3));
    let expected = wrapper.forward(&batch.view(), &mut rng).unwrap(); // (B, T, 4)
    let actual = mha.forward(&batch.view(), &mut rng).unwrap(); // (B, T, 4)
    let worst = (&actual - &expected).fold(0f32, |m, d| m.max(d.abs()));
    assert!(worst <= 2e-6, "differ by {worst}");
    let printed = cells(&run_stage(BookSeeds::default()));
    let cell_34 = cell(&printed, "#34");
    assert!(cell_34.starts_with(&print::tensor(&actual)), "{cell_34}");
    insta::assert_snapshot!("exercise_from_wrapper", print::tensor(&actual));
}

#[test]
fn a_straight_reshape_puts_both_heads_of_three_tokens_into_head_0() {
    let printed = s4_multihead::head_0_both_ways(BookSeeds::default()).unwrap();
    let (split, reshaped) = printed.split_once("head 0 after reshape").unwrap();
    assert_eq!(split.matches("(head 0)").count(), 6);
    assert_eq!(split.matches("(head 1)").count(), 0);
    assert_eq!(reshaped.matches("(head 0)").count(), 3);
    assert_eq!(reshaped.matches("(head 1)").count(), 3);
    insta::assert_snapshot!("head_0_both_ways", printed);
}
