//! Stage 5's two layers agree to the bit: every op, forward and backward, on awkward shapes and values,
//! at one thread and at two; then whole training runs, `--reference` against the default; and the
//! layering itself (the lesson imports nothing of the fast layer or the tool).

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::app::args::Cli;
use attention_from_scratch::s5_gpt::backend::{Backend, Lesson};
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::fast::kernels::{self, AVX2_VAR, Lanes, PORTABLE_VAR};
use attention_from_scratch::s5_gpt::fast::tiles::{self, A_BLOCK_VAR, PANEL_VAR, TILE_VAR, Tile};
use attention_from_scratch::s5_gpt::fast::{Fast, team};
use attention_from_scratch::s5_gpt::ops::MASK_VALUE;
use attention_from_scratch::s5_gpt::optim::AdamW;
use attention_from_scratch::s5_gpt::train::Recipe;
use attention_from_scratch::s5_gpt::{NodeId, Tape, Tensor};

/// Normal values from NumPy's generator, times `scale`.
fn normals(n: usize, seed: u32, scale: f64) -> Vec<f32> {
    let mut rng = NumpyRandom::seed(seed);
    (0..n)
        .map(|_| (rng.standard_normal() * scale) as f32)
        .collect()
}

fn tensor(shape: &[usize], seed: u32) -> Tensor {
    Tensor::new(shape, normals(shape.iter().product(), seed, 1.0))
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

/// The output and every input's gradient (for a random output gradient), as bits.
type Run = (Vec<u32>, Vec<Vec<u32>>);

fn run_on(
    backend: Box<dyn Backend>,
    inputs: &[Tensor],
    op: &dyn Fn(&mut Tape, &[NodeId]) -> NodeId,
) -> Run {
    let mut tape = Tape::with_backend(backend);
    let ids: Vec<NodeId> = inputs.iter().map(|t| tape.param(t.clone())).collect();
    let out = op(&mut tape, &ids);
    let d_out = normals(tape.value(out).data.len(), 99, 1.0);
    let value = bits(&tape.value(out).data);
    tape.backward_from(out, d_out);
    let grads = ids
        .iter()
        .map(|&id| tape.grad(id).map(bits).unwrap_or_default())
        .collect();
    (value, grads)
}

/// Runs `op` on `inputs` with the lesson and with the fast layer (on 1 and 2 threads); all must agree.
fn agree(name: &str, inputs: &[Tensor], op: impl Fn(&mut Tape, &[NodeId]) -> NodeId) {
    let lesson = run_on(Box::new(Lesson), inputs, &op);
    for threads in [1, 2] {
        let fast = team::with_team(threads, || run_on(Box::new(Fast::new()), inputs, &op)).unwrap();
        let shapes: Vec<_> = inputs.iter().map(|t| &t.shape).collect();
        assert!(
            lesson.0 == fast.0,
            "{name} {shapes:?}, {threads} thread(s): the forward passes differ"
        );
        for (i, (l, f)) in lesson.1.iter().zip(&fast.1).enumerate() {
            assert!(
                l == f,
                "{name} {shapes:?}, {threads} thread(s): the gradients of input {i} differ"
            );
        }
    }
}

/// (B, T, C) shapes from the smallest to past every kernel's blocking and threading thresholds.
const SHAPES: [[usize; 3]; 8] = [
    [1, 1, 1],
    [1, 1, 3],
    [2, 5, 3],
    [1, 7, 9],
    [3, 17, 65],
    [4, 32, 64],
    [2, 33, 130],
    [1, 70, 257],
];

#[test]
fn embedding_add_transpose_and_scale_agree() {
    for (k, [b, t, c]) in SHAPES.into_iter().enumerate() {
        let seed = k as u32;
        let vocab = 1 + (k * 7) % 66;
        let ids: Vec<usize> = (0..b * t).map(|i| (i * 31 + k) % vocab).collect();
        let embed = |tape: &mut Tape, x: &[NodeId]| tape.embedding(x[0], &ids, &[b, t]);
        agree("embedding", &[tensor(&[vocab, c], seed)], embed);
        let add = |tape: &mut Tape, x: &[NodeId]| tape.add(x[0], x[1]);
        agree(
            "add",
            &[tensor(&[b, t, c], seed), tensor(&[t, c], seed + 50)],
            add,
        );
        // A residual connection: the same shapes, with zeros of both signs.
        let mut h = tensor(&[b, t, c], seed + 51);
        for (i, v) in h.data.iter_mut().enumerate().step_by(3) {
            *v = [0.0, -0.0][i % 2];
        }
        agree("residual add", &[tensor(&[b, t, c], seed), h], add);
        agree("transpose", &[tensor(&[b, t, c], seed)], |tape, x| {
            tape.transpose(x[0])
        });
        agree("scale", &[tensor(&[b, t, c], seed)], |tape, x| {
            tape.scale(x[0], 0.125)
        });
    }
}

#[test]
fn products_agree() {
    for (k, [b, t, c]) in SHAPES.into_iter().enumerate() {
        let seed = 10 * k as u32;
        let (x, y) = (tensor(&[b, t, c], seed), tensor(&[b, c, t + 1], seed + 1));
        agree("matmul", &[x.clone(), y], |tape, x| tape.matmul(x[0], x[1]));
        agree("x·xᵀ", std::slice::from_ref(&x), |tape, x| {
            let xt = tape.transpose(x[0]);
            tape.matmul(x[0], xt)
        });
        for n_out in [1, 3, 4 * c, 65] {
            let (w, bias) = (tensor(&[n_out, c], seed + 2), tensor(&[n_out], seed + 3));
            agree("linear", &[x.clone(), w, bias], |tape, x| {
                tape.linear(x[0], x[1], x[2])
            });
        }
    }
}

#[test]
fn mask_and_softmax_agree() {
    for (k, [b, t, _]) in SHAPES.into_iter().enumerate() {
        let scores = tensor(&[b, t, t], 20 + k as u32);
        agree("tril", std::slice::from_ref(&scores), |tape, x| {
            tape.tril(x[0], MASK_VALUE)
        });
        agree(
            "softmax of masked scores",
            std::slice::from_ref(&scores),
            |tape, x| {
                let masked = tape.tril(x[0], MASK_VALUE);
                tape.softmax(masked)
            },
        );
        // Scores already at the mask value, and exact zeros.
        let mut odd = scores.clone();
        for (i, s) in odd.data.iter_mut().enumerate() {
            *s = [MASK_VALUE, 0.0, -0.0, *s][i % 4];
        }
        agree("softmax", &[odd], |tape, x| tape.softmax(x[0]));
    }
}

#[test]
fn heads_dropout_and_layer_norm_agree() {
    for (k, [b, t, c]) in SHAPES.into_iter().enumerate() {
        let seed = 60 + k as u32;
        let x = tensor(&[b, t, c], seed);
        for h in (1..=c).filter(|h| c % h == 0).take(4) {
            agree("split_heads", std::slice::from_ref(&x), |tape, x| {
                tape.split_heads(x[0], h)
            });
            let heads = tensor(&[b, h, t, c / h], seed + 1);
            agree("merge_heads", &[heads], |tape, x| tape.merge_heads(x[0]));
        }
        let (w, bias) = (tensor(&[c], seed + 2), tensor(&[c], seed + 3));
        agree("layer_norm", &[x.clone(), w, bias], |tape, x| {
            tape.layer_norm(x[0], x[1], x[2])
        });
        for p in [0.0, 0.1, 0.5] {
            agree("dropout", std::slice::from_ref(&x), |tape, x| {
                tape.dropout(x[0], p, &mut NumpyRandom::seed(seed))
            });
        }
        let scores = tensor(&[b, t, t], seed + 4);
        agree("tril(0) and softmax", &[scores], |tape, x| {
            let masked = tape.tril(x[0], 0.0);
            tape.softmax(masked)
        });
    }
    // A row of equal values: the variance is 0 and 1/σ is 1/√ε.
    let flat = Tensor::new(&[2, 8], vec![3.0; 16]);
    let ones = Tensor::new(&[8], vec![1.0; 8]);
    let zeros = Tensor::new(&[8], vec![0.0; 8]);
    agree(
        "layer_norm of a constant row",
        &[flat, ones, zeros],
        |tape, x| tape.layer_norm(x[0], x[1], x[2]),
    );
}

#[test]
fn gelu_agrees_on_every_kind_of_input() {
    for len in [1, 2, 7, 15, 16, 17, 63, 64, 65, 1000, 32_771] {
        let mut x = normals(len, len as u32, 3.0);
        let awkward = [
            0.0, -0.0, 1e-30, -1e-30, 8.0, -8.0, 30.0, -30.0, 1e4, -1e4, 2.5e-4,
        ];
        for (v, &a) in x.iter_mut().step_by(5).zip(awkward.iter().cycle()) {
            *v = a;
        }
        agree("gelu", &[Tensor::new(&[len], x)], |tape, x| tape.gelu(x[0]));
    }
}

#[test]
fn the_loss_agrees() {
    for (k, [b, t, _]) in SHAPES.into_iter().enumerate() {
        for vocab in [1, 3, 65, 130] {
            let targets: Vec<usize> = (0..b * t).map(|i| (i * 7 + k) % vocab).collect();
            let logits = tensor(&[b, t, vocab], 30 + k as u32);
            agree("cross_entropy", &[logits], |tape, x| {
                tape.cross_entropy(x[0], &targets)
            });
        }
    }
}

#[test]
fn clipping_and_adamw_agree() {
    let shapes: [&[usize]; 6] = [&[1], &[3], &[65, 64], &[2049], &[256, 64], &[5000, 3]];
    let grads = |scale: f64| -> Vec<Vec<f32>> {
        shapes
            .iter()
            .enumerate()
            .map(|(i, s)| normals(s.iter().product(), 40 + i as u32, scale))
            .collect()
    };
    let params: Vec<Tensor> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| tensor(s, 50 + i as u32))
        .collect();
    let update = |backend: &mut dyn Backend, scale: f64| {
        let (mut params, mut grads, mut optimizer) =
            (params.clone(), grads(scale), AdamW::new(1e-3));
        let norm = backend.clip_grad_norm(&mut grads, 1.0);
        for _ in 0..3 {
            let step = optimizer.next_step();
            let moments = optimizer.moments(&params);
            backend.adamw_update(&mut params, &grads, moments, &step);
        }
        let values: Vec<Vec<u32>> = params.iter().map(|p| bits(&p.data)).collect();
        (
            norm.to_bits(),
            bits(&grads.concat()),
            values,
            bits(&optimizer.m.concat()),
            bits(&optimizer.v.concat()),
        )
    };
    for scale in [1e-3, 1.0, 0.0] {
        let lesson = update(&mut Lesson, scale);
        for threads in [1, 2] {
            let fast = team::with_team(threads, || update(&mut Fast::new(), scale)).unwrap();
            assert!(
                lesson == fast,
                "scale {scale}, {threads} thread(s): clipping or AdamW differ"
            );
        }
    }
}

