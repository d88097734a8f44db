//! Deterministic kernels: the matrix product and NumPy's float32 summation.
//!
//! The seed tutorial multiplies with `@` (OpenBLAS) and sums with `np.sum`. Neither order of additions is
//! fixed across machines, so this module fixes its own:
//!
//! * [`matmul`] computes every `c[i][j]` as `((a[i][0]·b[0][j] + a[i][1]·b[1][j]) + …)`, k in order, with a
//!   plain multiply and then an add. No fused multiply-add: Rust never contracts `a * b + c` on its own, and
//!   the code never asks for it. The inner loop runs along `j`, so a SIMD lane holds one output element and the
//!   order of its additions stays the same at any vector width, with or without AVX2.
//! * Threads split the *outputs* (rows of `c`), never a sum, so every thread count gives the same bits.
//! * [`pairwise_sum`] is NumPy's float32 `np.sum` along a contiguous axis, replayed exactly.

use rayon::prelude::*;

/// Output columns per SIMD tile: two AVX registers of f32.
const NR: usize = 16;
/// Output rows per tile: 6×16 accumulators take 12 of the 16 AVX registers.
const MR: usize = 6;
/// Below this many multiply-adds a product runs on the calling thread: waking a helper costs more.
const PARALLEL_MIN_WORK: usize = 1 << 16;
/// About this many multiply-adds per parallel task.
const TASK_WORK: usize = 1 << 15;

/// A read-only matrix seen through strides, so that a transpose costs nothing to pass in.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    pub data: &'a [f32],
    /// Distance between rows (the step of the first index).
    pub row_stride: usize,
    /// Distance between columns (the step of the second index).
    pub col_stride: usize,
}

impl<'a> Strided<'a> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        Strided {
            data,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        Strided {
            data,
            row_stride: 1,
            col_stride: cols,
        }
    }

    fn offset(self, rows: usize) -> Self {
        Strided {
            data: &self.data[rows * self.row_stride..],
            ..self
        }
    }
}

/// `c (m×n) = a (m×k) · b (k×n)`; `b` and `c` are row-major, `c` is overwritten.
///
/// Rows of `c` are shared out among the threads of the current rayon pool (see [`super::Config::threads`]).
pub fn matmul(c: &mut [f32], a: Strided, b: &[f32], m: usize, k: usize, n: usize) {
    assert_eq!(c.len(), m * n, "matmul: c must hold m×n values");
    assert!(b.len() >= k * n, "matmul: b must hold k×n values");
    if rayon::current_num_threads() == 1 || m * k * n < PARALLEL_MIN_WORK || m <= MR {
        return matmul_serial(c, a, b, m, k, n);
    }
    // Small tasks of whole MR-row tiles: a helper that wakes up late takes what is left instead of
    // making the caller wait for a large half.
    let rows_per_task = TASK_WORK.div_ceil(MR * k * n).max(1) * MR;
    c.par_chunks_mut(rows_per_task * n)
        .enumerate()
        .for_each(|(t, c)| matmul_serial(c, a.offset(t * rows_per_task), b, c.len() / n, k, n));
}

/// `batch` independent products `c[i] = a[i] · b[i]`, each laid out as in [`matmul`], one task per item.
pub fn matmul_batched(
    c: &mut [f32],
    a: &[f32],
    a_transposed: bool,
    b: &[f32],
    batch: usize,
    (m, k, n): (usize, usize, usize),
) {
    assert_eq!(
        c.len(),
        batch * m * n,
        "matmul_batched: c must hold batch×m×n values"
    );
    let item = |i: usize, c: &mut [f32]| {
        let a_i = &a[i * m * k..(i + 1) * m * k];
        let a_i = if a_transposed {
            Strided::transposed(a_i, m)
        } else {
            Strided::rows(a_i, k)
        };
        matmul_serial(c, a_i, &b[i * k * n..(i + 1) * k * n], m, k, n);
    };
    if rayon::current_num_threads() == 1 || batch * m * k * n < PARALLEL_MIN_WORK {
        c.chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| item(i, c));
    } else {
        c.par_chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| item(i, c));
    }
}

/// One thread's share of [`matmul`], using AVX2 when the CPU has it. Both paths do the same operations in
/// the same order, so they give the same bits.
fn matmul_serial(c: &mut [f32], a: Strided, b: &[f32], m: usize, k: usize, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { matmul_avx2(c, a, b, m, k, n) };
    }
    matmul_tiles(c, a, b, m, k, n);
}

/// [`matmul_tiles`] compiled for AVX2, without FMA so that no multiply and add are fused.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn matmul_avx2(c: &mut [f32], a: Strided, b: &[f32], m: usize, k: usize, n: usize) {
    matmul_tiles(c, a, b, m, k, n);
}

