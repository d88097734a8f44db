//! Gradient checks the stages' tests share: an op's backward pass, and a whole model's, against
//! central finite differences.

use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s5_gpt::beyond::{Architecture, dropout_masks};
use attention_from_scratch::s5_gpt::{CharDataset, Gpt, GptConfig, NodeId, Split, Tape, Tensor};

/// Values from NumPy's generator, scaled.
pub fn normals(rng: &mut NumpyRandom, n: usize, scale: f64) -> Vec<f32> {
    (0..n)
        .map(|_| (rng.standard_normal() * scale) as f32)
        .collect()
}

/// Builds a graph from `inputs` with `f`, reduces the output to L = Σ out·R with fixed random R, and
/// compares dL/d(input) from the tape with (L(x+h) − L(x−h)) / 2h for every input element.
///
/// The ops compute in float32, so L carries rounding noise of about 1e-7·|L|; with h = 1e-2 that is
/// 1e-5 in the difference quotient, and the truncation error h²·f‴/6 is of the same order or smaller.
/// The tolerance, 1e-3 + 1e-2·|g|, is an order of magnitude above both and far below the size of the
/// gradients (a wrong sign, a missing factor or a transposed index fails it).
pub fn check_gradients(name: &str, inputs: &[Tensor], f: impl Fn(&mut Tape, &[NodeId]) -> NodeId) {
    let h = 1e-2f32;
    let eval = |inputs: &[Tensor]| -> (Tape, NodeId, Vec<NodeId>) {
        let mut tape = Tape::new();
        let ids: Vec<NodeId> = inputs.iter().map(|t| tape.param(t.clone())).collect();
        let out = f(&mut tape, &ids);
        (tape, out, ids)
    };
    let (mut tape, out, ids) = eval(inputs);
    let n_out = tape.value(out).data.len();
    let weights = normals(&mut NumpyRandom::seed(7), n_out, 1.0);
    let loss = |tape: &Tape, out: NodeId| -> f64 {
        let v = &tape.value(out).data;
        v.iter()
            .zip(&weights)
            .map(|(&o, &w)| f64::from(o) * f64::from(w))
            .sum()
    };
    tape.backward_from(out, weights.clone());
    let mut worst = 0.0f64;
    for (i, input) in inputs.iter().enumerate() {
        let analytic = tape
            .grad(ids[i])
            .map(<[f32]>::to_vec)
            .unwrap_or(vec![0.0; input.data.len()]);
        for (j, (&x, &g)) in input.data.iter().zip(&analytic).enumerate() {
            let mut moved = inputs.to_vec();
            moved[i].data[j] = x + h;
            let (t_plus, o_plus, _) = eval(&moved);
            moved[i].data[j] = x - h;
            let (t_minus, o_minus, _) = eval(&moved);
            let numeric = (loss(&t_plus, o_plus) - loss(&t_minus, o_minus)) / (2.0 * f64::from(h));
            let g = f64::from(g);
            let err = (numeric - g).abs();
            assert!(
                err <= 1e-3 + 1e-2 * g.abs(),
                "{name}: input {i} element {j}: backward {g}, finite difference {numeric}"
            );
            worst = worst.max(err / (1e-3 + 1e-2 * g.abs()));
        }
    }
    eprintln!("{name}: worst error {worst:.3} of the tolerance");
}

pub fn random_tensor(shape: &[usize], seed: u32, scale: f64) -> Tensor {
    let n = shape.iter().product();
    Tensor::new(shape, normals(&mut NumpyRandom::seed(seed), n, scale))
}

/// Checks the gradient of a tiny GPT's loss for every parameter (V = 6, T = 4, C = 8, two blocks), with
/// both embedding tables scaled by `embedding_scale`. Dropout, when the architecture has it, draws the
/// same masks in every evaluation.
///
/// The difference quotient is Richardson's, (4·D(h/2) − D(h))/3 with D(h) = (L(x+h) − L(x−h))/2h, which
/// cancels D's h² error; the loss's float32 noise (about 2e-7) adds at most about 1e-4 to it.
pub fn check_whole_model(architecture: Architecture, embedding_scale: f32) {
    let ds = CharDataset::from_text("to be, or not to be: that is the question", 2, 4);
    let config = GptConfig {
        vocab_size: ds.vocab_size(),
        context_size: 4,
        embedding_size: 8,
        blocks: 2,
        architecture,
    };
    let batch = ds.batch(Split::Train, 1);
    let build = |params: Option<&[Tensor]>| -> (Tape, Gpt) {
        let mut tape = Tape::new();
        let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(3), config);
        if let Some(params) = params {
            tape.set_params(params.iter().map(|p| &p.data[..]));
        }
        (tape, model)
    };
    let loss = |tape: &mut Tape, model: &Gpt| {
        let mut masks = dropout_masks(42, 7);
        let logits = model.forward(tape, &batch.x, batch.rows, Some(&mut masks));
        tape.cross_entropy(logits, &batch.y)
    };
    let (mut tape, model) = build(None);
    let mut params = tape.params().to_vec();
    for id in std::iter::once(model.tok_emb).chain(model.pos_emb) {
        let table = &mut params[id.0].data;
        table.iter_mut().for_each(|x| *x *= embedding_scale);
    }
    tape.set_params(params.iter().map(|p| &p.data[..]));
    let l = loss(&mut tape, &model);
    tape.backward(l);
    let grads = tape.param_grads().to_vec();
    let h = 5e-3f32;
    let mut checked = 0;
    for (p, (param, grad)) in params.iter().zip(&grads).enumerate() {
        for (j, (&x, &g)) in param.data.iter().zip(grad).enumerate() {
            let mut moved = params.clone();
            let mut at = |v: f32| {
                moved[p].data[j] = v;
                let (mut tape, model) = build(Some(&moved));
                let l = loss(&mut tape, &model);
                f64::from(tape.value(l).data[0])
            };
            let mut quotient = |h: f32| (at(x + h) - at(x - h)) / (2.0 * f64::from(h));
            let numeric = (4.0 * quotient(h / 2.0) - quotient(h)) / 3.0;
            let g = f64::from(g);
            assert!(
                (numeric - g).abs() <= 1e-3 + 1e-2 * g.abs(),
                "{architecture:?}: parameter {p} element {j}: backward {g}, finite difference {numeric}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, params.iter().map(|p| p.data.len()).sum::<usize>());
}
