//! The pictures of stage 2 (§3.4), drawn from the crate's own numbers: the query q⁽²⁾ and the six
//! keys in the plane, a score as a projection (`s2_keys_plane.svg`), and how the largest softmax
//! weight grows with d_k, with and without the 1/√d_k scale (`s2_scaling.svg`).

use super::Figure;
use super::chart::{Axis, LineChart, POINTS, Scale, Series};
use super::draw::{
    GREY, RED, Tag, arrow, axes, frame, note, open_svg, points, text, vertical_text,
};
use super::finish;
use super::stage1::{QUERY, SCORE, WEIGHT, superscript};
use crate::lang::Lang;
use crate::rng::torch::Generator;
use crate::s1_simple::{TOKENS, inputs};
use crate::s2_trainable::{D_OUT, Scaling, WalkThrough};
use crate::{BookSeeds, Error};

/// The key sizes of the scaling picture: 2, 4, …, 1024.
pub const SCALING_D_K: [usize; 10] = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// How many draws of a query and six keys each point of the scaling picture averages.
pub const SCALING_DRAWS: usize = 200;

/// The mean largest softmax weight over `draws` draws of [`Scaling::new`] (one query and six keys
/// of size `d_k`, components of mean 0 and variance 1) from a generator seeded with `seed`: first
/// of the unscaled scores, softmax(q·k), then of the scaled ones, softmax(q·k / √d_k). Six equal
/// scores would give 1/6 ≈ 0.17; a softmax that picks one key alone gives 1.
pub fn mean_largest_weights(seed: u64, d_k: usize, draws: usize) -> (f64, f64) {
    let mut rng = Generator::manual_seed(seed);
    let largest = |w: &ndarray::Array1<f32>| f64::from(w.fold(0.0f32, |m, &a| m.max(a)));
    let (mut unscaled, mut scaled) = (0.0, 0.0);
    for _ in 0..draws {
        let demo = Scaling::new(&mut rng, d_k);
        unscaled += largest(&demo.unscaled_weights);
        scaled += largest(&demo.weights);
    }
    (unscaled / draws as f64, scaled / draws as f64)
}

/// The label of `v` on the vertical axis at x0, level with height y.
fn y_tick(svg: &mut String, (x0, y): (f64, f64), v: f64) {
    text(
        svg,
        (x0 - 6.0, y + 4.0),
        "end",
        12,
        "black",
        &format!("{v:.1}"),
    );
}

/// The query q⁽²⁾ and the six keys of the walk-through with d_out = 2, placed in the plane of
/// [`keys_plane`]: each key's shadow on the query's direction, and the key drawn with its shadow.
struct Plane {
    walk: WalkThrough,
    q: (f64, f64),
    q_len: f64,
    /// The query's direction, a unit vector.
    q_hat: (f64, f64),
    keys: Vec<(f64, f64)>,
    shadows: Vec<f64>,
    /// The key drawn with its shadow: the one furthest from the query's line, where the drop from
    /// its tip to the line shows best.
    shown: usize,
    /// The plane's lowest coordinate on both axes, and its highest on x and on y.
    lo: f64,
    hi: (f64, f64),
}

/// The page x of the plane's left edge, and the plane's height in px: its scale on both axes.
const PLANE_LEFT: f64 = 110.0;
const PLANE_HEIGHT: f64 = 390.0;

impl Plane {
    fn new(seeds: BookSeeds) -> Self {
        let walk = WalkThrough::new(
            &inputs().view(),
            &mut Generator::manual_seed(seeds.seed_123),
            D_OUT,
        );
        let q = (f64::from(walk.query_2[0]), f64::from(walk.query_2[1]));
        let q_len = q.0.hypot(q.1);
        let q_hat = (q.0 / q_len, q.1 / q_len);
        let keys: Vec<(f64, f64)> = walk
            .keys
            .rows()
            .into_iter()
            .map(|k| (f64::from(k[0]), f64::from(k[1])))
            .collect();
        let shadows = keys.iter().map(|k| k.0 * q_hat.0 + k.1 * q_hat.1).collect();
        let off_line = |k: &(f64, f64)| (k.0 * q_hat.1 - k.1 * q_hat.0).abs();
        let shown = (0..keys.len())
            .max_by(|&a, &b| off_line(&keys[a]).total_cmp(&off_line(&keys[b])))
            .expect("six keys");
        // The plane, on the same scale on both axes: from 0 (or below, if a coordinate is
        // negative) to the largest coordinate rounded up to a half, with room on the right for
        // the labels.
        let half_up = |v: f64| (v * 2.0).ceil() / 2.0;
        let half_down = |v: f64| (v * 2.0).floor() / 2.0;
        let all = || keys.iter().chain([&q]);
        let lo = half_down(all().fold(0f64, |m, k| m.min(k.0).min(k.1)));
        let hi_x = half_up(all().fold(0f64, |m, k| m.max(k.0))) + 0.25;
        let hi_y = half_up(all().fold(0f64, |m, k| m.max(k.1)));
        Plane {
            walk,
            q,
            q_len,
            q_hat,
            keys,
            shadows,
            shown,
            lo,
            hi: (hi_x, hi_y),
        }
    }