/// The chapter's trainer on `backend`'s layer after `steps` steps: its losses, parameters and a sample.
fn trained(reference: bool, steps: usize) -> (Vec<u32>, Vec<u32>, String) {
    trained_with(Architecture::default(), reference, steps)
}

/// Like [`trained`], for a model with `architecture`.
fn trained_with(
    architecture: Architecture,
    reference: bool,
    steps: usize,
) -> (Vec<u32>, Vec<u32>, String) {
    let cfg = Config {
        recipe: Recipe {
            architecture,
            ..Recipe::default()
        },
        max_steps: Some(steps),
        reference,
        ..Config::default()
    };
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        trainer.train(|_| ControlFlow::Continue(()))?;
        let params: Vec<f32> = trainer
            .parameters()
            .iter()
            .flat_map(|p| p.data.clone())
            .collect();
        let sample = trainer.generate("ROMEO:", 100)?;
        Ok((bits(&trainer.losses), bits(&params), sample))
    })
    .expect("Tiny Shakespeare: run data/fetch.sh")
}

#[test]
fn two_hundred_steps_give_the_same_bits_on_both_layers() {
    let (lesson, fast) = (trained(true, 200), trained(false, 200));
    assert_eq!(lesson.0.len(), 200);
    assert!(lesson.0 == fast.0, "the losses differ");
    assert!(lesson.1 == fast.1, "the parameters differ after 200 steps");
    assert_eq!(lesson.2, fast.2, "the samples differ");
}

