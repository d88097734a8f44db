//! More pictures of stage 6, drawn from the crate's own numbers: the tiled backward pass of one
//! query block, what the forward pass kept and what it computes again (`s6_backward.svg`), and the
//! bytes the naive graph and the tiled forward move between memory and the cores as T grows
//! (`s6_traffic.svg`, counted by `s6_flash::traffic`). Also what this diagram and stage 7's latent
//! picture share: the two-line box of a step, and the legend row and footer that end them.

use super::chart::{Axis, LineChart, POINTS, Scale, Series};
use super::draw::{
    BLUE, GREEN, GREY, ORANGE, PURPLE, arrow, bold, footer, frame, legend_label, note, open_svg,
    rect, rounded, sized, text, thousands,
};
use super::{Figure, finish};
use crate::lang::Lang;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::flash::TAPE_TILES;
use crate::s5_gpt::train::Recipe;
use crate::s6_flash::bench::CONTEXTS;
use crate::s6_flash::traffic::{naive_traffic, tiled_traffic};
use crate::s6_flash::{BOOK_LENGTH, Tiles};

/// The head of every arrow here: (length, half width).
pub(super) const HEAD: (f64, f64) = (7.0, 3.5);
/// The ink of what explains a box (its sizes, its role): a step back from black.
const DIM: &str = "#333333";
/// The pale fills of boxes outlined in green, orange, blue and purple, light enough for black ink.
pub(super) const GREEN_FILL: &str = "#e0f2dd";
pub(super) const ORANGE_FILL: &str = "#fee6ce";
pub(super) const BLUE_FILL: &str = "#deebf7";
pub(super) const PURPLE_FILL: &str = "#ece4f4";
/// A box of what is given, neither kept nor computed here.
pub(super) const PLAIN: (&str, &str) = ("#999999", "white");

/// A box of a diagram at `at` (its top-left corner), `size`, outlined and filled `colours`: `name`
/// on its first line and, dimmer, `detail` (its sizes, or its role) on its second.
pub(super) fn step_box(
    svg: &mut String,
    at: (f64, f64),
    size: (f64, f64),
    colours: (&str, &str),
    (name, detail): (&str, &str),
) {
    let ((x, y), (w, h)) = (at, size);
    rounded(svg, at, size, colours.0, colours.1);
    text(
        svg,
        (x + w / 2.0, y + h / 2.0 - 2.0),
        "middle",
        13,
        "black",
        name,
    );
    text(
        svg,
        (x + w / 2.0, y + h / 2.0 + 13.0),
        "middle",
        12,
        DIM,
        detail,
    );
}

/// A row of legend keys from `at`, one every `pitch` px: a swatch outlined and filled in the key's
/// colours, and its words.
fn swatches(svg: &mut String, at: (f64, f64), pitch: f64, keys: &[((&str, &str), &str)]) {
    for (n, &((stroke, fill), words)) in keys.iter().enumerate() {
        let x = at.0 + pitch * n as f64;
        rounded(svg, (x, at.1 - 11.0), (16.0, 14.0), stroke, fill);
        legend_label(svg, (x + 16.0, at.1), words);
    }
}

/// Where a diagram's legend row stands (its first key, and the distance between two keys), and
/// its keys' colours and words.
pub(super) type Legend<'a> = (((f64, f64), f64), [(&'a str, &'a str); 4], [&'a str; 4]);

/// Ends a diagram `size` px: its legend row, its footer (`en` or `zh`, by `lang`), and the picture
/// closed and filed as `file`.
pub(super) fn sign_off(
    mut svg: String,
    lang: Lang,
    (file, size): (&str, (f64, f64)),
    ((at, pitch), colours, words): Legend,
    [en, zh]: [String; 2],
) -> Figure {
    let keys: Vec<_> = colours.into_iter().zip(words).collect();
    swatches(&mut svg, at, pitch, &keys);
    footer(&mut svg, size, lang.pick(&en, &zh));
    finish(lang, file, svg)
}

/// `16–31`: a range of rows by its first and its last.
fn rows_of(range: &std::ops::Range<usize>) -> String {
    format!("{}–{}", range.start, range.end - 1)
}

