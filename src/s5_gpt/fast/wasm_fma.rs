//! Fast layer. For WebAssembly, the product kernel's fused multiply-add from float64 arithmetic,
//! two lanes at a time: the page's share of Appendix B, "the same bits in the browser".
//!
//! The lesson adds each term of a product with `f32::mul_add`, the exact `a·b + c` rounded once
//! to float32. WebAssembly has no fused multiply-add instruction, so there `mul_add` is a software
//! routine, a function call of many steps for every term. This module gets the same bits another
//! way, from operations WebAssembly does have and IEEE 754 defines exactly (the page's train panel
//! shows the time per step of the kernel it runs; `?train=300&kernel=f64` picks this one):
//!
//! 1. `p = a·b` in float64 is **exact**: two 24-bit significands make at most 48 bits, and the
//!    exponent (between 2⁻²⁹⁸ and 2²⁵⁶) is far inside float64's normal range.
//! 2. `s = p + c` in float64 is the exact `x = a·b + c` rounded to nearest (float64 never
//!    overflows or underflows here).
//! 3. `s as f32` rounds once more. Rounding to float32 is monotonic and changes value only at the
//!    *halfway points* between neighbouring float32 values (and at the overflow threshold, half
//!    an ulp above `f32::MAX`). Every halfway point is itself a float64. So if a halfway point lay
//!    strictly between `x` and `s`, it would be a float64 nearer to `x` than `s` is: impossible.
//!    Hence `s` and `x` round to the same float32 **unless `s` is itself a halfway point** (and
//!    `x ≠ s`): double rounding can go wrong only there.
//! 4. A normal float32 has 24 bits, so a halfway point in the normal range is a float64 whose 29
//!    lowest significand bits are exactly `1000…0` ([`HALFWAY`]). Below `f32::MIN_POSITIVE` the
//!    float32 grid is coarser (subnormals) and the halfway bit moves up, so there the pattern
//!    test is not enough: every nonzero `s` in that range is treated as a possible halfway point.
//!    [`needs_care`] is these two tests. A sum whose low bits look random is flagged once in 2²⁹
//!    (about 540 million); training has sums of few-bit values too, and the tutorial's first 300
//!    steps flagged some lane of a 16-wide row about 23 times per step. (Zero needs no care:
//!    `s = 0` only when `x = 0`, and float64 gives the exact zero the same sign IEEE 754 gives it
//!    in float32. NaN and ±∞ need none: they come only from such inputs, and convert as they are.)
//! 5. A flagged sum is finished by [`fma_rounded_to_odd`]: the exact error `e = x − s` of the
//!    addition (Knuth's TwoSum, six float64 operations, exact because nothing overflows), then `s`
//!    moved one float64 step towards `x` when `e ≠ 0` and `s`'s last bit is even. That value has
//!    an odd last bit, so it is no halfway point, and no halfway point lies between it and `x`:
//!    it rounds to float32 as `x` does, in every range (Boldo and Melquiond's "rounding to odd").
//! 6. The subnormal test can be skipped when neither factor is a nonzero below 2⁻⁵¹ in magnitude
//!    ([`on_grid`]): then each factor's last bit is worth 2^(e−23) with e ≥ −51, so `a·b` is a
//!    multiple of 2⁻¹⁴⁹, and so is every float32 `c`, and so is `x`. An `x` below 2⁻¹²⁶ is then a
//!    float32 itself (a subnormal, or zero), exact in float64 too: `s = x`, rounded once. The
//!    kernel checks its tile's factors once and then tests each sum for halfway points alone.
//!
//! `libm::fmaf` does steps 1–4 with the normal-range test only, so on targets without a hardware
//! fused multiply-add it rounds a few sums in float32's subnormal range twice (and so does the
//! standard library's `mul_add` there, which calls the same code): `tests/s5_wasm_fma.rs` shows one.
//! This module gives the hardware's bits there too.
//!
//! [`fma`] is the scalar version, on every target, so the tests compare it on this machine with the
//! CPU's own fused multiply-add. [`accumulate`] is the product kernel's inner loop, built on it; with
//! SIMD128 it runs two float64 lanes per instruction and checks the lanes of a whole row at once.
//!
//! **Fused lanes.** WebAssembly's relaxed SIMD has `f32x4.relaxed_madd`, which an engine may compute
//! with one rounding (the CPU's fused multiply-add: exactly `f32::mul_add`, four lanes at a time) or
//! with two. The page has a second build with relaxed SIMD for browsers that validate it; there
//! [`choose_kernel`] tries the instruction once at start-up, on inputs where one rounding and two
//! differ and on the self-check's triples ([`fused_lanes_round_once`]), and [`accumulate`] then runs
//! [`accumulate_fused`] (the same terms in the same order over k, four columns per instruction) if
//! it rounds once, or the float64 lanes if not. Elsewhere [`accumulate_fused`] computes each lane
//! with `f32::mul_add`, what a fused `relaxed_madd` computes, so that tests here can check its lanes
//! and order; the browser test checks the instruction itself.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// The 29 low significand bits of a float64 that a float32 significand does not hold.
pub const EXTRA_BITS: u64 = (1 << 29) - 1;
/// Those bits at a float32 halfway point: the first one set, the rest clear.
pub const HALFWAY: u64 = 1 << 28;
/// The smallest normal float32, 2⁻¹²⁶, as a float64.
const MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;
/// Output columns per row of the kernel's tile: one panel of packed B.
pub const PANEL: usize = 16;

