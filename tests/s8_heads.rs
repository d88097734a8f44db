//! Stage 8's proofs: the detectors score hand-made patterns by their definition, the attention-only
//! model and the key offset have the gradients finite differences give and the same bits on the
//! fast layer, probing a run changes none of its training bits, and an ablated head is a head
//! whose output is replaced.

mod common;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::fast::{Fast, team};
use attention_from_scratch::s5_gpt::train::{Recipe, Trainer};
use attention_from_scratch::s5_gpt::{CharDataset, Gpt, GptConfig, Split, Tape, Tensor};
use attention_from_scratch::s8_heads::ablation::{
    Ablation, HeadId, ablated_params, head_outputs, with_params,
};
use attention_from_scratch::s8_heads::detectors::{Detector, pure, score};
use attention_from_scratch::s8_heads::repeats::{Repeats, repeats_rng};
use attention_from_scratch::s8_heads::study::{Probes, train_probed};
use common::gradcheck::{check_gradients, check_whole_model, random_tensor};

#[test]
fn a_pure_head_scores_one_on_its_own_detector() {
    let tokens: Vec<usize> = "CAPULETCAPULET".chars().map(|c| c as usize).collect();
    let (t, n) = (tokens.len(), tokens.len() / 2);
    let previous = pure(t, |i| i.saturating_sub(1));
    let induction = pure(t, |i| if i >= n { i - n + 1 } else { i });
    assert_eq!(score(Detector::PreviousToken, &tokens, &previous), 1.0);
    assert_eq!(score(Detector::Induction, &tokens, &induction), 1.0);
    // The duplicate-token head looks at the earlier copy itself: one before the induction head.
    let duplicate = pure(t, |i| if i >= n { i - n } else { i });
    assert_eq!(score(Detector::DuplicateToken, &tokens, &duplicate), 1.0);
    assert!(score(Detector::Induction, &tokens, &previous) < 0.2);
}

#[test]
fn gradient_of_the_key_offset() {
    let k = random_tensor(&[2, 2, 5, 8], 11, 1.0); // (B, K, T, D)
    check_gradients("key_offset", &[k], |tape, ids| tape.key_offset(ids[0]));
}

#[test]
fn gradient_of_attention_only_models() {
    let attention_only = |key_offset| Architecture {
        attention_only: true,
        key_offset,
        ..Architecture::everything(2, 0.0)
    };
    check_whole_model(attention_only(false), 25.0);
    check_whole_model(attention_only(true), 25.0);
}

#[test]
fn attention_only_draws_the_feed_forward_weights_and_drops_them() {
    let params = |attention_only| {
        let mut tape = Tape::new();
        let config = GptConfig {
            vocab_size: 10,
            context_size: 8,
            embedding_size: 8,
            blocks: 2,
            architecture: Architecture {
                attention_only,
                ..Architecture::everything(2, 0.0)
            },
        };
        let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(1), config);
        let named: Vec<(String, Tensor)> = model
            .named_parameters()
            .into_iter()
            .map(|(n, id)| (n, tape.value(id).clone()))
            .collect();
        named
    };
    let (with, without) = (params(true), params(false));
    let kept: Vec<&(String, Tensor)> = without
        .iter()
        .filter(|(n, _)| !n.contains(".ff.") && !n.contains(".ln2."))
        .collect();
    assert_eq!(with.iter().collect::<Vec<_>>(), kept);
    assert!(with.len() < without.len());
}

/// A small attention-only recipe on a line of text, with repeats in every row.
fn small(key_offset: bool) -> (Recipe, CharDataset) {
    let text =
        "to be, or not to be: that is the question. whether 'tis nobler in the mind to suffer";
    let recipe = Recipe {
        epochs: 4,
        batch_size: 2,
        context_size: 16,
        embedding_size: 16,
        blocks: 2,
        architecture: Architecture {
            attention_only: true,
            key_offset,
            rope: key_offset,
            ..Architecture::everything(2, 0.0)
        },
        lr: 3e-3,
        seed: 5,
    };
    (recipe, CharDataset::from_text(&text.repeat(4), 2, 16))
}

const REPEATS: Repeats = Repeats {
    every: 1,
    lengths: (2, 6),
};

