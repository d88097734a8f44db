//! Stage 6's outputs: the snapshot of everything `cargo run --example s6_flash` prints, the online
//! softmax ending at stage 1's weights, the tiled forward's differences from stage 4, and the exact
//! form's bits.

use attention_from_scratch::BookSeeds;
use attention_from_scratch::s1_simple;
use attention_from_scratch::s6_flash::{
    self, KEYS_PER_STEP, journey_scores, online_softmax, online_weights,
};

mod common;

use common::{Block, blocks};

fn run_stage(seeds: BookSeeds) -> String {
    common::printed(s6_flash::run, seeds)
}

/// The chapter's output blocks, each to be shown right after the code that computes it: the
/// snapshot's name and the cells it holds.
const BLOCKS: [Block; 2] = [
    ("online_softmax", &["scores", "step 1", "step 2", "step 3"]),
    ("online_weights", &["weights"]),
];

#[test]
fn full_output_snapshot() {
    insta::assert_snapshot!("output", run_stage(BookSeeds::default()));
}

#[test]
fn output_blocks_of_the_chapter() {
    for (name, text) in blocks(&run_stage(BookSeeds::default()), &BLOCKS) {
        insta::assert_snapshot!(name, text);
    }
}

/// Bit-equality holds for the chapter's scores, and this is why: the largest score, "journey"'s own
/// 1.4950, is in the first pair, so every later rescale is e⁰ = 1 (exact), every exponential is
/// e^(xⱼ − m) with the final m, and ℓ adds them left to right from 0, which is the order stage 1's
/// `sum` adds six values in (ndarray's unrolled fold sends fewer than eight values to its tail, one
/// after another).
#[test]
fn the_walk_ends_at_stage_1s_weights_bit_for_bit() {
    let scores = journey_scores();
    let steps = online_softmax(&scores.view(), KEYS_PER_STEP);
    let online = online_weights(&scores.view(), steps.last().unwrap());
    let stage_1 = s1_simple::softmax(&scores);
    let bits = |w: &ndarray::Array1<f32>| w.mapv(f32::to_bits);
    assert_eq!(bits(&online), bits(&stage_1));
}

#[test]
fn each_step_rescales_the_old_sum_to_the_new_maximum() {
    let scores = journey_scores();
    let steps = online_softmax(&scores.view(), KEYS_PER_STEP);
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].m_old, f32::NEG_INFINITY);
    assert_eq!(steps[0].rescale, 0.0, "e^(−∞) forgets the empty start");
    for pair in steps.windows(2) {
        assert_eq!(pair[1].m_old, pair[0].m_new);
        assert_eq!(pair[1].l_old, pair[0].l_new);
    }
    let last = steps.last().unwrap();
    assert_eq!(last.m_new, scores.fold(f32::NEG_INFINITY, |m, &x| m.max(x)));
    let sum: f32 = scores.mapv(|x| libm::expf(x - last.m_new)).sum();
    assert!((last.l_new - sum).abs() <= 2.0 * f32::EPSILON * sum);
}

/// Read one key at a time or all at once, the walk finds the same maximum, and a sum within a few
/// roundings of the direct one.
#[test]
fn any_step_size_finds_the_same_maximum() {
    let scores = journey_scores();
    let max = scores.fold(f32::NEG_INFINITY, |m, &x| m.max(x));
    for keys_per_step in 1..=scores.len() + 1 {
        let steps = online_softmax(&scores.view(), keys_per_step);
        assert_eq!(steps.len(), scores.len().div_ceil(keys_per_step));
        assert_eq!(steps.last().unwrap().m_new, max);
    }
}

#[test]
fn a_step_of_no_keys_is_refused() {
    let scores = journey_scores();
    let refused = std::panic::catch_unwind(|| online_softmax(&scores.view(), 0));
    assert!(refused.is_err());
}