/// What the backward picture is drawn at, all read from the crate: stage 5's model (T and C of
/// its recipe, one head of D = C as its attention has), and the tape's tiles.
struct Backward {
    t: usize,
    d: usize,
    tiles: Tiles,
    /// The query block drawn: the last one, which sees every key tile.
    block: std::ops::Range<usize>,
    /// The key tiles it sees.
    keys: Vec<std::ops::Range<usize>>,
}

impl Backward {
    fn at_stage_5() -> Self {
        let recipe = Recipe::default();
        let t = recipe.context_size;
        let d = Architecture::default()
            .head_dim(recipe.embedding_size)
            .expect("one head divides any width");
        let tiles = TAPE_TILES;
        let block = tiles.query_blocks(t).last().expect("T ≥ 1");
        let keys = tiles.visible_key_tiles(&block).collect();
        Backward {
            t,
            d,
            tiles,
            block,
            keys,
        }
    }
}

/// The backward picture's size, and the left edges and widths of its three columns.
const BACKWARD_SIZE: (f64, f64) = (980.0, 650.0);
const COLUMNS: [(f64, f64); 3] = [(30.0, 210.0), (330.0, 320.0), (740.0, 220.0)];
/// The tops of the loop's steps: the first, and the distance between two.
const STEPS_AT: (f64, f64) = (170.0, 56.0);
/// A step's box, and the loop's frame: its top and bottom.
const STEP: f64 = 40.0;
const LOOP: (f64, f64) = (130.0, 566.0);

/// Column `n`'s heading, in bold over its middle; returns the column's left edge and width.
fn column_heading(svg: &mut String, n: usize, words: &str) -> (f64, f64) {
    let (x, w) = COLUMNS[n];
    bold(svg, (x + w / 2.0, 52.0), "middle", words);
    (x, w)
}

/// The left column: what the forward pass kept (O and the log-sum-exp L), what the tape hands the
/// node (dO, and Q, K, V), and that nothing T × T is kept.
fn kept_column(svg: &mut String, lang: Lang, b: &Backward) {
    let heading = lang.pick("kept by the forward pass", "前向传播保留的");
    let (x, w) = column_heading(svg, 0, heading);
    let (t, d) = (b.t, b.d);
    let boxes = [
        (
            70.0,
            (GREEN, GREEN_FILL),
            lang.pick("O, the output", "O：输出"),
            format!("T × D = {t} × {d}"),
        ),
        (
            120.0,
            (GREEN, GREEN_FILL),
            lang.pick("L = m + ln ℓ, per row", "L = m + ln ℓ：每行一个"),
            format!("T = {t}"),
        ),
        (
            206.0,
            PLAIN,
            lang.pick("dO, the output's gradient", "dO：输出的梯度"),
            format!("{t} × {d}"),
        ),
        (
            256.0,
            PLAIN,
            lang.pick("Q, K, V, the node's inputs", "Q、K、V：节点的输入"),
            format!("{t} × {d}"),
        ),
    ];
    for (y, colours, name, detail) in &boxes {
        step_box(svg, (x, *y), (w, STEP), *colours, (name, detail));
    }
    note(
        svg,
        (x + w / 2.0, 194.0),
        lang.pick("given by the tape", "由记录带给出"),
    );
    note(
        svg,
        (x + w / 2.0, 322.0),
        lang.pick("no T × T matrix is kept", "不保存任何 T × T 矩阵"),
    );
    let to = |y: f64| (COLUMNS[1].0, y);
    arrow(svg, (x + w, 90.0), to(90.0), GREEN, 1.5, HEAD);
    let p_middle = STEPS_AT.0 + STEPS_AT.1 + STEP / 2.0;
    arrow(
        svg,
        (x + w, 140.0),
        (COLUMNS[1].0, p_middle),
        GREEN,
        1.5,
        HEAD,
    );
    for y in [226.0, 276.0] {
        arrow(svg, (x + w, y), (COLUMNS[1].0 - 20.0, y), GREY, 1.5, HEAD);
    }
}

