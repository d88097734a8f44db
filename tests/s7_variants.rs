//! Stage 7's outputs and proofs: the snapshot of `cargo run --example s7_variants`, each variant's
//! backward pass against finite differences, K = H and W ≥ T giving the full model's bits, the fast
//! layer giving the lesson's, the KV-memory formula against rasbt's printed figures, and the flags
//! of `s5_gpt` with their one-line errors.

mod common;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::app::checkpoint;
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::cache::{GptCache, generate_cached};
use attention_from_scratch::s5_gpt::fast::{Fast, team};
use attention_from_scratch::s5_gpt::flash::AttentionForm;
use attention_from_scratch::s5_gpt::generate::{Sampling, generate, last_row};
use attention_from_scratch::s5_gpt::rolling::{RollingCache, generate_rolling, reach};
use attention_from_scratch::s5_gpt::{CharDataset, Gpt, GptConfig, Tape, Tensor};
use attention_from_scratch::s7_variants::{
    self, KvShape, gigabytes, kv_head_of_each_query_head, rasbt_examples, turned_score, weigh,
};
use common::Block;
use common::cli::{fails, ok};
use common::gradcheck::{check_gradients, check_whole_model, random_tensor};

fn printed() -> String {
    let mut out = Vec::new();
    s7_variants::run(&mut out).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("the output is UTF-8")
}

/// The chapter's output blocks: the snapshot's name and the cells it holds.
const BLOCKS: [Block; 6] = [
    ("kv_memory", &["kv"]),
    ("groups", &["groups"]),
    ("band", &["band"]),
    ("rope", &["rope"]),
    ("latent", &["latent"]),
    ("side_by_side", &["side by side"]),
];

#[test]
fn full_output_snapshot() {
    insta::assert_snapshot!("output", printed());
}

#[test]
fn output_blocks_of_the_chapter() {
    for (name, text) in common::blocks(&printed(), &BLOCKS) {
        insta::assert_snapshot!(name, text);
    }
}

// ---------------------------------------------------------------------------------------------------
// Each op's backward pass, and whole models with each variant, against finite differences.
// ---------------------------------------------------------------------------------------------------

#[test]
fn gradient_of_repeat_kv() {
    let kv = random_tensor(&[2, 2, 3, 4], 1, 1.0); // (B, K, T, D)
    check_gradients("repeat_kv", &[kv], |tape, ids| tape.repeat_kv(ids[0], 3));
}

#[test]
fn gradient_of_the_window() {
    let scores = random_tensor(&[2, 5, 5], 2, 1.0); // (B, T, T)
    check_gradients("window", &[scores], |tape, ids| {
        let masked = tape.tril(ids[0], -1e9);
        let banded = tape.window(masked, 2, -1e9);
        tape.softmax(banded)
    });
}

#[test]
fn gradient_of_rope() {
    let x = random_tensor(&[2, 2, 5, 6], 3, 1.0); // (B, H, T, D)
    check_gradients("rope", std::slice::from_ref(&x), |tape, ids| {
        tape.rope(ids[0], 0)
    });
    check_gradients("rope at 7", &[x], |tape, ids| tape.rope(ids[0], 7));
}

/// The sequel's fullest model with `arch`'s variant (2 heads of 4): every parameter's gradient.
fn fullest(arch: Architecture) -> Architecture {
    Architecture {
        qkv: true,
        heads: 2,
        residual: true,
        layer_norm: true,
        ..arch
    }
}

#[test]
fn gradient_of_whole_models_with_each_variant() {
    // Embeddings 25 times larger, for LayerNorm's sake, as stage 5's check of the fullest model.
    let base = Architecture::default();
    check_whole_model(
        fullest(Architecture {
            kv_heads: Some(1),
            ..base
        }),
        25.0,
    );
    check_whole_model(
        fullest(Architecture {
            window: Some(2),
            ..base
        }),
        25.0,
    );
    check_whole_model(Architecture { rope: true, ..base }, 1.0);
    for rope in [false, true] {
        let latent = Architecture {
            latent: Some(3),
            rope,
            ..base
        };
        check_whole_model(fullest(latent), 25.0);
    }
}

#[test]
fn gradient_of_concat() {
    let a = random_tensor(&[2, 2, 3, 4], 4, 1.0); // (B, H, T, D)
    let b = random_tensor(&[2, 2, 3, 2], 5, 1.0); // (B, H, T, R)
    check_gradients("concat", &[a, b], |tape, ids| tape.concat(ids[0], ids[1]));
}

// ---------------------------------------------------------------------------------------------------
// Left at their full size, the variants change no bit.
// ---------------------------------------------------------------------------------------------------

/// The weights and the first and last losses of [`weigh`]'s ten AdamW steps.
fn trained_bits(arch: Architecture, tape: &mut Tape) -> Vec<u32> {
    let weighed = weigh(tape, arch);
    let params = tape.params().iter().flat_map(|p| p.data.iter());
    let losses = weighed.losses.iter();
    params.chain(losses).map(|x| x.to_bits()).collect()
}