/// Whether the float64 sum `s` could round to float32 differently from the exact sum: `s` is a
/// normal float32 halfway point, or nonzero below the normal range (see the module's argument).
#[inline(always)]
pub fn needs_care(s: f64) -> bool {
    s.to_bits() & EXTRA_BITS == HALFWAY || (s.abs() < MIN_NORMAL && s != 0.0)
}

/// 2⁻⁵¹ as float32 bits: factors at least this large, or zero, make products on float32's grid.
const GRID_BITS: u32 = 0x2600_0000;

/// Whether `x` is zero, or at least 2⁻⁵¹ in magnitude (or ±∞, NaN): a product of two such is a
/// multiple of 2⁻¹⁴⁹, the spacing of float32's subnormals (step 6 of the module's argument).
#[inline(always)]
pub fn on_grid(x: f32) -> bool {
    (x.to_bits() & 0x7fff_ffff).wrapping_sub(1) >= GRID_BITS - 1
}

/// [`needs_care`] for a product of two factors [`on_grid`]: only a halfway point needs care.
#[inline(always)]
pub fn needs_care_on_grid(s: f64) -> bool {
    s.to_bits() & EXTRA_BITS == HALFWAY
}

/// `a.mul_add(b, c)` when `a` and `b` are both [`on_grid`]: [`fma`] with the halfway test alone.
#[inline(always)]
pub fn fma_on_grid(a: f32, b: f32, c: f32) -> f32 {
    let s = f64::from(a) * f64::from(b) + f64::from(c);
    if needs_care_on_grid(s) {
        fma_rounded_to_odd(a, b, c)
    } else {
        s as f32
    }
}

/// `a.mul_add(b, c)`, bit for bit: the float64 product and sum, rounded once to float32, with the
/// rare sums that [`needs_care`] flags finished by [`fma_rounded_to_odd`].
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let s = f64::from(a) * f64::from(b) + f64::from(c);
    if needs_care(s) {
        fma_rounded_to_odd(a, b, c)
    } else {
        s as f32
    }
}

/// The exact `a·b + c` rounded to float32 by way of float64 "rounded to odd": correct for every
/// input, in every range, and slower than [`fma`] (step 5 of the module's argument).
#[inline(never)]
pub fn fma_rounded_to_odd(a: f32, b: f32, c: f32) -> f32 {
    let (p, c) = (f64::from(a) * f64::from(b), f64::from(c));
    let s = p + c;
    if !s.is_finite() {
        return s as f32; // ±∞ or NaN, from such inputs
    }
    // TwoSum: `error` is exactly (p + c) − s.
    let c_part = s - p;
    let error = (p - (s - c_part)) + (c - c_part);
    let bits = s.to_bits();
    let odd = if error == 0.0 || bits & 1 == 1 {
        s
    } else if (error > 0.0) == (s > 0.0) {
        f64::from_bits(bits + 1) // one step away from zero, towards x
    } else {
        f64::from_bits(bits - 1) // one step towards zero, towards x
    };
    odd as f32
}