#[test]
fn everything_the_tutorial_leaves_out_gives_the_same_bits_on_both_layers() {
    let (lesson, fast) = (
        trained_with(everything(), true, 60),
        trained_with(everything(), false, 60),
    );
    assert!(lesson.0 == fast.0, "the losses differ");
    assert!(lesson.1 == fast.1, "the parameters differ after 60 steps");
    assert_eq!(lesson.2, fast.2, "the samples differ");
}

/// `s5_gpt ARGS… --loss-csv F` in-process: its report and its CSV.
fn chapter_run(args: &[&str], csv: &Path) -> (String, Vec<u8>) {
    let argv = ["s5_gpt"].iter().chain(args).copied().chain([
        "--loss-csv",
        csv.to_str().unwrap(),
        "--quiet",
    ]);
    let cli = Cli::try_parse_args(argv).unwrap();
    let mut out = Vec::new();
    cli.run(&mut out, &AtomicBool::new(false))
        .expect("Tiny Shakespeare: run data/fetch.sh");
    (String::from_utf8(out).unwrap(), std::fs::read(csv).unwrap())
}

#[test]
fn the_reference_chapter_run_prints_the_same_bytes() {
    let dir = std::env::temp_dir().join(format!("s5_layers_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let steps = [
        "--max-steps",
        "200",
        "--log-every",
        "20",
        "--sample-len",
        "100",
    ];
    let reference = chapter_run(
        &[&steps[..], &["--reference"]].concat(),
        &dir.join("reference.csv"),
    );
    let fast = chapter_run(&steps, &dir.join("fast.csv"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(reference.0, fast.0, "the reports differ");
    assert!(reference.1 == fast.1, "the loss CSVs differ");
    assert_eq!(reference.1.iter().filter(|&&b| b == b'\n').count(), 201);
}

/// Set in a child process of this test binary: the file where it writes its run.
const NARROWER_CHILD: &str = "S5_LAYERS_NARROWER_CHILD";

/// Everything the sequel adds to the tutorial's model, for the tests that train it.
fn everything() -> Architecture {
    Architecture::everything(4, 0.1)
}

/// The tutorial's model and [`everything`], trained `steps` steps on the fast layer, as text.
fn both_models_trained(steps: usize) -> String {
    let show = |(losses, params, sample): (Vec<u32>, Vec<u32>, String)| {
        format!("{losses:?}\n{params:?}\n{sample}")
    };
    let tutorial = show(trained(false, steps));
    let sequel = show(trained_with(everything(), false, steps));
    format!("{tutorial}\n{sequel}")
}

/// Trains in a child process of this test binary with `switch` set, and checks that its run has
/// the same bits as this process's and that the child used `lanes`.
fn a_narrower_path_gives_the_same_bits(test: &str, switch: &str, lanes: Lanes) {
    let steps = 30;
    if let Some(file) = std::env::var_os(NARROWER_CHILD) {
        assert_eq!(kernels::lanes(), lanes, "{switch} did not switch the lanes");
        std::fs::write(file, both_models_trained(steps)).unwrap();
        return;
    }
    let file = std::env::temp_dir().join(format!("s5_{test}_{}.txt", std::process::id()));
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test])
        .env(NARROWER_CHILD, &file)
        .env(switch, "1")
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "{}",
        String::from_utf8_lossy(&child.stdout)
    );
    let narrower = std::fs::read_to_string(&file).unwrap();
    std::fs::remove_file(&file).ok();
    assert!(both_models_trained(steps) == narrower, "the runs differ");
}