#[test]
fn k_equal_to_h_and_a_window_of_t_are_the_full_model_bit_for_bit() {
    let full = Architecture::everything(4, 0.0);
    let reference = trained_bits(full, &mut Tape::new());
    for same in [
        Architecture {
            kv_heads: Some(4),
            ..full
        },
        Architecture {
            window: Some(32),
            ..full
        },
        Architecture {
            window: Some(1000),
            ..full
        },
    ] {
        assert!(
            trained_bits(same, &mut Tape::new()) == reference,
            "{same:?}"
        );
    }
    let narrower = Architecture {
        window: Some(31),
        ..full
    };
    assert!(
        trained_bits(narrower, &mut Tape::new()) != reference,
        "W = T − 1 masks a key"
    );
}

#[test]
fn the_fast_layer_gives_the_lessons_bits_for_each_variant() {
    for (name, arch) in s7_variants::variants() {
        let lesson = trained_bits(arch, &mut Tape::new());
        for threads in [1, 2] {
            let fast = team::with_team(threads, || {
                trained_bits(arch, &mut Tape::with_backend(Box::new(Fast::new())))
            })
            .unwrap();
            assert!(fast == lesson, "{name}, {threads} thread(s)");
        }
    }
}

#[test]
fn rope_keeps_the_position_table_out_and_every_other_weight_in() {
    let config = |rope| GptConfig {
        vocab_size: 10,
        context_size: 8,
        embedding_size: 8,
        blocks: 1,
        architecture: Architecture {
            rope,
            ..Architecture::everything(2, 0.0)
        },
    };
    let params = |rope| {
        let mut tape = Tape::new();
        let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(1), config(rope));
        let names: Vec<String> = model
            .named_parameters()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        (names, tape.params().to_vec())
    };
    let ((names, with), (_, without)) = (params(true), params(false));
    assert!(!names.iter().any(|n| n.starts_with("pos_emb")), "{names:?}");
    let mut without: Vec<Tensor> = without;
    without.remove(1); // the position table, the second parameter drawn
    assert_eq!(with, without, "the same draws for every other weight");
}

#[test]
fn a_turned_query_and_key_score_by_their_distance() {
    let q = [0.3, -1.2, 0.8, 0.5, 0.1, -0.4];
    let k = [1.1, 0.2, -0.7, 0.9, -0.3, 0.6];
    let at = |m, n| turned_score(&q, &k, m, n);
    assert!((at(2, 0) - at(12, 10)).abs() < 1e-5);
    assert!((at(5, 5) - turned_score(&q, &k, 0, 0)).abs() < 1e-5);
    assert!(
        (at(3, 0) - at(2, 0)).abs() > 1e-3,
        "another distance, another score"
    );
}

