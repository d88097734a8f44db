//! The Mersenne Twister MT19937, the generator behind both `torch.manual_seed` and
//! `np.random.seed`.
//!
//! Both libraries seed it the same way, with Matsumoto and Nishimura's `init_genrand` recurrence
//! over a 32-bit seed, so one implementation serves both replays in [`super::torch`] and
//! [`super::numpy`].

use rand::RngCore;

/// Words of state.
const N: usize = 624;
/// The middle word used by the twist.
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// MT19937 with the standard tempering. Implements [`rand::RngCore`], so ndarray-rand's
/// `RandomExt::random_using` can fill arrays from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mt19937 {
    state: [u32; N],
    /// Index of the next word to temper; `N` means "twist before the next draw".
    index: usize,
}

impl Mt19937 {
    // ANCHOR: init_genrand
    /// `init_genrand(seed)`: the state PyTorch's `manual_seed` and NumPy's legacy `seed` build.
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { state, index: N }
    }
    // ANCHOR_END: init_genrand

    /// `init_by_array(key)`: the state NumPy's legacy `seed` builds from an array of seeds, such as
    /// `np.random.seed([42, 7])`. It starts from `init_genrand(19650218)` and stirs every key word
    /// into every state word, so that nearby keys give unrelated streams.
    pub fn from_key(key: &[u32]) -> Self {
        assert!(!key.is_empty(), "init_by_array needs at least one key word");
        let mut mt = Mt19937::new(19_650_218);
        let s = &mut mt.state;
        let (mut i, mut j) = (1, 0);
        for _ in 0..N.max(key.len()) {
            let prev = s[i - 1] ^ (s[i - 1] >> 30);
            s[i] = (s[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            (i, j) = (i + 1, (j + 1) % key.len());
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        for _ in 0..N - 1 {
            let prev = s[i - 1] ^ (s[i - 1] >> 30);
            s[i] = (s[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        s[0] = 0x8000_0000; // the most significant bit is 1, so that the state is never all zero
        mt
    }

    // ANCHOR: twist
    /// Regenerates all 624 words at once (the "twist").
    fn twist(&mut self) {
        for i in 0..N {
            let (next, partner) = (self.state[(i + 1) % N], self.state[(i + M) % N]);
            self.state[i] = Self::twisted(self.state[i], next, partner);
        }
        self.index = 0;
    }

    /// One new word, from the old one, the word after it and its partner M words on.
    #[inline(always)]
    fn twisted(word: u32, next: u32, partner: u32) -> u32 {
        let y = (word & UPPER_MASK) | (next & LOWER_MASK);
        let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
        partner ^ (y >> 1) ^ mag
    }
    // ANCHOR_END: twist

    /// [`twist`](Self::twist) in runs without wrapping indices: first the words whose partner
    /// `i + M` is still an old word, then the rest in stretches whose partners, N − M back, are
    /// already new, then the last word. Each run reads only words it does not write, so it goes in
    /// SIMD lanes; the state is the same, word for word.
    #[inline(always)]
    fn twist_in_runs(&mut self) {
        let old = self.state;
        let new = &mut self.state;
        twist_run(&mut new[..N - M], &old, &old[1..], &old[M..]);
        let mut i = N - M;
        while i < N - 1 {
            let end = (i + N - M).min(N - 1);
            let (done, rest) = new.split_at_mut(i);
            twist_run(
                &mut rest[..end - i],
                &old[i..],
                &old[i + 1..],
                &done[i - (N - M)..],
            );
            i = end;
        }
        new[N - 1] = Self::twisted(old[N - 1], new[0], new[M - 1]);
        self.index = 0;
    }

    // ANCHOR: temper
    /// One tempered 32-bit output (`genrand_int32`).
    pub fn next_word(&mut self) -> u32 {
        if self.index >= N {
            self.twist();
        }
        let y = self.state[self.index];
        self.index += 1;
        Self::temper(y)
    }

    /// The tempering: a fixed scramble of a state word's bits.
    #[inline(always)]
    fn temper(mut y: u32) -> u32 {
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }
    // ANCHOR_END: temper

    /// Fills `out` with the words that as many calls of [`next_word`](Self::next_word) would give,
    /// a block of state at a time: the twist in runs without wrapping indices, then a tempering loop
    /// with no carried dependency, both in SIMD lanes. Stage 5's dropout draws its masks this way.
    #[inline(always)]
    pub fn fill(&mut self, mut out: &mut [u32]) {
        while !out.is_empty() {
            if self.index >= N {
                self.twist_in_runs();
            }
            let count = out.len().min(N - self.index);
            let (now, rest) = out.split_at_mut(count);
            for (o, &y) in now.iter_mut().zip(&self.state[self.index..]) {
                *o = Self::temper(y);
            }
            self.index += count;
            out = rest;
        }
    }
}

/// `out[i] = Mt19937::twisted(words[i], nexts[i], partners[i])` along a run.
#[inline(always)]
fn twist_run(out: &mut [u32], words: &[u32], nexts: &[u32], partners: &[u32]) {
    let inputs = words.iter().zip(nexts).zip(partners);
    for (o, ((&w, &n), &p)) in out.iter_mut().zip(inputs) {
        *o = Mt19937::twisted(w, n, p);
    }
}

impl RngCore for Mt19937 {
    fn next_u32(&mut self) -> u32 {
        self.next_word()
    }

    /// Two words, the first as the high half: PyTorch's `random64()`.
    fn next_u64(&mut self) -> u64 {
        let hi = u64::from(self.next_word());
        let lo = u64::from(self.next_word());
        (hi << 32) | lo
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(4) {
            let bytes = self.next_word().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block-at-a-time path gives the one-at-a-time words, from any point of the stream and
    /// across many twists, and leaves the generator where the single calls would.
    #[test]
    fn fill_gives_the_words_of_next_word() {
        for (seed, skip, len) in [
            (5489, 0, 1),
            (42, 3, 623),
            (7, 624, 625),
            (1, 100, 5000),
            (9, 1, 20_000),
        ] {
            let (mut one, mut block) = (Mt19937::new(seed), Mt19937::new(seed));
            for _ in 0..skip {
                one.next_word();
                block.next_word();
            }
            let want: Vec<u32> = (0..len).map(|_| one.next_word()).collect();
            let mut got = vec![0; len];
            block.fill(&mut got);
            assert_eq!(got, want, "seed {seed}, after {skip} words");
            assert_eq!(block.next_word(), one.next_word());
        }
    }

    #[test]
    fn reference_seed_5489_first_outputs() {
        // The reference implementation's default seed; these are the first outputs of mt19937ar.c.
        let mut mt = Mt19937::new(5489);
        let got: Vec<u32> = (0..5).map(|_| mt.next_word()).collect();
        assert_eq!(
            got,
            [3499211612, 581869302, 3890346734, 3586334585, 545404204]
        );
    }

    #[test]
    fn ten_thousandth_output_of_default_seed() {
        // The C++ standard requires this value of `std::mt19937` (seed 5489).
        let mut mt = Mt19937::new(5489);
        let last = (0..10_000).map(|_| mt.next_word()).last();
        assert_eq!(last, Some(4123659995));
    }

    #[test]
    fn seed_123_first_outputs() {
        let mut mt = Mt19937::new(123);
        let got: Vec<u32> = (0..3).map(|_| mt.next_word()).collect();
        assert_eq!(got, [2991312382, 3062119789, 1228959102]);
    }

    #[test]
    fn init_by_array_first_outputs() {
        // mt19937ar.c's own test: init_by_array({0x123, 0x234, 0x345, 0x456}), as in mt19937ar.out.
        let mut mt = Mt19937::from_key(&[0x123, 0x234, 0x345, 0x456]);
        let got: Vec<u32> = (0..5).map(|_| mt.next_word()).collect();
        assert_eq!(
            got,
            [1067595299, 955945823, 477289528, 4107218783, 4228976476]
        );
    }

    #[test]
    fn next_u64_puts_the_first_word_high() {
        let mut a = Mt19937::new(7);
        let mut b = Mt19937::new(7);
        let hi = u64::from(b.next_word());
        let lo = u64::from(b.next_word());
        assert_eq!(a.next_u64(), (hi << 32) | lo);
    }
}
