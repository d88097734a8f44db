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
/// Output rows per tile: 4×16 accumulators fit in 8 of the 16 AVX registers.
const MR: usize = 4;
/// Below this many multiply-adds a product runs on the calling thread: waking a helper costs more.
const PARALLEL_MIN_WORK: usize = 1 << 16;

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
    let threads = rayon::current_num_threads();
    if threads == 1 || m * k * n < PARALLEL_MIN_WORK || m <= MR {
        return matmul_serial(c, a, b, m, k, n);
    }
    // Whole tiles of MR rows per task, about two tasks per thread.
    let rows_per_task = m.div_ceil(2 * threads).div_ceil(MR) * MR;
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
    let mut i = 0;
    while i + MR <= m {
        tile_rows::<MR>(&mut c[i * n..(i + MR) * n], a.offset(i), b, k, n);
        i += MR;
    }
    while i < m {
        tile_rows::<1>(&mut c[i * n..(i + 1) * n], a.offset(i), b, k, n);
        i += 1;
    }
}

/// R rows of `c`: for each k in order, `c[r][j..j+NR] += a[r][k] · b[k][j..j+NR]`.
#[inline(always)]
fn tile_rows<const R: usize>(c: &mut [f32], a: Strided, b: &[f32], k: usize, n: usize) {
    let a_at = |r: usize, p: usize| a.data[r * a.row_stride + p * a.col_stride];
    let mut j = 0;
    while j + NR <= n {
        let mut acc = [[0.0f32; NR]; R];
        for p in 0..k {
            let b_row: &[f32; NR] = b[p * n + j..p * n + j + NR].try_into().unwrap();
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let a_rp = a_at(r, p);
                for q in 0..NR {
                    acc_r[q] += a_rp * b_row[q];
                }
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            c[r * n + j..r * n + j + NR].copy_from_slice(acc_r);
        }
        j += NR;
    }
    // The columns left over: the same sum, one column at a time.
    for j in j..n {
        let mut acc = [0.0f32; R];
        for p in 0..k {
            let b_pj = b[p * n + j];
            for (r, acc_r) in acc.iter_mut().enumerate() {
                *acc_r += a_at(r, p) * b_pj;
            }
        }
        for (r, acc_r) in acc.iter().enumerate() {
            c[r * n + j] = *acc_r;
        }
    }
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
