//! Lesson layer. Stage 7's ops: what the attention of today's LLMs changes, each a forward/backward
//! pair over slices as [`super::ops`] keeps them. The chapter `s7_variants` shows them; the tape
//! records them for [`super::beyond::Architecture`]'s `kv_heads`, `window` and `rope`.
//!
//! - Grouped-query attention shares each key/value head with G query heads: [`repeat_kv_forward`].
//! - Sliding-window attention lets a token see only the W newest keys: [`window_forward`].
//! - Rotary positions turn each pair of a query's or key's coordinates by an angle that grows with
//!   the position: [`rope_forward`].
//! - Multi-head latent attention puts a rotary part beside each query and key (its decoupled RoPE,
//!   [`super::latent`]): [`concat_forward`].
//!
//! None of them draws a random number, and none changes a bit of the model when it is left out.

// ANCHOR: repeat_kv
/// Grouped-query attention's `repeat_interleave(G, dim=1)`: (B, K, T, D) → (B, K·G, T, D). Query
/// head h reads key/value head h / G, so each K/V head appears G times in a row. `head` is the
/// length of one head's (T, D) matrix.
pub fn repeat_kv_forward(out: &mut [f32], x: &[f32], groups: usize, head: usize) {
    let copies = out.chunks_exact_mut(head * groups);
    for (out, x) in copies.zip(x.chunks_exact(head)) {
        for copy in out.chunks_exact_mut(head) {
            copy.copy_from_slice(x); // out[k·G + g] = x[k]
        }
    }
}

/// A K/V head's gradient is the sum of its G copies' gradients, added in head order.
pub fn repeat_kv_backward(d_x: &mut [f32], d_out: &[f32], groups: usize, head: usize) {
    for (d_x, d_out) in d_x
        .chunks_exact_mut(head)
        .zip(d_out.chunks_exact(head * groups))
    {
        let mut copies = d_out.chunks_exact(head);
        d_x.copy_from_slice(copies.next().expect("at least one copy"));
        for copy in copies {
            for (d, g) in d_x.iter_mut().zip(copy) {
                *d += g;
            }
        }
    }
}
// ANCHOR_END: repeat_kv

// ANCHOR: window
/// Sliding-window attention's band, after `Tril`: in each (T, T) matrix of scores, token i keeps
/// the W keys i − W + 1 ..= i (rasbt's convention: the window counts the token itself) and
/// `value` is written over the older ones. With W ≥ T nothing is written.
pub fn window_forward(out: &mut [f32], x: &[f32], t: usize, window: usize, value: f32) {
    out.copy_from_slice(x);
    for (r, row) in out.chunks_exact_mut(t).enumerate() {
        let oldest = (r % t + 1).saturating_sub(window); // the oldest key token i still sees
        row[..oldest].fill(value);
    }
}

/// The gradient passes where the score was kept and is 0 outside the window.
pub fn window_backward(d_x: &mut [f32], d_out: &[f32], t: usize, window: usize) {
    window_forward(d_x, d_out, t, window, 0.0);
}
// ANCHOR_END: window

// ANCHOR: rope
/// RoPE's angles for positions `positions` of a head D wide: position p turns pair i (coordinates
/// i and i + D/2, Llama's split halves) by p·θᵢ, θᵢ = 10,000^(−2i/D). Returns cos and sin, each
/// (positions, D/2), computed in float32 as rasbt's `compute_rope_params` does.
pub fn rope_angles(positions: std::ops::Range<usize>, d: usize) -> (Vec<f32>, Vec<f32>) {
    let theta: Vec<f32> = (0..d / 2)
        .map(|i| 1.0 / libm::powf(10_000.0, (2 * i) as f32 / d as f32))
        .collect();
    let angles = positions.flat_map(|p| theta.iter().map(move |&th| p as f32 * th));
    angles.map(|a| (libm::cosf(a), libm::sinf(a))).unzip()
}

