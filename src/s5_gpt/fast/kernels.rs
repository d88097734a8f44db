//! Fast layer. The matrix product kernel and vector lanes.
//!
//! The seed tutorial multiplies with `@` (OpenBLAS) and sums with `np.sum`. Neither order of
//! additions is fixed across machines, so this module fixes its own:
//!
//! * [`matmul`] computes every `c[i][j]` as `((a[i][0]·b[0][j] + a[i][1]·b[1][j]) + …)`, k in
//!   order, with a plain multiply and then an add. No fused multiply-add: Rust never contracts
//!   `a * b + c` on its own, and the code never asks for it. The inner loop runs along `j`, so a
//!   SIMD lane holds one output element and the order of its additions stays the same at any vector
//!   width, with or without AVX2.
//! * Threads split the *outputs* (rows of `c`), never a sum, so every thread count gives the same bits.
//! * Each product gives exactly the bits of the lesson's [`ops::matmul_forward`], which adds the same
//!   terms in the same order; the tests compare the two.

use super::team;
#[cfg(doc)]
use crate::s5_gpt::ops;
use std::cell::Cell;
use std::thread::LocalKey;

/// Output columns per SIMD tile: two AVX registers of f32.
const NR: usize = 16;
/// Output rows per tile: 4×16 accumulators take 8 of the 16 AVX registers, and 4 divides every row
/// count of the GPT (32, 64, 128, 256).
const MR: usize = 4;
/// Below this many multiply-adds a product runs on the calling thread: waking a helper costs more.
const PARALLEL_MIN_WORK: usize = 1 << 17;

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

thread_local! {
    /// The calling thread's copy of B in column panels, kept from product to product so none
    /// allocates.
    static PACKED_B: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's buffer from `slot`. The buffer is taken out for the call, so a call
/// nested inside it would start a buffer of its own rather than share this one.
fn with_buffer<R>(
    slot: &'static LocalKey<Cell<Vec<f32>>>,
    f: impl FnOnce(&mut Vec<f32>) -> R,
) -> R {
    let mut buffer = slot.take();
    let result = f(&mut buffer);
    slot.set(buffer);
    result
}

/// `c (m×n) = a (m×k) · b (k×n)`, plus `bias` (n) on every row if given; `c` is row-major and
/// overwritten.
///
/// The bias is added after the whole sum, as `x @ W.T + b` does. Rows of `c` are shared out among
/// the training threads (see [`super::team`]) when the product is large enough.
pub fn matmul(
    c: &mut [f32],
    a: Strided,
    b: Strided,
    bias: Option<&[f32]>,
    (m, k, n): (usize, usize, usize),
) {
    assert_eq!(c.len(), m * n, "matmul: c must hold m×n values");
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "matmul: one bias per column");
    }
    with_buffer(&PACKED_B, |packed| {
        pack_b(packed, b, k, n);
        let threads = team::threads();
        if threads == 1 || m * k * n < PARALLEL_MIN_WORK || m <= MR {
            return multiply_packed(c, a, packed, bias, k, n);
        }
        // One task per thread, each a band of whole MR-row tiles: one hand-off per product.
        let rows_per_task = m.div_ceil(MR).div_ceil(threads) * MR;
        let packed = &*packed;
        let bands = c.chunks_mut(rows_per_task * n).enumerate();
        team::for_each(bands, |(t, c)| {
            multiply_packed(c, a.offset(t * rows_per_task), packed, bias, k, n)
        });
    });
}

