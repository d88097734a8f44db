//! The pictures of stage 3 (§3.5), drawn from the crate's own numbers: the two routes of §3.5.1 from
//! the scores to the causal weights (`s3_masking.svg`), and §3.5.2's dropout mask applied to those
//! weights (`s3_dropout.svg`).

use ndarray::Array2;

use super::colours::blue;
use super::draw::{
    GREEN, GREY, ORANGE, PURPLE, RED, Shade, Tag, arrow, bold, footer, legend_label, matrix,
    open_svg, rect, text, weight,
};
use super::finish;
use super::{Figure, s3_weights};
use crate::lang::Lang;
use crate::rng::torch::Generator;
use crate::s1_simple::{TOKENS, inputs, softmax};
use crate::s2_trainable::{D_OUT, SelfAttentionV2};
use crate::s3_causal::{CausalMask, mask_future, renormalise, tril_ones};
use crate::{BookSeeds, Error};

/// Side of one cell of a (T, T) matrix, in pixels: room for `-0.07` in 12 px type.
const CELL: f64 = 34.0;
/// Room on the left for the row labels.
const LEFT: f64 = 60.0;
/// Between two panels: room for an arrow or an operator.
const GAP: f64 = 42.0;
/// The picture's width: three panels of six cells.
const WIDTH: f64 = LEFT + 3.0 * 6.0 * CELL + 2.0 * GAP + 4.0;
/// From the top of a row of panels to the top of its cells: its heading, the panels' titles and
/// the slanted column labels.
const HEAD: f64 = 90.0;
/// The fill of a score set to −∞.
const MINUS_INF: &str = "#444";
/// The fill of a cell that is 0 because the causal mask removed it.
const FUTURE: &str = "#e4e4e4";
/// The fill of a weight that dropout removed.
const DROPPED: &str = "#fde0dd";
/// The fill of a weight that dropout kept (and doubled).
const KEPT: &str = "#d9f0d3";

/// `colour` (`#rrggbb`) mixed with white: `t` = 0 white, 1 the colour itself.
fn tint(colour: &str, t: f64) -> String {
    let channel = |k: usize| u8::from_str_radix(&colour[1 + 2 * k..3 + 2 * k], 16).unwrap_or(0);
    let mix = |c: u8| (255.0 - (255.0 - f64::from(c)) * t.clamp(0.0, 1.0)).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(channel(0)),
        mix(channel(1)),
        mix(channel(2))
    )
}

/// A cell of one score, on a scale of its own: purple for a positive score, orange for a negative
/// one, paler towards 0, where `top` is the largest score in size. Its value printed to two
/// decimals.
fn score(s: f32, top: f64) -> Shade {
    let t = f64::from(s.abs()) / top;
    let colour = if s < 0.0 { ORANGE } else { PURPLE };
    Shade {
        fill: tint(colour, t),
        ink: if t > 0.6 { "white" } else { "black" },
        word: format!("{s:.2}"),
    }
}

/// The left edge of panel `k` (0, 1, 2).
fn panel_left(k: usize) -> f64 {
    LEFT + k as f64 * (6.0 * CELL + GAP)
}

/// A row of three (T, T) panels whose cells start at `top`: the token labels down the left and,
/// slanted, along the top of each panel, each panel's title above, and `shade(k, i, j)` for cell
/// (i, j) of panel k.
fn panels(
    svg: &mut String,
    top: f64,
    titles: [&str; 3],
    shade: impl Fn(usize, usize, usize) -> Shade,
) {
    let n = TOKENS.len();
    for (i, token) in TOKENS.iter().enumerate() {
        let y = top + CELL * (i as f64 + 0.5) + 4.5;
        text(svg, (LEFT - 6.0, y), "end", 13, "black", token);
    }
    for (k, title) in titles.into_iter().enumerate() {
        let left = panel_left(k);
        bold(svg, (left + 3.0 * CELL, top - 58.0), "middle", title);
        for (j, token) in TOKENS.iter().enumerate() {
            let (x, y) = (left + CELL * (j as f64 + 0.5), top - 6.0);
            let tag = Tag::new("text").at((x, y)).set("font-size", 12);
            tag.rotated(-45, (x, y)).holding(svg, token);
        }
        matrix(svg, (left, top), (n, n), (CELL, CELL), |i, j| {
            shade(k, i, j)
        });
    }
}

/// One entry of a legend at (x, y): a swatch filled `fill` with `word` in it, then `label`.
fn key(svg: &mut String, (x, y): (f64, f64), fill: &str, (ink, word): (&str, &str), label: &str) {
    rect(svg, (x, y), (CELL, 22.0), fill, "white");
    rect(svg, (x, y), (CELL, 22.0), "none", "#999");
    text(svg, (x + CELL / 2.0, y + 15.5), "middle", 12, ink, word);
    legend_label(svg, (x + CELL, y + 15.5), label);
}

