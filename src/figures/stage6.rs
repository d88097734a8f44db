//! The pictures of stage 6, drawn from the crate's own numbers: the online softmax's walk over
//! "journey"'s six scores (`s6_online_walk.svg`), the tiles a causal tiled forward computes and
//! skips (`s6_tiles.svg`), and how far the online and the exact forms lie from stage 4's attention
//! as T grows (`s6_bits.svg`).

use super::chart::{Axis, LineChart, POINTS, Scale, Series};
use super::draw::{BLUE, GREY, ORANGE, bold, footer, frame, note, open_svg, polyline, rect, text};
use super::{Figure, finish};
use crate::lang::Lang;
use crate::s1_simple::TOKENS;
use crate::s6_flash::{
    Difference, KEYS_PER_STEP, OnlineStep, Tiles, exact_attention, journey_scores, naive_attention,
    online_softmax, random_head, tiled_attention,
};
use crate::{BookSeeds, Error};

/// The width of one key's cell in the walk.
const KEY_W: f64 = 110.0;
/// The left edge of the walk's first cell.
const WALK_LEFT: f64 = 30.0;

/// One step of the walk: a frame around its keys, each key's token and score, then m, ℓ and the
/// rescale after the step.
fn walk_step(svg: &mut String, lang: Lang, n: usize, step: &OnlineStep) {
    let left = WALK_LEFT + step.keys.start as f64 * KEY_W;
    let width = step.keys.len() as f64 * KEY_W;
    frame(svg, (left + 4.0, 44.0), (width - 8.0, 96.0), BLUE, "none");
    let heading = format!("{} {}", lang.pick("step", "第"), n + 1);
    let heading = match lang {
        Lang::En => heading,
        Lang::ZhCn => format!("{heading} 步"),
    };
    bold(svg, (left + width / 2.0, 62.0), "middle", &heading);
    for (j, &score) in step.keys.clone().zip(&step.scores) {
        let x = WALK_LEFT + (j as f64 + 0.5) * KEY_W;
        let fill = if score == step.m_new { ORANGE } else { "black" };
        text(svg, (x, 90.0), "middle", 13, "black", TOKENS[j]);
        text(svg, (x, 116.0), "middle", 14, fill, &format!("{score:.4}"));
    }
    let centre = left + width / 2.0;
    let lines = [
        format!("m = {:.4}", step.m_new),
        format!("ℓ = {:.4}", step.l_new),
        format!("e^(m_old − m_new) = {:.4}", step.rescale),
    ];
    for (row, line) in lines.iter().enumerate() {
        text(
            svg,
            (centre, 170.0 + 22.0 * row as f64),
            "middle",
            13,
            "black",
            line,
        );
    }
}

