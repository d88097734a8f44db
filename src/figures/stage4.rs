//! The pictures of stage 4 (§3.6), drawn from the crate's own numbers: how `MultiHeadAttention`
//! splits its queries into heads and merges them back (`s4_split_heads.svg`), and what a straight
//! reshape to (B, H, T, D) would put into each head instead (`s4_reshape_mix.svg`).
//!
//! Both draw the chapter's layer (seed 123) on the first item of the batch: its queries
//! Q = X·W_q, (T, d_out) = (6, 2), each cell coloured by the head its column belongs to.

use ndarray::{Array2, Array3, Axis};

use super::Figure;
use super::draw::{
    BLUE, GREEN, GREY, ORANGE, RED, Shade, Tag, arrow, bold, footer, legend_label, matrix,
    open_svg, rect, text,
};
use super::finish;
use crate::lang::Lang;
use crate::rng::torch::Generator;
use crate::s1_simple::TOKENS;
use crate::s2_trainable::D_OUT;
use crate::s3_causal::{batch, project};
use crate::s4_multihead::MultiHeadAttention;
use crate::{BookSeeds, Error};

/// A cell of a tensor: wide enough for a token and its value.
const CW: f64 = 90.0;
/// Its height.
const CH: f64 = 26.0;
/// The top of the tensors' cells.
const TOP: f64 = 104.0;
/// The left edges of the three tensors.
const LEFTS: [f64; 3] = [20.0, 372.0, 628.0];
/// The picture's width.
const WIDTH: f64 = 740.0;
/// Between two groups of cells (two tokens of (T, H, D), two heads of (H, T, D)).
const GROUP_GAP: f64 = 10.0;
/// The colours of head 0 and head 1.
pub(super) const HEADS: [&str; 2] = [BLUE, ORANGE];
/// The fills of head 0's and head 1's cells: their colours, pale enough for black text.
const FILLS: [&str; 2] = ["#a5c9e1", "#ffc999"];

/// One entry of the queries: its token, its column and its value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Entry {
    pub token: usize,
    pub column: usize,
    pub value: f32,
}

/// The chapter's layer (seed 123): the queries of the first batch item, each with where it came
/// from, (T, d_out); and D, the width of one head.
pub(super) fn queries(seeds: BookSeeds) -> Result<(Array2<Entry>, usize), Error> {
    let batch = batch(); // (B, T, C)
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let mha = MultiHeadAttention::new(&mut rng, d_in, D_OUT, context_length, 0.0, 2, false)?;
    let q = project(&mha.w_query, &batch.view()).index_axis_move(Axis(0), 0); // (T, d_out)
    let entries = Array2::from_shape_fn(q.dim(), |(token, column)| Entry {
        token,
        column,
        value: q[(token, column)],
    });
    Ok((entries, mha.head_dim()))
}

/// `view(T, H, D)`: each token's row cut into H pieces of D. (T, d_out) -> (T, H, D).
fn view<A: Clone>(x: Array2<A>, d: usize) -> Array3<A> {
    let (t, d_out) = x.dim();
    x.into_shape_with_order((t, d_out / d, d))
        .expect("row-major") // (T, H, D)
}

/// `view` then `transpose(1, 2)`, as `MultiHeadAttention` splits its heads. (T, d_out) -> (H, T, D).
pub(super) fn split<A: Clone>(x: Array2<A>, d: usize) -> Array3<A> {
    view(x, d).permuted_axes([1, 0, 2]) // (H, T, D)
}

/// A straight reshape to (H, T, D): the numbers in memory order, cut into H blocks of T·D. (T,
/// d_out) -> (H, T, D).
pub(super) fn reshape<A: Clone>(x: Array2<A>, d: usize) -> Array3<A> {
    let (t, d_out) = x.dim();
    x.into_shape_with_order((d_out / d, t, d))
        .expect("row-major") // (H, T, D)
}

/// The head that owns an entry's column.
fn head(entry: &Entry, d: usize) -> usize {
    entry.column / d
}

/// An entry's cell: its head's colour, its token and its value.
fn shade(entry: &Entry, d: usize) -> Shade {
    Shade {
        fill: FILLS[head(entry, d) % 2].into(),
        ink: "black",
        word: format!("{} {:.2}", TOKENS[entry.token], entry.value),
    }
}