    /// The page position of the point (a, b) of the plane, in a picture `height` px tall.
    fn to_px(&self, (a, b): (f64, f64), height: f64) -> (f64, f64) {
        let px_per = PLANE_HEIGHT / (self.hi.1 - self.lo);
        let bottom = height - 56.0;
        (
            PLANE_LEFT + (a - self.lo) * px_per,
            bottom - (b - self.lo) * px_per,
        )
    }
}

/// The height of [`keys_plane`]'s picture.
const KEYS_PLANE_HEIGHT: f64 = 500.0;

/// `s2_keys_plane.svg`: with d_out = 2, the query q⁽²⁾ and the six keys as arrows in the plane
/// (the walk-through's W_q, W_k at seed 123), and one score ω₂ᵢ = q⁽²⁾ · k⁽ⁱ⁾ as the shadow of
/// k⁽ⁱ⁾ on the query's direction times |q⁽²⁾|; a table beside it gives every key's shadow and
/// score.
fn keys_plane(lang: Lang, seeds: BookSeeds) -> Figure {
    let plane = Plane::new(seeds);
    let mut svg = open_svg(
        lang,
        740.0,
        KEYS_PLANE_HEIGHT,
        lang.pick(
            "Stage 2: the query q⁽²⁾ and the six keys k⁽ⁱ⁾ in the plane (d_out = 2)",
            "第 2 阶段：平面上的查询 q⁽²⁾ 与六个键 k⁽ⁱ⁾（d_out = 2）",
        ),
    );
    let to_px = |p| plane.to_px(p, KEYS_PLANE_HEIGHT);
    plane_axes(lang, &mut svg, &plane, &to_px);
    query_direction(&mut svg, &plane, &to_px);
    key_arrows(&mut svg, &plane, &to_px);
    let q_tip = to_px(plane.q);
    let origin = to_px((0.0, 0.0));
    arrow(&mut svg, origin, q_tip, QUERY, 3.0, (13.0, 5.85));
    let at = (q_tip.0 - 10.0, q_tip.1 - 8.0);
    text(&mut svg, at, "end", 13, QUERY, "q⁽²⁾");
    shadow(&mut svg, &plane, &to_px);
    let below = score_table(lang, &mut svg, &plane);
    table_notes(lang, &mut svg, below);
    finish(lang, "s2_keys_plane.svg", svg)
}

/// The page position of a point of the plane.
type ToPx<'a> = dyn Fn((f64, f64)) -> (f64, f64) + 'a;

/// The plane's axes, with ticks every 0.5 and the components' names.
fn plane_axes(lang: Lang, svg: &mut String, plane: &Plane, to_px: &ToPx) {
    let (lo, (hi_x, hi_y)) = (plane.lo, plane.hi);
    let (x0, y0) = to_px((lo, lo));
    let (x1, y1) = to_px((hi_x, hi_y));
    axes(svg, (x0, y0), (x1, y1));
    let ticks = ((hi_y - lo) * 2.0).round() as usize;
    for t in 0..=ticks {
        let v = lo + 0.5 * t as f64;
        let (px, py) = to_px((v, v));
        if v <= hi_x {
            let at = (px, y0 + 16.0);
            text(svg, at, "middle", 12, "black", &format!("{v:.1}"));
        }
        y_tick(svg, (x0, py), v);
    }
    let component_1 = lang.pick("component 1", "第 1 个分量");
    note(svg, ((x0 + x1) / 2.0, y0 + 36.0), component_1);
    let mid = (y0 + y1) / 2.0;
    let component_2 = lang.pick("component 2", "第 2 个分量");
    vertical_text(svg, (24.0, mid), 12, GREY, component_2);
}