/// Walks `c` in tiles of MR rows; the last tile may have fewer.
#[inline(always)]
fn matmul_tiles(c: &mut [f32], a: Strided, b: &[f32], m: usize, k: usize, n: usize) {
    let mut a_packed = vec![0.0f32; k * MR];
    let mut i = 0;
    while i < m {
        let rows = MR.min(m - i);
        let c = &mut c[i * n..(i + rows) * n];
        let (a, packed) = (a.offset(i), &mut a_packed[..k * rows]);
        match rows {
            MR => tile_rows::<MR>(c, a, packed, b, k, n),
            5 => tile_rows::<5>(c, a, packed, b, k, n),
            4 => tile_rows::<4>(c, a, packed, b, k, n),
            3 => tile_rows::<3>(c, a, packed, b, k, n),
            2 => tile_rows::<2>(c, a, packed, b, k, n),
            _ => tile_rows::<1>(c, a, packed, b, k, n),
        }
        i += rows;
    }
}

// ANCHOR: matmul
/// R rows of `c`: for each k in order, `c[r][j..j+NR] += a[r][k] · b[k][j..j+NR]`.
#[inline(always)]
fn tile_rows<const R: usize>(
    c: &mut [f32],
    a: Strided,
    packed: &mut [f32],
    b: &[f32],
    k: usize,
    n: usize,
) {
    // A's R rows, copied k-major once, so the loops below read them in order whatever the strides.
    for (p, a_p) in packed.chunks_exact_mut(R).enumerate() {
        for (r, x) in a_p.iter_mut().enumerate() {
            *x = a.data[r * a.row_stride + p * a.col_stride];
        }
    }
    let b = &b[..k * n];
    let mut j = 0;
    while j + NR <= n {
        let mut acc = [[0.0f32; NR]; R];
        for (a_p, b_row) in packed.chunks_exact(R).zip(b.chunks_exact(n)) {
            let b_row: &[f32; NR] = b_row[j..j + NR].try_into().unwrap();
            for (acc_r, &a_rp) in acc.iter_mut().zip(a_p) {
                for q in 0..NR {
                    acc_r[q] += a_rp * b_row[q];
                }
            }
        }
        for (c_r, acc_r) in c.chunks_exact_mut(n).zip(&acc) {
            c_r[j..j + NR].copy_from_slice(acc_r);
        }
        j += NR;
    }
    // The columns left over: the same sum, one column at a time.
    for j in j..n {
        let mut acc = [0.0f32; R];
        for (a_p, b_row) in packed.chunks_exact(R).zip(b.chunks_exact(n)) {
            for (acc_r, &a_rp) in acc.iter_mut().zip(a_p) {
                *acc_r += a_rp * b_row[j];
            }
        }
        for (c_r, acc_r) in c.chunks_exact_mut(n).zip(&acc) {
            c_r[j] = *acc_r;
        }
    }
}
// ANCHOR_END: matmul

/// Runs an elementwise loop compiled for AVX2 when the CPU has it. Elementwise work gives the same bits at
/// any vector width (each lane does one element's operations in order), so this only changes the speed.
#[inline(always)]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        #[target_feature(enable = "avx2")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the CPU supports AVX2, checked just above.
        return unsafe { avx2(f) };
    }
    f()
}

/// Copies a row-major `rows×cols` matrix into its transpose (`cols×rows`).
pub fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut dst = vec![0.0; rows * cols];
    for (i, row) in src.chunks_exact(cols).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            dst[j * rows + i] = v;
        }
    }
    dst
}

/// NumPy's `np.sum` of a contiguous float32 array: pairwise summation with eight accumulators.
///
/// NumPy adds blocks of at most 128 values with eight running sums, combines them as
/// `((r0+r1)+(r2+r3)) + ((r4+r5)+(r6+r7))`, adds the leftovers in order, and splits longer arrays in
/// two halves (a multiple of 8 on the left). Fewer than 8 values are added in order. Checked against
/// NumPy 2.4 for lengths 1 to 20,000 and for rows of 2-D arrays (`axis=-1`).
pub fn pairwise_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        a.iter().fold(0.0, |s, &x| s + x)
    } else if n <= 128 {
        let mut r: [f32; 8] = a[..8].try_into().unwrap();
        let whole = n - n % 8;
        for block in a[8..whole].chunks_exact(8) {
            for (rj, &x) in r.iter_mut().zip(block) {
                *rj += x;
            }
        }
        let head = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        a[whole..].iter().fold(head, |s, &x| s + x)
    } else {
        let half = n / 2;
        let half = half - half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}

