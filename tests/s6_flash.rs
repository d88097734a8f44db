//! Stage 6's outputs: the snapshot of everything `cargo run --example s6_flash` prints, the online
//! softmax ending at stage 1's weights, the tiled forward's differences from stage 4, and the exact
//! form's bits.

use attention_from_scratch::BookSeeds;
use attention_from_scratch::rng::torch::Generator;
use attention_from_scratch::s1_simple;
use attention_from_scratch::s3_causal::batch;
use attention_from_scratch::s4_multihead::{MultiHeadAttention, gpt2_sized};
use attention_from_scratch::s6_flash::{
    self, Difference, KEYS_PER_STEP, Tiles, UnrolledSum, exact_attention, journey_scores,
    multi_head_forward, naive_attention, online_softmax, online_weights, random_head, score_tile,
    tiled_attention,
};
use ndarray::Array3;

mod common;

use common::{Block, blocks};

fn run_stage(seeds: BookSeeds) -> String {
    common::printed(s6_flash::run, seeds)
}

/// The chapter's output blocks, each to be shown right after the code that computes it: the
/// snapshot's name and the cells it holds.
const BLOCKS: [Block; 4] = [
    ("online_softmax", &["scores", "step 1", "step 2", "step 3"]),
    ("online_weights", &["weights"]),
    ("tiled_attention", &["tiles", "tiled"]),
    ("where_the_bits_part", &["length"]),
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

/// Stage 4's layer of §3.6.2 on the chapter's batch, drawn from `seed`, and its output.
fn chapter_layer(seed: u64) -> (MultiHeadAttention, Array3<f32>, Array3<f32>) {
    let batch = batch(); // (B, T, C)
    let (_, t, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seed);
    let mha = MultiHeadAttention::new(&mut rng, d_in, 2, t, 0.0, 2, false).unwrap();
    let stage_4 = mha.forward(&batch.view(), &mut rng).unwrap(); // (B, T, d_out)
    (mha, batch, stage_4)
}

/// A GPT-2-sized layer (12 heads of 64) on `t` random tokens, and its output.
fn gpt2_layer(seed: u64, t: usize) -> (MultiHeadAttention, Array3<f32>, Array3<f32>) {
    let mut rng = Generator::manual_seed(seed);
    let mha = gpt2_sized(&mut rng).unwrap();
    let x = rng.uniform((1, t, 768), -1.0, 1.0); // (B, T, C)
    let stage_4 = mha.forward(&x.view(), &mut rng).unwrap(); // (B, T, d_out)
    (mha, x, stage_4)
}

fn bits<D: ndarray::Dimension>(a: &ndarray::Array<f32, D>) -> ndarray::Array<u32, D> {
    a.mapv(f32::to_bits)
}

#[test]
fn the_naive_head_is_stage_4s_attention_bit_for_bit() {
    for seed in [123, 1, 2] {
        let (mha, x, stage_4) = chapter_layer(seed);
        let naive = multi_head_forward(&mha, &x.view(), naive_attention).unwrap();
        assert_eq!(bits(&naive), bits(&stage_4), "seed {seed}");
    }
    let (mha, x, stage_4) = gpt2_layer(5, 300);
    let naive = multi_head_forward(&mha, &x.view(), naive_attention).unwrap();
    assert_eq!(bits(&naive), bits(&stage_4));
}

/// Tile sizes that divide T, that do not, of one row, and larger than T.
const ODD_TILES: [(usize, usize); 6] = [(2, 2), (4, 4), (1, 1), (3, 5), (7, 2), (64, 64)];

#[test]
fn the_exact_form_is_stage_4s_layer_bit_for_bit() {
    for seed in [123, 7, 8] {
        let (mha, x, stage_4) = chapter_layer(seed);
        for (br, bc) in ODD_TILES {
            let exact = multi_head_forward(&mha, &x.view(), |q, k, v| {
                exact_attention(q, k, v, Tiles::new(br, bc))
            })
            .unwrap();
            assert_eq!(
                bits(&exact),
                bits(&stage_4),
                "seed {seed}, tiles {br} × {bc}"
            );
        }
    }
    for (seed, t, br, bc) in [
        (1, 1, 64, 64),
        (2, 7, 3, 5),
        (3, 300, 64, 100),
        (4, 513, 37, 200),
    ] {
        let (mha, x, stage_4) = gpt2_layer(seed, t);
        let tiles = Tiles::new(br, bc);
        let exact =
            multi_head_forward(&mha, &x.view(), |q, k, v| exact_attention(q, k, v, tiles)).unwrap();
        assert_eq!(bits(&exact), bits(&stage_4), "T = {t}, tiles {br} × {bc}");
    }
}

/// One head, T across the 256-key chunks of the naive product: odd T, T = 1, and tiles that do
/// not divide T.
#[test]
fn the_exact_form_is_the_naive_head_bit_for_bit_across_chunks() {
    let cases = [
        (1, 1),
        (255, 64),
        (256, 64),
        (257, 100),
        (511, 33),
        (1000, 128),
        (1025, 256),
    ];
    for (seed, (t, bc)) in cases.into_iter().enumerate() {
        let [q, k, v] = random_head(seed as u64, t, 64);
        let naive = naive_attention(&q.view(), &k.view(), &v.view());
        for br in [1, 17, 64] {
            let exact = exact_attention(&q.view(), &k.view(), &v.view(), Tiles::new(br, bc));
            assert_eq!(bits(&exact), bits(&naive), "T = {t}, tiles {br} × {bc}");
        }
    }
}

#[test]
fn the_unrolled_sum_adds_as_ndarray_does() {
    let values: Vec<f32> = (0..37).map(|i| 1.0 / (i as f32 + 0.3)).collect();
    for len in 0..values.len() {
        let row = ndarray::ArrayView1::from(&values[..len]);
        let mut sum = UnrolledSum::new(len);
        row.iter().enumerate().for_each(|(j, &x)| sum.add(j, x));
        assert_eq!(sum.total().to_bits(), row.sum().to_bits(), "{len} values");
    }
}

#[test]
fn causal_tiles_above_the_diagonal_are_skipped() {
    assert_eq!(Tiles::new(2, 2).count(6), (6, 3));
    assert_eq!(Tiles::new(64, 64).count(256), (10, 6));
    assert_eq!(Tiles::new(3, 5).count(7), (5, 1)); // blocks 0–2, 3–5, 6; tiles 0–4, 5–6
    assert_eq!(Tiles::new(8, 8).count(1), (1, 0));
    let [q, k, v] = random_head(9, 100, 8);
    let tiled = tiled_attention(&q.view(), &k.view(), &v.view(), Tiles::new(10, 10));
    assert_eq!((tiled.tiles_computed, tiled.tiles_skipped), (55, 45));
}

/// The log-sum-exp of each row is ln Σⱼ e^(sⱼ) of its scores: it gives back the row's weights.
#[test]
fn the_log_sum_exp_gives_back_the_weights() {
    let (t, d) = (70, 16);
    let [q, k, v] = random_head(11, t, d);
    let tiled = tiled_attention(&q.view(), &k.view(), &v.view(), Tiles::new(16, 24));
    let scores = score_tile(&q.view(), &k.view(), &(0..t), &(0..t)); // (T, T)
    for (row, &lse) in scores.rows().into_iter().zip(&tiled.lse) {
        let sum: f32 = row.mapv(|s| libm::expf(s - lse)).sum();
        assert!((sum - 1.0).abs() < 1e-5, "Σ e^(s − lse) = {sum}");
    }
}

/// The bound the online form keeps from stage 4's attention: 8 ULPs of each head's largest output,
/// and 1e-6 absolutely (the values lie in [−2, 2), so the outputs do too).
///
/// Measured on this machine (AMD EPYC, Zen 5; matrixmultiply's AVX-512 kernel), the largest
/// difference over [`LENGTHS`] and the chapter's layer was 6.5 ULPs of the largest output,
/// 7.7e-7 absolutely, at T = 4,096 with tiles of 100 × 300. Element by element the largest was
/// 3,377,255 ULPs, at T = 1,024: an output close to 0, whose weighted values cancelled, where the
/// same 5e-7 is millions of ULPs of the small result (see [`Difference`]).
const ONLINE_BOUND_SCALED_ULPS: f32 = 8.0;

/// The absolute part of the bound above.
const ONLINE_BOUND_ABSOLUTE: f32 = 1e-6;

/// (T, Br, Bc) of the heads of 64 columns [`where_the_bits_part`] measures.
const LENGTHS: [(usize, usize, usize); 12] = [
    (1, 64, 64),
    (6, 64, 64),
    (6, 2, 2),
    (255, 64, 64),
    (256, 64, 64),
    (257, 32, 100),
    (1000, 64, 64),
    (1024, 64, 64),
    (1024, 128, 32),
    (2048, 64, 64),
    (4096, 64, 64),
    (4096, 100, 300),
];

/// The chapter's shapes (the book's layer; heads of 64 at T = 256, 1,024 and 4,096) and odd
/// lengths: the online form differs from stage 4 within [`ONLINE_BOUND_SCALED_ULPS`], and the
/// exact form not at all.
#[test]
fn where_the_bits_part() {
    let mut most = Difference::default();
    for seed in [123, 7] {
        let (mha, x, stage_4) = chapter_layer(seed);
        let tiled = multi_head_forward(&mha, &x.view(), |q, k, v| {
            tiled_attention(q, k, v, Tiles::new(2, 2)).output
        })
        .unwrap();
        most = most.max(Difference::between(&tiled, &stage_4));
    }
    println!("chapter's layer: {most:?}");
    for (seed, (t, br, bc)) in LENGTHS.into_iter().enumerate() {
        let [q, k, v] = random_head(seed as u64, t, 64);
        let (q, k, v) = (q.view(), k.view(), v.view());
        let naive = naive_attention(&q, &k, &v); // (T, D)
        let tiles = Tiles::new(br, bc);
        let difference = Difference::between(&tiled_attention(&q, &k, &v, tiles).output, &naive);
        println!("T = {t}, tiles {br} × {bc}: {difference:?}");
        most = most.max(difference);
        let exact = exact_attention(&q, &k, &v, tiles);
        assert_eq!(bits(&exact), bits(&naive), "T = {t}, tiles {br} × {bc}");
    }
    println!("largest: {most:?}");
    assert!(most.scaled_ulps <= ONLINE_BOUND_SCALED_ULPS, "{most:?}");
    assert!(most.absolute <= ONLINE_BOUND_ABSOLUTE, "{most:?}");
}

// The chapter's exercises: their solutions in `s6_flash::exercises`.

mod exercises {
    use attention_from_scratch::s6_flash::exercises::{
        causal_tile_counts, largest_square_tile, tile_bytes, window_key_tiles, window_tile_count,
    };
    use attention_from_scratch::s6_flash::{Tiles, random_head, tiled_attention};

    const L1: usize = 32 * 1024;

    #[test]
    fn the_largest_square_tile_in_a_32_kib_l1_is_28() {
        assert_eq!(largest_square_tile(L1, 64), 28);
        assert!(tile_bytes(28, 64) <= L1 && tile_bytes(29, 64) > L1);
        assert_eq!(tile_bytes(28, 64), 7_952 * 4);
        assert_eq!(
            tile_bytes(16, 64),
            17 * 1024,
            "a power of two leaves 15 KiB"
        );
    }

    /// The formula's counts are the ones the tiled forward returns.
    #[test]
    fn causal_skipping_saves_n_n_minus_1_over_2_tiles() {
        for (t, b) in [
            (6, 2),
            (256, 64),
            (100, 10),
            (257, 64),
            (7, 3),
            (1, 8),
            (300, 35),
        ] {
            let [q, k, v] = random_head(3, t, 4);
            let tiled = tiled_attention(&q.view(), &k.view(), &v.view(), Tiles::new(b, b));
            let counts = (tiled.tiles_computed, tiled.tiles_skipped);
            assert_eq!(causal_tile_counts(t, b), counts, "T = {t}, tiles {b}");
        }
    }

    /// A window keeps a tile if one of its keys is in the window of one of the block's queries,
    /// and leaves it otherwise; a window as long as T is the causal pass.
    #[test]
    fn a_sliding_window_leaves_the_tiles_behind_it() {
        let in_window = |i: usize, j: usize, w: usize| j <= i && i - j < w;
        for (t, br, bc, w) in [
            (256, 64, 64, 64),
            (100, 10, 15, 23),
            (50, 7, 5, 1),
            (90, 8, 8, 90),
        ] {
            let tiles = Tiles::new(br, bc);
            for rows in tiles.query_blocks(t) {
                let kept: Vec<_> = window_key_tiles(tiles, &rows, w).collect();
                for keys in tiles.visible_key_tiles(&rows) {
                    let needed = rows
                        .clone()
                        .any(|i| keys.clone().any(|j| in_window(i, j, w)));
                    assert_eq!(
                        kept.contains(&keys),
                        needed,
                        "T = {t}, rows {rows:?}, {keys:?}"
                    );
                }
            }
        }
        let tiles = Tiles::new(64, 64);
        assert_eq!(window_tile_count(tiles, 256, 64), 7);
        assert_eq!(window_tile_count(tiles, 256, 256), tiles.count(256).0);
    }
}

// The command line: `s6_flash --scores …`, `--context T --tile N`, and its one-line errors.

mod command_line {
    use attention_from_scratch::BookSeeds;
    use attention_from_scratch::s6_flash::app::{Cli, MAX_CONTEXT};
    use attention_from_scratch::s6_flash::{self, Tiles, naive_held_bytes};
    use clap::Parser;

    /// `s6_flash ARGS…` in-process: its output, or its error's message.
    fn s6_flash(args: &[&str]) -> Result<String, String> {
        let argv = std::iter::once("s6_flash").chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        cli.walk(&mut out).map_err(|e| e.to_string())?;
        Ok(String::from_utf8(out).unwrap())
    }

    /// The message of input that must be refused, checked to be one line.
    fn refused(args: &[&str]) -> String {
        let message = s6_flash(args).expect_err("this input must be refused");
        assert!(!message.contains('\n'), "not one line: {message}");
        message
    }

    #[test]
    fn no_flags_print_the_chapter() {
        let mut chapter = Vec::new();
        s6_flash::run(&mut chapter, BookSeeds::default()).unwrap();
        assert_eq!(s6_flash(&[]).unwrap(), String::from_utf8(chapter).unwrap());
    }

    /// Other scores are walked and labelled by index (the chapter's tokens belong to its own), and
    /// an odd count ends with a step of one key.
    #[test]
    fn scores_given_are_walked_and_labelled_by_index() {
        let out = s6_flash(&["--scores", "-0.5, 2,1.25,3,0"]).unwrap();
        assert!(out.starts_with("## Online softmax: the scores given, two keys at a time\n"));
        assert!(
            out.contains("[scores] scores\ntensor([-0.5000,  2.0000,  1.2500,  3.0000,  0.0000])")
        );
        assert!(out.contains("[step 1] keys 0–1\nscores             tensor([-0.5000,  2.0000])"));
        assert!(out.contains("[step 3] key 4\n"));
        assert!(!out.contains("[step 4]"));
        assert!(!out.contains("Your") && !out.contains("holds"), "{out}");
        // Stage 4's layer and the comparison at length are the chapter's.
        let chapter = s6_flash(&[]).unwrap();
        let tail = |text: &str| text[text.find("## Tiled").unwrap()..].to_string();
        assert_eq!(tail(&out), tail(&chapter));
    }

    /// `--context T --tile N` sets the head at length, and only then is the memory printed: naive's
    /// T × T scores and weights, tiled's tile and m, ℓ per row.
    #[test]
    fn context_and_tile_set_the_head_at_length_and_print_the_memory() {
        let out = s6_flash(&["--context", "100", "--tile", "48"]).unwrap();
        let length = &out[out.find("## Where the bits part").unwrap()..];
        assert!(length.starts_with("## Where the bits part: one head of 64 columns, T = 100\n"));
        assert!(length.contains("T = 100, Br = 48, Bc = 48: 6 tiles computed, 3 skipped\n"));
        assert!(length.contains(
            "naive holds its T × T scores and weights: 2 × 100 × 100 floats, 80000 bytes (78.12 KiB)"
        ));
        assert!(length.contains(
            "tiled holds one Br × Bc tile, m and ℓ per row: 48 × 48 + 2 × 48 floats, 9600 bytes (9.38 KiB)"
        ));
        let tile_only = s6_flash(&["--tile", "32"]).unwrap();
        assert!(tile_only.contains("T = 256, Br = 32, Bc = 32: 36 tiles computed, 28 skipped"));
        assert!(tile_only.contains("naive holds") && tile_only.contains("(512.00 KiB)"));
        // The chapter's own T and tiles, named, print the chapter's cell and the memory.
        let named = s6_flash(&["--context", "256", "--tile", "64"]).unwrap();
        let chapter = s6_flash(&[]).unwrap();
        assert!(named.starts_with(chapter.trim_end()), "{named}");
        assert!(named.contains("2 × 256 × 256 floats, 524288 bytes (512.00 KiB)\n"));
        assert!(named.contains("64 × 64 + 2 × 64 floats, 16896 bytes (16.50 KiB)\n"));
    }

    /// A grid more than 32 tiles across is not drawn.
    #[test]
    fn a_wide_grid_is_not_drawn() {
        let out = s6_flash(&["--context", "300", "--tile", "9"]).unwrap();
        assert!(out.contains("(the grid of 34 × 34 tiles is not drawn: more than 32 across)"));
        let drawn = s6_flash(&["--context", "300", "--tile", "10"]).unwrap();
        assert!(drawn.contains("■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■ ■\n"));
    }

    /// `s6_flash --backward ARGS…` in-process, as the example runs it.
    fn backward(args: &[&str]) -> String {
        let argv = ["s6_flash", "--backward"]
            .into_iter()
            .chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).unwrap();
        let mut out = Vec::new();
        cli.run(&mut out, &mut std::io::sink()).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// `--backward`: the naive graph keeps 4·T² + 2·T·D floats (Kᵀ, the scores three times, the
    /// weights, O), the tiled node T·D + T (O and L), the exact node T·D (O); the exact node's
    /// gradients are the naive graph's bits, the tiled node's within the tape test's bound.
    #[test]
    fn backward_prints_what_each_way_keeps_and_how_far_its_gradients_lie() {
        use attention_from_scratch::s6_flash::{BOOK_LENGTH, HEAD_WIDTH, backward};
        let out = backward(&[]);
        insta::assert_snapshot!("backward_pass", out);
        let (t, d) = (BOOK_LENGTH.t, HEAD_WIDTH);
        let b = backward::backward(BookSeeds::default().seed_123, BOOK_LENGTH);
        assert_eq!(b.naive.kept, 4 * t * t + 2 * t * d);
        assert_eq!((b.tiled.kept, b.exact.kept), (t * d + t, t * d));
        assert!(out.contains("values whose bits differ from the naive graph's: 0\n"));
        for (tiled, naive) in b.tiled.grads.iter().zip(&b.naive.grads) {
            let largest = naive.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            let worst = tiled.iter().zip(naive).map(|(a, b)| (a - b).abs());
            assert!(worst.fold(0.0, f32::max) <= 6e-6 * largest);
        }
        let short = backward(&["--context", "9", "--tile", "4"]);
        assert!(short.starts_with(
            "## The backward pass: one head of 64 columns at T = 9, tiles of 4 × 4\n"
        ));
        assert!(
            short.contains("naive graph         1,476\n"),
            "4·9² + 2·9·64: {short}"
        );
        assert!(s6_flash(&["--backward", "--bench"]).is_err());
        assert!(s6_flash(&["--backward", "--scores", "1"]).is_err());
    }

    #[test]
    fn held_memory_is_the_formula() {
        assert_eq!(naive_held_bytes(4096), 128 << 20);
        assert_eq!(naive_held_bytes(1), 8);
        assert_eq!(Tiles::new(64, 64).held_bytes(), (64 * 64 + 128) * 4);
        assert_eq!(Tiles::new(3, 5).held_bytes(), (15 + 6) * 4);
    }

    #[test]
    fn bad_input_stops_with_one_line_naming_the_fix() {
        let no_scores = "--scores holds no scores; give comma-separated numbers";
        assert!(refused(&["--scores="]).starts_with(no_scores));
        assert!(refused(&["--scores", " "]).starts_with(no_scores));
        assert!(
            refused(&["--scores", "1,x"]).starts_with("--scores: score 1, \"x\", is not a number")
        );
        assert!(
            refused(&["--scores", "1,,2"]).starts_with("--scores: score 1, \"\", is not a number")
        );
        for infinite in ["inf", "-inf", "NaN", "1e39"] {
            let scores = format!("0.5,{infinite}");
            let message = refused(&["--scores", &scores]);
            assert!(
                message.starts_with(&format!("--scores: score 1, \"{infinite}\", is not finite"))
            );
        }
        assert!(refused(&["--context", "0"]).starts_with("--context 0 has no tokens"));
        let too_long = (MAX_CONTEXT + 1).to_string();
        assert!(refused(&["--context", &too_long]).starts_with("--context 4097 is longer"));
        assert!(refused(&["--context", "8,9"]).starts_with("--context takes one length"));
        assert!(refused(&["--context", "10"]).starts_with("--tile 64 does not fit T = 10"));
        assert!(refused(&["--tile", "0"]).starts_with("--tile 0 does not fit T = 256"));
        assert!(
            refused(&["--context", "8", "--tile", "9"]).starts_with("--tile 9 does not fit T = 8")
        );
        // clap's own: a number that is not one, and flags that belong to --bench only.
        assert!(s6_flash(&["--context", "abc"]).is_err());
        assert!(s6_flash(&["--scores", "1", "--bench"]).is_err());
        assert!(s6_flash(&["--heads", "2"]).is_err());
        // Negative scores need no `=`.
        assert!(s6_flash(&["--scores", "-1,-2"]).is_ok());
        assert!(s6_flash(&["--context", "4096", "--tile", "4096"]).is_ok());
    }
}

/// Each line of `--bench` gives the forward pass's GFLOP/s and, where the core's FMA peak could be
/// measured, its share of it after a comment line naming the peak; the chapter's figures still read
/// the lines.
#[test]
fn bench_lines_give_their_share_of_the_peak() {
    use attention_from_scratch::s6_flash::app::Cli;
    use clap::Parser;
    let argv = [
        "s6_flash",
        "--bench",
        "--context",
        "32",
        "--attention",
        "naive,tiled",
        "--repeat",
        "1",
        "--threads",
        "1",
    ];
    let cli = Cli::try_parse_from(argv).unwrap();
    let mut out = Vec::new();
    cli.run(&mut out, &mut std::io::sink()).unwrap();
    let out = String::from_utf8(out).unwrap();
    let peak = out.starts_with("# this core's FMA peak");
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in &lines {
        assert!(line.contains(" forward_gflops="), "{line}");
        assert_eq!(line.contains(" forward_peak_pct="), peak, "{line}");
    }
    let parsed = attention_from_scratch::figures::cost::parse(&out).unwrap();
    assert_eq!(parsed.len(), 2);
}