/// A 3-axis tensor drawn as its outer axis's groups, one above the other, from (left, TOP): group g
/// is the (rows, cols) matrix `x[g]`, labelled `label(g)` on its left.
fn groups(
    svg: &mut String,
    left: f64,
    x: &Array3<Entry>,
    d: usize,
    label: impl Fn(usize) -> String,
) {
    let (n, rows, cols) = x.dim();
    for g in 0..n {
        let top = TOP + g as f64 * (rows as f64 * CH + GROUP_GAP);
        let y = top + rows as f64 * CH / 2.0 + 4.5;
        text(svg, (left - 6.0, y), "end", 12, "black", &label(g));
        let group = x.index_axis(Axis(0), g);
        matrix(svg, (left, top), (rows, cols), (CW, CH), |i, j| {
            shade(&group[(i, j)], d)
        });
    }
}

/// The (T, d_out) queries from (left, TOP), their columns labelled by head.
fn flat(svg: &mut String, lang: Lang, left: f64, q: &Array2<Entry>, d: usize) {
    let (t, d_out) = q.dim();
    for c in 0..d_out {
        let label = format!("{} {}", lang.pick("head", "头"), c / d);
        text(
            svg,
            (left + CW * (c as f64 + 0.5), TOP - 6.0),
            "middle",
            12,
            HEADS[(c / d) % 2],
            &label,
        );
    }
    matrix(svg, (left, TOP), (t, d_out), (CW, CH), |i, j| {
        shade(&q[(i, j)], d)
    });
}

/// A tensor's header above its cells: `what` in bold, and `shape` under it.
fn header(svg: &mut String, x: f64, what: &str, shape: &str) {
    bold(svg, (x, TOP - 48.0), "middle", what);
    text(svg, (x, TOP - 28.0), "middle", 12, GREY, shape);
}

/// A step from one tensor to the next: an arrow at height y from x1 to x2, either way.
fn step_arrow(svg: &mut String, (x1, x2): (f64, f64), y: f64, colour: &str) {
    arrow(svg, (x1, y), (x2, y), colour, 2.0, (9.0, 5.0));
}

/// The legend of the heads' colours at (x, y).
fn legend(svg: &mut String, lang: Lang, (x, y): (f64, f64)) {
    for (h, fill) in FILLS.iter().enumerate() {
        let x = x + 120.0 * h as f64;
        rect(svg, (x, y), (26.0, 18.0), fill, "white");
        let label = format!("{} {h}", lang.pick("head", "头"));
        legend_label(svg, (x + 26.0, y + 13.5), &label);
    }
}

/// `s4_split_heads.svg`: (B, T, d_out) → view (B, T, H, D) → transpose (B, H, T, D), and back.
fn split_heads(lang: Lang, seeds: BookSeeds) -> Result<Figure, Error> {
    let (q, d) = queries(seeds)?; // (T, d_out)
    let (t, d_out) = q.dim();
    let h = d_out / d;
    let tall = t as f64 * (h as f64 * CH + GROUP_GAP);
    let height = TOP + tall + 44.0;
    let mut svg = open_svg(
        lang,
        WIDTH,
        height,
        lang.pick(
            "Splitting the queries into heads, and merging them back",
            "把查询拆分成多个头，再合并回来",
        ),
    );
    let (b, item) = (2, lang.pick("item 0 drawn", "画出第 0 项"));
    let shapes = [
        (
            d_out,
            "(B, T, d_out)",
            format!("({b}, {t}, {d_out}), {item}"),
        ),
        (d, "(B, T, H, D)", format!("({b}, {t}, {h}, {d})")),
        (d, "(B, H, T, D)", format!("({b}, {h}, {t}, {d})")),
    ];
    for (left, (cols, what, shape)) in LEFTS.into_iter().zip(&shapes) {
        header(&mut svg, left + CW * *cols as f64 / 2.0, what, shape);
    }
    flat(&mut svg, lang, LEFTS[0], &q, d);
    let viewed = view(q.clone(), d); // (T, H, D)
    groups(&mut svg, LEFTS[1], &viewed, d, |g| TOKENS[g].to_string());
    let head_label = |g: usize| format!("{} {g}", lang.pick("head", "头"));
    groups(&mut svg, LEFTS[2], &split(q, d), d, head_label);
    split_and_merge(&mut svg, (d, d_out));
    let below = TOP + t as f64 * CH;
    let split_word = lang.pick("split (blue arrows) →", "拆分（蓝色箭头）→");
    text(
        &mut svg,
        (LEFTS[0], below + 30.0),
        "start",
        12,
        HEADS[0],
        split_word,
    );
    let merge_word = lang.pick("← merge (grey arrows)", "← 合并（灰色箭头）");
    text(
        &mut svg,
        (LEFTS[0], below + 48.0),
        "start",
        12,
        GREY,
        merge_word,
    );
    legend(&mut svg, lang, (LEFTS[0], below + 70.0));
    let words = lang.pick(
        "each cell: a token and its query value · its colour: the head its column belongs to",
        "每个格子：一个词元及其查询值 · 颜色：它所在的列属于哪个头",
    );
    footer(&mut svg, (WIDTH, height), words);
    Ok(finish(lang, "s4_split_heads.svg", svg))
}

