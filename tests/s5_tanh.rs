//! The lesson's float32 `tanh` (GELU's), against the true tanh: within 2 ulp on every float32.
//!
//! The reference is libm's float64 `tanh`, whose own error is far below a float32 ulp.

use attention_from_scratch::s5_gpt::ops::tanh;

/// How far `t` is from the float64 `reference`, in float32 ulps at the reference.
fn ulps(t: f32, reference: f64) -> f64 {
    let exponent = ((reference.abs().to_bits() >> 52) as i32 - 1023).max(-126);
    let ulp = f64::from_bits(((exponent - 23 + 1023) as u64) << 52);
    (f64::from(t) - reference).abs() / ulp
}

/// The worst error of [`tanh`] over the float32 bit patterns `bits`, checking both signs.
fn worst_tanh_error(bits: impl Iterator<Item = u32>) -> (f64, f32) {
    let mut worst = (0.0, 0.0);
    for x in bits.map(f32::from_bits) {
        let e = ulps(tanh(x), libm::tanh(f64::from(x)));
        if e > worst.0 {
            worst = (e, x);
        }
        assert_eq!(tanh(-x).to_bits(), (-tanh(x)).to_bits(), "odd at {x}");
    }
    worst
}

/// Every float32 from 2⁻¹⁴ to 10.5, where tanh is neither x nor 1, on two threads.
#[test]
fn tanh_is_within_2_ulp_on_every_float32_where_it_computes() {
    let (from, to) = (2f32.powi(-14).to_bits(), 10.5f32.to_bits());
    let middle = from + (to - from) / 2;
    let (low, high) = std::thread::scope(|s| {
        let low = s.spawn(|| worst_tanh_error(from..middle));
        let high = worst_tanh_error(middle..=to);
        (low.join().unwrap(), high)
    });
    for (e, x) in [low, high] {
        assert!(e <= 2.0, "{e} ulp at x = {x}");
    }
}

/// The rest of float32, every exponent, a dense sweep of each: tiny inputs return x, large ones
/// 1.
#[test]
fn tanh_is_within_2_ulp_on_a_sweep_of_every_exponent() {
    let below = (0..2f32.powi(-14).to_bits()).step_by(61);
    let above = (10.5f32.to_bits()..f32::INFINITY.to_bits()).step_by(61);
    let (e, x) = worst_tanh_error(below.chain(above).chain([f32::INFINITY.to_bits()]));
    assert!(e <= 2.0, "{e} ulp at x = {x}");
    assert_eq!(tanh(0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
    assert!(tanh(f32::NAN).is_nan());
}

/// Run with `cargo test --release -- --ignored`: all 2³² inputs (about 3 minutes per core).
#[test]
#[ignore]
fn tanh_is_within_2_ulp_on_every_float32() {
    let (e, x) = worst_tanh_error((0..=f32::INFINITY.to_bits()).chain([f32::NAN.to_bits()]));
    println!("worst error: {e:.3} ulp at x = {x:e}");
    assert!(e <= 2.0, "{e} ulp at x = {x}");
}