/// The fast layer without AVX2 and FMA, as on a CPU that has neither, `mul_add` computing its fused
/// multiply-adds in software: the same losses, parameters and samples as this process.
#[test]
fn the_portable_path_gives_the_same_bits() {
    let test = "the_portable_path_gives_the_same_bits";
    a_narrower_path_gives_the_same_bits(test, PORTABLE_VAR, Lanes::Portable);
    if std::env::var_os(NARROWER_CHILD).is_none()
        && cfg!(target_arch = "x86_64")
        && is_x86_feature_detected!("fma")
    {
        assert_ne!(
            kernels::lanes(),
            Lanes::Portable,
            "this process should have used AVX2 and FMA"
        );
    }
}

/// The fast layer with AVX2 and FMA where the CPU also has AVX-512: the same bits as this process
/// (which used AVX-512 if the CPU has it).
#[test]
fn the_avx2_path_gives_the_same_bits() {
    let test = "the_avx2_path_gives_the_same_bits";
    let lanes = match kernels::lanes() {
        Lanes::Portable => Lanes::Portable,
        _ => Lanes::Avx2,
    };
    a_narrower_path_gives_the_same_bits(test, AVX2_VAR, lanes);
}

/// Set in a child process of this test binary: the file where it writes its run, with a tile
/// forced by [`TILE_VAR`].
const TILE_CHILD: &str = "S5_LAYERS_TILE_CHILD";

