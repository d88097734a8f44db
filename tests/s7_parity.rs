//! Stages 6 and 7 against files PyTorch wrote, as llm.c's `test_gpt2.c` reads one: causal
//! attention's output, log-sum-exp and gradients in every form of stage 6; stage 7's grouped-query
//! layer with rotary positions, with a sliding window and without; and latent attention, without
//! and with its decoupled RoPE, unfolded on the tape and absorbed. The fixtures in
//! `tests/fixtures/parity/` are written by `python3 tools/parity_fixtures.py` (the command and the
//! PyTorch version are in each file's header); the tests need neither Python nor PyTorch.
//!
//! # The bound
//!
//! Each fixture stores every output twice: `NAME.f32`, what PyTorch computes in float32, and
//! `NAME.f64`, the same modules run by PyTorch in float64 on the same float32 inputs and weights,
//! which stands for the exact answer (its own error is some 1e-16 of it). A tensor's **gap** is
//!
//! > max over its elements |got − exact| / (u · max |exact|), u = 2⁻²⁴,
//!
//! the distance from the exact answer counted in float32 roundings of the tensor's largest value.
//! The gradients of a layer's weight and bias are measured together: the gradient of a key bias
//! without RoPE is exactly 0 (the bias adds the same q·b to a query's every score, which the
//! softmax ignores), and float32 leaves a rounding's worth of the weight gradient's size there.
//!
//! Every tensor the crate computes, in every form and on both backends, must be within
//! [`BOUND`] = 16 u of the exact answer, and so must PyTorch's own float32 (the fixture's
//! `NAME.f32`, checked here too): the bound is one that float32 arithmetic meets, not a tolerance
//! fitted to the crate. It is measured, then set with a margin of two. The largest gaps measured
//! (the test prints every one with `--nocapture`), the crate's against PyTorch's float32:
//!
//! | fixture | the crate | PyTorch float32 |
//! |---|---|---|
//! | `s6_flash`, on the tape | 7.40 u (tiled 16 × 16, the gradient of K) | 5.69 u (the gradient of K) |
//! | `s6_flash`, stage 6's heads | 2.27 u (`tiled_attention` 16 × 16, the output) | 1.87 u (the output) |
//! | `s7_gqa_window_rope` | 6.21 u (no window, the gradient of W_value) | 5.91 u (the gradient of W_key) |
//! | `s7_latent` | 7.41 u (tiled, the gradient of W_DKV); absorbed 2.20 u | 6.56 u (the gradient of W_query) |
//! | `s7_latent_rope` | 7.39 u (the gradient of W_value); absorbed 2.28 u | 6.51 u (the gradient of W_QR) |
//!
//! The longest sums here have 37 terms (a row of stage 6's weights) to 58 (a weight gradient, over
//! B·T rows); each one's rounding error is at most γ_n = n·u/(1 − n·u) times its sum of magnitudes
//! (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), and errors of either sign
//! mostly cancel, so both implementations sit at a few u. A neighbouring convention lands some
//! 10⁶ to 10⁷ u away (`the_bound_tells_the_layers_conventions_from_their_neighbours`): pairs turned
//! (2i, 2i + 1) instead of split halves, a query head reading the next group's key/value head, a
//! window one key wider, no RoPE.

use std::collections::HashMap;
use std::ops::Range;

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::backend::Op;
use attention_from_scratch::s5_gpt::beyond::{Architecture, Attention};
use attention_from_scratch::s5_gpt::fast::Fast;
use attention_from_scratch::s5_gpt::flash::{AttentionForm, FlashForm, TAPE_TILES};
use attention_from_scratch::s5_gpt::latent::{Cached, absorb, absorbed_attention};
use attention_from_scratch::s5_gpt::model::{Linear, attention_scale};
use attention_from_scratch::s5_gpt::ops::MASK_VALUE;
use attention_from_scratch::s5_gpt::{Gpt, GptConfig, NodeId, Tape, Tensor};
use attention_from_scratch::s6_flash::{Tiles, exact_attention, naive_attention, tiled_attention};
use ndarray::ArrayView2;
use safetensors::{Dtype, SafeTensors};

/// u = 2⁻²⁴, the unit roundoff of float32.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// The largest gap from the exact answer, in u · max |exact|, that the crate's tensors and
/// PyTorch's float32 ones may have: twice the largest measured (the module docs give each).
const BOUND: f64 = 16.0;

