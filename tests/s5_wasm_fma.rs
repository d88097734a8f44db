//! The page's fused multiply-add (`fast::wasm_fma`, Appendix B) against this CPU's FMA instruction:
//! the same bits on tens of millions of triples drawn to round twice, in every range.

use attention_from_scratch::s5_gpt::fast::wasm_fma::{
    self, Kernel, PANEL, accumulate, accumulate_fused, fma, fma_lanes, fma_lanes_fused,
    fma_on_grid, fma_rounded_to_odd, needs_care, on_grid, test_triple,
};

/// The CPU's fused multiply-add, one rounding, in hardware.
#[cfg(target_arch = "x86_64")]
fn hardware() -> fn(f32, f32, f32) -> f32 {
    #[target_feature(enable = "fma")]
    fn fused(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    assert!(
        std::arch::is_x86_feature_detected!("fma"),
        "this test needs a CPU with FMA"
    );
    // SAFETY: the CPU has FMA, checked just above.
    |a, b, c| unsafe { fused(a, b, c) }
}

#[cfg(not(target_arch = "x86_64"))]
fn hardware() -> fn(f32, f32, f32) -> f32 {
    f32::mul_add
}

/// Equal bits, or both NaN: IEEE 754 leaves a NaN's payload open, and WebAssembly too.
fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// The float64 sum rounded to float32 with no care at all: what the fix is for.
fn rounded_twice(a: f32, b: f32, c: f32) -> f32 {
    (f64::from(a) * f64::from(b) + f64::from(c)) as f32
}

/// 24 million stress triples on two threads: `fma`, its slow path alone, the kernel's lanes, the
/// fused lanes (here with `mul_add` per lane, as a fused `relaxed_madd` computes) and `libm::fmaf`
/// all give the hardware's bits; and the triples do make plain float64 rounding fail
/// often, in the normal range, the subnormal range and at overflow, so the check can fail.
#[test]
fn fma_is_the_hardware_fused_multiply_add_on_stress_triples() {
    const PER_THREAD: usize = 12_000_000;
    const CHUNK: usize = 1 << 16;
    let hw = hardware();
    let run = |seed: u64| {
        let mut state = seed;
        let (mut flagged, mut twice_wrong, mut on_grid_tiny) = (0usize, [0usize; 3], 0usize);
        let (mut a, mut b, mut c) = (vec![0.0; CHUNK], vec![0.0; CHUNK], vec![0.0; CHUNK]);
        let (mut lanes, mut fused) = (vec![0.0; CHUNK], vec![0.0; CHUNK]);
        for _ in 0..PER_THREAD / CHUNK {
            for i in 0..CHUNK {
                (a[i], b[i], c[i]) = test_triple(&mut state);
            }
            fma_lanes(&mut lanes, &a, &b, &c);
            fma_lanes_fused(&mut fused, &a, &b, &c);
            for i in 0..CHUNK {
                let (a, b, c) = (a[i], b[i], c[i]);
                let want = hw(a, b, c);
                let triple = format!("{a:e}·{b:e} + {c:e} ({want:e})");
                assert!(same(fma(a, b, c), want), "fma: {triple}");
                assert!(same(fma_rounded_to_odd(a, b, c), want), "odd: {triple}");
                assert!(same(lanes[i], want), "lanes: {triple}");
                assert!(same(fused[i], want), "fused lanes: {triple}");
                assert!(same(libm::fmaf(a, b, c), want), "libm: {triple}");
                if on_grid(a) && on_grid(b) {
                    assert!(same(fma_on_grid(a, b, c), want), "on grid: {triple}");
                    on_grid_tiny += usize::from(want != 0.0 && want.abs() < f32::MIN_POSITIVE);
                }
                let s = f64::from(a) * f64::from(b) + f64::from(c);
                flagged += usize::from(needs_care(s));
                let twice = rounded_twice(a, b, c);
                if !same(twice, want) {
                    let range = match want.abs() {
                        w if w < f32::MIN_POSITIVE => 0,
                        _ if twice.is_infinite() => 2,
                        _ => 1,
                    };
                    twice_wrong[range] += 1;
                }
            }
        }
        (flagged, twice_wrong, on_grid_tiny)
    };
    let (one, two) = std::thread::scope(|s| {
        let other = s.spawn(|| run(2));
        (run(1), other.join().unwrap())
    });
    let flagged = one.0 + two.0;
    let wrong: Vec<usize> = (0..3).map(|r| one.1[r] + two.1[r]).collect();
    let on_grid_tiny = one.2 + two.2;
    println!("flagged {flagged}, rounded twice wrongly (subnormal, normal, overflow) {wrong:?}");
    println!("subnormal results from factors on the grid {on_grid_tiny}");
    assert!(
        on_grid_tiny > 10_000,
        "the shortcut's own cases: {on_grid_tiny}"
    );
    // A test that can fail: without the care, about one triple in twelve would differ.
    assert!(wrong[0] > 100_000, "subnormal halfway cases: {wrong:?}");
    assert!(wrong[1] > 1_000_000, "normal halfway cases: {wrong:?}");
    assert!(wrong[2] > 10_000, "overflow threshold cases: {wrong:?}");
}

/// One of those triples, worked by hand. a·b = 2⁻¹⁵⁰·(1 − 2⁻⁴⁶) lies just below half the smallest
/// subnormal, and c = 2⁻¹²⁷ + 2⁻¹⁴⁹ is odd on float32's grid, so the float64 sum rounds up onto the
/// halfway point c + 2⁻¹⁵⁰, and that tie rounds up again, to the even neighbour; the exact sum is
/// below it and rounds down, to c. A halfway test on the 29 low bits alone misses this one.
#[test]
fn a_subnormal_halfway_sum_rounds_once() {
    let u = f32::EPSILON; // 2⁻²³
    let (a, b) = (2f32.powi(-75) * (1.0 + u), 2f32.powi(-75) * (1.0 - u));
    let c = f32::from_bits(0x0040_0001); // 2⁻¹²⁷ + 2⁻¹⁴⁹
    assert_eq!(hardware()(a, b, c).to_bits(), c.to_bits());
    assert_eq!(rounded_twice(a, b, c).to_bits(), 0x0040_0002);
    assert_eq!(fma(a, b, c).to_bits(), c.to_bits());
    let s = f64::from(a) * f64::from(b) + f64::from(c);
    assert_ne!(s.to_bits() & wasm_fma::EXTRA_BITS, wasm_fma::HALFWAY);
}

/// The kernel's inner loop gives each accumulator the lesson's chain of `mul_add`s, with the
/// float64 lanes and with the fused ones.
#[test]
fn accumulate_is_a_chain_of_mul_adds() {
    chain_of_mul_adds(|acc, a, b| accumulate(acc, a, b));
    chain_of_mul_adds(|acc, a, b| accumulate_fused(acc, a, b));
}

/// A tile kernel of three rows: the accumulators, A's element (r, p), and the panel of B.
type TileKernel = fn(&mut [[f32; PANEL]; 3], &dyn Fn(usize, usize) -> f32, &[f32]);

fn chain_of_mul_adds(kernel: TileKernel) {
    let hw = hardware();
    let mut state = 7;
    for (k, grid) in [
        (1, false),
        (2, false),
        (31, true),
        (64, false),
        (64, true),
        (257, false),
    ] {
        // Off the grid: the stress triples' factors; on it, their normal ones above 2⁻⁵¹.
        let mut factor = |pick: fn((f32, f32, f32)) -> f32| loop {
            let x = pick(test_triple(&mut state));
            if !grid || (on_grid(x) && x.is_normal()) {
                break x;
            }
        };
        let a: Vec<f32> = (0..3 * k).map(|_| factor(|t| t.0)).collect();
        let b: Vec<f32> = (0..k * PANEL).map(|_| factor(|t| t.1)).collect();
        let start: [[f32; PANEL]; 3] =
            std::array::from_fn(|_| std::array::from_fn(|_| test_triple(&mut state).2));
        let mut acc = start;
        kernel(&mut acc, &|r, p| a[r * k + p], &b);
        for r in 0..3 {
            for q in 0..PANEL {
                let want = (0..k).fold(start[r][q], |s, p| hw(a[r * k + p], b[p * PANEL + q], s));
                assert!(same(acc[r][q], want), "row {r}, column {q}, k {k}");
            }
        }
    }
}

/// The browser's self-check finds nothing here either, for either kernel's lanes and tiles.
#[test]
fn self_check_finds_no_mismatch() {
    assert_eq!(wasm_fma::self_check(1 << 20, 3), 0);
    assert_eq!(wasm_fma::self_check_of(Kernel::FusedLanes, 1 << 20, 3), 0);
    assert_eq!(wasm_fma::tile_mismatches(Kernel::ExactFloat64, 5), 0);
}

/// The start-up check's first triple tells one rounding from two: (1 + 2⁻¹²)² − (1 + 2⁻¹¹) is
/// 2⁻²⁴ fused and 0 rounded twice. Lanes that round once pass the check; natively nothing
/// chooses them, since only the page's relaxed-SIMD build has them.
#[test]
fn the_start_up_check_tells_one_rounding_from_two() {
    let x = 1.0 + 2f32.powi(-12);
    let c = -(1.0 + 2f32.powi(-11));
    assert_eq!(hardware()(x, x, c), 2f32.powi(-24));
    assert_eq!(x * x + c, 0.0);
    assert!(wasm_fma::fused_lanes_round_once());
    assert_eq!(wasm_fma::choose_kernel(true), Kernel::ExactFloat64);
    assert_eq!(wasm_fma::kernel(), Kernel::ExactFloat64);
}

/// Every a = 1 + j·2⁻²³ with b = 1 − j·2⁻²³ (a·b = 1 − j²·2⁻⁴⁶), against c at halfway points
/// of four binades, both signs of a: 4 million products × 64 c × 2. `cargo test --release --test
/// s5_wasm_fma -- --ignored`.
#[test]
#[ignore = "a sweep of 537 million triples, half a minute on two threads"]
fn sweep_of_products_just_below_one() {
    let hw = hardware();
    let cs: Vec<f32> = (0..64u32)
        .map(|i| {
            let exponent = 151 + i % 4; // ulp 2, 4, 8, 16: 1 is half an ulp, a quarter, …
            let sign = (i >> 2) & 1;
            f32::from_bits((sign << 31) | (exponent << 23) | ((i >> 3) * 0x0f_0f0f))
        })
        .collect();
    let check = |js: std::ops::Range<u32>| {
        for j in js {
            let a = f32::from_bits(0x3f80_0000 | j);
            let b = f32::from_bits(0x3f00_0000 | ((1 << 23) - 2 * j));
            for &c in &cs {
                for (a, b) in [(a, b), (-a, b)] {
                    assert!(same(fma(a, b, c), hw(a, b, c)), "{a:e}·{b:e} + {c:e}");
                }
            }
        }
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| check(1 << 21..1 << 22));
        check(1..1 << 21);
        other.join().unwrap();
    });
}
