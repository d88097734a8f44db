//! A replay of PyTorch's CPU generator: `torch.manual_seed`, `torch.rand`, `uniform_`, `nn.Linear`
//! initialisation and the dropout mask, bit for bit.
//!
//! Each sampler is a [`Distribution`], so [`RandomExt::random_using`] fills an array in row-major
//! order, the order PyTorch draws in. Only the book's code paths are replayed:
//!
//! | PyTorch | draws per element | value |
//! |---|---|---|
//! | `torch.rand` (float32) | one word | low 24 bits × 2⁻²⁴ |
//! | `uniform_(a, b)` | one word | `u·(b−a) + a` with a single rounding (fused multiply-add) |
//! | `bernoulli_(q)` in dropout | two words (53-bit double) | kept iff `u < q` |
//!
//! PyTorch 2.4 and older on Linux x86-64 with an Intel CPU drew dropout masks through MKL instead,
//! so on such a machine the book's dropout cells print a different mask; the book and current
//! PyTorch take the path here.

use ndarray::{Array, Array1, Array2, Dimension, ShapeBuilder};
use ndarray_rand::RandomExt;
use rand::distr::Distribution;
use rand::{Rng, RngCore};

use super::Mt19937;

// ANCHOR: rand
/// `torch.rand` on float32: the low 24 bits of one word, scaled into [0, 1).
#[derive(Clone, Copy, Debug)]
pub struct Rand;

impl Distribution<f32> for Rand {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f32 {
        (rng.next_u32() & 0x00ff_ffff) as f32 * (1.0 / 16_777_216.0)
    }
}
// ANCHOR_END: rand

// ANCHOR: uniform
/// `tensor.uniform_(from, to)` on float32: `rand` mapped onto [from, to) with one fused
/// multiply-add, as PyTorch's AVX2 and AVX-512 kernels compute it.
#[derive(Clone, Copy, Debug)]
pub struct Uniform {
    from: f32,
    range: f32,
}

impl Uniform {
    /// The bounds arrive as Python floats (f64) and are rounded to f32 before the range is taken.
    pub fn new(from: f64, to: f64) -> Self {
        let (from, to) = (from as f32, to as f32);
        Uniform {
            from,
            range: to - from,
        }
    }
}

impl Distribution<f32> for Uniform {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f32 {
        Rand.sample(rng).mul_add(self.range, self.from)
    }
}
// ANCHOR_END: uniform

// ANCHOR: bernoulli
/// `bernoulli_(q)` on the default CPU path: one 53-bit double per element, `true` (kept) iff `u <
/// q`.
#[derive(Clone, Copy, Debug)]
pub struct Bernoulli {
    q: f64,
}

impl Distribution<bool> for Bernoulli {
    fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        let u = (rng.next_u64() & ((1 << 53) - 1)) as f64 * (1.0 / 9_007_199_254_740_992.0);
        u < self.q
    }
}
// ANCHOR_END: bernoulli

// ANCHOR: kaiming_bound
/// The bound `kaiming_uniform_(w, a=√5)` gives for `fan_in`, computed the way `torch.nn.init` does,
/// in f64.
pub fn kaiming_bound(fan_in: usize) -> f64 {
    let a = 5f64.sqrt();
    let gain = (2.0 / (1.0 + a * a)).sqrt();
    let std = gain / (fan_in as f64).sqrt();
    3f64.sqrt() * std
}
// ANCHOR_END: kaiming_bound

/// PyTorch's default CPU generator after `torch.manual_seed(seed)`.
#[derive(Clone, Debug)]
pub struct Generator {
    mt: Mt19937,
}

impl Generator {
    /// `torch.manual_seed(seed)`. PyTorch keeps the 64-bit seed but seeds MT19937 from its low 32
    /// bits.
    pub fn manual_seed(seed: u64) -> Self {
        Generator {
            mt: Mt19937::new(seed as u32),
        }
    }

    /// `torch.rand(shape)`, float32.
    pub fn rand<Sh: ShapeBuilder>(&mut self, shape: Sh) -> Array<f32, Sh::Dim> {
        Array::random_using(shape, Rand, &mut self.mt)
    }

    /// `torch.empty(shape).uniform_(from, to)`, float32.
    pub fn uniform<Sh: ShapeBuilder>(
        &mut self,
        shape: Sh,
        from: f64,
        to: f64,
    ) -> Array<f32, Sh::Dim> {
        Array::random_using(shape, Uniform::new(from, to), &mut self.mt)
    }