/// The tiles of a causal pass at the picture's T, 2 × 2 at stage 5's, the drawn block's row
/// framed: which tiles it sees, and which the pass skips.
fn tile_map(svg: &mut String, lang: Lang, b: &Backward) {
    const CELL: f64 = 44.0;
    const GRID_TOP: f64 = 396.0;
    let (x, w) = COLUMNS[0];
    let left = x + 70.0;
    let blocks: Vec<_> = b.tiles.query_blocks(b.t).collect();
    let columns = b.t.div_ceil(b.tiles.bc);
    let title = match lang {
        Lang::En => format!("T = {} in tiles: query rows × keys", b.t),
        Lang::ZhCn => format!("T = {} 的分块：查询行 × 键", b.t),
    };
    text(svg, (x + w / 2.0, 368.0), "middle", 12, "black", &title);
    for (c, keys) in b.tiles.visible_key_tiles(&(0..b.t)).enumerate() {
        let centre = left + CELL * (c as f64 + 0.5);
        text(
            svg,
            (centre, GRID_TOP - 6.0),
            "middle",
            12,
            DIM,
            &rows_of(&keys),
        );
    }
    for (r, rows) in blocks.iter().enumerate() {
        let y = GRID_TOP + CELL * r as f64;
        text(
            svg,
            (left - 8.0, y + CELL / 2.0 + 4.5),
            "end",
            12,
            DIM,
            &rows_of(rows),
        );
        let seen = b.tiles.visible_key_tiles(rows).count();
        for c in 0..columns {
            let fill = if c < seen { "#a5c9e1" } else { "#eeeeee" };
            rect(
                svg,
                (left + CELL * c as f64, y),
                (CELL, CELL),
                fill,
                "white",
            );
        }
        if *rows == b.block {
            frame(
                svg,
                (left - 2.0, y - 2.0),
                (CELL * columns as f64 + 4.0, CELL + 4.0),
                ORANGE,
                "none",
            );
        }
    }
    let (computed, skipped) = b.tiles.count(b.t);
    let below = GRID_TOP + CELL * blocks.len() as f64 + 20.0;
    let words = match lang {
        Lang::En => format!("{computed} computed, {skipped} skipped; block i framed"),
        Lang::ZhCn => format!("计算 {computed} 个，跳过 {skipped} 个；框出的是块 i"),
    };
    note(svg, (x + w / 2.0, below), &words);
}

/// The loop's seven steps, in the order `tiled_backward` takes them: each one's formula, its sizes
/// or its role, and its colours (orange: computed again; blue: added to a gradient).
fn loop_steps(lang: Lang, b: &Backward) -> [(String, String, (&'static str, &'static str)); 7] {
    let (br, bc, d) = (b.tiles.br, b.tiles.bc, b.d);
    let tile = format!("Br × Bc = {br} × {bc}");
    let again = (ORANGE, ORANGE_FILL);
    let grad = (BLUE, BLUE_FILL);
    [
        (
            lang.pick("S = Q[i] K[j]ᵀ / √D, masked", "S = Q[i] K[j]ᵀ / √D，掩码后")
                .to_string(),
            tile.clone(),
            again,
        ),
        (
            "P = exp(S − L[i])".to_string(),
            lang.pick("the weights, from L", "由 L 还原的权重")
                .to_string(),
            again,
        ),
        (
            "dV[j] += Pᵀ dO[i]".to_string(),
            format!("Bc × D = {bc} × {d}"),
            grad,
        ),
        ("dP = dO[i] V[j]ᵀ".to_string(), tile.clone(), PLAIN),
        ("dS = P ⊙ (dP − Δ[i])".to_string(), tile, PLAIN),
        (
            "dQ[i] += dS K[j] / √D".to_string(),
            format!("Br × D = {br} × {d}"),
            grad,
        ),
        (
            "dK[j] += dSᵀ Q[i] / √D".to_string(),
            format!("Bc × D = {bc} × {d}"),
            grad,
        ),
    ]
}