/// Rotary positions: each (T, D) matrix's row r, the token at position `offset + r`, has its pairs
/// (x₁, x₂) = (`x[i]`, `x[i + D/2]`) turned by that position's angles:
/// (x₁·cos − x₂·sin, x₂·cos + x₁·sin).
pub fn rope_forward(out: &mut [f32], x: &[f32], (t, d): (usize, usize), offset: usize) {
    let (cos, sin) = rope_angles(offset..offset + t, d);
    let half = d / 2;
    for (r, (out, x)) in out.chunks_exact_mut(d).zip(x.chunks_exact(d)).enumerate() {
        let (cos, sin) = (&cos[r % t * half..][..half], &sin[r % t * half..][..half]);
        let (x1, x2) = x.split_at(half);
        let (out1, out2) = out.split_at_mut(half);
        for i in 0..half {
            out1[i] = x1[i] * cos[i] + (-x2[i]) * sin[i];
            out2[i] = x2[i] * cos[i] + x1[i] * sin[i];
        }
    }
}

/// A rotation's gradient is turned back by the same angle: (g₁·cos + g₂·sin, g₂·cos − g₁·sin).
pub fn rope_backward(d_x: &mut [f32], d_out: &[f32], (t, d): (usize, usize), offset: usize) {
    let (cos, sin) = rope_angles(offset..offset + t, d);
    let half = d / 2;
    for (r, (d_x, g)) in d_x
        .chunks_exact_mut(d)
        .zip(d_out.chunks_exact(d))
        .enumerate()
    {
        let (cos, sin) = (&cos[r % t * half..][..half], &sin[r % t * half..][..half]);
        let (g1, g2) = g.split_at(half);
        let (d_x1, d_x2) = d_x.split_at_mut(half);
        for i in 0..half {
            d_x1[i] = g1[i] * cos[i] + g2[i] * sin[i];
            d_x2[i] = g2[i] * cos[i] + (-g1[i]) * sin[i];
        }
    }
}
// ANCHOR_END: rope

// ANCHOR: concat
/// `torch.cat([a, b], dim=-1)`: each row of a (…, A) followed by the same row of b (…, B), into
/// (…, A + B).
pub fn concat_forward(out: &mut [f32], a: &[f32], b: &[f32], (wa, wb): (usize, usize)) {
    let rows = a.chunks_exact(wa).zip(b.chunks_exact(wb));
    for (out, (a, b)) in out.chunks_exact_mut(wa + wb).zip(rows) {
        out[..wa].copy_from_slice(a);
        out[wa..].copy_from_slice(b);
    }
}

/// Each part's gradient is its own columns of the output's.
pub fn concat_backward(d_a: &mut [f32], d_b: &mut [f32], d_out: &[f32], (wa, wb): (usize, usize)) {
    let rows = d_a.chunks_exact_mut(wa).zip(d_b.chunks_exact_mut(wb));
    for (d_out, (d_a, d_b)) in d_out.chunks_exact(wa + wb).zip(rows) {
        d_a.copy_from_slice(&d_out[..wa]);
        d_b.copy_from_slice(&d_out[wa..]);
    }
}
// ANCHOR_END: concat

// ANCHOR: key_offset
/// The coordinates of a key D wide that the key offset moves: the second half of each half,
/// D/2 − D/4 .. D/2 and D − D/4 .. D, half of the coordinates, the pairs RoPE turns slowest
/// (modded-nanogpt's "stationary" dims). Whole pairs, so a turned key stays a turned key.
pub fn offset_coordinates(d: usize) -> [std::ops::Range<usize>; 2] {
    let (half, quarter) = (d / 2, d / 4);
    [half - quarter..half, d - quarter..d]
}

/// Stage 8's one-position key offset (modded-nanogpt's "partial key offset"): in each (T, D)
/// matrix of keys, row r takes those coordinates from row r − 1, and row 0 has zeros there (no
/// character comes before the first). A key then also says which character came before it, which
/// is what an induction head asks for, in one layer.
pub fn key_offset_forward(out: &mut [f32], x: &[f32], (t, d): (usize, usize)) {
    out.copy_from_slice(x);
    for (r, row) in out.chunks_exact_mut(d).enumerate() {
        for range in offset_coordinates(d) {
            match r % t {
                0 => row[range].fill(0.0),
                _ => row[range.clone()].copy_from_slice(&x[(r - 1) * d..][range]),
            }
        }
    }
}

