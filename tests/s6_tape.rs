//! Stage 6 on stage 5's tape: the FlashAttention op (`Tape::flash_attention`) in both forms,
//! gradchecked against float64 finite differences, the tiled form against the naive graph's
//! gradients, the exact form bit for bit against the naive graph, and training runs with
//! `--attention exact` against the naive runs.

use std::ops::ControlFlow;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::app::args::{Cli, Command};
use attention_from_scratch::s5_gpt::backend::Op;
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::flash::AttentionForm;
use attention_from_scratch::s5_gpt::flash::{FlashForm, TAPE_TILES};
use attention_from_scratch::s5_gpt::model::attention_scale;
use attention_from_scratch::s5_gpt::ops::{MASK_VALUE, dropout_mask};
use attention_from_scratch::s5_gpt::train::Recipe;
use attention_from_scratch::s5_gpt::{NodeId, Tape, Tensor};
use attention_from_scratch::s6_flash::Tiles;
use attention_from_scratch::s6_flash::backward::relative_difference;

/// Values from NumPy's generator, times `scale`.
fn random_tensor(shape: &[usize], seed: u32, scale: f64) -> Tensor {
    let mut rng = NumpyRandom::seed(seed);
    let n = shape.iter().product();
    let data = (0..n).map(|_| (rng.standard_normal() * scale) as f32);
    Tensor::new(shape, data.collect())
}

/// One attention to compute: the shape (…, T, D) of Q, K and V, whether they are one node (the
/// tutorial's q = k = v = x) or three, the mask's value, and dropout's probability (its mask drawn
/// from [`DROPOUT_SEED`]).
#[derive(Clone, Copy, Debug)]
struct Case {
    shape: [usize; 4],
    same_node: bool,
    mask_value: f32,
    dropout: f64,
}

/// The seed of every case's dropout mask.
const DROPOUT_SEED: u32 = 77;

impl Case {
    /// (B, T, C) with q = k = v = x, as the tutorial's model attends.
    fn tutorial(b: usize, t: usize, c: usize, mask_value: f32) -> Self {
        Case {
            shape: [1, b, t, c],
            same_node: true,
            mask_value,
            dropout: 0.0,
        }
    }

    /// (B, H, T, D) with projections: three nodes.
    fn heads(b: usize, h: usize, t: usize, d: usize, mask_value: f32) -> Self {
        Case {
            shape: [b, h, t, d],
            same_node: false,
            mask_value,
            dropout: 0.0,
        }
    }

    /// The shape as the model has it: (B, T, C) for the tutorial's, (B, H, T, D) otherwise.
    fn dims(&self) -> Vec<usize> {
        match self.same_node {
            true => self.shape[1..].to_vec(),
            false => self.shape.to_vec(),
        }
    }

    /// The same with dropout `p`.
    fn dropout(self, p: f64) -> Self {
        Case { dropout: p, ..self }
    }

    /// The dropout mask of the (…, T, T) weights, as `Tape::dropout` draws it: ones without dropout.
    fn mask(&self) -> Vec<f32> {
        let (t, d) = self.t_d();
        let mut mask = vec![1.0; self.dims().iter().product::<usize>() / d * t];
        if self.dropout > 0.0 {
            dropout_mask(
                &mut mask,
                &mut NumpyRandom::seed(DROPOUT_SEED),
                self.dropout,
            );
        }
        mask
    }

    fn t_d(&self) -> (usize, usize) {
        (self.shape[2], self.shape[3])
    }

    fn scale(&self) -> f32 {
        attention_scale(self.t_d().1)
    }

    /// Q, K and V (one tensor when they are one node), drawn from `seed`.
    fn inputs(&self, seed: u32) -> Vec<Tensor> {
        let n = if self.same_node { 1 } else { 3 };
        (0..n as u32)
            .map(|i| random_tensor(&self.dims(), seed + i, 1.0))
            .collect()
    }
}