// ANCHOR: tanh
/// tanh of a float64, from +, −, × and ÷ alone, so that it vectorises and gives the same bits everywhere.
///
/// GELU needs 65,536 tanh per training step; a scalar library call for each costs more than all the
/// matrix products. NumPy itself uses its own SIMD tanh here, not the C library's. This one agrees with
/// `libm::tanh` to the last bit for 96% of inputs and is never more than 3 float64 ulps away, far below the
/// float32 rounding GELU's output gets:
///
/// tanh(a) = e / (e + 2) with e = expm1(2a), and expm1(y) = 2ᵏ·expm1(r) + (2ᵏ − 1) for y = k·ln 2 + r,
/// |r| ≤ ln2/2, where expm1(r) is its Taylor series to r¹³.
#[inline(always)]
pub fn tanh(x: f64) -> f64 {
    // ln 2 split so that k·LN2_HI is exact (fdlibm's constants).
    const LN2_HI: f64 = 0.693_147_180_369_123_8; // 0x3fe62e42_fee00000
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10; // 0x3dea39ef_35793c76
    const INV_LN2: f64 = std::f64::consts::LOG2_E;
    // Adding 1.5·2⁵² rounds to an integer and leaves it in the low bits of the sum.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    // 1/n! for n = 13 down to 2.
    const INV_FACT: [f64; 12] = [
        1.0 / 6_227_020_800.0,
        1.0 / 479_001_600.0,
        1.0 / 39_916_800.0,
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5_040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        1.0 / 2.0,
    ];
    let y = 2.0 * x.abs().min(20.0); // tanh(20) is 1 in float64
    let rounded = y * INV_LN2 + ROUND;
    let k = rounded - ROUND;
    let r = (y - k * LN2_HI) - k * LN2_LO;
    let series = INV_FACT.iter().fold(0.0, |s, &f| s * r + f);
    let expm1_r = r + r * (r * series);
    let two_k = f64::from_bits((rounded.to_bits() << 52).wrapping_add(1023 << 52));
    let e = two_k * expm1_r + (two_k - 1.0);
    let t = (e / (e + 2.0)).copysign(x);
    if x.is_nan() { x } else { t }
}
// ANCHOR_END: tanh

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f32;
                for p in 0..k {
                    s += a[i * k + p] * b[p * n + j];
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut rng = crate::rng::numpy::NumpyRandom::seed(seed);
        (0..len).map(|_| rng.standard_normal() as f32).collect()
    }

    #[test]
    fn matmul_is_the_in_order_sum_bit_for_bit() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (5, 7, 3),
            (4, 64, 16),
            (9, 33, 65),
            (130, 64, 256),
        ] {
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let want = naive(&a, &b, m, k, n);
            let mut got = vec![f32::NAN; m * n];
            matmul(&mut got, Strided::rows(&a, k), &b, m, k, n);
            assert_eq!(got, want, "{m}×{k}·{k}×{n}");
            let mut portable = vec![f32::NAN; m * n];
            matmul_tiles(&mut portable, Strided::rows(&a, k), &b, m, k, n);
            assert_eq!(portable, want, "portable path {m}×{k}·{k}×{n}");
            let at = transpose(&a, m, k);
            let mut via_t = vec![f32::NAN; m * n];
            matmul(&mut via_t, Strided::transposed(&at, m), &b, m, k, n);
            assert_eq!(via_t, want, "strided a {m}×{k}·{k}×{n}");
        }
    }

    #[test]
    fn tanh_is_within_a_few_ulps_of_libm() {
        let ulps = |a: f64, b: f64| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        let (mut worst, mut exact) = (0, 0);
        for i in -200_000..=200_000 {
            let x = f64::from(i) * 1e-4 + 1e-9 * f64::from(i % 7); // −20 ..= 20, irregular steps
            let e = ulps(tanh(x), libm::tanh(x));
            worst = worst.max(e);
            exact += usize::from(e == 0);
        }
        assert!(exact >= 380_000, "only {exact} of 400,001 exact");
        for x in [1e-300, 1e-20, 1e-8, 0.25, 0.5493, 0.55, 19.0, 25.0, 1e300] {
            worst = worst.max(ulps(tanh(x), libm::tanh(x)));
            worst = worst.max(ulps(tanh(-x), libm::tanh(-x)));
        }
        assert!(worst <= 3, "worst error {worst} ulps");
        assert_eq!(tanh(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f64).to_bits());
        assert!(tanh(f64::NAN).is_nan());
        assert_eq!(tanh(f64::INFINITY), 1.0);
    }

    #[test]
    fn pairwise_sum_matches_numpy() {
        // np.sum(np.arange(n, dtype=np.float32) * np.float32(0.1)) for these n, as printed by NumPy 2.4.
        let sum = |n: usize| pairwise_sum(&(0..n).map(|i| i as f32 * 0.1f32).collect::<Vec<_>>());
        assert_eq!(sum(5), 1.0);
        assert_eq!(sum(65), 207.99998);
        assert_eq!(sum(129), 825.6);
        assert_eq!(sum(1000), 49950.0);
        assert_eq!(sum(8193), 3.355853e6);
    }
}