/// `batch` independent products `c[i] = a[i] · b[i]` (each as in [`matmul`], without bias), a band
/// of items per thread. `a` and `b` hold the matrices one after another, each row-major or
/// transposed.
pub fn matmul_batched(
    c: &mut [f32],
    (a, a_transposed): (&[f32], bool),
    (b, b_transposed): (&[f32], bool),
    batch: usize,
    (m, k, n): (usize, usize, usize),
) {
    assert_eq!(
        c.len(),
        batch * m * n,
        "matmul_batched: c must hold batch×m×n values"
    );
    let view = |data, rows, cols, transposed| {
        if transposed {
            Strided::transposed(data, rows)
        } else {
            Strided::rows(data, cols)
        }
    };
    let item = |i: usize, c: &mut [f32]| {
        let a_i = view(&a[i * m * k..(i + 1) * m * k], m, k, a_transposed);
        let b_i = view(&b[i * k * n..(i + 1) * k * n], k, n, b_transposed);
        with_buffer(&PACKED_B, |packed| {
            pack_b(packed, b_i, k, n);
            multiply_packed(c, a_i, packed, None, k, n);
        });
    };
    let threads = team::threads();
    if threads == 1 || batch * m * k * n < PARALLEL_MIN_WORK {
        c.chunks_mut(m * n)
            .enumerate()
            .for_each(|(i, c)| item(i, c));
    } else {
        let items_per_task = batch.div_ceil(threads);
        let bands = c.chunks_mut(items_per_task * m * n).enumerate();
        team::for_each(bands, |(t, c)| {
            for (i, c) in c.chunks_mut(m * n).enumerate() {
                item(t * items_per_task + i, c);
            }
        });
    }
}

/// Copies B into column panels of NR, each k×NR and contiguous, the last one padded with zeros. The
/// padding only fills SIMD lanes whose results are never stored.
fn pack_b(packed: &mut Vec<f32>, b: Strided, k: usize, n: usize) {
    // Every value is written below, so the buffer is only resized, never cleared first.
    packed.resize(n.div_ceil(NR) * k * NR, 0.0);
    for (panel, out) in packed.chunks_exact_mut(k * NR).enumerate() {
        let j0 = panel * NR;
        let width = NR.min(n - j0);
        if width < NR {
            out.fill(0.0);
        }
        if b.col_stride == 1 {
            // Row-major: row p of the panel is a run of `width` values.
            for (p, out) in out.chunks_exact_mut(NR).enumerate() {
                let row = &b.data[p * b.row_stride + j0..];
                let out: &mut [f32; NR] = out.try_into().unwrap();
                match row.first_chunk::<NR>() {
                    Some(row) if width == NR => *out = *row, // known size: no `memcpy` call
                    _ => out[..width].copy_from_slice(&row[..width]),
                }
            }
        } else {
            // A transpose (row stride 1): column j is a run of k values from j·col_stride.
            assert_eq!(
                b.row_stride, 1,
                "matmul: B must be row-major or a transpose"
            );
            for q in 0..width {
                let column = &b.data[(j0 + q) * b.col_stride..][..k];
                for (out, &v) in out.chunks_exact_mut(NR).zip(column) {
                    out[q] = v;
                }
            }
        }
    }
}

/// One thread's share of [`matmul`], using AVX2 when the CPU has it. Both paths do the same
/// operations in the same order, so they give the same bits.
fn multiply_packed(c: &mut [f32], a: Strided, b: &[f32], bias: Option<&[f32]>, k: usize, n: usize) {
    vectorised(
        #[inline(always)]
        || multiply_tiles(c, a, b, bias, (k, n)),
    )
}

/// Walks `c` in tiles of MR rows; the last tile may have fewer.
#[inline(always)]
fn multiply_tiles(
    c: &mut [f32],
    a: Strided,
    b: &[f32],
    bias: Option<&[f32]>,
    (k, n): (usize, usize),
) {
    for (t, c) in c.chunks_mut(MR * n).enumerate() {
        let a = a.offset(t * MR);
        match c.len() / n {
            MR => tile(c, TileRows::<MR>::new(a, k), b, bias, n),
            3 => tile(c, TileRows::<3>::new(a, k), b, bias, n),
            2 => tile(c, TileRows::<2>::new(a, k), b, bias, n),
            _ => tile(c, TileRows::<1>::new(a, k), b, bias, n),
        }
    }
}

/// The R rows of A that one tile multiplies, read in place through A's strides. (Copying them into
/// a packed block first cost as much as the arithmetic in the GPT's narrow products.)
#[derive(Clone, Copy)]
struct TileRows<'a, const R: usize> {
    a: Strided<'a>,
    k: usize,
}