/// Each tile of the product kernel that this CPU can run (the wide AVX-512 one, the one for cores
/// that run AVX-512 as halves, AVX2's and the plain one), forced in a child process with
/// [`TILE_VAR`]: every op at the tutorial's and nanoGPT's shapes and at odd ones agrees with the
/// lesson, on 1 and 2 threads, and training gives this process's bits; and so does this core's tile
/// with panels of B and blocks of A of other sizes ([`PANEL_VAR`], [`A_BLOCK_VAR`]).
#[test]
fn every_tile_gives_the_same_bits() {
    let steps = 30;
    if let Some(file) = std::env::var_os(TILE_CHILD) {
        let name = std::env::var(TILE_VAR).unwrap();
        assert_eq!(
            tiles::tile().name(),
            name,
            "{TILE_VAR} did not switch the tile"
        );
        products_agree();
        products_at_every_tile_edge_agree();
        nanogpt_shapes_agree();
        odd_attention_shapes_agree();
        std::fs::write(file, both_models_trained(steps)).unwrap();
        return;
    }
    let runnable: Vec<Tile> = Tile::ALL
        .into_iter()
        .filter(|t| t.runs_with(kernels::lanes()))
        .collect();
    assert!(runnable.contains(&tiles::for_this_core(kernels::lanes())));
    let here = both_models_trained(steps);
    // Each tile with the panel and block of A chosen for this core, and this core's tile with
    // another of each too (blocks of k of other lengths, bands of other heights).
    let other_panel = if tiles::panel_values() == 4096 {
        "8192"
    } else {
        "4096"
    };
    let other_a_block = if tiles::a_block_values() == 98304 {
        "49152"
    } else {
        "98304"
    };
    let this_core = tiles::for_this_core(kernels::lanes());
    let runs = (runnable.into_iter().map(|t| (t, None))).chain([(this_core, Some(other_panel))]);
    for (tile, panel) in runs {
        let file = std::env::temp_dir().join(format!(
            "s5_tile_{}_{}_{}.txt",
            tile.name(),
            panel.unwrap_or("own"),
            std::process::id()
        ));
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args(["--exact", "every_tile_gives_the_same_bits"])
            .env(TILE_CHILD, &file)
            .env(TILE_VAR, tile.name());
        if let Some(panel) = panel {
            child.env(PANEL_VAR, panel).env(A_BLOCK_VAR, other_a_block);
        }
        let child = child.output().unwrap();
        let what = match panel {
            Some(panel) => format!(
                "{} (panel {panel}, block of A {other_a_block})",
                tile.name()
            ),
            None => format!("{} (own panel and block of A)", tile.name()),
        };
        assert!(
            child.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&child.stdout)
        );
        let run = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_file(&file).ok();
        assert!(here == run, "{what}: the runs differ");
    }
}