/// The naive graph, as `beyond::Attention::forward` records it, with dropout while training.
fn naive(tape: &mut Tape, [q, k, v]: [NodeId; 3], case: Case, rng: &mut NumpyRandom) -> NodeId {
    let kt = tape.transpose(k); // (…, D, T)
    let scores = tape.matmul(q, kt); // (…, T, T)
    let scores = tape.scale(scores, case.scale());
    let masked = tape.tril(scores, case.mask_value);
    let mut weights = tape.softmax(masked);
    if case.dropout > 0.0 {
        weights = tape.dropout(weights, case.dropout, rng);
    }
    tape.matmul(weights, v) // (…, T, D)
}

/// The output of `form` (the naive graph for `None`) on `inputs`, the gradient of each input from
/// `d_out`, and the dropout generator's next draw after the attention.
fn run(
    case: Case,
    inputs: &[Tensor],
    form: Option<FlashForm>,
    d_out: &[f32],
) -> (Vec<f32>, Vec<Vec<f32>>, f64) {
    let mut tape = Tape::new();
    let ids: Vec<NodeId> = inputs.iter().map(|x| tape.param(x.clone())).collect();
    let qkv = if case.same_node {
        [ids[0]; 3]
    } else {
        [ids[0], ids[1], ids[2]]
    };
    let (scale, mask) = (case.scale(), case.mask_value);
    let mut rng = NumpyRandom::seed(DROPOUT_SEED);
    let out = match form {
        None => naive(&mut tape, qkv, case, &mut rng),
        Some(form) if case.dropout > 0.0 => {
            tape.flash_attention_dropout(qkv, (scale, mask), form, (case.dropout, &mut rng))
        }
        Some(form) => {
            let [q, k, v] = qkv;
            tape.flash_attention(q, k, v, scale, mask, form)
        }
    };
    let value = tape.value(out).data.clone();
    tape.backward_from(out, d_out.to_vec());
    let grads = ids.iter().map(|&x| tape.grad(x).unwrap().to_vec());
    (value, grads.collect(), rng.random_sample())
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

/// The cases of the bit-for-bit and closeness tests: T = 1, odd T, T past `pairwise_sum`'s block of
/// 128, one head and four, q = k = v and three nodes, masks of −1e9, 0 and −∞, without dropout and
/// with a dropout of 0.25.
fn cases() -> Vec<Case> {
    let mut cases = vec![];
    for mask in [MASK_VALUE, 0.0, f32::NEG_INFINITY] {
        let these = [
            Case::tutorial(2, 1, 8, mask),
            Case::tutorial(2, 7, 8, mask),
            Case::tutorial(1, 32, 64, mask),
            Case::tutorial(1, 131, 6, mask),
            Case::heads(2, 1, 5, 4, mask),
            Case::heads(1, 1, 1, 4, mask),
            Case::heads(2, 4, 9, 4, mask),
            Case::heads(1, 4, 33, 16, mask),
        ];
        cases.extend(these);
        cases.extend(these.map(|case| case.dropout(0.25)));
    }
    cases
}

#[test]
fn the_exact_form_gives_the_naive_graphs_bits() {
    for (n, case) in cases().into_iter().enumerate() {
        let inputs = case.inputs(10 + 3 * n as u32);
        let len = case.dims().iter().product();
        let d_out = random_tensor(&[len], 99, 1.0).data;
        let (want, want_grads, want_next) = run(case, &inputs, None, &d_out);
        let (got, got_grads, got_next) = run(case, &inputs, Some(FlashForm::Exact), &d_out);
        assert_eq!(
            got_next, want_next,
            "{case:?}: the generator after the attention"
        );
        assert_eq!(bits(&got), bits(&want), "{case:?}: the output");
        for (i, (got, want)) in got_grads.iter().zip(&want_grads).enumerate() {
            assert_eq!(bits(got), bits(want), "{case:?}: the gradient of input {i}");
        }
    }
}

/// Σ O·R of causal attention in float64, for Q, K, V of `case` (one tensor when they are one node):
/// the reference the finite differences are taken of.
fn loss_f64(case: Case, inputs: &[Vec<f64>], r: &[f32]) -> f64 {
    let (t, d) = case.t_d();
    let [q, k, v] = match case.same_node {
        true => [&inputs[0]; 3],
        false => [&inputs[0], &inputs[1], &inputs[2]],
    };
    let (scale, mask) = (f64::from(case.scale()), f64::from(case.mask_value));
    let dropout = case.mask();
    let mut loss = 0.0;
    for m in 0..q.len() / (t * d) {
        let at = |x: &[f64], i: usize| x[(m * t + i) * d..][..d].to_vec();
        for i in 0..t {
            let scores: Vec<f64> = (0..t)
                .map(|j| match j > i {
                    true => mask,
                    false => {
                        at(q, i)
                            .iter()
                            .zip(at(k, j))
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                            * scale
                    }
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for p in 0..d {
                let kept = |j: usize| f64::from(dropout[(m * t + i) * t + j]);
                let o: f64 = (0..t).map(|j| e[j] / sum * kept(j) * at(v, j)[p]).sum();
                loss += o * f64::from(r[(m * t + i) * d + p]);
            }
        }
    }
    loss
}

/// The largest |backward − finite difference| / (1 + |finite difference|) of `form` over every
/// input element: central differences of [`loss_f64`] with h = 1e-4, whose truncation and rounding
/// errors (about 1e-8 and 1e-12/h) are far below the float32 backward pass's own rounding.
fn gradcheck(case: Case, form: FlashForm) -> f64 {
    let inputs = case.inputs(5);
    let len = case.dims().iter().product();
    let r = random_tensor(&[len], 7, 1.0).data;
    let (_, grads, _) = run(case, &inputs, Some(form), &r);
    let wide: Vec<Vec<f64>> = inputs
        .iter()
        .map(|x| x.data.iter().map(|&v| f64::from(v)).collect())
        .collect();
    let h = 1e-4;
    let mut worst = 0.0f64;
    for (i, grad) in grads.iter().enumerate() {
        for (j, &g) in grad.iter().enumerate() {
            let mut moved = wide.clone();
            moved[i][j] += h;
            let plus = loss_f64(case, &moved, &r);
            moved[i][j] -= 2.0 * h;
            let minus = loss_f64(case, &moved, &r);
            let numeric = (plus - minus) / (2.0 * h);
            worst = worst.max((f64::from(g) - numeric).abs() / (1.0 + numeric.abs()));
        }
    }
    worst
}

/// The forms the gradchecks run: the tiled one in tiles that do not divide T.
const FORMS: [FlashForm; 2] = [FlashForm::Tiled(Tiles { br: 3, bc: 2 }), FlashForm::Exact];

#[test]
fn both_forms_pass_a_gradcheck_against_float64_finite_differences() {
    // The float32 backward pass rounds each of its sums of about T·D terms, so it sits within a few
    // 1e-7 of the float64 gradient (at most 2.9e-7 here, relative to 1 + |g|); 1e-6 leaves a margin
    // and still fails a wrong sign, a missing term or a transposed index, which are off by the
    // gradient's own size, about 0.1 to 1.
    let cases = [
        Case::tutorial(2, 7, 4, MASK_VALUE),
        Case::tutorial(1, 6, 3, 0.0),
        Case::heads(1, 2, 7, 3, MASK_VALUE),
        Case::heads(2, 1, 5, 2, 0.0),
        Case::tutorial(2, 7, 4, MASK_VALUE).dropout(0.25),
        Case::heads(1, 2, 7, 3, 0.0).dropout(0.5),
    ];
    for case in cases {
        for form in FORMS {
            let worst = gradcheck(case, form);
            eprintln!("{case:?} {form:?}: worst error {worst:.2e}");
            assert!(worst <= 1e-6, "{case:?} {form:?}: {worst:e}");
        }
    }
}

#[test]
fn the_tiled_forms_gradients_are_close_to_the_naive_graphs() {
    // Measured over these cases and tiles: outputs within 1.7e-6 of the naive graph's largest
    // output, gradients within 2.5e-6 of its largest gradient, both at T = 131 with a mask of 0
    // (every row weighs all 131 keys) in tiles of 3 × 2 (66 rescales per row). The bounds are about
    // two and a half times those.
    let tile_sizes = [Tiles::new(3, 2), TAPE_TILES, Tiles::new(16, 8)];
    let mut worst = [0.0f64; 2];
    for (n, case) in cases().into_iter().enumerate() {
        let inputs = case.inputs(40 + 3 * n as u32);
        let len = case.dims().iter().product();
        let d_out = random_tensor(&[len], 98, 1.0).data;
        let (want, want_grads, _) = run(case, &inputs, None, &d_out);
        for tiles in tile_sizes {
            let (got, got_grads, _) = run(case, &inputs, Some(FlashForm::Tiled(tiles)), &d_out);
            let output = relative_difference(&got, &want);
            // All the gradients together: with T = 1 the one weight's dQ and dK are 0 in the naive
            // graph, and a rounding's worth in the tiled form.
            let grad = relative_difference(&got_grads.concat(), &want_grads.concat());
            eprintln!("{case:?} {tiles:?}: output {output:.2e}, gradients {grad:.2e}");
            worst = [worst[0].max(output), worst[1].max(grad)];
        }
    }
    eprintln!("worst: output {:.2e}, gradients {:.2e}", worst[0], worst[1]);
    assert!(worst[0] <= 4e-6, "outputs {:e} apart", worst[0]);
    assert!(worst[1] <= 6e-6, "gradients {:e} apart", worst[1]);
}

/// The losses of the chapter's first `steps` training steps with `architecture`, on the fast layer
/// (whose kernels for the tiled form give the lesson's bits, `tests/s6_fast.rs`).
fn losses(architecture: Architecture, steps: usize) -> Vec<f32> {
    let cfg = Config {
        recipe: Recipe {
            architecture,
            ..Recipe::default()
        },
        max_steps: Some(steps),
        ..Config::default()
    };
    let mut trainer = cfg.trainer().expect("Tiny Shakespeare: run data/fetch.sh");
    trainer.train(|_| ControlFlow::Continue(())).unwrap();
    trainer.losses
}

/// 300 steps of `architecture` naive, exact and tiled: the exact losses must be the naive ones bit
/// for bit, and the tiled ones within 1e-5 of them (measured: 4.8e-7 for the tutorial's model,
/// 7.2e-7 for the sequel's fullest, with dropout and without). Returns the three runs' losses.
fn naive_exact_tiled(architecture: Architecture) -> [Vec<f32>; 3] {
    let with = |attention| {
        losses(
            Architecture {
                attention,
                ..architecture
            },
            300,
        )
    };
    let naive = with(AttentionForm::Naive);
    assert_eq!(naive.len(), 300);
    let exact = with(AttentionForm::Exact);
    for (s, (e, n)) in exact.iter().zip(&naive).enumerate() {
        assert_eq!(e.to_bits(), n.to_bits(), "step {s}: exact {e}, naive {n}");
    }
    let tiled = with(AttentionForm::Tiled);
    let drift = largest_distance(&tiled, &naive);
    eprintln!("{architecture:?}, tiled: losses within {drift:e} of naive");
    assert!(drift <= 1e-5, "tiled drifts {drift} from naive");
    [naive, exact, tiled]
}

/// The largest |a − b| over the steps.
fn largest_distance(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// The chapter's view of three runs: the losses at a few steps in each form, and how they compare
/// over all 300 steps.
fn losses_table([naive, exact, tiled]: &[Vec<f32>; 3]) -> String {
    let mut text = format!("{:<6}{:<12}{:<12}{}\n", "step", "naive", "exact", "tiled");
    for step in [0, 1, 2, 100, 200, 299] {
        let [n, e, t] = [naive, exact, tiled].map(|l| l[step].to_string());
        text += &format!("{step:<6}{n:<12}{e:<12}{t}\n");
    }
    let same = exact
        .iter()
        .zip(naive)
        .all(|(e, n)| e.to_bits() == n.to_bits());
    text += &format!("exact = naive, bit for bit, at all 300 steps: {same}\n");
    let drift = largest_distance(tiled, naive);
    text += &format!("tiled, the largest distance from naive: {drift:.1e}");
    text
}

#[test]
fn the_chapters_recipe_with_exact_attention_gives_every_loss_of_the_naive_run() {
    let runs = naive_exact_tiled(Architecture::default());
    // The chapter's locked log (tests/snapshots/s5_gpt__chapter_2_training.snap) prints step 0.
    assert_eq!(runs[0][0].to_string(), "4.1720004");
    insta::assert_snapshot!("chapter_recipe_each_attention", losses_table(&runs));
}

#[test]
fn the_sequels_fullest_model_with_exact_attention_gives_every_loss_of_the_naive_run() {
    naive_exact_tiled(Architecture::everything(4, 0.0));
}

#[test]
fn the_sequels_fullest_model_with_dropout_and_exact_attention_gives_every_loss_of_the_naive_run() {
    // Dropout 0.1 inside the op, its masks drawn as the naive graph's `Dropout` draws them.
    let runs = naive_exact_tiled(Architecture::everything(4, 0.1));
    let without = losses(Architecture::everything(4, 0.0), 5);
    assert_ne!(runs[0][1..5], without[1..5], "dropout changes the losses");
    insta::assert_snapshot!("fullest_model_dropout_each_attention", losses_table(&runs));
}

#[test]
fn attention_is_a_flag_and_a_field_that_older_checkpoints_do_without() {
    let recipe = |args: &[&str]| {
        let argv = [&["s5_gpt", "train"][..], args].concat();
        Cli::try_parse_args(argv).map(|cli| match cli.command {
            Some(Command::Train(t)) => t.recipe.recipe(),
            _ => unreachable!("train parses as train"),
        })
    };
    assert_eq!(
        recipe(&[]).unwrap().architecture.attention,
        AttentionForm::Naive
    );
    for form in AttentionForm::ALL {
        let got = recipe(&["--attention", form.name()]).unwrap();
        assert_eq!(got.architecture.attention, form);
    }
    let error = recipe(&["--attention", "flash"]).unwrap_err().to_string();
    assert!(
        error.starts_with("error: invalid value 'flash' for '--attention <FORM>'"),
        "{error}"
    );
    assert!(
        error.contains("[possible values: naive, tiled, exact]"),
        "{error}"
    );

    // A naive recipe writes no `attention` (a checkpoint's config.json is what it was), and a
    // config.json without one reads as naive.
    let naive = serde_json::to_value(Recipe::default()).unwrap();
    assert!(naive.get("attention").is_none(), "{naive}");
    let exact = Recipe {
        architecture: Architecture {
            attention: AttentionForm::Exact,
            ..Architecture::default()
        },
        ..Recipe::default()
    };
    let written = serde_json::to_value(exact).unwrap();
    assert_eq!(written["attention"], "exact");
    let read: Recipe = serde_json::from_value(written).unwrap();
    assert_eq!(read, exact);
    let old: Recipe = serde_json::from_value(naive).unwrap();
    assert_eq!(old.architecture.attention, AttentionForm::Naive);
}

#[test]
fn the_node_keeps_one_number_per_row_tiled_and_none_exact() {
    // (B, H, T, D) = (2, 4, 64, 8): the naive graph keeps 2·4·64·64 = 32,768 scores and as many
    // weights on the tape; the tiled node keeps its 2·4·64 = 512 log-sum-exps, the exact one nothing.
    let case = Case::heads(2, 4, 64, 8, MASK_VALUE);
    let inputs = case.inputs(3);
    for (form, kept) in [(FlashForm::Tiled(TAPE_TILES), 512), (FlashForm::Exact, 0)] {
        let mut tape = Tape::new();
        let [q, k, v] = [0, 1, 2].map(|i| tape.param(inputs[i].clone()));
        let out = tape.flash_attention(q, k, v, case.scale(), MASK_VALUE, form);
        assert_eq!(tape.len(), 4, "one node for the whole attention");
        let Op::FlashAttention(node) = tape.op(out) else {
            panic!("the node is FlashAttention")
        };
        assert_eq!(node.lse.len(), kept, "{form:?}");
    }
}