/// One entry of a legend: a swatch's fill, the ink and word printed in it, and what it means.
type Entry<'a> = (String, (&'a str, &'a str), &'a str);

/// The foot of a picture `height` high: a legend of `entries` in a row, `pitch` px apart, and a note
/// under it that says how to read the cells.
fn legend_and_note(svg: &mut String, height: f64, (entries, pitch): (&[Entry], f64), words: &str) {
    let y = height - 62.0;
    for (k, (fill, word, label)) in entries.iter().enumerate() {
        key(svg, (8.0 + pitch * k as f64, y), fill, *word, label);
    }
    footer(svg, (WIDTH, height), words);
}

/// The (T, T) matrices of §3.5.1's two routes, each from the scores to the causal weights: route 1
/// `[scores, weights with the future zeroed, renormalised]`, route 2 `[scores, scores with −∞ in
/// the future, their softmax]`. The scores are stage 2's `SelfAttentionV2` at seed 789 on the six
/// inputs, as in the chapter.
pub(super) fn masking_routes(seeds: BookSeeds) -> Result<[[Array2<f32>; 3]; 2], Error> {
    let inputs = inputs(); // (T, C)
    let mut rng = Generator::manual_seed(seeds.seed_789);
    let sa_v2 = SelfAttentionV2::new(&mut rng, inputs.ncols(), D_OUT, false);
    let scores = sa_v2.scores(&inputs.view()); // (T, T)
    let d_k = sa_v2.w_key.weight.nrows() as f32;
    let n = scores.nrows();
    let zeroed = softmax(&(&scores / d_k.sqrt())) * tril_ones(n); // (T, T)
    let route_1 = [scores.clone(), zeroed.clone(), renormalise(&zeroed)];
    let masked = mask_future(scores.clone(), &CausalMask::new(n).for_tokens(n)?); // (T, T)
    let weights = softmax(&(&masked / d_k.sqrt())); // (T, T)
    Ok([route_1, [scores, masked, weights]])
}

/// `s3_masking.svg`: both routes of §3.5.1 as two rows of panels, scores → masked → weights.
fn masking(lang: Lang, seeds: BookSeeds) -> Result<Figure, Error> {
    let routes = masking_routes(seeds)?;
    let top_score = routes[0][0].fold(0f64, |m, &s| m.max(f64::from(s.abs())));
    let height = 36.0 + 2.0 * (HEAD + 6.0 * CELL + 24.0) + 70.0;
    let mut svg = open_svg(
        lang,
        WIDTH,
        height,
        lang.pick(
            "Two ways to hide the future, one result (seed 789)",
            "隐藏未来的两种方法，同一个结果（种子 789）",
        ),
    );
    for (r, route) in routes.iter().enumerate() {
        let block = 36.0 + r as f64 * (HEAD + 6.0 * CELL + 24.0);
        let top = block + HEAD;
        let (heading, titles) = route_words(lang, r);
        bold(&mut svg, (8.0, block + 14.0), "start", heading);
        for k in 0..2 {
            let x = panel_left(k) + 6.0 * CELL;
            let y = top - 62.0;
            arrow(
                &mut svg,
                (x + 6.0, y),
                (x + GAP - 6.0, y),
                GREY,
                2.0,
                (9.0, 5.0),
            );
        }
        panels(&mut svg, top, titles, |k, i, j| {
            route_shade(r, k, (i, j), route[k][(i, j)], top_score)
        });
        if r == 0 {
            row_sums(&mut svg, &route[1], top);
        }
    }
    let words = lang.pick(
        "row: the query token · column: the key token it attends to · Σ: the row's sum",
        "行：查询词元 · 列：它所关注的键词元 · Σ：该行之和",
    );
    legend_and_note(&mut svg, height, (&masking_legend(lang), 150.0), words);
    Ok(finish(lang, "s3_masking.svg", svg))
}

/// Route `r`'s heading, and the titles of its three panels.
fn route_words(lang: Lang, r: usize) -> (&'static str, [&'static str; 3]) {
    let headings = [
        lang.pick(
            "Route 1: softmax, then zero the future and renormalise",
            "方法 1：先 softmax，再把未来置零并重新归一化",
        ),
        lang.pick(
            "Route 2: −∞ in the future, then softmax",
            "方法 2：先在未来处填入 −∞，再 softmax",
        ),
    ];
    let scores = lang.pick("scores ω", "分数 ω");
    let titles = [
        [
            scores,
            lang.pick("softmax, future zeroed", "softmax 后未来置零"),
            lang.pick("÷ row sum = weights", "除以行和 = 权重"),
        ],
        [
            scores,
            lang.pick("−∞ above the diagonal", "对角线上方填 −∞"),
            lang.pick("softmax = weights", "softmax = 权重"),
        ],
    ];
    (headings[r], titles[r])
}