#[test]
fn query_heads_read_their_groups_kv_head() {
    assert_eq!(kv_head_of_each_query_head(8, 2), [0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(kv_head_of_each_query_head(4, 4), [0, 1, 2, 3]);
    assert_eq!(kv_head_of_each_query_head(6, 1), [0; 6]);
}

// ---------------------------------------------------------------------------------------------------
// The KV cache's memory: rasbt's estimators' figures.
// ---------------------------------------------------------------------------------------------------

#[test]
fn the_kv_formula_gives_rasbts_printed_figures() {
    let figures: Vec<(String, String)> = rasbt_examples()
        .into_iter()
        .map(|(name, shape, context)| (name.to_string(), gigabytes(shape.total_bytes(1, context))))
        .collect();
    let figure = |name: &str| &figures.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(figure("MHA"), "17.18 GB"); // ch04/04_gqa
    assert_eq!(figure("GQA, 8 K/V heads"), "4.29 GB");
    assert_eq!(figure("MLA, latent 1,024"), "0.81 GB"); // ch04/05_mla
}

#[test]
fn a_window_caps_the_cache_and_a_latent_replaces_it() {
    let mha = KvShape {
        layers: 2,
        heads: 4,
        kv_heads: 4,
        head_dim: 16,
        window: None,
        latent: None,
        bytes: 4,
    };
    assert_eq!(mha.bytes_per_token(), 2 * 2 * 4 * 16 * 4);
    let swa = KvShape {
        window: Some(8),
        ..mha
    };
    assert_eq!(
        swa.total_bytes(1, 6),
        mha.total_bytes(1, 6),
        "a window not yet full"
    );
    assert_eq!(swa.total_bytes(3, 100), 3 * 8 * mha.bytes_per_token());
    let mla = KvShape {
        latent: Some(10),
        ..mha
    };
    assert_eq!(mla.bytes_per_token(), 2 * 10 * 4);
    let arch = |rope| Architecture {
        latent: Some(32),
        rope,
        ..Architecture::everything(4, 0.0)
    };
    let per_token = |rope| KvShape::of(&arch(rope), 2, 64, 4).bytes_per_token();
    assert_eq!(per_token(false), 2 * 32 * 4, "the latent alone");
    assert_eq!(
        per_token(true),
        2 * (32 + 8) * 4,
        "and the rotary key, D/2 = 8 wide"
    );
}

// ---------------------------------------------------------------------------------------------------
// The flags on `s5_gpt`: recorded in the checkpoint, and bad input stopped with one line.
// ---------------------------------------------------------------------------------------------------

#[test]
fn the_variants_flags_train_save_and_reload() {
    let dir = common::scratch("s7_variants", "flags");
    let dir = dir.to_str().unwrap();
    let flags = ["--heads", "4", "--kv-heads", "2", "--window", "8", "--rope"];
    let steps = ["--max-steps", "5", "--quiet"];
    ok(&[&["train", "--save", dir][..], &flags, &steps].concat());
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{dir}/config.json")).unwrap()).unwrap();
    assert_eq!(config["kv_heads"], 2);
    assert_eq!(config["window"], 8);
    assert_eq!(config["rope"], true);
    let saved = checkpoint::load(std::path::Path::new(dir)).unwrap();
    let shape = |name: &str| {
        saved
            .weights
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.shape.clone())
    };
    assert_eq!(
        shape("blocks.0.attn.key.weight"),
        Some(vec![32, 64]),
        "K·D = 2 × 16 rows"
    );
    assert_eq!(shape("pos_emb.weight"), None, "RoPE in place of the table");
    ok(&["eval", "--checkpoint", dir, "--quiet"]);
    ok(&["generate", "--checkpoint", dir, "--sample-len", "20"]);
    let msg = fails(&["train", "--resume", dir, "--window", "4"]);
    assert!(
        msg.contains("--window 4 differs from the checkpoint's 8"),
        "{msg}"
    );
}

#[test]
fn the_latent_flag_trains_saves_and_reloads() {
    let dir = common::scratch("s7_variants", "latent");
    let dir = dir.to_str().unwrap();
    let flags = ["--heads", "4", "--latent", "16", "--rope", "--layer-norm"];
    ok(&[
        &["train", "--save", dir, "--max-steps", "5", "--quiet"][..],
        &flags,
    ]
    .concat());
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(format!("{dir}/config.json")).unwrap()).unwrap();
    assert_eq!(config["latent"], 16);
    let saved = checkpoint::load(std::path::Path::new(dir)).unwrap();
    let shape = |name: &str| {
        let found = saved.weights.iter().find(|(n, _)| n == name);
        found.map(|(_, t)| t.shape.clone())
    };
    assert_eq!(
        shape("blocks.0.attn.latent.weight"),
        Some(vec![16, 64]),
        "W_DKV"
    );
    assert_eq!(
        shape("blocks.0.attn.key.weight"),
        Some(vec![64, 16]),
        "W_UK reads L"
    );
    assert_eq!(
        shape("blocks.1.attn.query_rope.weight"),
        Some(vec![32, 64]),
        "H·R"
    );
    assert_eq!(
        shape("blocks.1.attn.key_rope.weight"),
        Some(vec![8, 64]),
        "R"
    );
    ok(&["eval", "--checkpoint", dir, "--quiet"]);
    ok(&["generate", "--checkpoint", dir, "--sample-len", "20"]);
    let msg = fails(&["train", "--resume", dir, "--latent", "8"]);
    assert!(
        msg.contains("--latent 8 differs from the checkpoint's 16"),
        "{msg}"
    );
}

#[test]
fn bad_variant_flags_are_named_with_their_fix() {
    for (flags, expect) in [
        (
            &["--heads", "4", "--kv-heads", "3"][..],
            "--kv-heads 3 does not divide --heads 4",
        ),
        (
            &["--kv-heads", "0"],
            "--kv-heads 0 does not divide --heads 1",
        ),
        (&["--window", "0"], "--window 0 leaves a character no key"),
        (
            &["--window", "4", "--attention", "tiled"],
            "drop --attention tiled or --window",
        ),
        (
            &["--rope", "--embedding-size", "63", "--heads", "3"],
            "a head is 21 wide",
        ),
        (&["--latent", "0"], "--latent 0 is out of range"),
        (&["--latent", "65"], "from 1 to --embedding-size (64) wide"),
        (
            &["--heads", "4", "--kv-heads", "2", "--latent", "8"],
            "--latent and --kv-heads 2 both shrink the cache",
        ),
        (
            &["--heads", "32", "--latent", "8", "--rope"],
            "make C/H a multiple of 4",
        ),
        (
            &["--latent", "8", "--rope", "--attention", "exact"],
            "drop --attention exact or --rope",
        ),
    ] {
        let dir = common::scratch("s7_variants", "refused");
        let save = dir.join("run");
        let save = save.to_str().expect("a UTF-8 temporary path");
        let base = ["train", "--max-steps", "1", "--quiet", "--save", save];
        let msg = fails(&[&base[..], flags].concat());
        assert!(msg.contains(expect), "{flags:?}: {msg}");
        assert!(
            !dir.join("run").exists(),
            "{flags:?} left its --save folder"
        );
    }
}

