//! The pictures of stage 2 (§3.4), drawn from the crate's own numbers: the query q⁽²⁾ and the six
//! keys in the plane, a score as a projection (`s2_keys_plane.svg`), and how the largest softmax
//! weight grows with d_k, with and without the 1/√d_k scale (`s2_scaling.svg`).

use std::fmt::Write;

use super::Figure;
use super::draw::{GREY, RED, arrow, frame, note, text, vertical_text};
use super::finish;
use super::stage1::{QUERY, SCORE, WEIGHT, superscript};
use crate::lang::Lang;
use crate::plot::open_svg;
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

/// The axes of a chart, left and bottom, from their corner (x0, y0) up to y1 and across to x1.
fn axes(svg: &mut String, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
    let _ = writeln!(
        svg,
        "<path d=\"M{x0:.1},{y1:.1} V{y0:.1} H{x1:.1}\" fill=\"none\" stroke=\"black\"/>"
    );
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

/// `s2_keys_plane.svg`: with d_out = 2, the query q⁽²⁾ and the six keys as arrows in the plane
/// (the walk-through's W_q, W_k at seed 123), and one score ω₂ᵢ = q⁽²⁾ · k⁽ⁱ⁾ as the shadow of
/// k⁽ⁱ⁾ on the query's direction times |q⁽²⁾|; a table beside it gives every key's shadow and
/// score.
fn keys_plane(lang: Lang, seeds: BookSeeds) -> Figure {
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
    let shadows: Vec<f64> = keys.iter().map(|k| k.0 * q_hat.0 + k.1 * q_hat.1).collect();

    // The key drawn with its shadow: the one furthest from the query's line, where the drop from
    // its tip to the line shows best.
    let off_line = |k: &(f64, f64)| (k.0 * q_hat.1 - k.1 * q_hat.0).abs();
    let shown = (0..keys.len())
        .max_by(|&a, &b| off_line(&keys[a]).total_cmp(&off_line(&keys[b])))
        .expect("six keys");

    let (width, height) = (740.0, 500.0);
    let mut svg = open_svg(
        lang,
        width,
        height,
        lang.pick(
            "Stage 2: the query q⁽²⁾ and the six keys k⁽ⁱ⁾ in the plane (d_out = 2)",
            "第 2 阶段：平面上的查询 q⁽²⁾ 与六个键 k⁽ⁱ⁾（d_out = 2）",
        ),
    );
    // The plane, on the same scale on both axes: from 0 (or below, if a coordinate is negative) to
    // the largest coordinate rounded up to a half, with room on the right for the labels.
    let half_up = |v: f64| (v * 2.0).ceil() / 2.0;
    let half_down = |v: f64| (v * 2.0).floor() / 2.0;
    let all = || keys.iter().chain([&q]);
    let lo = half_down(all().fold(0f64, |m, k| m.min(k.0).min(k.1)));
    let hi_x = half_up(all().fold(0f64, |m, k| m.max(k.0))) + 0.25;
    let hi_y = half_up(all().fold(0f64, |m, k| m.max(k.1)));
    let (left, bottom) = (110.0, height - 56.0);
    let px_per = 390.0 / (hi_y - lo);
    let to_px = |(a, b): (f64, f64)| (left + (a - lo) * px_per, bottom - (b - lo) * px_per);

    // Axes with ticks every 0.5.
    let (x0, y0) = to_px((lo, lo));
    let (x1, y1) = to_px((hi_x, hi_y));
    axes(&mut svg, (x0, y0), (x1, y1));
    let ticks = ((hi_y - lo) * 2.0).round() as usize;
    for t in 0..=ticks {
        let v = lo + 0.5 * t as f64;
        let (px, py) = to_px((v, v));
        if v <= hi_x {
            text(
                &mut svg,
                (px, y0 + 16.0),
                "middle",
                12,
                "black",
                &format!("{v:.1}"),
            );
        }
        y_tick(&mut svg, (x0, py), v);
    }
    let component_1 = lang.pick("component 1", "第 1 个分量");
    note(&mut svg, ((x0 + x1) / 2.0, y0 + 36.0), component_1);
    let mid = (y0 + y1) / 2.0;
    let component_2 = lang.pick("component 2", "第 2 个分量");
    vertical_text(&mut svg, (24.0, mid), 12, GREY, component_2);

    // The query's direction, through the origin to the plane's edge.
    let origin = to_px((0.0, 0.0));
    let reach = (hi_x / q_hat.0).min(hi_y / q_hat.1);
    let edge = to_px((q_hat.0 * reach, q_hat.1 * reach));
    let _ = writeln!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{QUERY}\" \
         stroke-dasharray=\"5 4\" stroke-opacity=\"0.6\"/>",
        origin.0, origin.1, edge.0, edge.1
    );

    // The keys, labelled at their tips; a label that would overlap one above it moves down.
    let mut placed: Vec<(f64, f64)> = vec![];
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| to_px(keys[a]).1.total_cmp(&to_px(keys[b]).1));
    for &i in &order {
        let tip = to_px(keys[i]);
        let colour = if i == shown { WEIGHT } else { SCORE };
        arrow(&mut svg, origin, tip, colour, 1.8, (10.0, 4.5));
        let mut at = (tip.0 + 8.0, tip.1 - 4.0);
        while placed
            .iter()
            .any(|p| (p.0 - at.0).abs() < 90.0 && (p.1 - at.1).abs() < 15.0)
        {
            at.1 += 15.0;
        }
        placed.push(at);
        text(
            &mut svg,
            (at.0, at.1),
            "start",
            12,
            colour,
            &format!("k⁽{}⁾ {}", superscript(i + 1), TOKENS[i]),
        );
    }
    let q_tip = to_px(q);
    arrow(&mut svg, origin, q_tip, QUERY, 3.0, (13.0, 5.85));
    text(
        &mut svg,
        (q_tip.0 - 10.0, q_tip.1 - 8.0),
        "end",
        13,
        QUERY,
        "q⁽²⁾",
    );

    // The shown key's shadow on the query's direction: the drop from its tip, and the shadow
    // itself, drawn beside the query's line.
    let k = keys[shown];
    let t = shadows[shown];
    let foot = to_px((q_hat.0 * t, q_hat.1 * t));
    let tip = to_px(k);
    let _ = writeln!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{WEIGHT}\" \
         stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>",
        tip.0, tip.1, foot.0, foot.1
    );
    // The right angle at the foot, on the origin's side.
    let unit = |(x, y): (f64, f64)| {
        let n = x.hypot(y).max(1e-9);
        (x / n * 7.0, y / n * 7.0)
    };
    let up = unit((tip.0 - foot.0, tip.1 - foot.1));
    let back = unit((origin.0 - foot.0, origin.1 - foot.1));
    let _ = writeln!(
        svg,
        "<polyline points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"none\" \
         stroke=\"{WEIGHT}\"/>",
        foot.0 + up.0,
        foot.1 + up.1,
        foot.0 + up.0 + back.0,
        foot.1 + up.1 + back.1,
        foot.0 + back.0,
        foot.1 + back.1
    );
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
    let _ = writeln!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{WEIGHT}\" \
         stroke-width=\"4\"/>",
        a.0, a.1, b.0, b.1
    );
    text(
        &mut svg,
        (b.0 - 6.0, b.1 + 4.0),
        "end",
        12,
        WEIGHT,
        &format!("{t:.4}"),
    );

    // The table: every key's shadow and score.
    let tx = 390.0;
    let ty = 76.0;
    text(
        &mut svg,
        (tx + 130.0, ty),
        "middle",
        13,
        "black",
        lang.pick("score = shadow × |q⁽²⁾|", "得分 = 影长 × |q⁽²⁾|"),
    );
    // Each row's three columns, right-aligned so that the numbers' decimals line up.
    let row = |svg: &mut String, y: f64, ink: &str, words: [&str; 3]| {
        for (x, word) in [80.0, 170.0, 260.0].into_iter().zip(words) {
            text(svg, (tx + x, y), "end", 12, ink, word);
        }
    };
    let heads = [lang.pick("key", "键"), lang.pick("shadow", "影长"), "ω₂ᵢ"];
    row(&mut svg, ty + 24.0, GREY, heads);
    for (i, token) in TOKENS.iter().enumerate() {
        let y = ty + 50.0 + 24.0 * i as f64;
        if i == shown {
            frame(
                &mut svg,
                (tx - 6.0, y - 16.0),
                (276.0, 22.0),
                WEIGHT,
                "#eef8ee",
            );
        }
        let shadow = format!("{:.4}", shadows[i]);
        let score = format!("{:.4}", walk.attn_scores_2[i]);
        row(&mut svg, y, "black", [token, &shadow, &score]);
    }
    let y = ty + 50.0 + 24.0 * TOKENS.len() as f64 + 10.0;
    text(
        &mut svg,
        (tx + 260.0, y),
        "end",
        12,
        "black",
        &format!("|q⁽²⁾| = {q_len:.4}"),
    );
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
        let at = (tx - 6.0, y + 40.0 + 18.0 * n as f64);
        text(&mut svg, at, "start", 12, GREY, line);
    }
    finish(lang, "s2_keys_plane.svg", svg)
}