/// The product kernel's inner loop for one tile: `acc[r][q] = fma(a(r, p), b[p][q], acc[r][q])`
/// for every p in order, where `b_panel` holds k rows of [`PANEL`] values. Each accumulator gets
/// the lesson's terms in the lesson's order, each added as `f32::mul_add` adds it: by the fused
/// lanes once [`choose_kernel`] has chosen them, else by the float64 lanes.
#[inline(always)]
pub fn accumulate<const R: usize>(
    acc: &mut [[f32; PANEL]; R],
    a: impl Fn(usize, usize) -> f32,
    b_panel: &[f32],
) {
    if FUSED_LANES_BUILT && kernel() == Kernel::FusedLanes {
        return accumulate_fused(acc, a, b_panel);
    }
    accumulate_float64(acc, a, b_panel);
}

/// [`accumulate`] with the float64 lanes, exact on every engine (the module's argument).
#[inline(always)]
fn accumulate_float64<const R: usize>(
    acc: &mut [[f32; PANEL]; R],
    a: impl Fn(usize, usize) -> f32,
    b_panel: &[f32],
) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    simd::accumulate(acc, a, b_panel);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let k = b_panel.len() / PANEL;
        let grid =
            b_panel.iter().all(|&b| on_grid(b)) && (0..R).all(|r| (0..k).all(|p| on_grid(a(r, p))));
        let fma = if grid { fma_on_grid } else { fma };
        for (p, b_p) in b_panel.chunks_exact(PANEL).enumerate() {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let a_rp = a(r, p);
                for (acc, &b) in acc_r.iter_mut().zip(b_p) {
                    *acc = fma(a_rp, b, *acc);
                }
            }
        }
    }
}

/// [`self_check_of`] the kernel that [`accumulate`] runs now ([`kernel`]).
pub fn self_check(n: u32, seed: u32) -> u32 {
    self_check_of(kernel(), n, seed)
}

/// Mismatches between `kernel`'s lanes and [`fma_rounded_to_odd`] (and `libm::fmaf`, where
/// that one is correctly rounded: results of 2⁻¹²⁶ and more, or zero) on `n` random triples from
/// [`test_triple`] after the edge cases [`EDGE_VALUES`] taken three at a time, plus the tiles of
/// [`tile_mismatches`]. The browser test expects 0.
pub fn self_check_of(kernel: Kernel, n: u32, seed: u32) -> u32 {
    let mut rng = u64::from(seed);
    let edges = EDGE_VALUES.len();
    let triples = (0..edges.pow(3))
        .map(|i| {
            let e = |j: usize| EDGE_VALUES[j % edges];
            (e(i), e(i / edges), e(i / edges / edges))
        })
        .chain((0..n).map(|_| test_triple(&mut rng)));
    let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
    for (x, y, z) in triples {
        a.push(x);
        b.push(y);
        c.push(z);
    }
    let mut out = vec![0.0; a.len()];
    match kernel {
        Kernel::FusedLanes => fma_lanes_fused(&mut out, &a, &b, &c),
        Kernel::ExactFloat64 => fma_lanes(&mut out, &a, &b, &c),
    }
    let same = |x: f32, y: f32| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    let mut mismatches = 0;
    for (i, &got) in out.iter().enumerate() {
        let (a, b, c) = (a[i], b[i], c[i]);
        let want = fma_rounded_to_odd(a, b, c);
        let libm = libm::fmaf(a, b, c);
        let libm_exact = want.abs() >= f32::MIN_POSITIVE || want == 0.0 || want.is_nan();
        if !same(got, want) || (libm_exact && !same(got, libm)) {
            mismatches += 1;
        }
    }
    mismatches + tile_mismatches(kernel, seed)
}

/// `out[i] = fma(a[i], b[i], c[i])` with the kernel's own lanes (SIMD128 where built with it), and
/// its shortcut ([`fma_on_grid`]) where both factors are [`on_grid`].
pub fn fma_lanes(out: &mut [f32], a: &[f32], b: &[f32], c: &[f32]) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    simd::fma_lanes(out, a, b, c);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    for (((o, &a), &b), &c) in out.iter_mut().zip(a).zip(b).zip(c) {
        *o = if on_grid(a) && on_grid(b) {
            fma_on_grid(a, b, c)
        } else {
            fma(a, b, c)
        };
    }
}