#[test]
fn the_library_refuses_a_window_in_a_flash_node() {
    use attention_from_scratch::s5_gpt::GptError;
    for form in [AttentionForm::Tiled, AttentionForm::Exact] {
        let arch = Architecture {
            window: Some(4),
            attention: form,
            ..Architecture::everything(2, 0.0)
        };
        let err = arch
            .check()
            .expect_err("a window in a flash node is refused");
        assert!(matches!(err, GptError::WindowInFlashNode { .. }), "{err}");
        assert!(err.to_string().contains(form.name()), "{err}");
    }
    let empty = Architecture {
        window: Some(0),
        ..Architecture::default()
    };
    assert!(matches!(empty.check(), Err(GptError::EmptyWindow)));
    let naive = Architecture {
        window: Some(4),
        ..Architecture::everything(2, 0.0)
    };
    assert!(naive.check().is_ok());
}

// ---------------------------------------------------------------------------------------------------
// The exercises' solutions.
// ---------------------------------------------------------------------------------------------------

#[test]
fn exercise_interleaved_rope_is_split_halves_in_another_order() {
    use attention_from_scratch::s5_gpt::variants::rope_forward;
    use attention_from_scratch::s7_variants::exercises::{rope_interleaved, to_split_halves};
    let x: Vec<f32> = (0..8).map(|i| 0.3 * i as f32 - 1.0).collect();
    for p in [0, 1, 5, 31] {
        let mut split = vec![0.0; 8];
        rope_forward(&mut split, &to_split_halves(&x), (1, 8), p);
        let interleaved = to_split_halves(&rope_interleaved(&x, p));
        assert_eq!(
            split, interleaved,
            "position {p}: the same rotation, bit for bit"
        );
    }
}

#[test]
fn exercise_mqa_memory() {
    use attention_from_scratch::s7_variants::exercises::chapter_model_cache;
    assert_eq!(chapter_model_cache(4), 2 * 32 * 2 * 4 * 16 * 4); // 32 KiB
    assert_eq!(chapter_model_cache(1) * 4, chapter_model_cache(4));
}

#[test]
fn exercise_the_other_windows_convention() {
    use attention_from_scratch::s5_gpt::ops::tril_forward;
    use attention_from_scratch::s5_gpt::variants::window_forward;
    use attention_from_scratch::s7_variants::exercises::window_seeing_w_before;
    let (t, w) = (6, 2);
    let ones = vec![1.0; t * t];
    let (mut causal, mut band) = (vec![0.0; t * t], vec![0.0; t * t]);
    tril_forward(&mut causal, &ones, t, 0.0);
    window_forward(&mut band, &causal, t, window_seeing_w_before(w), 0.0);
    let last_row = &band[(t - 1) * t..];
    assert_eq!(last_row.iter().filter(|&&s| s == 1.0).count(), w + 1);
}

// ---------------------------------------------------------------------------------------------------
// The KV cache: generation with it gives recomputation's characters, bit for bit.
// ---------------------------------------------------------------------------------------------------

/// A model of `blocks` blocks at the tutorial's sizes with `arch`, from `np.random.seed(42)`, on
/// the vocabulary of [`s7_variants::LINE`].
fn model_on_the_line(arch: Architecture, blocks: usize) -> (Tape, Gpt, CharDataset) {
    line_model(arch, blocks, 32, 64)
}

/// A model of `blocks` blocks, a context of `context` and a width of `width` on
/// [`s7_variants::LINE`]'s characters.
fn line_model(
    arch: Architecture,
    blocks: usize,
    context: usize,
    width: usize,
) -> (Tape, Gpt, CharDataset) {
    let data = CharDataset::from_text(s7_variants::LINE, 1, 32);
    let config = GptConfig {
        vocab_size: data.vocab_size(),
        context_size: context,
        embedding_size: width,
        blocks,
        architecture: arch,
    };
    let mut tape = Tape::new();
    let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(42), config);
    (tape, model, data)
}

#[test]
fn cached_generation_is_recomputation_bit_for_bit() {
    let full = Architecture::everything(4, 0.0);
    let mut cases = s7_variants::variants();
    cases.push(("the tutorial's", Architecture::default()));
    cases.push((
        "SWA, W = 3, MQA",
        Architecture {
            window: Some(3),
            kv_heads: Some(1),
            ..full
        },
    ));
    cases.push((
        "MLA + RoPE, W = 3",
        Architecture {
            latent: Some(8),
            rope: true,
            window: Some(3),
            ..full
        },
    ));
    cases.push((
        "exact form",
        Architecture {
            attention: AttentionForm::Exact,
            ..full
        },
    ));
    for (name, arch) in cases {
        for blocks in [1, 2] {
            let (mut tape, model, data) = model_on_the_line(arch, blocks);
            let run = |cached: bool, tape: &mut Tape| {
                let rng = &mut NumpyRandom::seed(7);
                let sampling = Sampling::default();
                match cached {
                    true => generate_cached(tape, &model, &data, "Romeo", 90, rng, sampling),
                    false => generate(tape, &model, &data, "Romeo", 90, rng, sampling),
                }
                .unwrap()
            };
            let (recomputed, cached) = (run(false, &mut tape), run(true, &mut tape));
            assert_eq!(cached, recomputed, "{name}, {blocks} block(s)");
        }
    }
}