/// The steps between the three tensors of a head width `d` and `d_out` columns: each split along
/// the top of the gaps, in blue, and its way back, the merge, along the bottom, in grey.
fn split_and_merge(svg: &mut String, (d, d_out): (usize, usize)) {
    let steps = [
        (
            LEFTS[0] + CW * d_out as f64,
            LEFTS[1] - 62.0,
            "view",
            ["contiguous()", ".view(…)"],
        ),
        (
            LEFTS[1] + CW * d as f64,
            LEFTS[2] - 56.0,
            "transpose(1, 2)",
            ["transpose(1, 2)", ""],
        ),
    ];
    for (from, to, forward, back) in steps {
        let (x1, x2) = (from + 10.0, to);
        let middle = (x1 + x2) / 2.0;
        text(svg, (middle, TOP + 12.0), "middle", 12, "black", forward);
        step_arrow(svg, (x1, x2), TOP + 22.0, HEADS[0]);
        step_arrow(svg, (x2, x1), TOP + 120.0, GREY);
        for (k, line) in back.iter().enumerate() {
            let at = (middle, TOP + 140.0 + 15.0 * k as f64);
            text(svg, at, "middle", 12, GREY, line);
        }
    }
}

/// `s4_reshape_mix.svg`: the heads of view + transpose beside the "heads" of a straight reshape,
/// and the memory order that the reshape cuts.
fn reshape_mix(lang: Lang, seeds: BookSeeds) -> Result<Figure, Error> {
    let (q, d) = queries(seeds)?; // (T, d_out)
    let (t, d_out) = q.dim();
    let h = d_out / d;
    let tall = h as f64 * (t as f64 * CH + GROUP_GAP);
    let strip_top = TOP + tall + 40.0;
    let height = strip_top + 2.0 * CH + 60.0;
    let mut svg = open_svg(
        lang,
        WIDTH,
        height,
        lang.pick(
            "A straight reshape to (B, H, T, D) mixes heads and tokens",
            "直接 reshape 成 (B, H, T, D) 会把头和词元混在一起",
        ),
    );
    mix_headers(lang, &mut svg, (t, d_out, h, d));
    flat(&mut svg, lang, LEFTS[0], &q, d);
    let (x1, x2) = (LEFTS[0] + CW * d_out as f64 + 10.0, LEFTS[1] - 62.0);
    step_arrow(&mut svg, (x1, x2), TOP + 3.0 * CH, GREY);
    let head_label = |g: usize| format!("{} {g}", lang.pick("head", "头"));
    groups(&mut svg, LEFTS[1], &split(q.clone(), d), d, head_label);
    groups(&mut svg, LEFTS[2], &reshape(q.clone(), d), d, head_label);
    memory_strip(lang, &mut svg, &q, d, strip_top);
    legend(&mut svg, lang, (LEFTS[0], height - 26.0));
    Ok(finish(lang, "s4_reshape_mix.svg", svg))
}

/// The reshape picture's three headers, for queries (T, d_out) cut into H heads of D, and the
/// verdict on each way of cutting.
fn mix_headers(lang: Lang, svg: &mut String, (t, d_out, h, d): (usize, usize, usize, usize)) {
    let item = lang.pick("item 0", "第 0 项");
    let shape = format!("{item}: ({t}, {d_out})");
    header(
        svg,
        LEFTS[0] + CW * d_out as f64 / 2.0,
        "(B, T, d_out)",
        &shape,
    );
    let right = format!("{item}: ({h}, {t}, {d})");
    let split = lang.pick("view, transpose(1, 2)", "view，transpose(1, 2)");
    header(svg, LEFTS[1] + CW / 2.0, split, &right);
    let reshaped = lang.pick("reshape(B, H, T, D)", "reshape(B, H, T, D)");
    header(svg, LEFTS[2] + CW / 2.0, reshaped, &right);
    let verdicts = [
        (
            LEFTS[1],
            GREEN,
            lang.pick("✓ each head its own column", "✓ 每个头是自己的列"),
        ),
        (
            LEFTS[2],
            RED,
            lang.pick("✗ both heads, 3 tokens", "✗ 两个头、3 个词元"),
        ),
    ];
    for (left, colour, verdict) in verdicts {
        text(
            svg,
            (left + CW / 2.0, TOP - 12.0),
            "middle",
            12,
            colour,
            verdict,
        );
    }
}