/// The middle column: Δ, one number a row before any tile, then the loop over the key tiles the
/// block sees, each step a box and an arrow to the next.
fn backward_loop(svg: &mut String, lang: Lang, b: &Backward) {
    let heading = match lang {
        Lang::En => format!("query block i = rows {}", rows_of(&b.block)),
        Lang::ZhCn => format!("查询块 i = 第 {} 行", rows_of(&b.block)),
    };
    let (x, w) = column_heading(svg, 1, &heading);
    let once = match lang {
        Lang::En => format!("one a row, before the tiles: {} for block i", b.block.len()),
        Lang::ZhCn => format!("每行一个，在分块之前算好：块 i 有 {} 个", b.block.len()),
    };
    let delta = ("Δ[i] = rowsum(dO[i] ⊙ O[i])", once.as_str());
    step_box(svg, (x, 70.0), (w, STEP), (PURPLE, PURPLE_FILL), delta);
    sized("rect", (x - 20.0, LOOP.0), (w + 40.0, LOOP.1 - LOOP.0))
        .set("fill", "none")
        .set("stroke", "#999999")
        .set("stroke-dasharray", "5,4")
        .close(svg);
    let tiles: Vec<String> = b.keys.iter().map(rows_of).collect();
    let words = match lang {
        Lang::En => format!(
            "for each key tile j block i sees: keys {}",
            tiles.join(", ")
        ),
        Lang::ZhCn => format!("对块 i 看得到的每个键分块 j：键 {}", tiles.join("、")),
    };
    text(
        svg,
        (x + w / 2.0, LOOP.0 + 24.0),
        "middle",
        12,
        "black",
        &words,
    );
    arrow(
        svg,
        (x + w / 2.0, 110.0),
        (x + w / 2.0, LOOP.0),
        PURPLE,
        1.5,
        HEAD,
    );
    let steps = loop_steps(lang, b);
    for (n, (name, detail, colours)) in steps.iter().enumerate() {
        let y = STEPS_AT.0 + STEPS_AT.1 * n as f64;
        step_box(svg, (x, y), (w, STEP), *colours, (name, detail));
        if n + 1 < steps.len() {
            arrow(
                svg,
                (x + w / 2.0, y + STEP),
                (x + w / 2.0, y + STEPS_AT.1),
                GREY,
                1.5,
                HEAD,
            );
        }
    }
}

/// The right column: the three gradients, each beside the step that adds to it.
fn gradients(svg: &mut String, lang: Lang) {
    let (x, w) = column_heading(svg, 2, lang.pick("gradients, added up", "累加的梯度"));
    let sees = lang.pick(
        "over the blocks that see tile j",
        "对看得到分块 j 的各块求和",
    );
    let grads = [
        (
            2,
            lang.pick("dV[j], tile j's rows", "dV[j]：分块 j 的行"),
            sees,
        ),
        (
            5,
            lang.pick("dQ[i], block i's rows", "dQ[i]：块 i 的行"),
            lang.pick("over block i's key tiles", "对块 i 的各键分块求和"),
        ),
        (
            6,
            lang.pick("dK[j], tile j's rows", "dK[j]：分块 j 的行"),
            sees,
        ),
    ];
    for (n, name, detail) in grads {
        let y = STEPS_AT.0 + STEPS_AT.1 * f64::from(n);
        step_box(svg, (x, y), (w, STEP), (BLUE, BLUE_FILL), (name, detail));
        let from = COLUMNS[1].0 + COLUMNS[1].1;
        arrow(
            svg,
            (from, y + STEP / 2.0),
            (x, y + STEP / 2.0),
            BLUE,
            1.5,
            HEAD,
        );
    }
}

