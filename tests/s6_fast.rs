//! Stage 6 on the fast layer: the FlashAttention op's tiled form, forward and backward, gives the
//! lesson's bits on the fast backend, on one thread and on two, over awkward shapes, tiles, masks
//! and values; and training with `--attention tiled` gives the same losses on both layers.

use std::ops::ControlFlow;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::backend::{Backend, Lesson};
use attention_from_scratch::s5_gpt::beyond::Architecture;
use attention_from_scratch::s5_gpt::fast::kernels::{self, AVX2_VAR, Lanes, PORTABLE_VAR};
use attention_from_scratch::s5_gpt::fast::{Fast, team};
use attention_from_scratch::s5_gpt::flash::{AttentionForm, FlashForm};
use attention_from_scratch::s5_gpt::model::attention_scale;
use attention_from_scratch::s5_gpt::ops::MASK_VALUE;
use attention_from_scratch::s5_gpt::train::Recipe;
use attention_from_scratch::s5_gpt::{NodeId, Tape, Tensor};
use attention_from_scratch::s6_flash::Tiles;

/// Normal values from NumPy's generator, times `scale`.
fn normals(n: usize, seed: u32, scale: f64) -> Vec<f32> {
    let mut rng = NumpyRandom::seed(seed);
    (0..n)
        .map(|_| (rng.standard_normal() * scale) as f32)
        .collect()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

/// One attention: Q, K and V of `shape` (…, T, D) (one node when `same_node`, as the tutorial's
/// q = k = v = x), the mask's value, the tiles, and how large the values are.
#[derive(Clone, Copy, Debug)]
struct Case {
    shape: [usize; 4],
    same_node: bool,
    mask_value: f32,
    tiles: Tiles,
    scale: f64,
}

/// The output, the log-sum-exp the node keeps, and the gradient of each input, as bits.
type Run = (Vec<u32>, Vec<u32>, Vec<Vec<u32>>);

/// The op on `backend` for inputs drawn from `seed`, its backward pass from a random dO.
fn run_on(backend: Box<dyn Backend>, case: Case, seed: u32) -> Run {
    let n: usize = case.shape.iter().product();
    let mut tape = Tape::with_backend(backend);
    let count = if case.same_node { 1 } else { 3 };
    let ids: Vec<NodeId> = (0..count)
        .map(|i| {
            let x = Tensor::new(&case.shape, normals(n, seed + i, case.scale));
            tape.param(x)
        })
        .collect();
    let [q, k, v] = if case.same_node {
        [ids[0]; 3]
    } else {
        [ids[0], ids[1], ids[2]]
    };
    let scale = attention_scale(case.shape[3]);
    let form = FlashForm::Tiled(case.tiles);
    let out = tape.flash_attention(q, k, v, scale, case.mask_value, form);
    let value = bits(&tape.value(out).data);
    let lse = match tape.op(out) {
        attention_from_scratch::s5_gpt::backend::Op::FlashAttention(node) => bits(&node.lse),
        op => panic!("expected the FlashAttention node, got {}", op.name()),
    };
    tape.backward_from(out, normals(n, seed + 10, 1.0));
    let grads = ids.iter().map(|&x| bits(tape.grad(x).unwrap())).collect();
    (value, lse, grads)
}

/// The lesson's and the fast layer's runs of `case` (on 1 and 2 threads) agree to the bit.
fn agree(case: Case, seed: u32) {
    let lesson = run_on(Box::new(Lesson), case, seed);
    for threads in [1, 2] {
        let fast = team::with_team(threads, || run_on(Box::new(Fast::new()), case, seed)).unwrap();
        assert!(
            lesson.0 == fast.0,
            "{case:?} seed {seed}, {threads} thread(s): outputs differ"
        );
        assert!(
            lesson.1 == fast.1,
            "{case:?} seed {seed}, {threads} thread(s): lse differs"
        );
        for (i, (l, f)) in lesson.2.iter().zip(&fast.2).enumerate() {
            assert!(
                l == f,
                "{case:?} seed {seed}, {threads} thread(s): gradient {i} differs"
            );
        }
    }
}

fn heads(shape: [usize; 4], mask_value: f32, tiles: Tiles) -> Case {
    Case {
        shape,
        same_node: false,
        mask_value,
        tiles,
        scale: 1.0,
    }
}

#[test]
fn the_tiled_op_gives_the_lessons_bits_on_the_fast_layer() {
    let shapes = [
        [1, 1, 1, 4],
        [2, 1, 1, 8],
        [1, 1, 7, 4],
        [2, 3, 9, 6],
        [1, 2, 33, 16],
        [1, 1, 40, 64],
        [2, 2, 47, 20],
        [1, 1, 70, 72],
        [1, 2, 131, 64],
    ];
    let tiles = [
        Tiles::new(16, 16),
        Tiles::new(64, 64),
        Tiles::new(8, 16),
        Tiles::new(24, 8),
        Tiles::new(5, 7),
        Tiles::new(17, 33),
        Tiles::new(1, 1),
    ];
    for mask in [MASK_VALUE, 0.0, f32::NEG_INFINITY] {
        for (s, &shape) in shapes.iter().enumerate() {
            for (t, &tiles) in tiles.iter().enumerate() {
                agree(heads(shape, mask, tiles), (s * 7 + t) as u32);
            }
        }
    }
}

/// Long enough that the backward pass takes its keys in several panels and the forward pass its
/// query blocks in several pieces.
#[test]
fn a_long_context_gives_the_lessons_bits() {
    let tiles = [Tiles::new(16, 16), Tiles::new(24, 8), Tiles::new(5, 7)];
    for mask in [MASK_VALUE, 0.0] {
        for (t, &tiles) in tiles.iter().enumerate() {
            agree(heads([1, 2, 600, 20], mask, tiles), 70 + t as u32);
            agree(heads([1, 1, 528, 64], mask, tiles), 80 + t as u32);
        }
    }
}

#[test]
fn the_tutorials_one_node_gives_the_lessons_bits() {
    for mask in [MASK_VALUE, 0.0] {
        for (b, t, c) in [(2, 1, 8), (2, 7, 8), (1, 32, 64), (1, 131, 6)] {
            let case = Case {
                shape: [1, b, t, c],
                same_node: true,
                mask_value: mask,
                tiles: Tiles::new(16, 16),
                scale: 1.0,
            };
            agree(case, 3);
        }
    }
}

/// Large scores, near and past expf's underflow (differences below −87 take the library's own
/// call), and tiny ones, with both masks.
#[test]
fn extreme_scores_give_the_lessons_bits() {
    for scale in [1e-20, 0.01, 4.0, 12.0, 30.0] {
        for mask in [MASK_VALUE, 0.0] {
            for seed in 0..3 {
                let case = Case {
                    scale,
                    ..heads([1, 2, 37, 16], mask, Tiles::new(16, 16))
                };
                agree(case, 40 + seed);
            }
        }
    }
}

/// The losses of `steps` steps of the chapter's trainer with tiled attention, on the lesson
/// (`reference`) or the fast layer, at `threads`.
fn tiled_losses(architecture: Architecture, reference: bool, steps: usize) -> Vec<u32> {
    let cfg = Config {
        recipe: Recipe {
            architecture: Architecture {
                attention: AttentionForm::Tiled,
                ..architecture
            },
            ..Recipe::default()
        },
        max_steps: Some(steps),
        reference,
        ..Config::default()
    };
    cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        trainer.train(|_| ControlFlow::Continue(()))?;
        Ok(bits(&trainer.losses))
    })
    .expect("Tiny Shakespeare: run data/fetch.sh")
}