/// The command every fixture names in its header.
const COMMAND: &str = "python3 tools/parity_fixtures.py";

const FIXTURES: [&str; 4] = [
    "s6_flash.safetensors",
    "s7_gqa_window_rope.safetensors",
    "s7_latent.safetensors",
    "s7_latent_rope.safetensors",
];

// ---------------------------------------------------------------------------------------------------
// Reading the fixtures.
// ---------------------------------------------------------------------------------------------------

/// One fixture file: its bytes, read once.
struct Fixture {
    file: &'static str,
    bytes: Vec<u8>,
}

impl Fixture {
    fn open(file: &'static str) -> Self {
        let path = format!(
            "{}/tests/fixtures/parity/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        Fixture { file, bytes }
    }

    /// The header's `__metadata__`: the command, the PyTorch version, the seed, the sizes.
    fn metadata(&self) -> HashMap<String, String> {
        let (_, header) = SafeTensors::read_metadata(&self.bytes).expect("a safetensors header");
        header
            .metadata()
            .clone()
            .expect("the header names its command")
    }

    /// The size `name` in the header (`T`, `D`, …).
    fn size(&self, name: &str) -> usize {
        self.metadata()[name].parse().expect("a size is a number")
    }

    /// The raw little-endian bytes and shape of tensor `name`, which must be of `dtype`.
    fn raw(&self, name: &str, dtype: Dtype) -> (Vec<usize>, Vec<u8>) {
        let tensors = SafeTensors::deserialize(&self.bytes).expect("a safetensors file");
        let view = tensors
            .tensor(name)
            .unwrap_or_else(|e| panic!("{}: {name}: {e}", self.file));
        assert_eq!(view.dtype(), dtype, "{}: {name}", self.file);
        (view.shape().to_vec(), view.data().to_vec())
    }

    /// A float32 tensor: an input, a weight, or PyTorch's float32 output.
    fn tensor(&self, name: &str) -> Tensor {
        let (shape, bytes) = self.raw(name, Dtype::F32);
        let data = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()));
        Tensor::new(&shape, data.collect())
    }

    fn f32(&self, name: &str) -> Vec<f32> {
        self.tensor(name).data
    }

    /// A float64 tensor: the exact answer.
    fn f64(&self, name: &str) -> Vec<f64> {
        let (_, bytes) = self.raw(name, Dtype::F64);
        let data = bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()));
        data.collect()
    }
}

// ---------------------------------------------------------------------------------------------------
// Measuring.
// ---------------------------------------------------------------------------------------------------

/// max |got − exact| / (u · `largest`).
fn gap(got: &[f32], exact: &[f64], largest: f64) -> f64 {
    assert_eq!(got.len(), exact.len(), "one value per exact value");
    let worst = got
        .iter()
        .zip(exact)
        .fold(0.0f64, |m, (&g, &e)| m.max((f64::from(g) - e).abs()));
    worst / (U * largest)
}

/// The gaps of one fixture's checks: the crate's and PyTorch's float32, each against the exact
/// answer, one line per tensor.
#[derive(Default)]
struct Gaps {
    lines: Vec<String>,
    worst_crate: (f64, String),
    worst_torch: (f64, String),
}

impl Gaps {
    /// The crate's `got` for the group of outputs `names` (a weight and its bias, or one tensor),
    /// against the fixture's exact answer, beside PyTorch's float32 `NAME.f32`.
    fn check(&mut self, fixture: &Fixture, label: &str, names: &[&str], got: &[&[f32]]) {
        let exact: Vec<Vec<f64>> = names
            .iter()
            .map(|n| fixture.f64(&format!("{n}.f64")))
            .collect();
        let largest = exact.iter().flatten().fold(0.0f64, |m, e| m.max(e.abs()));
        assert!(largest > 0.0, "{}: {names:?} is all zeros", fixture.file);
        let torch: Vec<Vec<f32>> = names
            .iter()
            .map(|n| fixture.f32(&format!("{n}.f32")))
            .collect();
        let groupwise = |values: Vec<&[f32]>| {
            let gaps = values.iter().zip(&exact).map(|(v, e)| gap(v, e, largest));
            gaps.fold(0.0f64, f64::max)
        };
        let ours = groupwise(got.to_vec());
        let theirs = groupwise(torch.iter().map(Vec::as_slice).collect());
        let what = format!("{}: {label} {}", fixture.file, names.join(" + "));
        self.lines.push(format!(
            "{what}: crate {ours:5.2} u, PyTorch float32 {theirs:5.2} u"
        ));
        if ours >= self.worst_crate.0 {
            self.worst_crate = (ours, what.clone());
        }
        if theirs >= self.worst_torch.0 {
            self.worst_torch = (theirs, what);
        }
    }