#[test]
fn each_cached_step_gives_the_windows_last_logits() {
    let arch = Architecture {
        window: Some(5),
        rope: true,
        ..Architecture::everything(4, 0.0)
    };
    let (mut tape, model, data) = model_on_the_line(arch, 1);
    let ids = data.encode(s7_variants::LINE).unwrap();
    let mut cache = GptCache::default();
    let mut steps = 0;
    for l in 1..=32 {
        let window = &ids[..l];
        tape.reset();
        let whole = model.forward(&mut tape, window, 1, None); // (1, L, V)
        let last = last_row(tape.value(whole)).to_vec();
        let logits = match cache.extends(&model, window, 0) {
            true => {
                steps += 1;
                model.forward_cached(&mut tape, &window[l - 1..], &mut cache)
            }
            false => {
                cache = GptCache::default();
                model.forward_cached(&mut tape, window, &mut cache)
            }
        };
        assert_eq!(last_row(tape.value(logits)), last, "L = {l}");
        assert!(cache.layers[0].len() <= 5, "the window keeps 5 keys");
    }
    assert_eq!(
        steps, 31,
        "one block: every token after the first is one step"
    );
}

#[test]
fn a_windowed_step_behind_whole_blocks_of_forgotten_keys_gives_the_windows_last_logits() {
    // A window of 40 in a context of 300: a step's softmax sums its 40 weights behind up to 260
    // forgotten keys, whole blocks of NumPy's pairwise sum that hold none of them.
    let arch = Architecture {
        window: Some(40),
        ..Architecture::default()
    };
    let (mut tape, model, data) = line_model(arch, 1, 300, 32);
    let line = data.encode(s7_variants::LINE).unwrap();
    let ids: Vec<usize> = line.iter().copied().cycle().take(300).collect();
    let mut cache = GptCache::default();
    for l in 1..=ids.len() {
        tape.reset();
        let whole = model.forward(&mut tape, &ids[..l], 1, None); // (1, L, V)
        let last = last_row(tape.value(whole)).to_vec();
        let logits = model.forward_cached(&mut tape, &ids[l - 1..l], &mut cache); // (1, 1, V)
        assert_eq!(last_row(tape.value(logits)), last, "L = {l}");
    }
}

#[test]
fn sums_like_one_longer_is_what_the_pairwise_sum_does() {
    use attention_from_scratch::s5_gpt::cache::sums_like_one_longer;
    use attention_from_scratch::s5_gpt::ops::pairwise_sum;
    let mut rng = NumpyRandom::seed(5);
    let row: Vec<f32> = (0..2048)
        .map(|_| rng.standard_normal().exp() as f32)
        .collect();
    let mut alike = 0;
    for l in 2..=2048 {
        let claimed = sums_like_one_longer(l);
        let prefixes = [1, l / 3, l / 2 + 1, l - 1];
        let same = prefixes.iter().map(|&n| n.min(l - 1)).all(|n| {
            let mut padded = row[..l].to_vec();
            padded[n..].fill(0.0); // values 0..n, then zeros
            pairwise_sum(&padded) == pairwise_sum(&padded[..l - 1])
        });
        assert!(!claimed || same, "L = {l}: said alike, sums differ");
        alike += usize::from(claimed);
    }
    assert!(alike > 1000, "{alike} of 2,047 widths step with the cache");
}

#[test]
fn cached_generation_past_128_tokens_is_recomputation_bit_for_bit() {
    let arch = Architecture {
        kv_heads: Some(2),
        rope: true,
        ..Architecture::everything(4, 0.0)
    };
    let (mut tape, model, data) = line_model(arch, 2, 300, 32);
    let run = |cached: bool, tape: &mut Tape| {
        let (rng, sampling) = (&mut NumpyRandom::seed(3), Sampling::default());
        match cached {
            true => generate_cached(tape, &model, &data, "Romeo", 320, rng, sampling),
            false => generate(tape, &model, &data, "Romeo", 320, rng, sampling),
        }
        .unwrap()
    };
    assert_eq!(run(true, &mut tape), run(false, &mut tape));
}

// ---------------------------------------------------------------------------------------------------
// Latent attention: its absorbed weights within the stated bound.
// ---------------------------------------------------------------------------------------------------