/// Cell (i, j) of panel `k` of route `r`, holding `value`: a score, a −∞, a zeroed weight (red
/// where route 1 zeroes it) or a weight.
fn route_shade(r: usize, k: usize, (i, j): (usize, usize), value: f32, top_score: f64) -> Shade {
    match (r, k) {
        (_, 0) => score(value, top_score),
        (1, 1) if j > i => Shade::new(MINUS_INF, "white", "−∞"),
        (1, 1) => score(value, top_score),
        (0, 1) if j > i => Shade::new(FUTURE, RED, "0"),
        _ if j > i => Shade::new(FUTURE, GREY, "0"),
        _ => weight(value, 1.0),
    }
}

/// Route 1's zeroed rows no longer sum to 1: their sums, beside the panel whose cells start at
/// `top`.
fn row_sums(svg: &mut String, zeroed: &Array2<f32>, top: f64) {
    let x = panel_left(1) + 6.0 * CELL + GAP / 2.0;
    text(svg, (x, top - 6.0), "middle", 12, GREY, "Σ");
    for (i, row) in zeroed.rows().into_iter().enumerate() {
        let y = top + CELL * (i as f64 + 0.5) + 4.5;
        let sum = format!("{:.2}", row.sum());
        text(svg, (x, y), "middle", 12, GREY, &sum);
    }
}

/// The masking picture's legend: the scores' two colours, the weights', and the −∞ and zeroed
/// cells.
fn masking_legend(lang: Lang) -> [Entry<'static>; 5] {
    [
        (
            tint(PURPLE, 0.7),
            ("white", ""),
            lang.pick("score > 0", "分数 > 0"),
        ),
        (
            tint(ORANGE, 0.7),
            ("white", ""),
            lang.pick("score < 0", "分数 < 0"),
        ),
        (
            blue(0.4),
            ("black", ""),
            lang.pick("weight, 0 to 1", "权重，0 到 1"),
        ),
        (
            MINUS_INF.to_string(),
            ("white", "−∞"),
            lang.pick("masked score", "被遮盖的分数"),
        ),
        (
            FUTURE.to_string(),
            (RED, "0"),
            lang.pick("zeroed weight", "置零的权重"),
        ),
    ]
}

/// §3.5.2's dropout mask for a (T, T) matrix: `nn.Dropout(0.5)` after `torch.manual_seed(123)` on a
/// matrix of ones, so 2 where a weight is kept (and doubled), 0 where it is dropped.
pub(super) fn dropout_mask(seeds: BookSeeds) -> Array2<f32> {
    let n = TOKENS.len();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    rng.dropout(&Array2::ones((n, n)), 0.5) // (T, T)
}

/// `s3_dropout.svg`: the causal weights, the dropout mask, and the weights it leaves.
fn dropout(lang: Lang, seeds: BookSeeds) -> Result<Figure, Error> {
    let weights = s3_weights(seeds, 0.0)?; // (T, T)
    let mask = dropout_mask(seeds); // (T, T)
    let dropped = s3_weights(seeds, 0.5)?; // (T, T)
    let top_of_scale = dropped.fold(1f64, |m, &w| m.max(f64::from(w)));
    let top = 36.0 + HEAD - 16.0;
    let height = top + 6.0 * CELL + 80.0;
    let mut svg = open_svg(
        lang,
        WIDTH,
        height,
        lang.pick(
            "Dropout on the causal weights: p = 0.5 after manual_seed(123)",
            "在因果权重上应用 dropout：manual_seed(123) 之后，p = 0.5",
        ),
    );
    let titles = [
        lang.pick("causal weights", "因果权重"),
        lang.pick("dropout mask", "dropout 掩码"),
        lang.pick("dropped weights", "dropout 后的权重"),
    ];
    for (k, operator) in ["×", "="].into_iter().enumerate() {
        let x = panel_left(k) + 6.0 * CELL + GAP / 2.0;
        text(
            &mut svg,
            (x, top + 3.0 * CELL + 8.0),
            "middle",
            24,
            GREY,
            operator,
        );
    }
    panels(&mut svg, top, titles, |k, i, j| {
        let is_kept = mask[(i, j)] > 0.0;
        match k {
            1 if is_kept => Shade::new(KEPT, GREEN, "×2"),
            1 => Shade::new(DROPPED, RED, "0"),
            _ if j > i => Shade::new(FUTURE, GREY, "0"),
            0 => weight(weights[(i, j)], top_of_scale),
            _ if is_kept => weight(dropped[(i, j)], top_of_scale),
            _ => Shade::new(DROPPED, RED, "0"),
        }
    });
    let scale = format!("{} 0 → {top_of_scale:.2}", lang.pick("weight", "权重"));
    let legend = dropout_legend(lang, &scale);
    let words = lang.pick(
        "each weight is kept with probability 1 − p = 0.5 and then multiplied by 1/(1 − p) = 2",
        "每个权重以 1 − p = 0.5 的概率保留，保留后乘以 1/(1 − p) = 2",
    );
    legend_and_note(&mut svg, height, (&legend, 185.0), words);
    Ok(finish(lang, "s3_dropout.svg", svg))
}