/// Set in a child process of this test binary: a product runs there with a setting it cannot use.
const BAD_SETTING_CHILD: &str = "S5_LAYERS_BAD_SETTING_CHILD";

/// A product kernel's setting that cannot be used ends the run with one line that names it and
/// what it takes, and exit code 2, as a bad argument does: no panic, no backtrace.
#[test]
fn a_bad_setting_is_one_line_of_error() {
    if std::env::var_os(BAD_SETTING_CHILD).is_some() {
        products_agree();
        return;
    }
    for (var, value, fix) in [
        (PANEL_VAR, "5", "use 4096, 8192 or 16384"),
        (A_BLOCK_VAR, "1000", "use a multiple of 16384 up to 1048576"),
        (
            TILE_VAR,
            "avx3",
            "the tiles are avx512-12x32, avx512-8x32, avx2-6x16, plain-6x16",
        ),
    ] {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_bad_setting_is_one_line_of_error",
                "--nocapture",
            ])
            .env(BAD_SETTING_CHILD, "1")
            .env(var, value)
            .env("RUST_BACKTRACE", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&child.stderr);
        let line = format!("error: {var}={value}: {fix}\n");
        assert_eq!(child.status.code(), Some(2), "{var}={value}: {stderr}");
        assert!(stderr.ends_with(&line), "{var}={value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{var}={value}: {stderr}");
    }
}

/// `Linear` where every tile meets its edges: one row (B = 1, T = 1), a batch of one, one token
/// per sequence, rows that leave 1 to 11 in the last tile, and widths that leave 1 to 31 columns
/// in the last panel, at nanoGPT's width and at odd ones.
#[test]
fn products_at_every_tile_edge_agree() {
    for (k, [b, t, c]) in [
        [1, 1, 128],
        [1, 64, 128],
        [12, 1, 128],
        [1, 13, 33],
        [5, 5, 47],
        [3, 23, 129],
        [2, 35, 7],
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 400 + 10 * k as u32;
        let x = tensor(&[b, t, c], seed);
        for n_out in [1, 15, 17, 31, 33, 47, 65, 4 * c] {
            let (w, bias) = (tensor(&[n_out, c], seed + 1), tensor(&[n_out], seed + 2));
            agree("linear", &[x.clone(), w, bias], |tape, x| {
                tape.linear(x[0], x[1], x[2])
            });
        }
    }
}

/// The files of `dir` (a folder of `src/s5_gpt/`), with their text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files = vec![];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            files.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    files
}

#[test]
fn the_lesson_imports_neither_the_fast_layer_nor_the_tool() {
    let s5 = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/s5_gpt");
    let lesson = sources(&s5);
    assert!(lesson.len() >= 10, "the lesson's files are found");
    for (file, text) in &lesson {
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect();
        let first = text.lines().next().unwrap_or_default();
        if file.ends_with("mod.rs") {
            continue; // declares the modules
        }
        assert!(
            first.starts_with("//! Lesson layer."),
            "{file} does not say which layer it is in"
        );
        for word in [
            "fast::", "app::", "team::", "timers", "Pool", "unsafe", "Instant", "thread",
        ] {
            assert!(!code.contains(word), "{file} uses {word}");
        }
    }
    for (file, text) in sources(&s5.join("fast")) {
        if !file.ends_with("mod.rs") {
            assert!(
                text.starts_with("//! Fast layer."),
                "{file} does not say which layer it is in"
            );
        }
        assert!(
            !text.contains("app::"),
            "{file}: the fast layer does not know the tool"
        );
    }
    for (file, text) in sources(&s5.join("app"))
        .into_iter()
        .chain(sources(&s5.join("app/command")))
    {
        assert!(
            text.starts_with("//! Tool layer."),
            "{file} does not say which layer it is in"
        );
    }
}

