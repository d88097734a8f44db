//! Lesson layer. A head as two circuits, after Elhage et al., *A Mathematical Framework for
//! Transformer Circuits* (2021): its QK circuit, W_Qᵀ·W_K, decides where a query looks; its OV
//! circuit, W_O·W_V, decides what it writes there. Read through the token table E and the output
//! layer W_U, each is a V × V table of characters: 65 × 65 for Tiny Shakespeare.
//!
//! The circuits are read along the model's direct paths: biases, the position table and
//! LayerNorm are left out. The paper folds LayerNorm into the weights; these tables skip it (its
//! centring, scale, gain and shift), so they are the weights' own circuits, close to but not
//! exactly the trained model's.

use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::beyond::{Attention, Gpt};
use crate::s5_gpt::tape::Tape;

/// A matrix of `rows` × `cols`, row-major, in double precision.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f64>,
}

// ANCHOR: matrix
impl Matrix {
    /// The `rows` × `cols` block of a float32 weight (…, n_in) starting at row `top`, column
    /// `left`.
    pub fn block(
        w: &[f32],
        n_in: usize,
        (top, left): (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Self {
        let data = (top..top + rows)
            .flat_map(|r| w[r * n_in + left..][..cols].iter().map(|&x| f64::from(x)))
            .collect();
        Matrix { rows, cols, data }
    }

    /// A·B.
    pub fn dot(&self, b: &Matrix) -> Matrix {
        assert_eq!(self.cols, b.rows, "A·B needs A's columns to match B's rows");
        let mut data = vec![0.0; self.rows * b.cols];
        for (i, out) in data.chunks_exact_mut(b.cols).enumerate() {
            for (k, &a) in self.data[i * self.cols..][..self.cols].iter().enumerate() {
                for (o, &x) in out.iter_mut().zip(&b.data[k * b.cols..][..b.cols]) {
                    *o += a * x;
                }
            }
        }
        Matrix {
            rows: self.rows,
            cols: b.cols,
            data,
        }
    }

    /// Aᵀ.
    pub fn t(&self) -> Matrix {
        let data = (0..self.cols)
            .flat_map(|c| (0..self.rows).map(move |r| (r, c)))
            .map(|(r, c)| self.data[r * self.cols + c])
            .collect();
        Matrix {
            rows: self.cols,
            cols: self.rows,
            data,
        }
    }

    /// The Frobenius norm, √Σ aᵢⱼ².
    pub fn norm(&self) -> f64 {
        self.data.iter().map(|a| a * a).sum::<f64>().sqrt()
    }

    /// The share of columns whose largest entry is on the diagonal: 1 for a circuit that maps
    /// each character to itself.
    pub fn diagonal_share(&self) -> f64 {
        let hits = (0..self.cols)
            .filter(|&c| {
                let column = (0..self.rows).map(|r| self.data[r * self.cols + c]);
                let top = column
                    .enumerate()
                    .fold(
                        (0, f64::NEG_INFINITY),
                        |b, (r, x)| {
                            if x > b.1 { (r, x) } else { b }
                        },
                    );
                top.0 == c
            })
            .count();
        hits as f64 / self.cols as f64
    }
}
// ANCHOR_END: matrix

// ANCHOR: head_weights
/// One head's four weights, as the paper writes them: W_Q, W_K, W_V (D × C) and W_O (C × D).
#[derive(Clone, Debug, PartialEq)]
pub struct HeadWeights {
    pub query: Matrix,
    pub key: Matrix,
    pub value: Matrix,
    pub out: Matrix,
}

impl HeadWeights {
    /// Head `h` of `attn`: its rows of W_query, of its key/value head's W_key and W_value, and its
    /// columns of the output layer.
    pub fn of(tape: &Tape, attn: &Attention, h: usize) -> Self {
        let [query, key, value] = attn.qkv.as_ref().expect("the heads have projections");
        let c = tape.value(attn.out.weight).last_dim();
        let d = c / attn.num_heads;
        let kv = h / (attn.num_heads / attn.kv_heads); // the key/value head it reads
        let w = |id| &tape.value(id).data;
        HeadWeights {
            query: Matrix::block(w(query.weight), c, (h * d, 0), (d, c)),
            key: Matrix::block(w(key.weight), c, (kv * d, 0), (d, c)),
            value: Matrix::block(w(value.weight), c, (kv * d, 0), (d, c)),
            out: Matrix::block(w(attn.out.weight), c, (0, h * d), (c, d)),
        }
    }

    /// W_QK = W_Qᵀ·W_K (C × C): query x and key y score xᵀ·W_QK·y (times 1/√D).
    pub fn qk(&self) -> Matrix {
        self.query.t().dot(&self.key)
    }

    /// W_OV = W_O·W_V (C × C): a key y attended to adds W_OV·y to the stream.
    pub fn ov(&self) -> Matrix {
        self.out.dot(&self.value)
    }
}
// ANCHOR_END: head_weights

// ANCHOR: circuits
/// The token table E (V × C) and the output layer W_U (V × C) of `model`.
fn tables(model: &Gpt, tape: &Tape) -> (Matrix, Matrix) {
    let c = model.config.embedding_size;
    let v = model.config.vocab_size;
    let e = Matrix::block(&tape.value(model.tok_emb).data, c, (0, 0), (v, c));
    let u = Matrix::block(&tape.value(model.head.weight).data, c, (0, 0), (v, c));
    (e, u)
}

/// The full OV circuit W_U·W_O·W_V·Eᵀ (V × V): column b is what attending to character b adds to
/// each character's logit.
pub fn ov_circuit(model: &Gpt, tape: &Tape, block: usize, h: usize) -> Matrix {
    let (e, u) = tables(model, tape);
    let w = HeadWeights::of(tape, &model.blocks[block].attn, h);
    u.dot(&w.ov()).dot(&e.t())
}

/// The QK circuit E·W_QK·Eᵀ (V × V) of a head whose keys read the tokens themselves: row a is how
/// much a query of character a likes a key of each character.
pub fn qk_circuit(model: &Gpt, tape: &Tape, block: usize, h: usize) -> Matrix {
    let (e, _) = tables(model, tape);
    let w = HeadWeights::of(tape, &model.blocks[block].attn, h);
    e.dot(&w.qk()).dot(&e.t())
}

/// The QK circuit of head `h` of block 1 through head `prev` of block 0, E·W_QK·W_OV·Eᵀ (V × V):
/// row a is how much a query of character a likes a key whose previous character (moved there by
/// `prev`) is each character. An induction head's is diagonal.
pub fn k_composed_qk_circuit(model: &Gpt, tape: &Tape, prev: usize, h: usize) -> Matrix {
    let (e, _) = tables(model, tape);
    let w1 = HeadWeights::of(tape, &model.blocks[1].attn, h);
    let w0 = HeadWeights::of(tape, &model.blocks[0].attn, prev);
    e.dot(&w1.qk()).dot(&w0.ov()).dot(&e.t())
}
// ANCHOR_END: circuits

// ANCHOR: composition
/// Elhage's K-composition score of a later head's W_QK with an earlier head's W_OV:
/// ‖W_QK·W_OV‖ / (‖W_QK‖·‖W_OV‖), how much of where the later head looks is read from what the
/// earlier one wrote. Between 0 and 1.
pub fn k_composition(later: &HeadWeights, earlier: &HeadWeights) -> f64 {
    let (qk, ov) = (later.qk(), earlier.ov());
    qk.dot(&ov).norm() / (qk.norm() * ov.norm())
}

/// The score two heads of random weights of the same shapes get, averaged over `n` draws from
/// `np.random.RandomState(seed)`: the level a score must rise above to mean anything.
pub fn k_composition_baseline(c: usize, d: usize, n: usize, seed: u32) -> f64 {
    let mut rng = NumpyRandom::seed(seed);
    let mut random = |rows, cols| Matrix {
        rows,
        cols,
        data: rng.randn(rows * cols),
    };
    let total: f64 = (0..n)
        .map(|_| {
            let later = HeadWeights {
                query: random(d, c),
                key: random(d, c),
                value: random(d, c),
                out: random(c, d),
            };
            let earlier = HeadWeights {
                query: random(d, c),
                key: random(d, c),
                value: random(d, c),
                out: random(c, d),
            };
            k_composition(&later, &earlier)
        })
        .sum();
    total / n as f64
}
// ANCHOR_END: composition

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrices_multiply_transpose_and_read_their_diagonal() {
        let a = Matrix {
            rows: 2,
            cols: 3,
            data: vec![1., 2., 3., 4., 5., 6.],
        };
        let p = a.dot(&a.t());
        assert_eq!(p.data, [14., 32., 32., 77.]);
        assert_eq!(p.diagonal_share(), 0.5); // column 0's largest is in row 1
        let id = Matrix {
            rows: 2,
            cols: 2,
            data: vec![1., 0., 0., 1.],
        };
        assert_eq!(id.diagonal_share(), 1.0);
        assert!((id.norm() - 2f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn a_later_head_reading_exactly_what_the_earlier_wrote_composes_fully() {
        let eye = |n: usize| Matrix {
            rows: n,
            cols: n,
            data: (0..n * n)
                .map(|k| f64::from(u8::from(k % (n + 1) == 0)))
                .collect(),
        };
        let head = HeadWeights {
            query: eye(4),
            key: eye(4),
            value: eye(4),
            out: eye(4),
        };
        assert!((k_composition(&head, &head) - 0.5).abs() < 1e-12); // ‖I‖/(‖I‖·‖I‖) = 1/√4
        let baseline = k_composition_baseline(64, 16, 20, 0);
        assert!(baseline > 0.05 && baseline < 0.5, "{baseline}");
    }
}