/// `s6_online_walk.svg`: the walk over "journey"'s scores two keys a step, with the running
/// maximum m (its score in orange where it is set), the running sum ℓ and each step's rescale.
fn online_walk(lang: Lang) -> Figure {
    let scores = journey_scores();
    let steps = online_softmax(&scores.view(), KEYS_PER_STEP);
    let width = 2.0 * WALK_LEFT + scores.len() as f64 * KEY_W;
    let size = (width, 270.0);
    let title = lang.pick(
        "Stage 6: the online softmax of \"journey\"'s scores, two keys a step",
        "第 6 阶段：“journey”的分数的在线 softmax，每步两个键",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    for (n, step) in steps.iter().enumerate() {
        walk_step(&mut svg, lang, n, step);
    }
    let words = lang.pick(
        "after each step: the largest score so far m (orange), ℓ = Σ e^(x − m), and what the old ℓ was multiplied by",
        "每步之后：迄今最大的分数 m（橙色），ℓ = Σ e^(x − m)，以及旧的 ℓ 所乘的因子",
    );
    footer(&mut svg, size, words);
    finish(lang, "s6_online_walk.svg", svg)
}

/// The tiles of [`tiles`]: the chapter's comparison at length.
const GRID: (usize, Tiles) = (256, Tiles { br: 64, bc: 64 });
/// The side of one tile in the picture.
const TILE: f64 = 70.0;
/// The grid's top-left corner.
const GRID_AT: (f64, f64) = (220.0, 70.0);
/// The picture's width and height.
const GRID_SIZE: (f64, f64) = (720.0, 420.0);

/// `s6_tiles.svg`: the query blocks × key tiles of a causal tiled forward at T = 256 with 64 × 64
/// tiles, the computed tiles blue (the diagonal's half masked inside the tile) and the skipped ones
/// grey, as `Tiles::visible_key_tiles` picks them.
fn tiles(lang: Lang) -> Figure {
    let (t, tiles) = GRID;
    let blocks: Vec<_> = tiles.query_blocks(t).collect();
    let columns = t.div_ceil(tiles.bc);
    let size = GRID_SIZE;
    let title = lang.pick(
        "Stage 6: the tiles of a causal pass, T = 256, Br = Bc = 64",
        "第 6 阶段：因果计算的分块，T = 256，Br = Bc = 64",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    for (r, rows) in blocks.iter().enumerate() {
        let computed = tiles.visible_key_tiles(rows).count();
        let y = GRID_AT.1 + r as f64 * TILE;
        let label = format!("{}–{}", rows.start, rows.end - 1);
        text(
            &mut svg,
            (GRID_AT.0 - 10.0, y + TILE / 2.0 + 4.5),
            "end",
            12,
            "black",
            &label,
        );
        for c in 0..columns {
            let x = GRID_AT.0 + c as f64 * TILE;
            let fill = if c < computed { "#a5c9e1" } else { "#eeeeee" };
            rect(&mut svg, (x, y), (TILE, TILE), fill, "white");
        }
    }
    for c in 0..columns {
        let x = GRID_AT.0 + (c as f64 + 0.5) * TILE;
        let label = format!("{}–{}", c * tiles.bc, ((c + 1) * tiles.bc).min(t) - 1);
        text(
            &mut svg,
            (x, GRID_AT.1 - 8.0),
            "middle",
            12,
            "black",
            &label,
        );
    }
    let corner = |n: usize| (GRID_AT.0 + n as f64 * TILE, GRID_AT.1 + n as f64 * TILE);
    polyline(&mut svg, &[corner(0), corner(columns)], GREY, 1.5);
    let (computed, skipped) = tiles.count(t);
    let rows_name = lang.pick("query rows", "查询行");
    note(&mut svg, (GRID_AT.0 - 60.0, GRID_AT.1 - 8.0), rows_name);
    let keys_name = lang.pick("keys", "键");
    note(
        &mut svg,
        (GRID_AT.0 + columns as f64 * TILE / 2.0, GRID_AT.1 - 28.0),
        keys_name,
    );
    let (above, below) = match lang {
        Lang::En => (
            format!("blue: {computed} tiles computed, the diagonal's masked inside the tile"),
            format!(
                "grey: {skipped} tiles skipped, each of their keys after each query of the block"
            ),
        ),
        Lang::ZhCn => (
            format!("蓝色：计算的 {computed} 个分块，对角线上的分块在块内掩码"),
            format!("灰色：跳过的 {skipped} 个分块，其中每个键都在该块每个查询之后"),
        ),
    };
    note(&mut svg, (size.0 / 2.0, size.1 - 34.0), &above);
    footer(&mut svg, size, &below);
    finish(lang, "s6_tiles.svg", svg)
}

/// The lengths [`bits`] measures, one head of 64 columns in 64 × 64 tiles at each.
const BITS_T: [usize; 6] = [64, 128, 256, 512, 1024, 2048];

/// The online (tiled) and the exact form's largest difference from stage 4's attention at `t`, in
/// ULPs of the largest output.
fn differences(seed: u64, t: usize) -> (f64, f64) {
    let [q, k, v] = random_head(seed, t, 64);
    let (q, k, v) = (q.view(), k.view(), v.view());
    let tiles = Tiles::new(64, 64);
    let naive = naive_attention(&q, &k, &v); // (T, D)
    let online = Difference::between(&tiled_attention(&q, &k, &v, tiles).output, &naive);
    let exact = Difference::between(&exact_attention(&q, &k, &v, tiles), &naive);
    (f64::from(online.scaled_ulps), f64::from(exact.scaled_ulps))
}

/// `s6_bits.svg`: the largest difference of the online and the exact form from stage 4, in ULPs of
/// the largest output, against T (log scale), with the bound `tests/s6_flash.rs` asserts.
fn bits(lang: Lang, seeds: BookSeeds) -> Figure {
    let points: Vec<(f64, (f64, f64))> = BITS_T
        .iter()
        .map(|&t| (t as f64, differences(seeds.seed_123, t)))
        .collect();
    let curve = |name, colour, pick: fn((f64, f64)) -> f64| Series {
        name,
        colour,
        points: points.iter().map(|&(t, d)| (t, pick(d))).collect(),
    };
    let series = [
        curve(
            lang.pick("online (tiled) form", "在线（分块）形式"),
            ORANGE,
            |d| d.0,
        ),
        curve(lang.pick("exact form", "精确形式"), BLUE, |d| d.1),
    ];
    let chart = LineChart {
        title: lang.pick(
            "Stage 6: where the bits part from stage 4, one head of 64 columns",
            "第 6 阶段：与第 4 阶段的位在哪里分开，一个 64 列的头",
        ),
        style: POINTS,
        x: Axis {
            name: lang.pick("T, the tokens (log scale)", "T：词元数（对数刻度）"),
            ends: (BITS_T[0] as f64, BITS_T[BITS_T.len() - 1] as f64),
            scale: Scale::Log2,
            ticks: BITS_T.iter().map(|&t| (t as f64, t.to_string())).collect(),
        },
        y: Axis {
            name: lang.pick("ULPs of the largest output", "最大输出的 ULP 数"),
            ends: (0.0, 10.0),
            scale: Scale::Linear,
            ticks: (0..=5)
                .map(|k| (f64::from(2 * k), (2 * k).to_string()))
                .collect(),
        },
        series: &series,
        levels: vec![(8.0, lang.pick("the test's bound: 8", "测试的上界：8"))],
        footer: Some(lang.pick(
            "largest |form − stage 4| per T in ULPs of the largest output; seed 123, tiles 64 × 64",
            "每个 T 下最大的 |形式 − 第 4 阶段|，以最大输出的 ULP 计；种子 123，分块 64 × 64",
        )),
    };
    Figure::new(lang, "s6_bits.svg", chart.draw(lang))
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    Ok(vec![online_walk(lang), tiles(lang), bits(lang, seeds)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_form_draws_a_line_at_zero() {
        for t in [64, 300] {
            assert_eq!(differences(123, t).1, 0.0, "T = {t}");
        }
    }
}