impl<'a, const R: usize> TileRows<'a, R> {
    /// Checks once that the farthest element, a[R−1][k−1], is inside `a.data`; every other element
    /// of the tile lies before it, because both strides step forwards.
    fn new(a: Strided<'a>, k: usize) -> Self {
        if k > 0 {
            let last = (R - 1) * a.row_stride + (k - 1) * a.col_stride;
            assert!(
                last < a.data.len(),
                "matmul: A is too short for its strides"
            );
        }
        TileRows { a, k }
    }

    /// a[r][p], for r < R and p < k.
    #[inline(always)]
    fn at(self, r: usize, p: usize) -> f32 {
        assert!(r < R && p < self.k);
        let index = r * self.a.row_stride + p * self.a.col_stride;
        // SAFETY: r ≤ R−1 and p ≤ k−1, so `index` is at most the index `new` checked.
        unsafe { *self.a.data.get_unchecked(index) }
    }
}

// ANCHOR: matmul
/// R rows of `c`: for each NR-wide panel of packed B, `acc[r][0..NR] += a[r][p] · b[p][0..NR]` for
/// every p in order, then `c[r][j] = acc[r][j] + bias[j]`.
#[inline(always)]
fn tile<const R: usize>(
    c: &mut [f32],
    a: TileRows<R>,
    b_panels: &[f32],
    bias: Option<&[f32]>,
    n: usize,
) {
    let k = a.k;
    for (panel, b_panel) in b_panels.chunks_exact(k * NR).enumerate() {
        let mut acc = [[0.0f32; NR]; R];
        // WebAssembly has no fused multiply-add instruction: the same sums, from float64 lanes.
        #[cfg(target_arch = "wasm32")]
        super::wasm_fma::accumulate(&mut acc, |r, p| a.at(r, p), b_panel);
        #[cfg(not(target_arch = "wasm32"))]
        for (p, b_p) in (0..k).zip(b_panel.chunks_exact(NR)) {
            let b_p: &[f32; NR] = b_p.try_into().unwrap();
            let a_p: [f32; R] = std::array::from_fn(|r| a.at(r, p));
            for (acc_r, &a_rp) in acc.iter_mut().zip(&a_p) {
                for q in 0..NR {
                    acc_r[q] = a_rp.mul_add(b_p[q], acc_r[q]);
                }
            }
        }
        let j0 = panel * NR;
        let width = NR.min(n - j0);
        for (c_r, acc_r) in c.chunks_exact_mut(n).zip(&acc) {
            let c_r = &mut c_r[j0..j0 + width];
            match (bias, <&mut [f32; NR]>::try_from(&mut *c_r)) {
                (Some(bias), _) => {
                    let bias = &bias[j0..j0 + width];
                    for ((c, &s), &b) in c_r.iter_mut().zip(acc_r).zip(bias) {
                        *c = s + b;
                    }
                }
                // A whole panel: a copy of known size, with no `memcpy` call.
                (None, Ok(c_r)) => *c_r = *acc_r,
                (None, Err(_)) => c_r.copy_from_slice(&acc_r[..width]),
            }
        }
    }
}
// ANCHOR_END: matmul
/// Runs a loop compiled for AVX2 and FMA when the CPU has both. Elementwise work gives the same
/// bits at any vector width (each lane does one element's operations in order), and `mul_add` is
/// the same exactly rounded fused multiply-add with or without the FMA instruction, so this only
/// changes the speed.
///
/// Only code inlined into the function below is compiled for AVX2 and FMA, so callers mark the
/// closure `#[inline(always)]` and keep its loops inside it: a large closure left to the inliner's
/// judgement, or a helper it calls that is not inlined, runs as plain SSE2 code.
#[inline(always)]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if simd() {
        #[target_feature(enable = "avx2,fma")]
        fn avx2_fma<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the CPU supports AVX2 and FMA, checked by `simd`.
        return unsafe { avx2_fma(f) };
    }
    f()
}