/// The product kernel that [`accumulate`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `f32x4.relaxed_madd`, four fused multiply-adds per instruction ([`accumulate_fused`]).
    FusedLanes,
    /// Float64 lanes finished exactly (the module's argument): correct on every engine.
    ExactFloat64,
}

impl Kernel {
    /// The kernel's short name, as the page's URL parameter `kernel=` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::FusedLanes => "fused",
            Kernel::ExactFloat64 => "f64",
        }
    }
}

/// Whether this build has fused lanes: WebAssembly built with relaxed SIMD.
pub const FUSED_LANES_BUILT: bool =
    cfg!(all(target_arch = "wasm32", target_feature = "relaxed-simd"));

/// Set by [`choose_kernel`] once the fused lanes are shown to round once. Process-wide, because
/// the engine's rounding is too: every thread then runs the same kernel.
static FUSED: AtomicBool = AtomicBool::new(false);

/// The kernel [`accumulate`] runs now: the float64 lanes until [`choose_kernel`] says otherwise.
pub fn kernel() -> Kernel {
    if FUSED.load(Relaxed) {
        Kernel::FusedLanes
    } else {
        Kernel::ExactFloat64
    }
}

/// Chooses the fused lanes if `fused_wanted`, the build has them and they round once here
/// ([`fused_lanes_round_once`]), and the float64 lanes otherwise; returns the choice. Both give
/// the lesson's bits, so the choice changes only the speed.
pub fn choose_kernel(fused_wanted: bool) -> Kernel {
    let fused = fused_wanted && FUSED_LANES_BUILT && fused_lanes_round_once();
    FUSED.store(fused, Relaxed);
    kernel()
}

/// Whether [`accumulate_fused`]'s instruction rounds once on this engine and CPU. First
/// (1 + 2⁻¹²)² − (1 + 2⁻¹¹), exactly 2⁻²⁴, which two roundings make 0 (the square's last bit is a
/// tie that rounds to even); then [`self_check_of`] on the edge cases, 4,096 stress triples and
/// its tiles, so that an engine that fuses only some of the time is caught too.
pub fn fused_lanes_round_once() -> bool {
    let x = 1.0 + 2f32.powi(-12);
    let c = -(1.0 + 2f32.powi(-11));
    let mut out = [0.0];
    fma_lanes_fused(&mut out, &[x], &[x], &[c]);
    out[0] == 2f32.powi(-24) && self_check_of(Kernel::FusedLanes, 1 << 12, 0x5eed) == 0
}

/// Float32 lanes per instruction of the fused lanes.
const LANES: usize = 4;

/// [`accumulate`] with fused lanes: the tile's rows two at a time, each row's sums in four vectors
/// of four, and each step of k one `relaxed_madd` per vector, the vector of B loaded once for both
/// rows. A lane is one output element and gets the lesson's terms in the lesson's order, each
/// rounded once where the instruction is fused (checked by [`fused_lanes_round_once`] before it is
/// used). Two rows keep 8 vectors of sums, 2 of A and 1 of B in registers: a third row would need
/// more than the 16 vector registers a browser has on x86-64.
#[inline(always)]
pub fn accumulate_fused<const R: usize>(
    acc: &mut [[f32; PANEL]; R],
    a: impl Fn(usize, usize) -> f32,
    b_panel: &[f32],
) {
    let (pairs, last) = acc.as_chunks_mut::<2>();
    for (i, pair) in pairs.iter_mut().enumerate() {
        rows_fused(pair, |r, p| a(2 * i + r, p), b_panel);
    }
    if let [row] = last {
        rows_fused(std::array::from_mut(row), |_, p| a(R - 1, p), b_panel);
    }
}