/// `s6_backward.svg`: FlashAttention-2's backward pass for one query block of stage 5's model on
/// the tape's tiles: what the forward pass kept (O, and L = m + ln ℓ per row), Δ per row,
/// then per key tile the weights computed again from L and the three gradients added to.
fn backward(lang: Lang) -> Figure {
    let b = Backward::at_stage_5();
    let size = BACKWARD_SIZE;
    let title = lang.pick(
        "Stage 6: the tiled backward pass of one query block",
        "第 6 阶段：一个查询块的分块反向传播",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    kept_column(&mut svg, lang, &b);
    tile_map(&mut svg, lang, &b);
    backward_loop(&mut svg, lang, &b);
    gradients(&mut svg, lang);
    let words = match lang {
        Lang::En => [
            "kept by the forward pass",
            "computed again, tile by tile",
            "once per row",
            "gradients, added up",
        ],
        Lang::ZhCn => ["前向传播保留的", "逐块重新计算的", "每行一次", "累加的梯度"],
    };
    let colours = [
        (GREEN, GREEN_FILL),
        (ORANGE, ORANGE_FILL),
        (PURPLE, PURPLE_FILL),
        (BLUE, BLUE_FILL),
    ];
    let kept = thousands(b.t * b.d + b.t);
    let (t, d, Tiles { br, bc }) = (b.t, b.d, b.tiles);
    let en = format!(
        "stage 5's model, one head: T = {t}, D = {d}, tiles {br} × {bc}; kept between the passes: O and L, {kept} numbers"
    );
    let zh = format!(
        "第 5 阶段的模型，一个头：T = {t}，D = {d}，分块 {br} × {bc}；两次传播之间只保留 O 和 L，共 {kept} 个数"
    );
    let legend = (((60.0, size.1 - 50.0), 230.0), colours, words);
    sign_off(svg, lang, ("s6_backward.svg", size), legend, [en, zh])
}

/// The head width of the traffic chart: a head of the bench's record (12 heads of 64 columns).
const TRAFFIC_D: usize = 64;

/// `1 MiB`, `256 KiB`, `4 GiB`: a power of two bytes in binary units.
fn binary_bytes(bytes: f64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let step = (bytes.log2() / 10.0).floor().clamp(0.0, 4.0);
    let value = bytes / 2f64.powf(10.0 * step);
    format!(
        "{} {}",
        thousands(value.round() as usize),
        units[step as usize]
    )
}

/// Ticks at the powers of 4 bytes from the one at or below `low` to the one at or above `high`.
fn powers_of_four(low: f64, high: f64) -> Vec<(f64, String)> {
    let (from, to) = (
        (low.log2() / 2.0).floor() as i32,
        (high.log2() / 2.0).ceil() as i32,
    );
    (from..=to)
        .map(|e| 4f64.powi(e))
        .map(|v| (v, binary_bytes(v)))
        .collect()
}

/// A log-scale axis named `name` from its first tick to its last.
fn log2_axis(name: &str, ticks: Vec<(f64, String)>) -> Axis<'_> {
    Axis {
        name,
        ends: (ticks[0].0, ticks[ticks.len() - 1].0),
        scale: Scale::Log2,
        ticks,
    }
}

/// The traffic chart's lines: the naive graph, then the tiled pass in the tape's tiles and in the
/// chapter's 64 × 64, each (T, bytes read and written) at every doubling of T over the bench's
/// lengths; and how many times the tiled passes' bytes the naive graph moves at the last T.
fn traffic_points() -> ([Vec<(f64, f64)>; 3], [f64; 2]) {
    let (first, last) = (CONTEXTS[0], CONTEXTS[CONTEXTS.len() - 1]);
    let lengths = std::iter::successors(Some(first), |&t| (t < last).then_some(2 * t));
    let ts: Vec<usize> = lengths.collect();
    let curve = |moved: &dyn Fn(usize) -> usize| {
        ts.iter()
            .map(|&t| (t as f64, moved(t) as f64))
            .collect::<Vec<_>>()
    };
    let naive = |t| naive_traffic(t, TRAFFIC_D).total();
    let tiled = |tiles: Tiles| move |t| tiled_traffic(t, TRAFFIC_D, tiles).total();
    let ratio = |tiles| naive(last) as f64 / tiled(tiles)(last) as f64;
    (
        [
            curve(&naive),
            curve(&tiled(TAPE_TILES)),
            curve(&tiled(BOOK_LENGTH.tiles)),
        ],
        [ratio(TAPE_TILES), ratio(BOOK_LENGTH.tiles)],
    )
}

