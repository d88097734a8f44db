//! The heat maps' colour scale, which every picture that shades a weight shares, so that a weight
//! looks the same everywhere, and the grey of a cell the causal mask removed. Public, so that the
//! book's page draws with the same colours.

/// The fill of a cell the causal mask removed.
pub const MASKED: &str = "#e4e4e4";

/// ColorBrewer's "Blues", from white to deep blue: the stops of the heat maps' colour scale.
pub const BLUES: [(u8, u8, u8); 5] = [
    (247, 251, 255),
    (198, 219, 239),
    (107, 174, 214),
    (33, 113, 181),
    (8, 48, 107),
];

/// The colour of `t` in [0, 1] on the [`BLUES`] scale: 0 white, 1 deep blue.
pub(super) fn blue(t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (BLUES.len() - 1) as f64;
    let k = (t.floor() as usize).min(BLUES.len() - 2);
    let f = t - k as f64;
    let (a, b) = (BLUES[k], BLUES[k + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}