/// The gradient of a moved coordinate goes back one row; the last row's moved coordinates fed
/// nothing.
pub fn key_offset_backward(d_x: &mut [f32], d_out: &[f32], (t, d): (usize, usize)) {
    d_x.copy_from_slice(d_out);
    for (r, row) in d_x.chunks_exact_mut(d).enumerate() {
        for range in offset_coordinates(d) {
            match r % t == t - 1 {
                true => row[range].fill(0.0),
                false => row[range.clone()].copy_from_slice(&d_out[(r + 1) * d..][range]),
            }
        }
    }
}
// ANCHOR_END: key_offset

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_kv_interleaves_and_sums_back() {
        let x = [1.0, 2.0, 3.0, 4.0]; // K = 2 heads of 2 values
        let mut out = [0.0; 8];
        repeat_kv_forward(&mut out, &x, 2, 2);
        assert_eq!(out, [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
        let mut d_x = [0.0; 4];
        repeat_kv_backward(&mut d_x, &[1.0, 1.0, 2.0, 2.0, 3.0, 0.0, 4.0, 1.0], 2, 2);
        assert_eq!(d_x, [3.0, 3.0, 7.0, 1.0]);
    }

    #[test]
    fn concat_joins_rows_and_splits_back() {
        let mut out = [0.0; 6];
        concat_forward(&mut out, &[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0], (2, 1));
        assert_eq!(out, [1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
        let (mut d_a, mut d_b) = ([0.0; 4], [0.0; 2]);
        concat_backward(&mut d_a, &mut d_b, &out, (2, 1));
        assert_eq!((d_a, d_b), ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0]));
    }

    #[test]
    fn key_offset_moves_the_slow_pairs_one_row_down_and_back() {
        let x: Vec<f32> = (0..12).map(|i| i as f32).collect(); // T = 3 rows of D = 4
        let mut out = [0.0; 12];
        key_offset_forward(&mut out, &x, (3, 4));
        assert_eq!(out, [0., 0., 2., 0., 4., 1., 6., 3., 8., 5., 10., 7.]);
        let mut d_x = [0.0; 12];
        key_offset_backward(&mut d_x, &out, (3, 4));
        assert_eq!(d_x, [0., 1., 2., 3., 4., 5., 6., 7., 8., 0., 10., 0.]);
    }

    #[test]
    fn window_keeps_w_keys() {
        let mut out = [0.0; 16];
        window_forward(&mut out, &[1.0; 16], 4, 2, -9.0);
        let kept: Vec<usize> = out
            .chunks(4)
            .map(|r| r.iter().filter(|&&x| x == 1.0).count())
            .collect();
        assert_eq!(kept, [4, 4, 3, 2]); // the past beyond W; Tril takes the future
        assert_eq!(out[8..12], [-9.0, 1.0, 1.0, 1.0]);
    }

    #[test]
    fn rope_turns_pairs_and_keeps_their_length() {
        let x = [1.0, 0.0, 0.0, 1.0]; // one pair per half
        let mut out = [0.0; 4];
        rope_forward(&mut out, &x, (1, 4), 3);
        let len = |a: f32, b: f32| (a * a + b * b).sqrt();
        assert!((len(out[0], out[2]) - 1.0).abs() < 1e-6);
        assert!((out[0] - libm::cosf(3.0)).abs() < 1e-7); // θ₀ = 1: turned by 3 radians
        let mut back = [0.0; 4];
        rope_backward(&mut back, &out, (1, 4), 3);
        for (b, x) in back.iter().zip(x) {
            assert!((b - x).abs() < 1e-6, "{back:?}");
        }
    }
}