/// nanoGPT's CPU configuration (B 12, T 64, C 128, 4 heads of D = 32): every op of one
/// block at its real shapes, where the products block k, split their columns or rows among the
/// threads and run the attention's 48 small products as one batch.
#[test]
fn nanogpt_shapes_agree() {
    let (b, t, c, h) = (12, 64, 128, 4);
    let x = tensor(&[b, t, c], 200);
    for (n_in, n_out) in [(c, c), (c, 4 * c), (4 * c, c), (c, 65)] {
        let x = tensor(&[b, t, n_in], 201);
        let (w, bias) = (tensor(&[n_out, n_in], 202), tensor(&[n_out], 203));
        agree("linear", &[x, w, bias], |tape, x| {
            tape.linear(x[0], x[1], x[2])
        });
    }
    let (w, bias) = (tensor(&[c], 204), tensor(&[c], 205));
    agree("layer_norm", &[x.clone(), w, bias], |tape, x| {
        tape.layer_norm(x[0], x[1], x[2])
    });
    agree("split_heads", std::slice::from_ref(&x), |tape, x| {
        tape.split_heads(x[0], h)
    });
    let (q, k) = (
        tensor(&[b, h, t, c / h], 206),
        tensor(&[b, h, t, c / h], 207),
    );
    agree("merge_heads", std::slice::from_ref(&q), |tape, x| {
        tape.merge_heads(x[0])
    });
    agree("attention's scores", &[q.clone(), k], |tape, x| {
        let kt = tape.transpose(x[1]); // (B, H, D, T)
        let scores = tape.matmul(x[0], kt); // (B, H, T, T)
        let scores = tape.scale(scores, 0.176_776_7);
        let masked = tape.tril(scores, MASK_VALUE);
        tape.softmax(masked)
    });
    let weights = tensor(&[b, h, t, t], 208);
    agree("weights·v, with dropout", &[weights, q], |tape, x| {
        let weights = tape.dropout(x[0], 0.1, &mut NumpyRandom::seed(209));
        tape.matmul(weights, x[1]) // (B, H, T, D)
    });
}

/// Odd sizes through the attention's path: heads of odd width, one token, a batch of one.
#[test]
fn odd_attention_shapes_agree() {
    for (k, [b, t, c, h]) in [
        [1, 1, 3, 3],
        [1, 7, 15, 5],
        [3, 9, 21, 7],
        [2, 33, 65, 13],
        [5, 1, 8, 2],
    ]
    .into_iter()
    .enumerate()
    {
        let seed = 300 + 10 * k as u32;
        let x = tensor(&[b, t, c], seed);
        agree(
            "heads, scores and context",
            std::slice::from_ref(&x),
            |tape, x| {
                let heads = tape.split_heads(x[0], h); // (B, H, T, D)
                let kt = tape.transpose(heads); // (B, H, D, T)
                let scores = tape.matmul(heads, kt); // (B, H, T, T)
                let scores = tape.scale(scores, 0.5);
                let masked = tape.tril(scores, MASK_VALUE);
                let weights = tape.softmax(masked);
                let weights = tape.dropout(weights, 0.25, &mut NumpyRandom::seed(seed));
                let context = tape.matmul(weights, heads); // (B, H, T, D)
                tape.merge_heads(context) // (B, T, C)
            },
        );
    }
}