    /// Prints every line and the worst of each, and holds both to [`BOUND`].
    fn assert_within_bound(&self) {
        for line in &self.lines {
            eprintln!("{line}");
        }
        let [(crate_gap, crate_at), (torch_gap, torch_at)] = [&self.worst_crate, &self.worst_torch];
        eprintln!(
            "largest: crate {crate_gap:.2} u ({crate_at}), PyTorch {torch_gap:.2} u ({torch_at})"
        );
        assert!(
            *crate_gap <= BOUND,
            "{crate_at}: {crate_gap:.2} u, past {BOUND} u"
        );
        assert!(
            *torch_gap <= BOUND,
            "{torch_at}: PyTorch's own float32 is {torch_gap:.2} u away"
        );
    }
}

/// A backend's name and a fresh tape that computes with it.
type Backend = (&'static str, fn() -> Tape);

/// The two backends: the lesson's plain functions, and the fast layer's kernels (the same bits).
fn backends() -> [Backend; 2] {
    [
        ("lesson", Tape::new),
        ("fast", || Tape::with_backend(Box::new(Fast::new()))),
    ]
}

/// Replaces the values of the parameters `ids` with `values`, leaving every other parameter as it
/// is; each shape must match (a Linear's weight is (out, in), as PyTorch's).
fn load(tape: &mut Tape, loads: &[(NodeId, Tensor)]) {
    let mut params: Vec<Vec<f32>> = tape.params().iter().map(|p| p.data.clone()).collect();
    for (id, value) in loads {
        assert_eq!(tape.value(*id).shape, value.shape, "parameter {}", id.0);
        params[id.0] = value.data.clone();
    }
    tape.set_params(params.iter().map(Vec::as_slice));
}

#[test]
fn every_fixture_names_the_command_and_the_pytorch_that_wrote_it() {
    let script = format!("{}/tools/parity_fixtures.py", env!("CARGO_MANIFEST_DIR"));
    assert!(std::path::Path::new(&script).exists(), "{script}");
    for file in FIXTURES {
        let fixture = Fixture::open(file);
        let metadata = fixture.metadata();
        assert_eq!(metadata["command"], COMMAND, "{file}");
        assert!(metadata["torch"].starts_with("2."), "{file}: {metadata:?}");
        assert!(metadata["seed"].starts_with("torch.manual_seed("), "{file}");
        assert!(
            fixture.bytes.len() < 200_000,
            "{file}: keep a fixture small"
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Stage 6: causal attention, (B, H, T, D) = (2, 3, 37, 12).
// ---------------------------------------------------------------------------------------------------

/// The naive graph, as `beyond::Attention::attend` records it: (…, T, D) → (…, T, D).
fn naive_graph(tape: &mut Tape, [q, k, v]: [NodeId; 3], scale: f32) -> NodeId {
    let kt = tape.transpose(k); // (…, D, T)
    let scores = tape.matmul(q, kt); // (…, T, T)
    let scores = tape.scale(scores, scale); // (…, T, T)
    let masked = tape.tril(scores, MASK_VALUE); // (…, T, T)
    let weights = tape.softmax(masked); // (…, T, T)
    tape.matmul(weights, v) // (…, T, D)
}

/// The tiles of the tiled forms: the tape's 16 × 16, and 5 × 3, neither dividing T = 37.
const TILES: [Tiles; 2] = [TAPE_TILES, Tiles { br: 5, bc: 3 }];

#[test]
fn stage_6_on_the_tape_matches_pytorch_in_every_form_and_backend() {
    let fixture = Fixture::open("s6_flash.safetensors");
    let [q, k, v] = ["q", "k", "v"].map(|n| fixture.tensor(n)); // (B, H, T, D)
    let d_out = fixture.f32("d_out"); // (B, H, T, D)
    let scale = attention_scale(fixture.size("D"));
    let forms = [
        ("naive", None),
        ("tiled 16 × 16", Some(FlashForm::Tiled(TILES[0]))),
        ("tiled 5 × 3", Some(FlashForm::Tiled(TILES[1]))),
        ("exact", Some(FlashForm::Exact)),
    ];
    let mut gaps = Gaps::default();
    for (backend, new_tape) in backends() {
        for (form_name, form) in forms {
            let mut tape = new_tape();
            let qkv = [&q, &k, &v].map(|x| tape.param(x.clone()));
            let out = match form {
                None => naive_graph(&mut tape, qkv, scale),
                Some(form) => tape.flash_attention(qkv[0], qkv[1], qkv[2], scale, MASK_VALUE, form),
            };
            let label = format!("{backend}, {form_name}:");
            let value = tape.value(out).data.clone();
            if let Op::FlashAttention(node) = tape.op(out)
                && !node.lse.is_empty()
            {
                gaps.check(&fixture, &label, &["lse"], &[&node.lse]);
            }
            tape.backward_from(out, d_out.clone());
            gaps.check(&fixture, &label, &["out"], &[&value]);
            for (name, id) in ["grad.q", "grad.k", "grad.v"].iter().zip(qkv) {
                gaps.check(&fixture, &label, &[name], &[tape.grad(id).unwrap()]);
            }
        }
    }
    gaps.assert_within_bound();
}

/// The (T, D) matrix of head `m` of a (B, H, T, D) tensor.
fn head(x: &Tensor, m: usize) -> ArrayView2<'_, f32> {
    let [.., t, d] = x.shape[..] else {
        panic!("a head is (T, D)")
    };
    ArrayView2::from_shape((t, d), &x.data[m * t * d..][..t * d]).expect("(T, D)")
}

/// `f` of each head's Q, K and V (T, D), the heads' results one after another.
fn each_head<F>(qkv: &[Tensor; 3], f: F) -> Vec<f32>
where
    F: Fn([ArrayView2<f32>; 3]) -> Vec<f32>,
{
    let [.., t, d] = qkv[0].shape[..] else {
        panic!("(…, T, D)")
    };
    let heads = qkv[0].data.len() / (t * d);
    (0..heads)
        .flat_map(|m| f(qkv.each_ref().map(|x| head(x, m))))
        .collect()
}

#[test]
fn stage_6s_heads_match_pytorch_naive_tiled_and_exact() {
    let fixture = Fixture::open("s6_flash.safetensors");
    let qkv = ["q", "k", "v"].map(|n| fixture.tensor(n)); // (B, H, T, D)
    let mut gaps = Gaps::default();
    let naive = each_head(&qkv, |[q, k, v]| {
        naive_attention(&q, &k, &v).into_raw_vec_and_offset().0
    });
    gaps.check(&fixture, "naive_attention:", &["out"], &[&naive]);
    for tiles in TILES {
        let label = format!("tiled_attention {} × {}:", tiles.br, tiles.bc);
        let out = each_head(&qkv, |[q, k, v]| {
            let tiled = tiled_attention(&q, &k, &v, tiles);
            tiled.output.into_raw_vec_and_offset().0
        });
        let lse = each_head(&qkv, |[q, k, v]| {
            tiled_attention(&q, &k, &v, tiles).lse.to_vec()
        });
        gaps.check(&fixture, &label, &["out"], &[&out]);
        gaps.check(&fixture, &label, &["lse"], &[&lse]);
        let label = format!("exact_attention {} × {}:", tiles.br, tiles.bc);
        let exact = each_head(&qkv, |[q, k, v]| {
            exact_attention(&q, &k, &v, tiles)
                .into_raw_vec_and_offset()
                .0
        });
        gaps.check(&fixture, &label, &["out"], &[&exact]);
    }
    gaps.assert_within_bound();
}

// ---------------------------------------------------------------------------------------------------
// Stage 7: grouped-query attention with RoPE, with a sliding window and without.
// ---------------------------------------------------------------------------------------------------

/// A PyTorch `nn.Linear`'s name in the fixtures and the crate's layer that holds it.
type Named = (&'static str, Linear);

/// The fixture's weights and biases of `layers` on the tape, and the input x as a parameter after
/// them (its gradient is wanted too): x's node.
fn load_layers(tape: &mut Tape, fixture: &Fixture, layers: &[Named]) -> NodeId {
    load_edited(tape, fixture, layers, |_, t| t)
}

/// [`load_layers`] with each weight and bias passed through `edit` (given its name) first.
fn load_edited(
    tape: &mut Tape,
    fixture: &Fixture,
    layers: &[Named],
    edit: impl Fn(&str, Tensor) -> Tensor,
) -> NodeId {
    let loads: Vec<(NodeId, Tensor)> = layers
        .iter()
        .flat_map(|(name, l)| {
            [(l.weight, "weight"), (l.bias, "bias")].map(|(id, part)| {
                let name = format!("{name}.{part}");
                (id, edit(&name, fixture.tensor(&name)))
            })
        })
        .collect();
    load(tape, &loads);
    tape.param(fixture.tensor("x")) // (B, T, C)
}

/// The layer's output for the fixture's x, and the gradients of x and of every layer's weight and
/// bias for its `d_out`, each checked against the fixture's `{prefix}NAME`.
fn check_layer(
    gaps: &mut Gaps,
    (fixture, prefix, label): (&Fixture, &str, &str),
    (tape, x, out): (&mut Tape, NodeId, NodeId),
    layers: &[Named],
) {
    let value = tape.value(out).data.clone();
    tape.backward_from(out, fixture.f32("d_out"));
    gaps.check(fixture, label, &[&format!("{prefix}out")], &[&value]);
    let d_x = tape.grad(x).unwrap();
    gaps.check(fixture, label, &[&format!("{prefix}grad.x")], &[d_x]);
    for (name, l) in layers {
        let names = ["weight", "bias"].map(|p| format!("{prefix}grad.{name}.{p}"));
        let grads = [l.weight, l.bias].map(|id| tape.grad(id).unwrap());
        gaps.check(
            fixture,
            label,
            &names.each_ref().map(String::as_str),
            &grads,
        );
    }
}

/// The fixture's layer: W_query, W_key and W_value, then out_proj, in the order
/// `Attention::multi_head` draws them.
fn gqa_layers(attn: &Attention) -> [Named; 4] {
    let [query, key, value] = attn.qkv.expect("the layer projects");
    [
        ("W_query", query),
        ("W_key", key),
        ("W_value", value),
        ("out_proj", attn.out),
    ]
}

#[test]
fn stage_7s_grouped_query_layer_with_rope_and_a_window_matches_pytorch() {
    let fixture = Fixture::open("s7_gqa_window_rope.safetensors");
    let size = |n| fixture.size(n);
    let base = Architecture {
        qkv: true,
        heads: size("H"),
        kv_heads: Some(size("K")),
        rope: true,
        ..Architecture::default()
    };
    let window = Architecture {
        window: Some(size("W")),
        ..base
    };
    // The window is masked on the naive graph only (a FlashAttention node with a window is
    // refused); without one, every form.
    let mut runs = vec![("window/", "naive", window)];
    for form in AttentionForm::ALL {
        runs.push((
            "full/",
            form.name(),
            Architecture {
                attention: form,
                ..base
            },
        ));
    }
    let mut gaps = Gaps::default();
    for (backend, new_tape) in backends() {
        for &(prefix, form, arch) in &runs {
            let mut tape = new_tape();
            let attn = Attention::multi_head(&mut tape, &mut NumpyRandom::seed(0), size("C"), arch);
            let layers = gqa_layers(&attn);
            let x = load_layers(&mut tape, &fixture, &layers);
            let out = attn.forward(&mut tape, x, None); // (B, T, C)
            let label = format!("{backend}, {form}:");
            check_layer(
                &mut gaps,
                (&fixture, prefix, &label),
                (&mut tape, x, out),
                &layers,
            );
        }
    }
    gaps.assert_within_bound();
}

/// The rows of a weight (out, in) or a bias (out), out = n·D, reordered: new row r is old row
/// `from(r)`.
fn reorder_rows(x: Tensor, from: impl Fn(usize) -> usize) -> Tensor {
    let width = x.data.len() / x.shape[0];
    let rows = (0..x.shape[0]).flat_map(|r| x.data[from(r) * width..][..width].to_vec());
    Tensor::new(&x.shape, rows.collect())
}

#[test]
fn the_bound_tells_the_layers_conventions_from_their_neighbours() {
    // Each neighbour of the layer's conventions, run on the fixture's numbers, lands 4·10⁶ to
    // 3·10⁷ u from PyTorch's output (measured): the bound of 16 u cannot mistake one for another.
    let fixture = Fixture::open("s7_gqa_window_rope.safetensors");
    let size = |n| fixture.size(n);
    let (c, d) = (size("C"), size("D"));
    let arch = Architecture {
        qkv: true,
        heads: size("H"),
        kv_heads: Some(size("K")),
        rope: true,
        window: Some(size("W")),
        ..Architecture::default()
    };
    let exact = fixture.f64("window/out.f64");
    let largest = exact.iter().fold(0.0f64, |m, e| m.max(e.abs()));
    let out_gap = |arch: Architecture, edit: &dyn Fn(&str, Tensor) -> Tensor| {
        let mut tape = Tape::new();
        let attn = Attention::multi_head(&mut tape, &mut NumpyRandom::seed(0), c, arch);
        let x = load_edited(&mut tape, &fixture, &gqa_layers(&attn), edit);
        let out = attn.forward(&mut tape, x, None);
        gap(&tape.value(out).data, &exact, largest)
    };
    let kept = out_gap(arch, &|_, t| t);
    assert!(kept <= BOUND, "{kept}");
    // Interleaved pairs (2i, 2i + 1): the crate's split halves of each head's rows of W_query and
    // W_key laid out evens first, then odds.
    let interleaved =
        |name: &str, t: Tensor| match name.starts_with("W_query") || name.starts_with("W_key") {
            true => reorder_rows(t, |r| {
                let (head, i) = (r / d, r % d);
                head * d
                    + if i < d / 2 {
                        2 * i
                    } else {
                        2 * (i - d / 2) + 1
                    }
            }),
            false => t,
        };
    // Query head h reading key/value head (h / G + 1) mod K, not h / G: the K/V heads' rows turned
    // by one head.
    let wrong_group =
        |name: &str, t: Tensor| match name.starts_with("W_key") || name.starts_with("W_value") {
            true => {
                let rows = t.shape[0];
                reorder_rows(t, |r| (r + d) % rows)
            }
            false => t,
        };
    let neighbours = [
        ("interleaved RoPE", out_gap(arch, &interleaved)),
        (
            "the key/value head of the next group",
            out_gap(arch, &wrong_group),
        ),
        (
            "no RoPE",
            out_gap(
                Architecture {
                    rope: false,
                    ..arch
                },
                &|_, t| t,
            ),
        ),
        (
            "a window of W + 1",
            out_gap(
                Architecture {
                    window: Some(size("W") + 1),
                    ..arch
                },
                &|_, t| t,
            ),
        ),
        (
            "no window",
            out_gap(
                Architecture {
                    window: None,
                    ..arch
                },
                &|_, t| t,
            ),
        ),
    ];
    for (name, gap) in neighbours {
        eprintln!("{name}: {gap:.3e} u from PyTorch's output");
        assert!(gap > 1000.0 * BOUND, "{name}: only {gap} u away");
    }
}

// ---------------------------------------------------------------------------------------------------
// Stage 7: latent attention, without and with decoupled RoPE; unfolded, and absorbed.
// ---------------------------------------------------------------------------------------------------

/// A model of one block with latent attention at the fixture's sizes, with `form`: only its
/// attention is used.
fn latent_model(tape: &mut Tape, fixture: &Fixture, rope: bool, form: AttentionForm) -> Gpt {
    let architecture = Architecture {
        qkv: true,
        heads: fixture.size("H"),
        latent: Some(fixture.size("L")),
        rope,
        attention: form,
        ..Architecture::default()
    };
    let config = GptConfig {
        vocab_size: 3,
        context_size: fixture.size("T"),
        embedding_size: fixture.size("C"),
        blocks: 1,
        architecture,
    };
    Gpt::new(tape, &mut NumpyRandom::seed(0), config)
}

/// The fixture's layers of a latent attention: the query, W_DKV, the key and value unfolding, the
/// output, and with RoPE the rotary query and key.
fn latent_layers(attn: &Attention) -> Vec<Named> {
    let [query, key, value] = attn.qkv.expect("latent attention projects");
    let latent = attn.latent.expect("latent attention");
    let mut layers = vec![
        ("W_query", query),
        ("W_DKV", latent.down),
        ("W_key", key),
        ("W_value", value),
        ("out_proj", attn.out),
    ];
    if let Some([query_rope, key_rope]) = latent.rotary {
        layers.extend([("W_QR", query_rope), ("W_KR", key_rope)]);
    }
    layers
}

fn check_latent(file: &'static str, rope: bool) -> Gaps {
    let fixture = Fixture::open(file);
    // Latent attention's rotary parts are concatenated to the queries and keys, so its rope
    // variant runs on the naive graph only; without RoPE, every form.
    let forms = match rope {
        true => vec![AttentionForm::Naive],
        false => AttentionForm::ALL.to_vec(),
    };
    let mut gaps = Gaps::default();
    for (backend, new_tape) in backends() {
        for &form in &forms {
            let mut tape = new_tape();
            let model = latent_model(&mut tape, &fixture, rope, form);
            let attn = &model.blocks[0].attn;
            let layers = latent_layers(attn);
            let x = load_layers(&mut tape, &fixture, &layers);
            let out = attn.forward(&mut tape, x, None); // (B, T, C)
            let label = format!("{backend}, {}:", form.name());
            check_layer(
                &mut gaps,
                (&fixture, "", &label),
                (&mut tape, x, out),
                &layers,
            );
            if form.is_naive() {
                let absorbed = absorbed_outputs(&mut tape, attn, x);
                let label = format!("{backend}, absorbed:");
                gaps.check(&fixture, &label, &["out"], &[&absorbed]);
            }
        }
    }
    gaps
}

/// Rows `rows` of matrix `m` of `x`, a stack of (T, W) matrices with T = `t`.
fn rows(x: &[f32], (m, t, w): (usize, usize, usize), rows: Range<usize>) -> &[f32] {
    &x[(m * t + rows.start) * w..(m * t + rows.end) * w]
}

/// The layer's output (B, T, C) one token at a time through the absorbed weights, each token's
/// query reading the latents (and rotary keys) of the tokens up to it: no key or value unfolded.
fn absorbed_outputs(tape: &mut Tape, attn: &Attention, x: NodeId) -> Vec<f32> {
    let [query, key, value] = attn.qkv.expect("latent attention projects");
    let absorbed = absorb(tape, [query, key, value, attn.out], attn.num_heads);
    let (q, kept) = attn.project_kept(tape, x, 0); // (B, H, T, D + R), (B, T, L) and (B, 1, T, R)
    let [b, h, t, dr] = tape.value(q).shape[..] else {
        unreachable!()
    };
    let (c, l) = (tape.value(x).last_dim(), tape.value(kept[0]).last_dim());
    let value = |id: NodeId| tape.value(id).data.clone();
    let (xs, qs, latents) = (value(x), value(q), value(kept[0]));
    let rotary_keys = kept.get(1).map(|&k| value(k));
    let r = rotary_keys.as_ref().map_or(0, |_| dr - (c / h));
    let mut out = Vec::with_capacity(b * t * c);
    for batch in 0..b {
        for i in 0..t {
            // Token i's rotary query parts (H, R): the last R of each head's D + R.
            let q_r: Vec<f32> = (0..h)
                .flat_map(|head| rows(&qs, (batch * h + head, t, dr), i..i + 1)[dr - r..].to_vec())
                .collect();
            let cached = Cached {
                latents: rows(&latents, (batch, t, l), 0..i + 1),
                rotary: (rotary_keys.as_deref())
                    .map(|k| (&q_r[..], rows(k, (batch, t, r), 0..i + 1))),
            };
            let x_i = rows(&xs, (batch, t, c), i..i + 1);
            out.extend(absorbed_attention(&absorbed, x_i, cached, attn.scale()));
        }
    }
    out
}

#[test]
fn stage_7s_latent_attention_matches_pytorch_unfolded_and_absorbed() {
    check_latent("s7_latent.safetensors", false).assert_within_bound();
}

#[test]
fn stage_7s_latent_attention_with_decoupled_rope_matches_pytorch_unfolded_and_absorbed() {
    check_latent("s7_latent_rope.safetensors", true).assert_within_bound();
}