#[test]
fn absorbed_scores_stay_within_their_bound_and_pick_the_same_characters() {
    use attention_from_scratch::s7_variants::latent::{logit_gaps, model_on_the_line, score_gaps};
    for (name, arch) in s7_variants::variants() {
        if arch.latent.is_none() {
            continue;
        }
        let mut tape = Tape::new();
        let (model, ids) = model_on_the_line(&mut tape, arch);
        let (gap, share) = score_gaps(&mut tape, &model, &ids);
        assert!(gap > 0.0, "{name}: float32 rounds the two forms apart");
        assert!(share <= 1.0, "{name}: a gap of {share} times its bound");
        let (_, same, steps) = logit_gaps(&mut tape, &model, &ids);
        assert_eq!(same, steps, "{name}");
    }
}

#[test]
fn a_window_keeps_w_latents_and_absorbed_steps_read_only_those() {
    use attention_from_scratch::s7_variants::latent::{logit_gaps, model_on_the_line};
    let arch = Architecture {
        latent: Some(8),
        rope: true,
        window: Some(4),
        ..Architecture::everything(4, 0.0)
    };
    let mut tape = Tape::new();
    let (model, ids) = model_on_the_line(&mut tape, arch);
    let (gap, same, steps) = logit_gaps(&mut tape, &model, &ids);
    assert!(gap < 1e-3 && same == steps, "{gap}, {same} of {steps}");
}

// ---------------------------------------------------------------------------------------------------
// The KV-memory calculator of `s7_variants --kv` (and of the page).
// ---------------------------------------------------------------------------------------------------