/// The query's direction, dashed, through the origin to the plane's edge.
fn query_direction(svg: &mut String, plane: &Plane, to_px: &ToPx) {
    let ((hi_x, hi_y), q_hat) = (plane.hi, plane.q_hat);
    let reach = (hi_x / q_hat.0).min(hi_y / q_hat.1);
    let edge = to_px((q_hat.0 * reach, q_hat.1 * reach));
    Tag::new("line")
        .ends(to_px((0.0, 0.0)), edge)
        .set("stroke", QUERY)
        .set("stroke-dasharray", "5 4")
        .set("stroke-opacity", "0.6")
        .close(svg);
}

/// The keys as arrows from the origin, labelled at their tips, from the highest tip down; a label
/// that would overlap one above it moves down.
fn key_arrows(svg: &mut String, plane: &Plane, to_px: &ToPx) {
    let (keys, origin) = (&plane.keys, to_px((0.0, 0.0)));
    let mut placed: Vec<(f64, f64)> = vec![];
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| to_px(keys[a]).1.total_cmp(&to_px(keys[b]).1));
    for &i in &order {
        let tip = to_px(keys[i]);
        let colour = if i == plane.shown { WEIGHT } else { SCORE };
        arrow(svg, origin, tip, colour, 1.8, (10.0, 4.5));
        let mut at = (tip.0 + 8.0, tip.1 - 4.0);
        while placed
            .iter()
            .any(|p| (p.0 - at.0).abs() < 90.0 && (p.1 - at.1).abs() < 15.0)
        {
            at.1 += 15.0;
        }
        placed.push(at);
        let label = format!("k⁽{}⁾ {}", superscript(i + 1), TOKENS[i]);
        text(svg, at, "start", 12, colour, &label);
    }
}

/// The shown key's shadow on the query's direction: the drop from its tip with a right angle at
/// its foot, and the shadow itself, drawn beside the query's line with its length.
fn shadow(svg: &mut String, plane: &Plane, to_px: &ToPx) {
    let (q_hat, t) = (plane.q_hat, plane.shadows[plane.shown]);
    let foot = to_px((q_hat.0 * t, q_hat.1 * t));
    let tip = to_px(plane.keys[plane.shown]);
    let origin = to_px((0.0, 0.0));
    Tag::new("line")
        .ends(tip, foot)
        .set("stroke", WEIGHT)
        .set("stroke-width", "1.5")
        .set("stroke-dasharray", "4 3")
        .close(svg);
    right_angle(svg, foot, tip, origin);
    // On the side of the query's line away from the keys: the normal (q̂₂, −q̂₁) in the plane is
    // (q̂₂, q̂₁) on screen, whose y grows downwards.
    let off = (-q_hat.1 * 12.0, -q_hat.0 * 12.0);
    let off = if (tip.0 - foot.0) * off.0 + (tip.1 - foot.1) * off.1 > 0.0 {
        (-off.0, -off.1)
    } else {
        off
    };
    let (a, b) = (
        (origin.0 + off.0, origin.1 + off.1),
        (foot.0 + off.0, foot.1 + off.1),
    );
    Tag::new("line")
        .ends(a, b)
        .set("stroke", WEIGHT)
        .set("stroke-width", "4")
        .close(svg);
    let at = (b.0 - 6.0, b.1 + 4.0);
    text(svg, at, "end", 12, WEIGHT, &format!("{t:.4}"));
}

/// The right angle at `foot` between the drop up to `tip` and the line back to `origin`.
fn right_angle(svg: &mut String, foot: (f64, f64), tip: (f64, f64), origin: (f64, f64)) {
    let unit = |(x, y): (f64, f64)| {
        let n = x.hypot(y).max(1e-9);
        (x / n * 7.0, y / n * 7.0)
    };
    let up = unit((tip.0 - foot.0, tip.1 - foot.1));
    let back = unit((origin.0 - foot.0, origin.1 - foot.1));
    let corner = [
        (foot.0 + up.0, foot.1 + up.1),
        (foot.0 + up.0 + back.0, foot.1 + up.1 + back.1),
        (foot.0 + back.0, foot.1 + back.1),
    ];
    Tag::new("polyline")
        .set("points", points(&corner))
        .set("fill", "none")
        .set("stroke", WEIGHT)
        .close(svg);
}

