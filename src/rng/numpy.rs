//! A replay of NumPy's legacy global generator: `np.random.seed`, `random_sample`, `randn` and
//! `choice(…, p=…)`, bit for bit.
//!
//! Stage 5 follows GPTmini's chapter on causal attention, written in NumPy, which calls
//! `np.random.seed(42)` once and then draws every weight with `np.random.randn` and every generated
//! character with `np.random.choice`. NumPy's
//! legacy `RandomState` is an [`Mt19937`] seeded with `init_genrand`, so replaying it takes three
//! small recipes:
//!
//! | NumPy | words per draw | value |
//! |---|---|---|
//! | `random_sample` | two | `((a >> 5)·2²⁶ + (b >> 6)) / 2⁵³`, a 53-bit double in [0, 1) |
//! | `randn` / `standard_normal` | two or more per pair | Marsaglia's polar method; every second call returns a cached value |
//! | `choice(n, p=p)` | two (one `random_sample`) | `searchsorted(cumsum(p)/sum, u, side='right')` in float64 |

use super::Mt19937;

/// NumPy's legacy `RandomState`: the twister plus the polar method's cached second normal.
#[derive(Clone, Debug, PartialEq)]
pub struct NumpyRandom {
    mt: Mt19937,
    /// The polar method makes normals in pairs; NumPy returns one and keeps the other here.
    gauss: Option<f64>,
}

impl NumpyRandom {
    /// `np.random.seed(seed)` for a seed that fits in 32 bits: `init_genrand(seed)`, nothing
    /// cached.
    pub fn seed(seed: u32) -> Self {
        NumpyRandom {
            mt: Mt19937::new(seed),
            gauss: None,
        }
    }

    /// `np.random.seed(key)` for an array of 32-bit seeds, e.g. `np.random.seed([42, 7])`:
    /// `init_by_array(key)`, nothing cached.
    pub fn seed_array(key: &[u32]) -> Self {
        NumpyRandom {
            mt: Mt19937::from_key(key),
            gauss: None,
        }
    }

    // ANCHOR: random_sample
    /// `np.random.random_sample()`: 27 high bits of one word and 26 of the next make a 53-bit
    /// double.
    pub fn random_sample(&mut self) -> f64 {
        let a = self.mt.next_word();
        let b = self.mt.next_word();
        Self::double_from(a, b)
    }

    /// The 53-bit double of two words: `a`'s 27 high bits, then `b`'s 26.
    #[inline(always)]
    fn double_from(a: u32, b: u32) -> f64 {
        (f64::from(a >> 5) * 67_108_864.0 + f64::from(b >> 6)) / 9_007_199_254_740_992.0
    }
    // ANCHOR_END: random_sample

    /// Fills `out` with what as many calls of [`random_sample`](Self::random_sample) would give.
    /// The words come a block at a time ([`Mt19937::fill`]) and become doubles in SIMD lanes;
    /// stage 5's fast dropout draws its masks this way.
    #[inline(always)]
    pub fn fill_random_sample(&mut self, out: &mut [f64]) {
        const BLOCK: usize = 256;
        let mut words = [0u32; 2 * BLOCK];
        for out in out.chunks_mut(BLOCK) {
            let words = &mut words[..2 * out.len()];
            self.mt.fill(words);
            for (o, ab) in out.iter_mut().zip(words.chunks_exact(2)) {
                *o = Self::double_from(ab[0], ab[1]);
            }
        }
    }