/// Trains a few steps of `small` with repeats, without probing; the weights' bits.
fn plain_bits(trainer: &mut Trainer) -> Vec<u32> {
    let vocab = trainer.dataset.vocab_size();
    while trainer.losses.len() < trainer.steps {
        let s = trainer.losses.len();
        let mut batch = trainer
            .dataset
            .batch(Split::Train, s % trainer.dataset.len(Split::Train));
        REPEATS.mix(&mut batch, vocab, &mut repeats_rng(trainer.recipe.seed, s));
        trainer.step(&batch).unwrap();
    }
    bits(trainer)
}

fn bits(trainer: &Trainer) -> Vec<u32> {
    let params = trainer.tape.params().iter().flat_map(|p| p.data.iter());
    params.chain(&trainer.losses).map(|x| x.to_bits()).collect()
}

#[test]
fn probing_changes_no_training_bit() {
    for key_offset in [false, true] {
        let (recipe, dataset) = small(key_offset);
        let mut plain = Trainer::new(recipe, dataset.clone(), Box::new(Fast::new()), Some(12));
        let expected = plain_bits(&mut plain);
        let mut probed = Trainer::new(recipe, dataset, Box::new(Fast::new()), Some(12));
        let probes = Probes::new(1, 2, 16, probed.dataset.vocab_size());
        let taken = train_probed(&mut probed, Some(REPEATS), (&probes, 3), |_| {}).unwrap();
        assert_eq!(
            taken.len(),
            5,
            "before the first step and after steps 3, 6, 9 and 12"
        );
        assert!(bits(&probed) == expected, "key offset {key_offset}");
    }
}

#[test]
fn the_fast_layer_gives_the_lessons_bits_attention_only() {
    for key_offset in [false, true] {
        let (recipe, dataset) = small(key_offset);
        let lesson = plain_bits(&mut Trainer::new(
            recipe,
            dataset.clone(),
            Box::new(attention_from_scratch::s5_gpt::backend::Lesson),
            Some(8),
        ));
        for threads in [1, 2] {
            let fast = team::with_team(threads, || {
                let backend = Box::new(Fast::new());
                plain_bits(&mut Trainer::new(recipe, dataset.clone(), backend, Some(8)))
            })
            .unwrap();
            assert!(
                fast == lesson,
                "key offset {key_offset}, {threads} thread(s)"
            );
        }
    }
}

#[test]
fn an_ablated_head_is_its_output_replaced() {
    let (recipe, dataset) = small(false);
    let mut trainer = Trainer::new(recipe, dataset, Box::new(Fast::new()), Some(6));
    plain_bits(&mut trainer);
    let batch = trainer.dataset.batch(Split::Test, 0);
    let (model, tape) = (trainer.model.clone(), &mut trainer.tape);
    let head = HeadId { block: 1, head: 1 };
    // The block's output layer's output with the head's z replaced by `z`, computed by hand from
    // the graph of the model as it is.
    let by_hand = |tape: &mut Tape, replace: &dyn Fn(&mut [f32])| -> Vec<f32> {
        tape.reset();
        model.forward(tape, &batch.x, batch.rows, None);
        let z = tape.value(head_outputs(tape)[1]).clone(); // (B, H, T, D)
        let [b, h, t, d] = z.shape[..] else { panic!() };
        let mut merged = vec![0.0f32; b * t * h * d]; // (B, T, C)
        for (row, (bh, heads)) in merged
            .chunks_exact_mut(d)
            .zip((0..b * t).flat_map(|bt| (0..h).map(move |hh| (bt, hh))))
        {
            let (bb, tt) = (bh / t, bh % t);
            row.copy_from_slice(&z.data[((bb * h + heads) * t + tt) * d..][..d]);
            if heads == head.head {
                replace(row);
            }
        }
        let x = tape.input(Tensor::new(&[b, t, h * d], merged));
        let out = model.blocks[1].attn.out.forward(tape, x);
        tape.value(out).data.clone()
    };
    let ablated_out = |tape: &mut Tape, ablation| {
        let params = ablated_params(&model, tape, (head, ablation), (&batch.x, batch.rows));
        with_params(tape, &params, |tape| {
            tape.reset();
            model.forward(tape, &batch.x, batch.rows, None);
            let merged = head_outputs(tape).len(); // the out layer reads merge_heads' output
            assert_eq!(merged, 2);
            let out = (0..tape.len())
                .map(attention_from_scratch::s5_gpt::NodeId)
                .rfind(|&id| {
                    tape.op(id)
                        .inputs()
                        .contains(&model.blocks[1].attn.out.weight)
                })
                .unwrap();
            tape.value(out).data.clone()
        })
    };
    let zero = by_hand(tape, &|row| row.fill(0.0));
    let close = |a: &[f32], b: &[f32]| {
        a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs()))
    };
    assert!(close(&ablated_out(tape, Ablation::Zero), &zero));
    // The mean of the head's z over the reference text, the same batch here.
    tape.reset();
    model.forward(tape, &batch.x, batch.rows, None);
    let z = tape.value(head_outputs(tape)[1]).clone();
    let [b, h, t, d] = z.shape[..] else { panic!() };
    let mut mean = vec![0.0f64; d];
    for bb in 0..b {
        for tt in 0..t {
            for (m, &x) in mean
                .iter_mut()
                .zip(&z.data[((bb * h + head.head) * t + tt) * d..][..d])
            {
                *m += f64::from(x) / (b * t) as f64;
            }
        }
    }
    let mean_out = by_hand(tape, &|row| {
        row.iter_mut().zip(&mean).for_each(|(r, &m)| *r = m as f32)
    });
    assert!(close(&ablated_out(tape, Ablation::Mean), &mean_out));
    assert!(!close(&zero, &mean_out), "the two ablations differ");
}