/// `s2_scaling.svg`: the mean largest softmax weight of six keys against d_k (log scale), for the
/// unscaled scores and for the scores divided by √d_k ([`mean_largest_weights`]).
fn scaling(lang: Lang, seeds: BookSeeds) -> Figure {
    let points: Vec<(usize, (f64, f64))> = SCALING_D_K
        .iter()
        .map(|&d_k| {
            (
                d_k,
                mean_largest_weights(seeds.seed_123, d_k, SCALING_DRAWS),
            )
        })
        .collect();
    let (width, height) = (740.0, 420.0);
    let mut svg = open_svg(
        lang,
        width,
        height,
        lang.pick(
            "Stage 2: the largest of six softmax weights, as d_k grows",
            "第 2 阶段：d_k 增大时，六个 softmax 权重中的最大者",
        ),
    );
    let (left, right, top, bottom) = (80.0, 30.0, 44.0, 70.0);
    let log_lo = (SCALING_D_K[0] as f64).log2();
    let log_hi = (SCALING_D_K[SCALING_D_K.len() - 1] as f64).log2();
    let to_px = |d_k: usize, y: f64| {
        let x = ((d_k as f64).log2() - log_lo) / (log_hi - log_lo);
        (
            left + (width - left - right) * x,
            top + (height - top - bottom) * (1.0 - y),
        )
    };
    let (x0, y0) = to_px(SCALING_D_K[0], 0.0);
    let (x1, y1) = to_px(SCALING_D_K[SCALING_D_K.len() - 1], 1.0);
    axes(&mut svg, (x0, y0), (x1, y1));
    for &d_k in &SCALING_D_K {
        let (px, _) = to_px(d_k, 0.0);
        text(
            &mut svg,
            (px, y0 + 18.0),
            "middle",
            12,
            "black",
            &d_k.to_string(),
        );
    }
    for k in 0..=5 {
        let v = f64::from(k) * 0.2;
        let (_, py) = to_px(SCALING_D_K[0], v);
        y_tick(&mut svg, (x0, py), v);
        let _ = writeln!(
            svg,
            "<line x1=\"{x0:.1}\" y1=\"{py:.1}\" x2=\"{x1:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/>"
        );
    }
    text(
        &mut svg,
        ((x0 + x1) / 2.0, height - 30.0),
        "middle",
        13,
        "black",
        lang.pick(
            "d_k, the size of the query and keys (log scale)",
            "d_k：查询和键的维数（对数刻度）",
        ),
    );
    let mid = (y0 + y1) / 2.0;
    let y_label = lang.pick("mean largest weight", "最大权重的均值");
    vertical_text(&mut svg, (22.0, mid), 13, "black", y_label);
    // Six equal scores: every weight 1/6.
    let (_, sixth) = to_px(SCALING_D_K[0], 1.0 / 6.0);
    let _ = writeln!(
        svg,
        "<line x1=\"{x0:.1}\" y1=\"{sixth:.1}\" x2=\"{x1:.1}\" y2=\"{sixth:.1}\" stroke=\"{GREY}\" \
         stroke-dasharray=\"4 4\"/>"
    );
    text(
        &mut svg,
        (x1 - 4.0, sixth + 16.0),
        "end",
        12,
        GREY,
        lang.pick("1/6: six equal weights", "1/6：六个权重相等"),
    );
    let series = [
        (
            lang.pick("softmax(q·k), unscaled", "softmax(q·k)，不缩放"),
            RED,
            false,
        ),
        (
            lang.pick("softmax(q·k / √d_k), scaled", "softmax(q·k / √d_k)，缩放"),
            SCORE,
            true,
        ),
    ];
    for (n, (name, colour, scaled)) in series.iter().enumerate() {
        let at: Vec<(f64, f64)> = points
            .iter()
            .map(|&(d_k, (u, s))| to_px(d_k, if *scaled { s } else { u }))
            .collect();
        let path: Vec<String> = at.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>",
            path.join(" ")
        );
        for (x, y) in &at {
            let _ = writeln!(
                svg,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{colour}\"/>"
            );
        }
        let ly = top + 16.0 + 20.0 * n as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{colour}\" \
             stroke-width=\"3\"/>",
            x0 + 16.0,
            x0 + 40.0
        );
        text(&mut svg, (x0 + 46.0, ly + 4.0), "start", 12, "black", name);
    }
    let (last, (u, s)) = points[points.len() - 1];
    let words = match lang {
        Lang::En => format!(
            "mean of {SCALING_DRAWS} draws of Scaling::new per point; at d_k = {last}: {u:.2} unscaled, {s:.2} scaled"
        ),
        Lang::ZhCn => format!(
            "每个点是 Scaling::new 的 {SCALING_DRAWS} 次抽样的均值；d_k = {last} 时：不缩放 {u:.2}，缩放 {s:.2}"
        ),
    };
    note(&mut svg, (width / 2.0, height - 10.0), &words);
    finish(lang, "s2_scaling.svg", svg)
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