/// Set this environment variable to run the fast layer without AVX2 and FMA, as on a CPU that has
/// neither: `mul_add` then computes the fused multiply-add in software. The bits stay the same
/// (`tests/s5_layers.rs` checks), only slower.
pub const PORTABLE_VAR: &str = "ATTENTION_PORTABLE";

/// Whether [`vectorised`] uses AVX2 and FMA: on x86-64, when the CPU has both and [`PORTABLE_VAR`]
/// is not set.
pub fn simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static SIMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SIMD.get_or_init(|| {
            std::env::var_os(PORTABLE_VAR).is_none()
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Below this |x| (2⁻¹⁴), `libm::expf(x)` is `1 + x`.
const EXPF_TINY: u32 = 0x3900_0000;
/// From this |x| (about 87.34) on, `libm::expf` takes its overflow and subnormal paths.
const EXPF_LARGE: u32 = 0x42ae_ac50;

/// Whether [`expf`] gives `libm::expf(x)` for this `x`: |x| below about 87.34, and not NaN.
#[inline(always)]
pub fn expf_covers(x: f32) -> bool {
    x.to_bits() & 0x7fff_ffff < EXPF_LARGE
}

/// `libm::expf` (FreeBSD's `e_expf.c`) with its branches turned into selects, so that a loop of
/// them runs eight lanes per AVX2 instruction. Every lane does the operations the library does for
/// its `x`, so the bits are the library's wherever [`expf_covers`] holds; the tests check every
/// such float32. The caller takes the library's own call for the rest.
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    const LN2_HI: f32 = 6.931_457_5e-1;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const P1: f32 = 1.666_662_5e-1;
    const P2: f32 = -2.766_733_3e-3;
    let hx = x.to_bits() & 0x7fff_ffff;
    let sign = (x.to_bits() >> 31) as i32;
    let half = if sign == 0 { 0.5 } else { -0.5 };
    let k = if hx > 0x3f85_1592 {
        (std::f32::consts::LOG2_E * x + half) as i32 // |x| > 1.5 ln 2
    } else if hx > 0x3eb1_7218 {
        1 - sign - sign // 0.5 ln 2 < |x| ≤ 1.5 ln 2
    } else {
        0
    };
    let reduced = hx > 0x3eb1_7218;
    let kf = k as f32;
    let hi = if reduced { x - kf * LN2_HI } else { x };
    let lo = if reduced { kf * LN2_LO } else { 0.0 };
    let r = if reduced { hi - lo } else { x };
    let rr = r * r;
    let c = r - rr * (P1 + rr * P2);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    let two_k = f32::from_bits((0x7f_i32.wrapping_add(k) as u32) << 23); // 2ᵏ where covered
    if hx > EXPF_TINY { y * two_k } else { 1.0 + x }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s5_gpt::ops;

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut rng = crate::rng::numpy::NumpyRandom::seed(seed);
        (0..len).map(|_| rng.standard_normal() as f32).collect()
    }

    fn transposed(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let mut out = vec![0.0; x.len()];
        ops::transpose_forward(&mut out, x, (rows, cols));
        out
    }

    /// Every product the kernel can be asked for equals the lesson's, bit for bit, on 1 and 2
    /// threads.
    #[test]
    fn matmul_is_the_lessons_product_bit_for_bit() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (5, 7, 3),
            (4, 64, 16),
            (9, 33, 65),
            (130, 64, 256),
            (128, 256, 64),
        ] {
            let (a, b, bias) = (values(m * k, 1), values(k * n, 2), values(n, 3));
            let mut want = vec![0.0; m * n];
            ops::matmul_forward(&mut want, &a, &b, (m, k, n));
            let with_bias: Vec<f32> = want
                .iter()
                .enumerate()
                .map(|(i, c)| c + bias[i % n])
                .collect();
            let (at, bt) = (transposed(&a, m, k), transposed(&b, k, n));
            for threads in [1, 2] {
                team::with_team(threads, || {
                    let product = |a: Strided, b: Strided, bias| {
                        let mut c = vec![f32::NAN; m * n];
                        matmul(&mut c, a, b, bias, (m, k, n));
                        c
                    };
                    let (a_rows, b_rows) = (Strided::rows(&a, k), Strided::rows(&b, n));
                    let (a_t, b_t) = (Strided::transposed(&at, m), Strided::transposed(&bt, k));
                    assert_eq!(product(a_rows, b_rows, None), want, "{m}×{k}·{k}×{n}");
                    assert_eq!(product(a_t, b_rows, None), want, "strided a");
                    assert_eq!(product(a_rows, b_t, None), want, "strided b");
                    assert_eq!(product(a_rows, b_rows, Some(&bias)), with_bias, "bias");
                    let mut batched = vec![f32::NAN; 2 * m * n];
                    let (a2, b2) = ([&a[..], &a].concat(), [&bt[..], &bt].concat());
                    matmul_batched(&mut batched, (&a2, false), (&b2, true), 2, (m, k, n));
                    assert_eq!(batched, [&want[..], &want].concat(), "batched");
                })
                .unwrap();
            }
            let mut packed = vec![];
            pack_b(&mut packed, Strided::rows(&b, n), k, n);
            let mut portable = vec![f32::NAN; m * n];
            multiply_tiles(&mut portable, Strided::rows(&a, k), &packed, None, (k, n));
            assert_eq!(portable, want, "portable path {m}×{k}·{k}×{n}");
        }
    }

    /// `mul_add` is the exact a·b + c rounded once, whoever computes it: the CPU's FMA instruction
    /// here, and `libm::fmaf`, a software fused multiply-add, agree on a million products of the
    /// sizes training meets and on the rounding ties between two floats.
    #[test]
    fn mul_add_is_the_software_fused_multiply_add() {
        let (a, b, c) = (values(1 << 20, 4), values(1 << 20, 5), values(1 << 20, 6));
        for ((&a, &b), &c) in a.iter().zip(&b).zip(&c) {
            for (a, b, c) in [(a, b, c), (a * 1e-3, b, c), (a, b * 1e3, -c * 1e-4)] {
                assert_eq!(a.mul_add(b, c).to_bits(), libm::fmaf(a, b, c).to_bits());
            }
        }
        let tie = 1.0 + f32::EPSILON; // (1 + ε)² − 1 = 2ε + ε², exact only when fused
        assert_eq!(
            tie.mul_add(tie, -1.0),
            2.0 * f32::EPSILON + f32::EPSILON * f32::EPSILON
        );
        assert_eq!(libm::fmaf(tie, tie, -1.0), tie.mul_add(tie, -1.0));
    }

    /// [`expf`] is `libm::expf` to the bit on every float32 it covers: from −87.34 to 87.34, both
    /// signs, each of the 2.2 billion inputs, on two threads.
    #[test]
    fn expf_is_libms_on_every_float32_it_covers() {
        let check = |bits: std::ops::Range<u32>| {
            let mut x = vec![0.0; 1 << 16];
            let mut out = vec![0.0; 1 << 16];
            for start in bits.step_by(1 << 16) {
                for (i, x) in x.iter_mut().enumerate() {
                    *x = f32::from_bits(start + i as u32);
                }
                vectorised(
                    #[inline(always)]
                    || out.iter_mut().zip(&x).for_each(|(o, &x)| *o = expf(x)),
                );
                for (&x, &e) in x.iter().zip(&out) {
                    if expf_covers(x) {
                        assert_eq!(e.to_bits(), libm::expf(x).to_bits(), "expf({x:e})");
                    }
                }
            }
        };
        let (positive, negative) = (0..EXPF_LARGE + (1 << 16), 1 << 31..(1 << 31) + EXPF_LARGE);
        std::thread::scope(|s| {
            let other = s.spawn(|| check(negative));
            check(positive);
            other.join().unwrap();
        });
        assert!(!expf_covers(f32::NAN) && !expf_covers(-88.0) && expf_covers(-87.0));
    }
}