#[test]
fn exercise_a_head_built_by_position_misses_the_first_copys_repeat() {
    use attention_from_scratch::s8_heads::exercises::positional_induction_on_romeo;
    assert!((positional_induction_on_romeo() - 5.0 / 6.0).abs() < 1e-12);
}

#[test]
fn exercise_identity_heads_compose_at_one_over_root_c() {
    use attention_from_scratch::s8_heads::exercises::identity_composition;
    for c in [4, 16, 64] {
        assert!((identity_composition(c) - 1.0 / (c as f64).sqrt()).abs() < 1e-12);
    }
}

// ---------------------------------------------------------------------------------------------------
// The chapter's output, and the flags on the command lines.
// ---------------------------------------------------------------------------------------------------

/// What `cargo run --example s8_heads` prints, computed once for the tests that read it.
fn printed() -> &'static str {
    static PRINTED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PRINTED.get_or_init(|| {
        use attention_from_scratch::s5_gpt::app::files::default_data_path;
        use attention_from_scratch::s8_heads::{Settings, run};
        let settings = Settings {
            data: default_data_path(),
            threads: 1,
        };
        let mut out = Vec::new();
        run(&mut out, &settings).expect("the corpus is found and the run writes to a Vec");
        String::from_utf8(out).expect("the output is UTF-8")
    })
}

/// The chapter's output blocks: the snapshot's name and the cells it holds.
const BLOCKS: [common::Block; 5] = [
    ("hand_made", &["hand-made"]),
    ("short_run", &["short run"]),
    ("heads", &["heads"]),
    ("circuits", &["circuits"]),
    ("ablation", &["ablation"]),
];

#[test]
fn full_output_snapshot() {
    insta::assert_snapshot!("output", printed());
}

#[test]
fn output_blocks_of_the_chapter() {
    for (name, text) in common::blocks(printed(), &BLOCKS) {
        insta::assert_snapshot!(name, text);
    }
}