/// [`accumulate_fused`] for `N` rows of the tile, whose sums stay in registers over the whole of k.
#[inline(always)]
fn rows_fused<const N: usize>(
    acc: &mut [[f32; PANEL]; N],
    a: impl Fn(usize, usize) -> f32,
    b_panel: &[f32],
) {
    use lanes::{load, madd, splat, store};
    let mut sums: [[lanes::F32x4; PANEL / LANES]; N] =
        std::array::from_fn(|r| std::array::from_fn(|i| load(&acc[r][LANES * i..][..LANES])));
    for (p, b_p) in b_panel.chunks_exact(PANEL).enumerate() {
        let a_p: [lanes::F32x4; N] = std::array::from_fn(|r| splat(a(r, p)));
        for i in 0..PANEL / LANES {
            let b = load(&b_p[LANES * i..][..LANES]);
            for (sums_r, &a_rp) in sums.iter_mut().zip(&a_p) {
                sums_r[i] = madd(a_rp, b, sums_r[i]);
            }
        }
    }
    for (acc_r, sums_r) in acc.iter_mut().zip(sums) {
        for (i, sum) in sums_r.into_iter().enumerate() {
            store(sum, &mut acc_r[LANES * i..][..LANES]);
        }
    }
}

/// `out[i] = a[i]·b[i] + c[i]` with the fused lanes' instruction, four at a time (the last ones
/// padded with zeros).
pub fn fma_lanes_fused(out: &mut [f32], a: &[f32], b: &[f32], c: &[f32]) {
    let quad = |x: &[f32], i: usize| -> [f32; LANES] {
        std::array::from_fn(|j| x.get(i + j).copied().unwrap_or(0.0))
    };
    for i in (0..out.len()).step_by(LANES) {
        let (a4, b4, c4) = (quad(a, i), quad(b, i), quad(c, i));
        let mut o4 = [0.0; LANES];
        let sum = lanes::madd(lanes::load(&a4), lanes::load(&b4), lanes::load(&c4));
        lanes::store(sum, &mut o4);
        let n = (out.len() - i).min(LANES);
        out[i..i + n].copy_from_slice(&o4[..n]);
    }
}

/// Mismatches between `kernel`'s [`accumulate`] and chains of [`fma_rounded_to_odd`] on tiles
/// of three rows and k of 1, 7 and 64 drawn from [`test_triple`]: the kernel's own loop, order
/// over k and lanes, as training runs them.
pub fn tile_mismatches(kernel: Kernel, seed: u32) -> u32 {
    let mut rng = u64::from(seed) ^ 0x7117;
    let mut mismatches = 0;
    for k in [1, 7, 64] {
        let a: Vec<f32> = (0..3 * k).map(|_| test_triple(&mut rng).0).collect();
        let b: Vec<f32> = (0..k * PANEL).map(|_| test_triple(&mut rng).1).collect();
        let start: [[f32; PANEL]; 3] =
            std::array::from_fn(|_| std::array::from_fn(|_| test_triple(&mut rng).2));
        let mut acc = start;
        let at = |r: usize, p: usize| a[r * k + p];
        match kernel {
            Kernel::FusedLanes => accumulate_fused(&mut acc, at, &b),
            Kernel::ExactFloat64 => accumulate_float64(&mut acc, at, &b),
        }
        for (r, row) in acc.iter().enumerate() {
            for (q, &got) in row.iter().enumerate() {
                let chain = |s, p| fma_rounded_to_odd(a[r * k + p], b[p * PANEL + q], s);
                let want = (0..k).fold(start[r][q], chain);
                let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
                mismatches += u32::from(!same);
            }
        }
    }
    mismatches
}

/// The fused lanes' four float32: `f32x4.relaxed_madd` on WebAssembly with relaxed SIMD, and
/// elsewhere four `f32::mul_add`, what the instruction computes where it rounds once.
mod lanes {
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    pub use super::relaxed::{F32x4, load, madd, splat, store};

    /// Four float32 lanes.
    #[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
    pub type F32x4 = [f32; 4];

    /// The four float32 of `x` (four long).
    #[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
    #[inline(always)]
    pub fn load(x: &[f32]) -> F32x4 {
        x.try_into().expect("four float32")
    }

    /// `x` into `out` (four long).
    #[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
    #[inline(always)]
    pub fn store(x: F32x4, out: &mut [f32]) {
        out.copy_from_slice(&x);
    }

    /// `x` in every lane.
    #[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
    #[inline(always)]
    pub fn splat(x: f32) -> F32x4 {
        [x; 4]
    }