/// The legend's names of the traffic chart's three lines.
fn traffic_names(lang: Lang, ratios: [f64; 2]) -> [String; 3] {
    let last = thousands(CONTEXTS[CONTEXTS.len() - 1]);
    let [(a, b), (c, d)] = [TAPE_TILES, BOOK_LENGTH.tiles].map(|t| (t.br, t.bc));
    let [r1, r2] = ratios;
    match lang {
        Lang::En => [
            "naive graph: six nodes, each T × T matrix written and read back".to_string(),
            format!(
                "tiled, Br × Bc = {a} × {b} (the tape's): naive moves {r1:.1}× as much at {last}"
            ),
            format!("tiled, Br × Bc = {c} × {d}: naive moves {r2:.1}× as much"),
        ],
        Lang::ZhCn => [
            "朴素图：六个节点，每个 T × T 矩阵写出后再读回".to_string(),
            format!(
                "分块，Br × Bc = {a} × {b}（记录带的）：{last} 时朴素图搬运的是它的 {r1:.1} 倍"
            ),
            format!("分块，Br × Bc = {c} × {d}：朴素图搬运的是它的 {r2:.1} 倍"),
        ],
    }
}

/// `s6_traffic.svg`: the bytes one head's forward pass reads and writes, naive and tiled, against
/// T (log-log), as `s6_flash::traffic` counts them.
fn traffic(lang: Lang) -> Figure {
    let (points, ratios) = traffic_points();
    let names = traffic_names(lang, ratios);
    let colours = [ORANGE, BLUE, GREEN];
    let series: Vec<Series> = points
        .into_iter()
        .zip(&names)
        .zip(colours)
        .map(|((points, name), colour)| Series {
            name,
            colour,
            points,
        })
        .collect();
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (low, high) = ys.fold((f64::INFINITY, 0f64), |(l, h), y| (l.min(y), h.max(y)));
    let (en, zh) = (
        format!("one head, D = {TRAFFIC_D}, float32, the forward pass"),
        format!("一个头，D = {TRAFFIC_D}，float32，前向传播"),
    );
    let counted = "s6_flash::traffic::{naive_traffic, tiled_traffic}";
    let footer = match lang {
        Lang::En => format!("{en}; counted by {counted}"),
        Lang::ZhCn => format!("{zh}；由 {counted} 清点"),
    };
    let lengths = CONTEXTS.iter().map(|&t| (t as f64, thousands(t))).collect();
    let chart = LineChart {
        title: lang.pick(
            "Stage 6: the bytes one head moves between memory and the cores",
            "第 6 阶段：一个头在内存与核心之间搬运的字节数",
        ),
        style: POINTS,
        x: log2_axis(
            lang.pick("T, the tokens (log scale)", "T：词元数（对数刻度）"),
            lengths,
        ),
        y: log2_axis(
            lang.pick(
                "bytes read and written (log scale)",
                "读写的字节数（对数刻度）",
            ),
            powers_of_four(low, high),
        ),
        series: &series,
        levels: vec![],
        footer: Some(&footer),
    };
    Figure::new(lang, "s6_traffic.svg", chart.draw(lang))
}

/// These pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Vec<Figure> {
    vec![backward(lang), traffic(lang)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backward_picture_draws_the_last_block_of_stage_5s_tape() {
        let b = Backward::at_stage_5();
        assert_eq!((b.t, b.d, b.tiles), (32, 64, TAPE_TILES));
        assert_eq!(b.block, 16..32);
        assert_eq!(b.keys, [0..16, 16..32]);
        let svg = backward(Lang::En).svg;
        assert!(svg.contains(">query block i = rows 16–31</text>"), "{svg}");
        assert!(svg.contains("2,080 numbers"));
    }

    #[test]
    fn byte_ticks_are_powers_of_four_in_binary_units() {
        let ticks = powers_of_four(300.0 * 1024.0, 5e9);
        let labels: Vec<&str> = ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(
            labels,
            [
                "256 KiB", "1 MiB", "4 MiB", "16 MiB", "64 MiB", "256 MiB", "1 GiB", "4 GiB",
                "16 GiB"
            ]
        );
    }

    #[test]
    fn the_naive_graph_moves_more_the_larger_the_query_blocks() {
        let (_, [tape, chapter]) = traffic_points();
        assert!(1.9 < tape && tape < 2.1, "{tape}");
        assert!(7.5 < chapter && chapter < 8.1, "{chapter}");
    }
}