#[test]
fn the_attention_only_flags_train_save_reload_and_refuse_what_they_cannot() {
    use common::cli::{fails, ok};
    let dir = common::scratch("s8_heads", "flags");
    let dir = dir.to_str().unwrap();
    let flags = [
        "--heads",
        "4",
        "--residual",
        "--attention-only",
        "--key-offset",
    ];
    let steps = ["--max-steps", "3", "--quiet"];
    ok(&[&["train", "--save", dir][..], &flags, &steps].concat());
    let saved = attention_from_scratch::s5_gpt::app::checkpoint::load(std::path::Path::new(dir));
    let saved = saved.unwrap();
    assert!(
        !saved.weights.iter().any(|(n, _)| n.contains(".ff.")),
        "no feed-forward weights"
    );
    ok(&["generate", "--checkpoint", dir, "--sample-len", "10"]);
    let full = common::scratch("s8_heads", "full");
    let full = full.to_str().unwrap();
    ok(&["train", "--save", full, "--max-steps", "2", "--quiet"]);
    let msg = fails(&["train", "--resume", full, "--attention-only"]);
    assert!(
        msg.contains("--attention-only on differs from the checkpoint's off"),
        "{msg}"
    );
    for (flags, expect) in [
        (
            &["--key-offset", "--embedding-size", "12", "--heads", "4"][..],
            "a head is 3 wide",
        ),
        (&["--key-offset", "--latent", "8"], "use one of them"),
    ] {
        let scratch = common::scratch("s8_heads", "refused");
        let save = scratch.join("run");
        let base = [
            "train",
            "--max-steps",
            "1",
            "--quiet",
            "--save",
            save.to_str().unwrap(),
        ];
        let msg = fails(&[&base[..], flags].concat());
        assert!(msg.contains(expect), "{flags:?}: {msg}");
        assert!(!save.exists(), "{flags:?} left its --save folder");
    }
}

#[test]
fn bad_study_flags_are_named_with_their_fix() {
    use attention_from_scratch::s8_heads::app::Cli;
    use clap::Parser;
    for (args, expect) in [
        (
            &["--phase", "--steps", "0"][..],
            "--steps 0 is out of range",
        ),
        (
            &["--phase", "--steps", "10", "--every", "11"],
            "--every 11 is out of range",
        ),
        (
            &["--phase", "--model", "aon3"],
            "--model aon3 is not one of the study's",
        ),
        (&["--threads", "0"], "--threads 0 is out of range"),
        (
            &["--book-models", "--max-steps", "0"],
            "--max-steps 0 is out of range",
        ),
        (
            &["--data", "/nonexistent/corpus.txt"],
            "no corpus at /nonexistent/corpus.txt",
        ),
    ] {
        let cli = Cli::try_parse_from(std::iter::once("s8_heads").chain(args.iter().copied()));
        let err = cli.unwrap().run(&mut Vec::new()).expect_err("refused");
        let msg = err.to_string();
        assert!(
            msg.contains(expect) && !msg.contains('\n'),
            "{args:?}: {msg}"
        );
    }
}

/// `--book-models` trains the tutorial's model and each of stage 7's variants and prints a line per
/// head: two blocks of one head, then two of four for each variant.
#[test]
fn book_models_print_every_head_of_every_model() {
    use attention_from_scratch::s7_variants::variants;
    use attention_from_scratch::s8_heads::app::Cli;
    use clap::Parser;
    let cli = Cli::try_parse_from(["s8_heads", "--book-models", "--max-steps", "2"]).unwrap();
    let mut out = Vec::new();
    cli.run(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = out.lines().skip(1).collect();
    assert_eq!(lines.len(), 1 + variants().len(), "{out}");
    for (line, heads) in lines.iter().zip([2].into_iter().chain([8; 16])) {
        let scores: Vec<f64> = (line[16..].split_whitespace())
            .filter(|w| *w != "|")
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(scores.len(), heads + 2, "{line}");
        assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{line}");
    }
    assert!(Cli::try_parse_from(["s8_heads", "--max-steps", "2"]).is_err());
    assert!(Cli::try_parse_from(["s8_heads", "--book-models", "--phase"]).is_err());
}

/// The committed record of `--book-models` holds every model's line, and the chapter's include
/// takes exactly its table (lines 4 to 12).
#[test]
fn the_book_models_record_is_whole_and_included_whole() {
    use attention_from_scratch::s7_variants::variants;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let record =
        std::fs::read_to_string(root.join("book/src/generated/s8_book_models.txt")).unwrap();
    let lines: Vec<&str> = record.lines().collect();
    assert!(
        lines[3].starts_with("model ") && lines[12].starts_with("# Ended"),
        "{record}"
    );
    let names = std::iter::once("the tutorial's").chain(variants().into_iter().map(|(n, _)| n));
    assert!(
        names.zip(&lines[4..12]).all(|(n, l)| l.starts_with(n)),
        "{record}"
    );
    let chapter = std::fs::read_to_string(root.join("book/src/s8_heads.md")).unwrap();
    assert!(chapter.contains("{{#include generated/s8_book_models.txt:4:12}}"));
}