/// The memory order of the queries `q` (T, d_out), row after row, from `strip_top`: what the
/// reshape cuts into H blocks of T·D, each block bracketed and named.
fn memory_strip(lang: Lang, svg: &mut String, q: &Array2<Entry>, d: usize, strip_top: f64) {
    let (t, d_out) = q.dim();
    let cell = (WIDTH - 2.0 * LEFTS[0]) / (t * d_out) as f64;
    let words = lang.pick(
        "(B, T, d_out) in memory, one row after the other: reshape cuts it into blocks of T·D",
        "(B, T, d_out) 在内存中逐行排列：reshape 把它切成 T·D 个一块",
    );
    text(
        svg,
        (LEFTS[0], strip_top - 10.0),
        "start",
        12,
        "black",
        words,
    );
    let flat_order: Vec<Entry> = q.iter().copied().collect();
    matrix(
        svg,
        (LEFTS[0], strip_top),
        (1, t * d_out),
        (cell, CH),
        |_, k| Shade {
            word: TOKENS[flat_order[k].token].to_string(),
            ..shade(&flat_order[k], d)
        },
    );
    for g in 0..d_out / d {
        let x = LEFTS[0] + cell * (g * t * d) as f64;
        let w = cell * (t * d) as f64;
        let y = strip_top + CH + 8.0;
        let (left, right) = (x + 2.0, x + w - 2.0);
        Tag::new("path")
            .set(
                "d",
                format_args!("M{left:.1},{y:.1} V{:.1} H{right:.1} V{y:.1}", y + 8.0),
            )
            .set("fill", "none")
            .set("stroke", GREY)
            .close(svg);
        let label = format!("{} {g}", lang.pick("reshape's “head”", "reshape 的“头”"));
        text(svg, (x + w / 2.0, y + 26.0), "middle", 12, GREY, &label);
    }
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    Ok(vec![split_heads(lang, seeds)?, reshape_mix(lang, seeds)?])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fills and words of the cells drawn with their left edge at `x`, top to bottom.
    fn column(svg: &str, x: f64) -> Vec<(String, String)> {
        let lines: Vec<&str> = svg.lines().collect();
        let at = format!("<rect x=\"{x:.1}\"");
        lines
            .windows(2)
            .filter(|w| w[0].starts_with(&at) && w[0].contains("stroke=\"white\""))
            .map(|w| {
                let fill = w[0]
                    .split("fill=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let word = w[1]
                    .rsplit_once("\">")
                    .unwrap()
                    .1
                    .trim_end_matches("</text>");
                (fill.to_string(), word.to_string())
            })
            .collect()
    }

    #[test]
    fn after_view_and_transpose_each_head_holds_its_own_column_of_every_token() {
        let (q, d) = queries(BookSeeds::default()).unwrap();
        assert_eq!((q.dim(), d), ((6, 2), 1));
        let svg = split_heads(Lang::En, BookSeeds::default()).unwrap().svg;
        let cells = column(&svg, LEFTS[2]); // (H, T, D), head 0 then head 1
        assert_eq!(cells.len(), 12);
        for (k, (fill, word)) in cells.iter().enumerate() {
            let (h, token) = (k / 6, k % 6);
            assert_eq!(fill, FILLS[h], "cell {k}");
            assert_eq!(
                word,
                &format!("{} {:.2}", TOKENS[token], q[(token, h)].value)
            );
        }
        // (T, H, D): token by token, head 0 then head 1.
        let viewed: Vec<String> = column(&svg, LEFTS[1]).into_iter().map(|c| c.0).collect();
        assert_eq!(viewed, [FILLS[0], FILLS[1]].repeat(6));
    }

    #[test]
    fn a_straight_reshape_gives_head_0_both_heads_of_the_first_three_tokens() {
        let (q, d) = queries(BookSeeds::default()).unwrap();
        let mixed = reshape(q.clone(), d);
        let head_0: Vec<(usize, usize)> = mixed
            .index_axis(Axis(0), 0)
            .iter()
            .map(|e| (e.token, e.column))
            .collect();
        assert_eq!(head_0, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
        let svg = reshape_mix(Lang::En, BookSeeds::default()).unwrap().svg;
        let fills: Vec<String> = column(&svg, LEFTS[2]).into_iter().map(|c| c.0).collect();
        assert_eq!(fills, [FILLS[0], FILLS[1]].repeat(6));
        let proper: Vec<String> = column(&svg, LEFTS[1]).into_iter().map(|c| c.0).collect();
        assert_eq!(proper, [vec![FILLS[0]; 6], vec![FILLS[1]; 6]].concat());
    }
}