    // ANCHOR: standard_normal
    /// `np.random.standard_normal()` (what `randn` draws): the legacy Marsaglia polar method.
    ///
    /// Two uniforms on (−1, 1) are drawn until they fall inside the unit circle; the pair gives two
    /// normals. NumPy returns `f·x2` and caches `f·x1` for the next call, so the order matters for
    /// a replay.
    pub fn standard_normal(&mut self) -> f64 {
        if let Some(cached) = self.gauss.take() {
            return cached;
        }
        loop {
            let x1 = 2.0 * self.random_sample() - 1.0;
            let x2 = 2.0 * self.random_sample() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                // libm, not the platform's `ln`, so every machine gets the same last bit.
                let f = (-2.0 * libm::log(r2) / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }
    // ANCHOR_END: standard_normal

    /// `np.random.randn(n)` flattened: `n` normals in row-major order.
    pub fn randn(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.standard_normal()).collect()
    }

    // ANCHOR: choice
    /// `np.random.choice(len(p), p=p)`: one index drawn with probabilities `p`.
    ///
    /// NumPy converts `p` to float64, builds the running sum, divides it by its last entry, draws
    /// one [`random_sample`](Self::random_sample) `u` and returns the first index whose cumulative
    /// value exceeds `u` (`searchsorted(…, side='right')`).
    ///
    /// # Panics
    /// If `p` is empty. NumPy also rejects `p` whose sum is far from 1; the callers here pass a
    /// softmax.
    pub fn choice(&mut self, p: &[f64]) -> usize {
        assert!(!p.is_empty(), "choice needs at least one probability");
        let mut cdf = Vec::with_capacity(p.len());
        let mut running = 0.0;
        for &pi in p {
            running += pi;
            cdf.push(running);
        }
        let total = running;
        for c in &mut cdf {
            *c /= total;
        }
        let u = self.random_sample();
        // side='right': the number of entries <= u.
        cdf.partition_point(|&c| c <= u)
    }
    // ANCHOR_END: choice
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block-at-a-time doubles are the one-at-a-time ones, and the generator ends where the
    /// single calls leave it.
    #[test]
    fn fill_random_sample_gives_the_values_of_random_sample() {
        for (seed, len) in [(42, 0), (1, 1), (2, 255), (3, 256), (4, 257), (5, 3000)] {
            let (mut one, mut block) = (NumpyRandom::seed(seed), NumpyRandom::seed(seed));
            one.random_sample();
            block.random_sample();
            let want: Vec<f64> = (0..len).map(|_| one.random_sample()).collect();
            let mut got = vec![0.0; len];
            block.fill_random_sample(&mut got);
            assert_eq!(got, want, "seed {seed}, {len} values");
            assert_eq!(block.random_sample(), one.random_sample());
        }
    }

    #[test]
    fn first_normals_after_seed_42() {
        // np.random.seed(42); np.random.randn(6), as exact doubles (float.hex in Python).
        let mut rng = NumpyRandom::seed(42);
        let got = rng.randn(6);
        let want = [
            0.4967141530112327,
            -0.13826430117118466,
            0.6476885381006925,
            1.5230298564080254,
            -0.23415337472333597,
            -0.23413695694918055,
        ];
        assert_eq!(got, want);
        assert_eq!(got[0], f64::from_bits(0x3fdfca2a28a9307c));
    }

    #[test]
    fn random_sample_after_seed_42() {
        // np.random.seed(42); np.random.random_sample(3)
        let mut rng = NumpyRandom::seed(42);
        let got: Vec<f64> = (0..3).map(|_| rng.random_sample()).collect();
        assert_eq!(
            got,
            [0.3745401188473625, 0.9507143064099162, 0.7319939418114051]
        );
    }

    #[test]
    fn choice_matches_numpy() {
        // np.random.seed(42); p = float32 [0.1, 0.2, 0.3, 0.4]; [np.random.choice(4, p=p) for _ in
        // range(10)]
        let mut rng = NumpyRandom::seed(42);
        let p: Vec<f64> = [0.1f32, 0.2, 0.3, 0.4]
            .iter()
            .map(|&x| f64::from(x))
            .collect();
        let got: Vec<usize> = (0..10).map(|_| rng.choice(&p)).collect();
        assert_eq!(got, [2, 3, 3, 2, 1, 1, 0, 3, 3, 3]);
    }

    #[test]
    fn choice_side_right_skips_zero_probabilities() {
        // A u that lands exactly on a cumulative value moves past it, so a zero-probability entry
        // is never picked.
        let mut rng = NumpyRandom::seed(0);
        for _ in 0..1000 {
            assert_eq!(rng.choice(&[0.0, 1.0, 0.0]), 1);
        }
    }
}