/// The dropout picture's legend: the weights' scale (`scale` says its range), the kept, dropped
/// and future cells.
fn dropout_legend<'a>(lang: Lang, scale: &'a str) -> [Entry<'a>; 4] {
    [
        (blue(0.4), ("black", ""), scale),
        (
            KEPT.to_string(),
            (GREEN, "×2"),
            lang.pick("kept, doubled", "保留并翻倍"),
        ),
        (
            DROPPED.to_string(),
            (RED, "0"),
            lang.pick("dropped", "被丢弃"),
        ),
        (
            FUTURE.to_string(),
            (GREY, "0"),
            lang.pick("future (masked)", "未来（已遮盖）"),
        ),
    ]
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    Ok(vec![masking(lang, seeds)?, dropout(lang, seeds)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3_causal::allclose;

    /// How many cells of `svg` are filled `fill` and print `word`.
    fn cells(svg: &str, fill: &str, word: &str) -> usize {
        let lines: Vec<&str> = svg.lines().collect();
        lines
            .windows(2)
            .filter(|w| w[0].contains(&format!("fill=\"{fill}\" stroke=\"white\"")))
            .filter(|w| w[1].ends_with(&format!(">{word}</text>")))
            .count()
    }

    #[test]
    fn both_routes_end_in_the_same_weights_and_the_picture_marks_the_masked_cells() {
        let [route_1, route_2] = masking_routes(BookSeeds::default()).unwrap();
        assert!(allclose(&route_1[2], &route_2[2]));
        let svg = masking(Lang::En, BookSeeds::default()).unwrap().svg;
        // 15 of the 36 cells lie above the diagonal: −∞ in route 2, a red 0 in route 1.
        assert_eq!(cells(&svg, MINUS_INF, "−∞"), 15);
        assert_eq!(cells(&svg, FUTURE, "0"), 15 * 3);
        assert_eq!(
            svg.matches(&format!("fill=\"{RED}\">0</text>")).count(),
            15 + 1
        );
        // Both routes print the same 21 weights: each appears as often in one as in the other.
        for i in 0..6 {
            for j in 0..=i {
                let word = format!(">{:.2}</text>", route_1[2][(i, j)]);
                assert_eq!(format!(">{:.2}</text>", route_2[2][(i, j)]), word);
            }
        }
        // Route 1's zeroed rows lose weight: only the last row still sums to 1.
        let sums: Vec<f32> = route_1[1].rows().into_iter().map(|r| r.sum()).collect();
        assert!(sums[..5].iter().all(|&s| s < 0.99), "{sums:?}");
        assert!((sums[5] - 1.0).abs() < 1e-6);
    }

    #[test]
    fn the_dropout_picture_doubles_what_the_mask_keeps_and_zeroes_the_rest() {
        let seeds = BookSeeds::default();
        let (mask, weights) = (dropout_mask(seeds), s3_weights(seeds, 0.0).unwrap());
        let dropped = s3_weights(seeds, 0.5).unwrap();
        assert_eq!(dropped, &weights * &mask);
        let svg = dropout(Lang::En, seeds).unwrap().svg;
        let kept = mask.iter().filter(|&&m| m == 2.0).count();
        assert_eq!(cells(&svg, KEPT, "×2"), kept);
        // Dropped: every 0 of the mask, and every past weight it removed.
        let removed = mask
            .indexed_iter()
            .filter(|&((i, j), &m)| j <= i && m == 0.0)
            .count();
        assert_eq!(cells(&svg, DROPPED, "0"), 36 - kept + removed);
        // The chapter's second row loses both of its weights.
        assert_eq!(dropped.row(1).sum(), 0.0);
        assert!(weights.row(1).sum() > 0.99);
    }
}