/// The table's left edge and its heading's baseline.
const TABLE: (f64, f64) = (390.0, 76.0);

/// The table beside the plane: every key's shadow and score, the shown key's row framed, and
/// |q⁽²⁾| under it. Returns the baseline of that last line.
fn score_table(lang: Lang, svg: &mut String, plane: &Plane) -> f64 {
    let (tx, ty) = TABLE;
    let heading = lang.pick("score = shadow × |q⁽²⁾|", "得分 = 影长 × |q⁽²⁾|");
    text(svg, (tx + 130.0, ty), "middle", 13, "black", heading);
    // Each row's three columns, right-aligned so that the numbers' decimals line up.
    let row = |svg: &mut String, y: f64, ink: &str, words: [&str; 3]| {
        for (x, word) in [80.0, 170.0, 260.0].into_iter().zip(words) {
            text(svg, (tx + x, y), "end", 12, ink, word);
        }
    };
    let heads = [lang.pick("key", "键"), lang.pick("shadow", "影长"), "ω₂ᵢ"];
    row(svg, ty + 24.0, GREY, heads);
    for (i, token) in TOKENS.iter().enumerate() {
        let y = ty + 50.0 + 24.0 * i as f64;
        if i == plane.shown {
            frame(svg, (tx - 6.0, y - 16.0), (276.0, 22.0), WEIGHT, "#eef8ee");
        }
        let shadow = format!("{:.4}", plane.shadows[i]);
        let score = format!("{:.4}", plane.walk.attn_scores_2[i]);
        row(svg, y, "black", [token, &shadow, &score]);
    }
    let y = ty + 50.0 + 24.0 * TOKENS.len() as f64 + 10.0;
    let q_len = format!("|q⁽²⁾| = {:.4}", plane.q_len);
    text(svg, (tx + 260.0, y), "end", 12, "black", &q_len);
    y
}

/// What the table shows, in four grey lines below it, the first 40 px under `y`.
fn table_notes(lang: Lang, svg: &mut String, y: f64) {
    let notes = [
        lang.pick(
            "The shadow of k⁽ⁱ⁾ is how far it reaches",
            "k⁽ⁱ⁾ 的影长是它沿查询方向",
        ),
        lang.pick(
            "along the query's direction (dashed).",
            "（虚线）伸出的距离。",
        ),
        lang.pick(
            "A key that points the query's way",
            "与查询方向一致、又长的键，",
        ),
        lang.pick("and is long scores high.", "得分就高。"),
    ];
    for (n, line) in notes.iter().enumerate() {
        let at = (TABLE.0 - 6.0, y + 40.0 + 18.0 * n as f64);
        text(svg, at, "start", 12, GREY, line);
    }
}