    /// `a·b + c` in each lane, rounded once.
    #[cfg(not(all(target_arch = "wasm32", target_feature = "relaxed-simd")))]
    #[inline(always)]
    pub fn madd(a: F32x4, b: F32x4, c: F32x4) -> F32x4 {
        std::array::from_fn(|i| a[i].mul_add(b[i], c[i]))
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
mod relaxed {
    //! The fused lanes with WebAssembly's relaxed SIMD.
    use core::arch::wasm32::*;

    /// Four float32 lanes.
    pub type F32x4 = v128;

    /// The four float32 of `x` (four long).
    #[inline(always)]
    pub fn load(x: &[f32]) -> v128 {
        assert!(x.len() == 4);
        // SAFETY: `x` holds four f32, and v128_load reads 16 bytes unaligned.
        unsafe { v128_load(x.as_ptr().cast()) }
    }

    /// `x` into `out` (four long).
    #[inline(always)]
    pub fn store(x: v128, out: &mut [f32]) {
        assert!(out.len() == 4);
        // SAFETY: `out` holds four f32, and v128_store writes 16 bytes unaligned.
        unsafe { v128_store(out.as_mut_ptr().cast(), x) }
    }

    /// `x` in every lane.
    #[inline(always)]
    pub fn splat(x: f32) -> v128 {
        f32x4_splat(x)
    }

    /// `a·b + c` in each lane: one rounding where the engine fuses it, two elsewhere.
    #[inline(always)]
    pub fn madd(a: v128, b: v128, c: v128) -> v128 {
        f32x4_relaxed_madd(a, b, c)
    }
}

/// Values at float32's edges: signed zeros, the smallest subnormal and normal, one and its
/// neighbours, the largest finite, infinities and NaN.
pub const EDGE_VALUES: [f32; 16] = [
    0.0,
    -0.0,
    1.0e-45,
    -1.0e-45,
    f32::MIN_POSITIVE,
    -f32::MIN_POSITIVE,
    1.0,
    -1.0,
    1.0 + f32::EPSILON,
    1.0 - f32::EPSILON / 2.0,
    -(1.0 + f32::EPSILON),
    f32::MAX,
    f32::MIN,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
];

/// SplitMix64: the next 64 random bits from `state`.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The float32 with this sign bit, exponent field (0 subnormal, 1–254 normal) and significand
/// field.
fn float(sign: u64, exponent: i64, significand: u64) -> f32 {
    let exponent = exponent.clamp(0, 254) as u32;
    f32::from_bits((sign as u32 & 1) << 31 | exponent << 23 | significand as u32 & 0x7f_ffff)
}

/// A random triple (a, b, c) drawn to stress double rounding, then edges and plain random bits.
///
/// Most triples put the float64 sum on a float32 halfway point: a = 2^i·(1 + j·2⁻²³) and
/// b = 2^l·(1 − j·2⁻²³) multiply to P·(1 − j²·2⁻⁴⁶) with P = 2^(i+l), just below P, and c is a
/// float32 whose ulp is 2P, so c ± P is a halfway point and the product's last bits fall below
/// float64's precision. These are drawn in the normal range, in the subnormal range (P = 2⁻¹⁵⁰,
/// c subnormal) and at the overflow threshold (P = 2¹⁰³, c near `f32::MAX`).
pub fn test_triple(state: &mut u64) -> (f32, f32, f32) {
    let (r, s, t) = (next(state), next(state), next(state));
    let any = |bits: u64| f32::from_bits(bits as u32);
    let j = 1 + (s >> 40) % if s & 64 == 0 { 255 } else { 4095 };
    // c's exponent: mostly the one that makes P half its ulp, sometimes one off.
    let nudge = [0, 0, 0, -1, 1][(t >> 60) as usize % 5];
    let near_halfway = |e: i64, c_exponent: i64, c_significand: u64| {
        let i = e / 2 + (s >> 20) as i64 % 9 - 4;
        let l = e - i;
        let a = float(r >> 8, i + 127, j);
        let b = float(r >> 9, l + 126, (1 << 23) - 2 * j);
        let c = float(r >> 10, c_exponent + nudge, c_significand);
        if s & 1 == 0 { (a, b, c) } else { (b, a, c) }
    };
    match r % 16 {
        0..=5 => {
            let e = (t >> 8) as i64 % 220 - 120; // P = 2^e
            near_halfway(e, e + 24 + 127, t >> 16)
        }
        6 | 7 => near_halfway(-150 - (t >> 8) as i64 % 3, 0, t >> 16), // c subnormal
        8 => near_halfway(103, 254, (1 << 23) - 1 - (t >> 16) % 4),    // c near f32::MAX
        9 | 10 => {
            // Signed zeros, infinities, NaN, subnormals, with exact cancellations.
            let e = |bits: u64| EDGE_VALUES[(bits % 16) as usize];
            let (a, b) = (e(s), e(t));
            let c = match r >> 60 {
                0..=7 => e(r >> 8),
                8..=11 => -(a * b),
                _ => any(t >> 32),
            };
            (a, b, c)
        }
        11 => {
            // Tiny products on tiny c: results anywhere in the subnormal range.
            let (i, l) = ((s >> 8) as i64 % 60 - 100, (s >> 16) as i64 % 60 - 100);
            let (a, b) = (float(r >> 8, i + 127, t), float(r >> 9, l + 127, t >> 24));
            (a, b, float(r >> 10, (t >> 50) as i64 % 3, s >> 32))
        }
        12 => {
            // Factors on the grid whose product cancels against c: exact results below 2⁻¹²⁶.
            let (i, l) = ((s >> 8) as i64 % 12 - 51, (s >> 16) as i64 % 12 - 51);
            let (a, b) = (float(r >> 8, i + 127, t), float(r >> 9, l + 127, t >> 24));
            let c = -(a * b);
            let c = [c, c.next_up(), c.next_down()][(t >> 60) as usize % 3];
            (a, b, c)
        }
        _ => (any(r >> 8), any(s), any(t)),
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    //! The kernel's float64 lanes, with WebAssembly's SIMD128 instructions.
    use super::{EXTRA_BITS, HALFWAY, MIN_NORMAL, PANEL, fma_rounded_to_odd, on_grid};
    use core::arch::wasm32::*;
    use std::cell::Cell;

    /// Float64 pairs per panel row.
    const PAIRS: usize = PANEL / 2;

    thread_local! {
        /// A panel of B widened to float64, reused from call to call.
        static WIDE_B: Cell<Vec<v128>> = const { Cell::new(Vec::new()) };
    }

    /// `a·b + c` in both float64 lanes, and a mask of the lanes where [`super::needs_care`] holds,
    /// or [`super::needs_care_on_grid`] if not `SUBNORMALS` (for factors on the grid).
    #[inline(always)]
    fn fused_sum<const SUBNORMALS: bool>(a: v128, b: v128, c: v128) -> (v128, v128) {
        let s = f64x2_add(f64x2_mul(a, b), c);
        let extra = v128_and(s, u64x2_splat(EXTRA_BITS));
        let halfway = i64x2_eq(extra, u64x2_splat(HALFWAY));
        if !SUBNORMALS {
            return (s, halfway);
        }
        let tiny = f64x2_lt(f64x2_abs(s), f64x2_splat(MIN_NORMAL));
        let nonzero = f64x2_ne(s, f64x2_splat(0.0));
        (s, v128_or(halfway, v128_and(tiny, nonzero)))
    }

    /// Four float32 as two float64 pairs.
    #[inline(always)]
    fn widen(x: v128) -> [v128; 2] {
        let high = i32x4_shuffle::<2, 3, 0, 1>(x, x);
        [f64x2_promote_low_f32x4(x), f64x2_promote_low_f32x4(high)]
    }

    /// [`super::accumulate`]: the panel widened to float64 once, the factors checked once for
    /// [`on_grid`], then row by row.
    #[inline(always)]
    pub fn accumulate<const R: usize>(
        acc: &mut [[f32; PANEL]; R],
        a: impl Fn(usize, usize) -> f32,
        b_panel: &[f32],
    ) {
        let mut wide = WIDE_B.take();
        wide.clear();
        for b_p in b_panel.chunks_exact(4) {
            // SAFETY: `b_p` holds four f32, and v128_load reads 16 bytes unaligned.
            let x = unsafe { v128_load(b_p.as_ptr().cast()) };
            wide.extend(widen(x));
        }
        let k = b_panel.len() / PANEL;
        let off_grid = |x: f32| !on_grid(x);
        let b_off = b_panel.iter().fold(false, |any, &b| any | off_grid(b));
        let a_off = (0..R).any(|r| (0..k).fold(false, |any, p| any | off_grid(a(r, p))));
        if b_off || a_off {
            rows::<R, true>(acc, a, b_panel, &wide);
        } else {
            rows::<R, false>(acc, a, b_panel, &wide);
        }
        WIDE_B.set(wide);
    }

    /// Each row of the tile in turn, through every row of the widened panel. The sums are kept
    /// rounded to float32, two to a vector (the other two lanes zero), and widened for each step:
    /// kept in float64, the compiler would turn each rounding into four scalar conversions.
    #[inline(always)]
    fn rows<const R: usize, const SUBNORMALS: bool>(
        acc: &mut [[f32; PANEL]; R],
        a: impl Fn(usize, usize) -> f32,
        b_panel: &[f32],
        wide: &[v128],
    ) {
        for (r, acc_r) in acc.iter_mut().enumerate() {
            let mut sums: [v128; PAIRS] =
                std::array::from_fn(|i| f32x4(acc_r[2 * i], acc_r[2 * i + 1], 0.0, 0.0));
            for (p, b_p) in wide.chunks_exact(PAIRS).enumerate() {
                let a_rp = f64x2_splat(f64::from(a(r, p)));
                let mut care = u64x2_splat(0);
                let before = sums;
                sums = std::array::from_fn(|i| {
                    let c = f64x2_promote_low_f32x4(sums[i]);
                    let (s, flag) = fused_sum::<SUBNORMALS>(a_rp, b_p[i], c);
                    care = v128_or(care, flag);
                    f32x4_demote_f64x2_zero(s)
                });
                if v128_any_true(care) {
                    // A copy, so that only this rare branch keeps the sums in memory.
                    let mut redone = before;
                    redo_row(&mut redone, a(r, p), &b_panel[p * PANEL..][..PANEL]);
                    sums = redone;
                }
            }
            for (i, s) in sums.iter().enumerate() {
                acc_r[2 * i] = f32x4_extract_lane::<0>(*s);
                acc_r[2 * i + 1] = f32x4_extract_lane::<1>(*s);
            }
        }
    }

    /// The rare step where some lane needs care: every lane of the row again, from the sums
    /// before it, as [`fma_rounded_to_odd`] computes it.
    #[cold]
    #[inline(never)]
    fn redo_row(sums: &mut [v128; PAIRS], a: f32, b: &[f32]) {
        for (i, sum) in sums.iter_mut().enumerate() {
            let c = [f32x4_extract_lane::<0>(*sum), f32x4_extract_lane::<1>(*sum)];
            let lane = |j: usize| fma_rounded_to_odd(a, b[2 * i + j], c[j]);
            *sum = f32x4(lane(0), lane(1), 0.0, 0.0);
        }
    }

    /// [`super::fma_lanes`]: two triples per step through the kernel's own float64 lanes (an odd
    /// last one computed twice).
    pub fn fma_lanes(out: &mut [f32], a: &[f32], b: &[f32], c: &[f32]) {
        let last = out.len().saturating_sub(1);
        for i in (0..out.len()).step_by(2) {
            let j = (i + 1).min(last);
            let pair = |x: &[f32]| f64x2(f64::from(x[i]), f64::from(x[j]));
            let grid = [a[i], a[j], b[i], b[j]].into_iter().all(on_grid);
            let (a2, b2, c2) = (pair(a), pair(b), pair(c));
            let (mut s, care) = if grid {
                fused_sum::<false>(a2, b2, c2)
            } else {
                fused_sum::<true>(a2, b2, c2)
            };
            if v128_any_true(care) {
                let lane = |k: usize| f64::from(fma_rounded_to_odd(a[k], b[k], c[k]));
                s = f64x2(lane(i), lane(j));
            }
            out[j] = f64x2_extract_lane::<1>(s) as f32;
            out[i] = f64x2_extract_lane::<0>(s) as f32;
        }
    }
}