    // ANCHOR: linear
    /// `nn.Linear(d_in, d_out, bias)`'s parameters: the weight `(d_out, d_in)` first, then the
    /// bias.
    pub fn linear(
        &mut self,
        d_in: usize,
        d_out: usize,
        bias: bool,
    ) -> (Array2<f32>, Option<Array1<f32>>) {
        let bound = kaiming_bound(d_in);
        let weight = self.uniform((d_out, d_in), -bound, bound);
        let bias_bound = 1.0 / (d_in as f64).sqrt();
        let bias = bias.then(|| self.uniform(d_out, -bias_bound, bias_bound));
        (weight, bias)
    }
    // ANCHOR_END: linear

    // ANCHOR: dropout
    /// `nn.Dropout(p)` in training mode: zero each element with probability `p`, scale the rest by
    /// `1/(1−p)`. `p == 0` draws nothing and returns the input; `p == 1` draws nothing and returns
    /// zeros.
    pub fn dropout<D: Dimension>(&mut self, x: &Array<f32, D>, p: f64) -> Array<f32, D> {
        assert!(
            (0.0..=1.0).contains(&p),
            "dropout probability must be in [0, 1], got {p}"
        );
        if p == 0.0 {
            return x.clone();
        }
        if p == 1.0 {
            return x.mapv(|v| v * 0.0);
        }
        let keep = Array::random_using(x.raw_dim(), Bernoulli { q: 1.0 - p }, &mut self.mt);
        let scale = 1.0 / (1.0 - p) as f32;
        let mut out = x.clone();
        out.zip_mut_with(&keep, |v, &k| *v *= if k { scale } else { 0.0 });
        out
    }
    // ANCHOR_END: dropout

    /// The next raw word, for readers who want to compare with `torch.randint(0, 2**32, ...)`-style
    /// probes.
    pub fn next_word(&mut self) -> u32 {
        self.mt.next_u32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand_3x2_at_seed_123_bit_for_bit() {
        // The book's W_query, from `torch.manual_seed(123); torch.rand(3, 2)`.
        let w = Generator::manual_seed(123).rand((3, 2));
        let bits: Vec<u32> = w.iter().map(|v| v.to_bits()).collect();
        // 0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665 as the book prints them; here every bit.
        let expected = [
            0x3e979bfc, 0x3f043d6d, 0x3e80dafc, 0x3f304542, 0x3d977ee0, 0x3f5dd462,
        ];
        assert_eq!(bits, expected);
    }

    #[test]
    fn rand_is_low_24_bits_of_each_word() {
        let mut mt = Mt19937::new(123);
        let w = Generator::manual_seed(123).rand(4);
        for v in w {
            assert_eq!(v, (mt.next_u32() & 0xff_ffff) as f32 / 16_777_216.0);
        }
    }

    #[test]
    fn linear_3_to_2_at_seed_789_bit_for_bit() {
        // `torch.manual_seed(789); nn.Linear(3, 2, bias=False).weight`, the book's SelfAttention_v2
        // query. Expected bits from an exact-rational evaluation of `u·range + from` rounded once
        // to f32.
        let (w, b) = Generator::manual_seed(789).linear(3, 2, false);
        let bits: Vec<u32> = w.iter().map(|v| v.to_bits()).collect();
        assert_eq!(
            bits,
            [
                0x3ea1d27f, 0x3ee9e2d0, 0x3f03079c, 0xbe2c5302, 0xbeacfe38, 0xbdbbf3f0
            ]
        );
        assert_eq!(w.dim(), (2, 3));
        assert!(b.is_none());
    }

    #[test]
    fn kaiming_bound_is_one_over_sqrt_fan_in_in_f32() {
        for fan_in in 1..2000 {
            assert_eq!(
                kaiming_bound(fan_in) as f32,
                (1.0 / (fan_in as f64).sqrt()) as f32
            );
        }
    }

    #[test]
    fn dropout_with_zero_or_one_draws_nothing() {
        let x = ndarray::Array2::<f32>::ones((2, 2));
        let mut g = Generator::manual_seed(1);
        assert_eq!(g.dropout(&x, 0.0), x);
        assert_eq!(g.dropout(&x, 1.0), x * 0.0);
        assert_eq!(g.next_word(), Generator::manual_seed(1).next_word());
    }
}