/// `s2_scaling.svg`: the mean largest softmax weight of six keys against d_k (log scale), for the
/// unscaled scores and for the scores divided by √d_k ([`mean_largest_weights`]).
fn scaling(lang: Lang, seeds: BookSeeds) -> Figure {
    let points: Vec<(f64, (f64, f64))> = SCALING_D_K
        .iter()
        .map(|&d_k| {
            let weights = mean_largest_weights(seeds.seed_123, d_k, SCALING_DRAWS);
            (d_k as f64, weights)
        })
        .collect();
    let curve = |name, colour, pick: fn((f64, f64)) -> f64| Series {
        name,
        colour,
        points: points.iter().map(|&(d_k, w)| (d_k, pick(w))).collect(),
    };
    let series = [
        curve(
            lang.pick("softmax(q·k), unscaled", "softmax(q·k)，不缩放"),
            RED,
            |(unscaled, _)| unscaled,
        ),
        curve(
            lang.pick("softmax(q·k / √d_k), scaled", "softmax(q·k / √d_k)，缩放"),
            SCORE,
            |(_, scaled)| scaled,
        ),
    ];
    let (last, (u, s)) = points[points.len() - 1];
    let footer = match lang {
        Lang::En => format!(
            "mean of {SCALING_DRAWS} draws of Scaling::new per point; at d_k = {last}: {u:.2} unscaled, {s:.2} scaled"
        ),
        Lang::ZhCn => format!(
            "每个点是 Scaling::new 的 {SCALING_DRAWS} 次抽样的均值；d_k = {last} 时：不缩放 {u:.2}，缩放 {s:.2}"
        ),
    };
    let chart = LineChart {
        title: lang.pick(
            "Stage 2: the largest of six softmax weights, as d_k grows",
            "第 2 阶段：d_k 增大时，六个 softmax 权重中的最大者",
        ),
        style: POINTS,
        x: Axis {
            name: lang.pick(
                "d_k, the size of the query and keys (log scale)",
                "d_k：查询和键的维数（对数刻度）",
            ),
            ends: (points[0].0, last),
            scale: Scale::Log2,
            ticks: points
                .iter()
                .map(|&(d_k, _)| (d_k, d_k.to_string()))
                .collect(),
        },
        y: Axis {
            name: lang.pick("mean largest weight", "最大权重的均值"),
            ends: (0.0, 1.0),
            scale: Scale::Linear,
            ticks: (0..=5)
                .map(|k| f64::from(k) * 0.2)
                .map(|v| (v, format!("{v:.1}")))
                .collect(),
        },
        series: &series,
        // Six equal scores: every weight 1/6.
        levels: vec![(
            1.0 / 6.0,
            lang.pick("1/6: six equal weights", "1/6：六个权重相等"),
        )],
        footer: Some(&footer),
    };
    Figure::new(lang, "s2_scaling.svg", chart.draw(lang))
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    Ok(vec![keys_plane(lang, seeds), scaling(lang, seeds)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shadow_times_the_querys_length_is_the_printed_score() {
        let svg = &figures(Lang::En).unwrap()[0].svg;
        let walk = WalkThrough::new(&inputs().view(), &mut Generator::manual_seed(123), D_OUT);
        // The chapter prints the scores ω₂ᵢ; the picture shows the shadow of k⁽¹⁾ (Your), the key
        // furthest from the query's line, and its score 1.2705.
        for score in ["1.2705", "1.8524", "1.8111", "1.0795", "0.5577", "1.5440"] {
            assert!(svg.contains(&format!(">{score}</text>")), "{score}");
        }
        assert!(svg.contains(">k⁽¹⁾ Your</text>") && svg.contains("fill=\"#2ca02c\">k⁽¹⁾ Your<"));
        let number = |prefix: &str| -> f64 {
            let at = svg.find(prefix).unwrap() + prefix.len();
            svg[at..at + svg[at..].find('<').unwrap()].parse().unwrap()
        };
        let q_len = number("|q⁽²⁾| = ");
        let shadow = {
            let rows = svg.split(">Your</text>").nth(1).unwrap();
            let at = rows.find('>').unwrap() + 1;
            rows[at..at + rows[at..].find('<').unwrap()]
                .parse::<f64>()
                .unwrap()
        };
        assert!((shadow * q_len - 1.2705).abs() < 2e-4, "{shadow} × {q_len}");
        assert!((f64::from(walk.attn_scores_2[0]) - 1.2705).abs() < 5e-5);
        // The shadow drawn beside the query's line is labelled with the table's length.
        assert_eq!(svg.matches(&format!(">{shadow:.4}</text>")).count(), 2);
        // Seven arrows, each a line and a head.
        assert_eq!(svg.matches("<polygon").count(), 7);
    }

    #[test]
    fn without_the_scale_softmax_picks_one_key_and_with_it_stays_spread() {
        let at = |d_k| mean_largest_weights(123, d_k, SCALING_DRAWS);
        let (u2, s2) = at(2);
        let (u1024, s1024) = at(1024);
        assert!(u1024 > 0.9, "unscaled at 1024: {u1024}");
        assert!(u2 < 0.5, "unscaled at 2: {u2}");
        assert!(s1024 < 0.5, "scaled at 1024: {s1024}");
        assert!(
            (s1024 - s2).abs() < 0.05,
            "scaled: {s2} at 2, {s1024} at 1024"
        );
        // The unscaled curve only rises.
        let unscaled: Vec<f64> = SCALING_D_K.iter().map(|&d| at(d).0).collect();
        assert!(unscaled.windows(2).all(|w| w[1] > w[0]), "{unscaled:?}");
    }
}