/// What `s7_variants ARGS…` prints, or its one-line error.
fn s7(args: &[&str]) -> Result<String, String> {
    use attention_from_scratch::s7_variants::app::Cli;
    use clap::Parser;
    let cli = Cli::try_parse_from(std::iter::once("s7_variants").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    cli.run(&mut out).map_err(|e| e.to_string())?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn the_calculator_prints_rasbts_figures() {
    let mha = s7(&["--kv", "--kv-heads", "32"]).unwrap();
    assert!(
        mha.ends_with("the cache: 17,179,869,184 bytes, 17.18 GB\n"),
        "{mha}"
    );
    let gqa = s7(&["--kv"]).unwrap();
    assert!(gqa.contains("4.29 GB"), "{gqa}");
    let mla = [
        "--layers",
        "48",
        "--heads",
        "24",
        "--kv-heads",
        "24",
        "--latent",
        "1024",
    ];
    let mla = s7(&[&["--kv", "--tokens", "8192"][..], &mla].concat()).unwrap();
    assert!(mla.contains("0.81 GB"), "{mla}");
    let swa = s7(&["--kv", "--window", "4096"]).unwrap();
    assert!(swa.contains("tokens kept: 4,096 of 32,768"), "{swa}");
}

#[test]
fn the_calculators_bad_input_is_one_line() {
    for (args, expect) in [
        (
            &["--kv", "--kv-heads", "3"][..],
            "--kv-heads 3 does not divide --heads 32",
        ),
        (
            &["--kv", "--kv-heads", "64"],
            "--kv-heads 64 does not divide --heads 32",
        ),
        (&["--kv", "--layers", "0"], "--layers 0 is out of range"),
        (&["--kv", "--window", "0"], "--window 0 is out of range"),
        (
            &[
                "--kv",
                "--tokens",
                "10000000",
                "--layers",
                "10000000",
                "--head-dim",
                "10000000",
            ],
            "smaller sizes",
        ),
        (
            &["--bench", "--context", "0"],
            "--context 0 is out of range",
        ),
    ] {
        let msg = s7(args).expect_err("bad input");
        assert!(
            msg.contains(expect) && !msg.trim_end().contains('\n'),
            "{args:?}: {msg}"
        );
    }
}

#[test]
fn the_weighed_tables_are_drawn_from_the_committed_records() {
    use attention_from_scratch::figures::weighed::committed_tables;
    let generated = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/generated");
    for (file, table) in committed_tables().unwrap() {
        let committed = std::fs::read_to_string(generated.join(&file)).unwrap();
        assert_eq!(
            committed, table,
            "{file}: run `cargo run --release --example book_figures -- --quick`"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Each variant's first block on a prompt: `s7_variants --weights PROMPT` (and the page's panel).
// ---------------------------------------------------------------------------------------------------

#[test]
fn weights_snapshot() {
    use attention_from_scratch::s7_variants::weights::PROMPT;
    insta::assert_snapshot!("weights", s7(&["--weights", PROMPT]).unwrap());
}

#[test]
fn each_variants_first_block_is_its_mask_and_rows_that_sum_to_one() {
    use attention_from_scratch::s7_variants::app::Cli;
    use attention_from_scratch::s7_variants::weights::{PROMPT, visible};
    use clap::Parser;
    let cli = Cli::try_parse_from(["s7_variants", "--weights", PROMPT]).unwrap();
    let blocks = cli.first_blocks(&mut Vec::new()).unwrap();
    let t = PROMPT.chars().count();
    assert_eq!(blocks.len(), s7_variants::variants().len());
    for ((name, _, block), (_, arch)) in blocks.iter().zip(s7_variants::variants()) {
        assert_eq!(block.mask, visible(t, arch.window), "{name}");
        assert_eq!(block.heads.len(), arch.heads, "{name}");
        for (i, row) in block.heads.iter().flatten().enumerate() {
            let seen = &block.mask[i % t];
            let sum: f32 = row.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "{name}: row {i} sums to {sum}");
            // A key the mask hides gets exactly nothing.
            assert!(row.iter().zip(seen).all(|(&w, &s)| s || w == 0.0), "{name}");
        }
    }
    // The window of 8 hides the oldest keys of the 15 characters; the causal mask alone does not.
    let swa = blocks.iter().find(|(_, short, _)| *short == "swa").unwrap();
    assert_eq!(swa.2.mask[t - 1].iter().filter(|&&s| s).count(), 8);
    assert_eq!(blocks[0].2.mask[t - 1].iter().filter(|&&s| s).count(), t);
    // One variant by its name prints that part of the whole output: the last one, its end.
    let all = s7(&["--weights", PROMPT]).unwrap();
    let (_, last, _) = blocks.last().unwrap();
    let one = s7(&["--weights", PROMPT, "--variant", last]).unwrap();
    let part = &one[one.find("## ").unwrap()..];
    assert!(all.ends_with(part), "{one}");
}

#[test]
fn the_weights_bad_input_is_one_line() {
    let too_long = "Romeo".repeat(7);
    for (args, expect) in [
        (&["--weights", ""][..], "--weights is empty"),
        (
            &["--weights", "Juliet"],
            "not in the model's line: 'J', 'l', 'i'; use characters of",
        ),
        (&["--weights", &too_long], "--weights has 35 characters"),
        (
            &["--weights", "Romeo", "--variant", "nope"],
            "--variant \"nope\" is not a variant; use one of full, gqa, mqa, swa, rope",
        ),
        (&["--variant", "swa"], "--weights"),
        (&["--weights", "Romeo", "--kv"], "cannot be used with"),
    ] {
        // A flag error is clap's, whose first line the page shows; a setting's is one line.
        let msg = s7(args).expect_err("bad input");
        assert!(msg.contains(expect), "{args:?}: {msg}");
        if !msg.starts_with("error:") {
            assert!(!msg.trim_end().contains('\n'), "{args:?}: {msg}");
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The rolling cache: generation past the context, under the band mask.
// ---------------------------------------------------------------------------------------------------

/// Models that roll: rotary positions and a window, with grouped heads, latent attention, one head.
fn rolling_cases() -> Vec<(&'static str, Architecture)> {
    let full = Architecture {
        rope: true,
        window: Some(5),
        ..Architecture::everything(4, 0.0)
    };
    vec![
        ("RoPE + SWA, W = 5", full),
        (
            "GQA, K = 2, RoPE + SWA, W = 3",
            Architecture {
                kv_heads: Some(2),
                window: Some(3),
                ..full
            },
        ),
        (
            "MLA + RoPE + SWA, W = 4",
            Architecture {
                latent: Some(16),
                window: Some(4),
                ..full
            },
        ),
        (
            "one head, q = k = v = x, RoPE + SWA, W = 6",
            Architecture {
                rope: true,
                window: Some(6),
                ..Architecture::default()
            },
        ),
    ]
}

/// A model of `arch` with a context of 16 on `tape`, 2 blocks 32 wide, and 4 contexts of tokens.
fn rolling_model(tape: &mut Tape, arch: Architecture) -> (Gpt, Vec<usize>) {
    let data = CharDataset::from_text(s7_variants::LINE, 1, 16);
    let config = GptConfig {
        vocab_size: data.vocab_size(),
        context_size: 16,
        embedding_size: 32,
        blocks: 2,
        architecture: arch,
    };
    let model = Gpt::new(tape, &mut NumpyRandom::seed(42), config);
    let line = data.encode(s7_variants::LINE).unwrap();
    let ids = line.iter().copied().cycle().take(4 * 16).collect();
    (model, ids)
}

/// The logits (n, V) of `ids` after `cache`, as a vector.
fn rolled(tape: &mut Tape, model: &Gpt, ids: &[usize], cache: &mut RollingCache) -> Vec<f32> {
    tape.reset();
    let logits = model.forward_rolling(tape, ids, cache);
    tape.value(logits).data.clone()
}

/// The logits of the prefill of `ids` into `cache`, as a vector.
fn rolled_prefill(
    tape: &mut Tape,
    model: &Gpt,
    ids: &[usize],
    cache: &mut RollingCache,
) -> Vec<f32> {
    tape.reset();
    let logits = model.prefill_rolling(tape, ids, cache);
    tape.value(logits).data.clone()
}

#[test]
fn rolling_is_the_naive_graph_where_every_row_sums_alike() {
    // Below 8 values NumPy's pairwise sum adds one by one, so a row's masked zeros change nothing:
    // the naive graph with its band mask and the band's own softmax give the same bits.
    for (name, arch) in rolling_cases() {
        let mut tape = Tape::new();
        let (model, ids) = rolling_model(&mut tape, arch);
        for l in 1..8 {
            let naive = model.forward(&mut tape, &ids[..l], 1, None);
            let naive = tape.value(naive).data.clone();
            let rolling = rolled(&mut tape, &model, &ids[..l], &mut RollingCache::default());
            assert_eq!(rolling, naive, "{name}, L = {l}");
        }
    }
}

#[test]
fn the_rolling_cache_is_recomputation_under_the_band_over_four_contexts() {
    for (name, arch) in rolling_cases() {
        let window = arch.window.unwrap();
        let whole_on = |tape: &mut Tape| {
            let (model, ids) = rolling_model(tape, arch);
            let whole = rolled(tape, &model, &ids, &mut RollingCache::default()); // (64, V)
            (model, ids, whole)
        };
        let (_, _, lesson) = whole_on(&mut Tape::new());
        for threads in [1, 2] {
            team::with_team(threads, || {
                let tape = &mut Tape::with_backend(Box::new(Fast::new()));
                let (model, ids, whole) = whole_on(tape);
                assert!(
                    whole == lesson,
                    "{name}: fast = lesson, {threads} thread(s)"
                );
                let v = whole.len() / ids.len();
                let row = |p: usize| &whole[p * v..][..v];
                // One token at a time after a prefill of 5; the rings never hold more than W.
                let mut cache = RollingCache::default();
                assert_eq!(rolled(tape, &model, &ids[..5], &mut cache), whole[..5 * v]);
                for p in 5..ids.len() {
                    let step = rolled(tape, &model, &ids[p..=p], &mut cache);
                    assert!(step == row(p), "{name}: step at {p}, {threads} thread(s)");
                    let kept = cache.layers.iter().flatten().map(|ring| ring.len());
                    assert!(kept.max() == Some(window), "{name}: W rows kept");
                }
                // A prefill of the reach alone, at its positions, then one token at a time.
                let mut cache = RollingCache::default();
                let prefill = rolled_prefill(tape, &model, &ids[..40], &mut cache);
                assert!(
                    prefill[prefill.len() - v..] == *row(39),
                    "{name}: the reach's prefill"
                );
                assert!(
                    cache.len == 40,
                    "{name}: the cache goes on after the prompt"
                );
                for p in 40..ids.len() {
                    let step = rolled(tape, &model, &ids[p..=p], &mut cache);
                    assert!(
                        step == row(p),
                        "{name}: after the reach's prefill, step {p}"
                    );
                }
                // A prompt in pieces: the same bits as one prefill.
                let mut cache = RollingCache::default();
                let mut chunked = vec![];
                for piece in [3, 1, 9, 17, 34] {
                    let at = cache.len;
                    chunked.extend(rolled(tape, &model, &ids[at..at + piece], &mut cache));
                }
                assert!(chunked == whole, "{name}: chunked prefill");
                // Without a cache: the last n·(W − 1) + 1 tokens, at their positions.
                for p in [0usize, 9, 31, 63] {
                    let start = (p + 1).saturating_sub(reach(2, window));
                    let fresh = &mut RollingCache::at(start);
                    let again = rolled(tape, &model, &ids[start..=p], fresh);
                    assert!(again[again.len() - v..] == *row(p), "{name}: reach at {p}");
                }
            })
            .unwrap();
        }
    }
}

#[test]
fn rolling_generation_with_and_without_the_cache_is_one_sample() {
    for (name, arch) in rolling_cases() {
        let mut tape = Tape::new();
        let (model, _) = rolling_model(&mut tape, arch);
        assert!(model.rolls(), "{name} rolls");
        let data = CharDataset::from_text(s7_variants::LINE, 1, 16);
        // A prompt shorter than the reach, and one longer, whose prefill is only its reach.
        for prompt in ["Romeo", s7_variants::LINE] {
            let mut run = |cached| {
                let rng = &mut NumpyRandom::seed(7);
                let sampling = Sampling::default();
                generate_rolling(&mut tape, &model, &data, prompt, 80, rng, sampling, cached)
                    .unwrap()
            };
            let (cached, recomputed) = (run(true), run(false));
            assert_eq!(
                cached.chars().count(),
                prompt.chars().count() + 80,
                "{name}"
            );
            assert_eq!(cached, recomputed, "{name}, {prompt:?}");
        }
    }
    let mut tape = Tape::new();
    let (table, _) = rolling_model(&mut tape, Architecture::everything(4, 0.0));
    assert!(!table.rolls(), "a position table cannot roll");
}
