//! Stage 1: what `cargo run --example s1_simple` prints, locked as a snapshot and checked line by line
//! against the book, and the pieces behind it checked as numbers.

use attention_from_scratch::BookSeeds;
use attention_from_scratch::print;
use attention_from_scratch::print::python_float;
use attention_from_scratch::s1_simple::{
    self, attn_scores_for, attn_scores_loops, context_vector, context_vector_by_loops,
    cosine_attention_weights, dot_loop, inputs, normalize_by_sum, printed_row_sum,
    simple_attention, softmax, softmax_naive, softmaxes_of_scaled_scores, torch_row_sums,
    torch_sum,
};
use ndarray::{Array1, arr1};

mod common;

use common::{Block, assert_close, blocks, book_lines, structure};

fn output(seeds: BookSeeds) -> String {
    common::printed(s1_simple::run, seeds)
}

/// Every line the chapter 3 notebook prints in cells #2–#13 (`reference/book_ch03_outputs.md`), in order.
const BOOK: &str = "\
tensor([0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865])
tensor(0.9544)
tensor(0.9544)
Attention weights: tensor([0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656])
Sum: tensor(1.0000)
Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
Sum: tensor(1.)
Attention weights: tensor([0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581])
Sum: tensor(1.)
tensor([0.4419, 0.6515, 0.5683])
tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])
tensor([[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
        [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
        [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
        [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
        [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
        [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]])
tensor([[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
        [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
        [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
        [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
        [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
        [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]])
Row 2 sum: 1.0
All row sums: tensor([1.0000, 1.0000, 1.0000, 1.0000, 1.0000, 1.0000])
tensor([[0.4421, 0.5931, 0.5790],
        [0.4419, 0.6515, 0.5683],
        [0.4431, 0.6496, 0.5671],
        [0.4304, 0.6298, 0.5510],
        [0.4671, 0.5910, 0.5266],
        [0.4177, 0.6503, 0.5645]])
Previous 2nd context vector: tensor([0.4419, 0.6515, 0.5683])";

/// The chapter's output blocks, each shown right after the code that computes it: the snapshot's name
/// and the cells it holds.
const BLOCKS: [Block; 11] = [
    ("attn_scores_for", &["#2"]),
    ("dot_loop", &["#3"]),
    ("normalize_by_sum", &["#4"]),
    ("softmax_naive", &["#5"]),
    ("softmax", &["#6"]),
    ("context_vector", &["#7"]),
    ("attn_scores_loops", &["#8"]),
    ("simple_attention_scores", &["#9"]),
    ("simple_attention_weights", &["#10"]),
    ("row_sums", &["#11"]),
    ("simple_attention_context", &["#12", "#13"]),
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
    let output = output(BookSeeds::default());
    let expected: Vec<&str> = BOOK.lines().collect();
    assert_eq!(book_lines(&output), expected);
}

#[test]
fn labels_every_cell_under_its_section() {
    let output = output(BookSeeds::default());
    let expected = [
        "## 3.3.1 A simple self-attention mechanism without trainable weights",
        "[#2",
        "[#3",
        "[#4",
        "[#5",
        "[#6",
        "[#7",
        "## 3.3.2 Computing attention weights for all input tokens",
        "[#8",
        "[#9",
        "[#10",
        "[#11",
        "[#12",
        "[#13",
    ];
    assert_eq!(structure(&output), expected);
    assert!(output.starts_with("## 3.3.1 A simple self-attention mechanism without trainable weights\n\n[#2] attn_scores_2\ntensor("));
    assert!(
        output.ends_with("0.5683])\n\n"),
        "each cell ends with a blank line"
    );
}

#[test]
fn has_no_random_numbers_so_the_seed_changes_nothing() {
    assert_eq!(
        output(BookSeeds::new(Some(7))),
        output(BookSeeds::default())
    );
}

#[test]
fn the_scores_of_journey_are_the_books() {
    let x = inputs();
    let scores = attn_scores_for(&x.row(1), &x.view());
    assert_close(
        scores.view(),
        &[0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    );
    assert_eq!(dot_loop(&x.row(0), &x.row(1)), scores[0]);
}

#[test]
fn the_three_normalisations_are_the_books() {
    let x = inputs();
    let scores = attn_scores_for(&x.row(1), &x.view());
    let by_sum = normalize_by_sum(&scores.view());
    assert_close(
        by_sum.view(),
        &[0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656],
    );
    let book_softmax = [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581];
    assert_close(softmax_naive(&scores.view()).view(), &book_softmax);
    assert_close(softmax(&scores).view(), &book_softmax);
}

/// The book prints `Sum: tensor(1.0000)` for the division by the sum and `Sum: tensor(1.)` for the naive
/// softmax: only PyTorch's order of addition gives exactly 1.0 for the second.
#[test]
fn sums_follow_pytorchs_order_of_addition() {
    let x = inputs();
    let scores = attn_scores_for(&x.row(1), &x.view());
    let naive = softmax_naive(&scores.view());
    let left_to_right = naive.iter().fold(0.0f32, |sum, &w| sum + w);
    assert_ne!(
        left_to_right, 1.0,
        "left to right, the sum is off by an ulp"
    );
    assert_eq!(torch_sum(&naive.view()), 1.0);
    assert_eq!(torch_sum(&softmax(&scores).view()), 1.0);
    assert_ne!(torch_sum(&normalize_by_sum(&scores.view()).view()), 1.0);
}

#[test]
fn torch_sum_adds_four_lanes_then_the_rest() {
    // ((((x0 + x4) + x5) + x1) + x2) + x3: the big values cancel first and the ones survive.
    let x = arr1(&[1e8f32, 1.0, 1.0, 1.0, -1e8, 0.0]);
    assert_eq!(torch_sum(&x.view()), 3.0);
    assert_eq!(x.iter().fold(0.0f32, |sum, &v| sum + v), 0.0);
    assert_eq!(torch_sum(&arr1(&[2.0f32, 3.0]).view()), 5.0);
}

#[test]
#[should_panic(expected = "rows shorter than 8")]
fn torch_sum_refuses_rows_it_does_not_replay() {
    torch_sum(&Array1::<f32>::ones(8).view());
}

#[test]
fn the_context_vector_of_journey_is_the_books() {
    let x = inputs();
    let weights = softmax(&attn_scores_for(&x.row(1), &x.view()));
    let z_2 = context_vector(&weights.view(), &x.view());
    assert_close(z_2.view(), &[0.4419, 0.6515, 0.5683]);
}

#[test]
fn the_matrix_form_is_the_loops() {
    let x = inputs();
    let loops = attn_scores_loops(&x.view());
    let (scores, weights, contexts) = simple_attention(&x.view());
    for (a, b) in loops.iter().zip(&scores) {
        assert!((a - b).abs() <= 1e-6, "loops {a} vs matrix {b}");
    }
    for i in 0..x.nrows() {
        let row_weights = softmax(&attn_scores_for(&x.row(i), &x.view()));
        let z_i = context_vector(&row_weights.view(), &x.view());
        assert_close(contexts.row(i), &z_i.to_vec());
    }
    assert_close(
        weights.row(4),
        &[0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
    );
    assert_close(contexts.row(5), &[0.4177, 0.6503, 0.5645]);
}

#[test]
fn every_row_of_weights_sums_to_one() {
    let (_, weights, _) = simple_attention(&inputs().view());
    let sums = torch_row_sums(&weights.view());
    assert_close(sums.view(), &[1.0; 6]);
    assert!(
        sums.iter().any(|&s| s != 1.0),
        "some sum is off by an ulp, so torch prints 1.0000"
    );
    assert_eq!(python_float(printed_row_sum(&weights.row(1))), "1.0");
}

#[test]
fn softmax_survives_scores_that_overflow_the_naive_one() {
    let big = arr1(&[1000.0f32, 1000.0]);
    assert_eq!(softmax(&big), arr1(&[0.5, 0.5]));
    assert!(softmax_naive(&big.view()).iter().all(|w| w.is_nan()));
}

#[test]
fn one_embedding_per_word_of_the_sentence() {
    assert_eq!(s1_simple::sentence(), "Your journey starts with one step");
    assert_eq!(inputs().dim(), (s1_simple::TOKENS.len(), 3));
    assert_eq!(inputs().row(1), arr1(&[0.55f32, 0.87, 0.66]));
}

#[test]
fn python_floats_print_as_python_does() {
    assert_eq!(python_float(1.0), "1.0");
    assert_eq!(python_float(0.1 + 0.2), "0.30000000000000004");
}

/// The page's "another query" is the chapter's §3.3.1 with that token: for "journey" it prints the
/// chapter's own cells, and for another token the scores of that token's row of #9.
#[test]
fn run_query_is_section_3_3_1_for_any_token() {
    let printed = |query| {
        let mut out = Vec::new();
        s1_simple::run_query(&mut out, query).unwrap();
        String::from_utf8(out).unwrap()
    };
    let chapter = output(BookSeeds::default());
    let journey = printed(s1_simple::JOURNEY);
    assert!(chapter.starts_with(&journey));
    assert!(chapter[journey.len()..].starts_with("## 3.3.2"));
    let step = printed(5);
    let scores = attn_scores_for(&inputs().row(5), &inputs().view());
    let expected = attention_from_scratch::print::tensor(&scores);
    assert!(
        step.contains(&format!("[#2] attn_scores_6\n{expected}\n")),
        "{step}"
    );
    assert!(step.contains("[#7] context_vec_6\n"), "{step}");
    let err = s1_simple::run_query(&mut Vec::new(), 6)
        .unwrap_err()
        .to_string();
    assert!(err.contains("choose 0 to 5"), "{err}");
}

/// Exercise: the three loops of §3.3.1 give, for every query, that query's row of the matrix form.
#[test]
fn exercise_the_loops_give_every_row_of_the_matrix_form() {
    let x = inputs();
    let (_, _, contexts) = simple_attention(&x.view());
    for query in 0..x.nrows() {
        let z = context_vector_by_loops(&x.view(), query);
        for (a, b) in z.iter().zip(contexts.row(query)) {
            assert!(
                (a - b).abs() <= 1e-6,
                "query {query}: loops {a} vs matrix {b}"
            );
        }
    }
    let step = context_vector_by_loops(&x.view(), 5);
    assert_close(step.view(), &[0.4177, 0.6503, 0.5645]);
}

/// Exercise: scores ×100 overflow the naive softmax, not the stable one.
#[test]
fn exercise_scores_times_100_overflow_only_the_naive_softmax() {
    let x = inputs();
    let scores = attn_scores_for(&x.row(1), &x.view());
    let (naive, stable) = softmaxes_of_scaled_scores(&scores.view(), 100.0);
    assert!(naive.iter().any(|w| w.is_nan()), "{naive}");
    assert!(stable.iter().all(|w| w.is_finite()), "{stable}");
    assert!((stable.sum() - 1.0).abs() <= 1e-6, "{stable}");
    // At ×1 the weights are mild; at ×100 "journey" and "starts" take nearly everything.
    assert!(stable[1] + stable[2] > 0.999, "{stable}");
    let (naive_1, stable_1) = softmaxes_of_scaled_scores(&scores.view(), 1.0);
    assert_close(naive_1.view(), &stable_1.to_vec());
    let text = format!("{}\n{}", print::tensor(&naive), print::tensor(&stable));
    insta::assert_snapshot!("exercise_large_scores", text);
}

/// Exercise: with cosine similarities every token attends most to itself; with dot products three
/// of them ("starts", "with", "step") attend most to "journey".
#[test]
fn exercise_cosine_scores_make_every_token_attend_most_to_itself() {
    let x = inputs();
    let argmax = |row: ndarray::ArrayView1<f32>| {
        let max = row.fold(f32::NEG_INFINITY, |m, &w| m.max(w));
        row.iter().position(|&w| w == max).unwrap()
    };
    let cosine = cosine_attention_weights(&x.view());
    for (i, row) in cosine.rows().into_iter().enumerate() {
        assert_eq!(argmax(row), i, "row {i}: {row}");
        assert!((row.sum() - 1.0).abs() <= 1e-6);
    }
    let (_, dot, _) = simple_attention(&x.view());
    let favourites: Vec<usize> = dot.rows().into_iter().map(argmax).collect();
    assert_eq!(favourites, [0, 1, 1, 1, 2, 1]);
    // And the cosine's weights are flatter: a smaller largest weight, a larger smallest one.
    let range = |w: &ndarray::Array2<f32>| {
        let lo = w.fold(f32::INFINITY, |m, &v| m.min(v));
        let hi = w.fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        (lo, hi)
    };
    let (cos_lo, cos_hi) = range(&cosine);
    let (dot_lo, dot_hi) = range(&dot);
    assert!(dot_lo < cos_lo && cos_hi < dot_hi, "{cosine}");
    insta::assert_snapshot!("exercise_cosine", print::tensor(&cosine));
}