#[test]
fn training_with_tiled_attention_gives_the_same_losses_on_both_layers() {
    let arch = Architecture::default();
    let (lesson, fast) = (tiled_losses(arch, true, 40), tiled_losses(arch, false, 40));
    assert_eq!(lesson.len(), 40);
    assert!(lesson == fast, "the losses differ");
}

#[test]
fn the_sequels_model_with_tiled_attention_gives_the_same_losses_on_both_layers() {
    let arch = Architecture::everything(4, 0.0);
    let (lesson, fast) = (tiled_losses(arch, true, 20), tiled_losses(arch, false, 20));
    assert!(lesson == fast, "the losses differ");
}

/// Set in a child process of this test binary, which then checks the narrower lanes.
const NARROWER_CHILD: &str = "S6_FAST_NARROWER_CHILD";

/// Runs `test` again in a child process with `switch` set, where the kernels run on `lanes` (the
/// portable loops or AVX2's, not AVX-512's sixteen-key products): the op must still give the
/// lesson's bits there.
fn a_narrower_path_gives_the_lessons_bits(test: &str, switch: &str, lanes: Lanes) {
    if std::env::var_os(NARROWER_CHILD).is_some() {
        assert_eq!(kernels::lanes(), lanes, "{switch} did not switch the lanes");
        for mask in [MASK_VALUE, 0.0] {
            for (s, shape) in [[1, 1, 7, 4], [2, 3, 9, 6], [1, 2, 40, 64], [1, 1, 70, 72]]
                .into_iter()
                .enumerate()
            {
                for tiles in [Tiles::new(16, 16), Tiles::new(64, 64), Tiles::new(5, 7)] {
                    agree(heads(shape, mask, tiles), s as u32);
                }
            }
        }
        return;
    }
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test])
        .env(NARROWER_CHILD, "1")
        .env(switch, "1")
        .output()
        .unwrap();
    assert!(
        child.status.success(),
        "{}",
        String::from_utf8_lossy(&child.stdout)
    );
}

#[test]
fn the_avx2_path_gives_the_lessons_bits() {
    let lanes = match kernels::lanes() {
        Lanes::Portable => Lanes::Portable,
        _ => Lanes::Avx2,
    };
    let test = "the_avx2_path_gives_the_lessons_bits";
    a_narrower_path_gives_the_lessons_bits(test, AVX2_VAR, lanes);
}

#[test]
fn the_portable_path_gives_the_lessons_bits() {
    let test = "the_portable_path_gives_the_lessons_bits";
    a_narrower_path_gives_the_lessons_bits(test, PORTABLE_VAR, Lanes::Portable);
}
