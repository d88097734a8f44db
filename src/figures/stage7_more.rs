//! More pictures of stage 7, drawn from the crate's own numbers: latent attention's down and up
//! projections, what its cache keeps, and the same attention with W_key folded into W_query and
//! W_value into the output layer (`s7_latent_absorb.svg`), at the sizes of the chapter's model.

use super::Figure;
use super::draw::{BLUE, GREEN, GREY, ORANGE, PURPLE, Tag, arrow, bold, note, open_svg};
use super::stage6_more::{
    BLUE_FILL, GREEN_FILL, HEAD, ORANGE_FILL, PLAIN, PURPLE_FILL, sign_off, step_box,
};
use crate::lang::Lang;
use crate::s5_gpt::Tape;
use crate::s5_gpt::model::Linear;
use crate::s7_variants::{chapter_model, variants};

/// The sizes of the chapter's latent attention with RoPE, read off its first block: each weight's
/// (out, in) as the tape holds it, and the absorbed weights as `Gpt::absorb` folds them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sizes {
    /// C, H, D, L, R.
    c: usize,
    h: usize,
    d: usize,
    l: usize,
    r: usize,
    /// W_query, W_DKV, W_key, W_value, W_KR, W_QR: (out, in).
    weights: [(usize, usize); 6],
    /// Â_h and Ô_h, (rows, columns) each.
    absorbed: [(usize, usize); 2],
    /// How many Â_h (and Ô_h) a layer holds: one per head.
    per_layer: usize,
}

impl Sizes {
    /// The chapter's variant with a latent and RoPE, built as `chapter_model` builds it.
    fn of_the_chapter() -> Self {
        let (_, arch) = variants()
            .into_iter()
            .find(|(_, a)| a.latent.is_some() && a.rope)
            .expect("the chapter compares latent attention with RoPE");
        let mut tape = Tape::new();
        let (model, _) = chapter_model(&mut tape, arch);
        let attn = &model.blocks[0].attn;
        let latent = attn.latent.expect("a latent variant");
        let [query, key, value] = attn.qkv.expect("latent attention projects");
        let [query_rope, key_rope] = latent.rotary.expect("a variant with RoPE");
        let shape = |layer: Linear| match tape.value(layer.weight).shape[..] {
            [out, n_in] => (out, n_in),
            ref other => panic!("a weight is (out, in), not {other:?}"),
        };
        let weights = [query, latent.down, key, value, key_rope, query_rope].map(shape);
        let absorbed = model.absorb(&tape).expect("a latent model absorbs");
        let first = &absorbed[0];
        let (l, c) = weights[1]; // W_DKV: C → L
        let h = attn.num_heads;
        let l1 = first.outputs[0].len() / c; // Ô_h is (C, L + 1)
        Sizes {
            c,
            h,
            d: weights[0].0 / h, // W_query: C → H·D
            l,
            r: weights[4].0, // W_KR: C → R
            weights,
            absorbed: [(first.scores[0].len() / l1, l1), (c, l1)],
            per_layer: first.scores.len(),
        }
    }
}

/// The picture's size, and the height of a box.
const LATENT_SIZE: (f64, f64) = (1000.0, 650.0);
const BOX_H: f64 = 40.0;
/// The unfolded half: the tops of its five rows, and the left edges and widths of its columns
/// (x; the projections from x; what they make; W_key and W_value; k and v).
const ROWS: [f64; 5] = [70.0, 122.0, 174.0, 226.0, 278.0];
const UNFOLD: [(f64, f64); 5] = [
    (30.0, 80.0),
    (150.0, 180.0),
    (360.0, 150.0),
    (550.0, 180.0),
    (770.0, 140.0),
];
/// The absorbed half: the tops of its two rows, and the left edges and widths of its columns.
const ABSORBED_ROWS: [f64; 2] = [392.0, 476.0];
const FOLDED: [(f64, f64); 5] = [
    (30.0, 120.0),
    (180.0, 215.0),
    (425.0, 165.0),
    (620.0, 200.0),
    (850.0, 130.0),
];

/// The middle of the left or right edge of a box in `column`, in row `top`.
fn edge(column: (f64, f64), top: f64, right: bool) -> (f64, f64) {
    let x = if right { column.0 + column.1 } else { column.0 };
    (x, top + BOX_H / 2.0)
}

/// A box in column `col` and row `row` of a half laid out as `columns` (left edge, width) and
/// `rows` (tops).
fn grid_box(
    svg: &mut String,
    (columns, rows): (&[(f64, f64)], &[f64]),
    (col, row): (usize, usize),
    colours: Colours,
    words: (&str, &str),
) {
    let (x, w) = columns[col];
    step_box(svg, (x, rows[row]), (w, BOX_H), colours, words);
}

/// `64 → 32`: what a layer (out, in) maps, in to out.
fn maps((out, n_in): (usize, usize)) -> String {
    format!("{n_in} → {out}")
}

/// An arrow in the unfolded half from the right edge of box (column, row) `from` to the left edge
/// of box `to`.
fn link(svg: &mut String, from: (usize, usize), to: (usize, usize), colour: &str) {
    let a = edge(UNFOLD[from.0], ROWS[from.1], true);
    arrow(
        svg,
        a,
        edge(UNFOLD[to.0], ROWS[to.1], false),
        colour,
        1.5,
        HEAD,
    );
}

/// The layers that read x, each with its row, its name and map, and what it makes: its name, its
/// size and its colours (the cached parts in theirs).
type FromX = (usize, &'static str, String, &'static str, String, Colours);

/// A box's outline and fill.
type Colours = (&'static str, &'static str);

/// W_query, W_DKV, W_KR and W_QR, in their rows.
fn layers_from_x(lang: Lang, s: &Sizes) -> [FromX; 4] {
    let [w_q, w_dkv, _, _, w_kr, w_qr] = s.weights;
    let rope = |m: (usize, usize)| match lang {
        Lang::En => format!("{}, then RoPE", maps(m)),
        Lang::ZhCn => format!("{}，再做 RoPE", maps(m)),
    };
    let every = lang.pick("for every head", "所有头共用");
    [
        (
            0,
            "W_query: C → H·D",
            maps(w_q),
            "q",
            format!("H × D = {} × {}", s.h, s.d),
            PLAIN,
        ),
        (
            1,
            "W_DKV: C → L",
            maps(w_dkv),
            lang.pick("c, cached", "c，缓存"),
            format!("L = {}", s.l),
            (GREEN, GREEN_FILL),
        ),
        (
            3,
            "W_KR: C → R",
            rope(w_kr),
            lang.pick("k_R, cached", "k_R，缓存"),
            format!("R = {}, {every}", s.r),
            (PURPLE, PURPLE_FILL),
        ),
        (
            4,
            "W_QR: C → H·R",
            rope(w_qr),
            "q_R",
            format!("H × R = {} × {}", s.h, s.r),
            PLAIN,
        ),
    ]
}

/// The unfolded half: x, the layers that read it, the latent c that W_key and W_value unfold, and
/// the cached parts in their colours.
fn unfolded(svg: &mut String, lang: Lang, s: &Sizes) {
    let heading = lang.pick(
        "Unfolded: training, and the cache's exact steps",
        "展开：训练时，以及缓存的精确步骤",
    );
    bold(svg, (30.0, 52.0), "start", heading);
    let (x, w) = UNFOLD[0];
    let middle = (ROWS[0] + ROWS[4] + BOX_H) / 2.0;
    step_box(
        svg,
        (x, middle - 30.0),
        (w, 60.0),
        PLAIN,
        ("x", &format!("C = {}", s.c)),
    );
    let weight = (BLUE, BLUE_FILL);
    for (row, name, detail, made, size, colours) in &layers_from_x(lang, s) {
        grid_box(svg, (&UNFOLD, &ROWS), (1, *row), weight, (name, detail));
        grid_box(svg, (&UNFOLD, &ROWS), (2, *row), *colours, (made, size));
        let to = edge(UNFOLD[1], ROWS[*row], false);
        arrow(svg, (x + w, middle), to, GREY, 1.5, HEAD);
        link(svg, (1, *row), (2, *row), GREY);
    }
    let heads = format!("H × D = {} × {}", s.h, s.d);
    let [_, _, w_k, w_v, _, _] = s.weights;
    for (row, name, w_up, made) in [
        (1, "W_key: L → H·D", w_k, "k"),
        (2, "W_value: L → H·D", w_v, "v"),
    ] {
        grid_box(svg, (&UNFOLD, &ROWS), (3, row), weight, (name, &maps(w_up)));
        grid_box(svg, (&UNFOLD, &ROWS), (4, row), PLAIN, (made, &heads));
        link(svg, (2, 1), (3, row), GREEN);
        link(svg, (3, row), (4, row), GREY);
    }
    let score = lang.pick(
        "head h's score, before the softmax",
        "头 h 的得分（softmax 之前）",
    );
    let wide = UNFOLD[4].0 + UNFOLD[4].1 - UNFOLD[3].0;
    let words = ("(q·k + q_R·k_R) / √(D + R)", score);
    step_box(
        svg,
        (UNFOLD[3].0, ROWS[3] + 12.0),
        (wide, 54.0),
        PLAIN,
        words,
    );
}

/// A box of the absorbed half: its column and row, its colours, its formula and its sizes or role.
type Folded = ((usize, usize), Colours, &'static str, String);

/// The absorbed half's boxes, each with its column and row, its colours, its formula and its sizes
/// or role: the scores from [x, 1] through Â_h straight to the cached latents, then the weighted
/// sum of the latents through Ô_h to the output, right to left.
fn absorbed_boxes(lang: Lang, s: &Sizes) -> [Folded; 9] {
    let [(a_rows, a_cols), (o_rows, o_cols)] = s.absorbed;
    let folded = (ORANGE, ORANGE_FILL);
    let (query, cached) = match lang {
        Lang::En => (
            format!("folded query, L + 1 = {a_cols}"),
            format!("cached, L + 1 = {a_cols}"),
        ),
        Lang::ZhCn => (
            format!("合并后的查询，L + 1 = {a_cols}"),
            format!("缓存，L + 1 = {a_cols}"),
        ),
    };
    let each = lang
        .pick("each cached token j", "每个缓存的词元 j")
        .to_string();
    let weights = lang.pick("the weights", "权重").to_string();
    [
        ((0, 0), PLAIN, "[x, 1]", format!("C + 1 = {}", s.c + 1)),
        (
            (1, 0),
            folded,
            "Â_h = W_query,hᵀ W_key,h",
            format!("(C + 1) × (L + 1) = {a_rows} × {a_cols}"),
        ),
        ((2, 0), PLAIN, "q′_h = Â_hᵀ [x, 1]", query),
        ((3, 0), PLAIN, "s_j = q′_h·ĉ_j + q_R·k_R,j", each),
        ((4, 0), (GREEN, GREEN_FILL), "ĉ_j = [c_j, 1]", cached),
        ((3, 1), PLAIN, "w = softmax(s / √(D + R))", weights),
        (
            (2, 1),
            PLAIN,
            "ẑ_h = Σ_j w_j ĉ_j",
            format!("L + 1 = {a_cols}"),
        ),
        (
            (1, 1),
            folded,
            "Ô_h = W_out,h W_value,h",
            format!("C × (L + 1) = {o_rows} × {o_cols}"),
        ),
        ((0, 1), PLAIN, "Σ_h Ô_h ẑ_h + b", format!("C = {}", s.c)),
    ]
}

/// The absorbed half: its heading, its boxes, and the arrows between them.
fn absorbed(svg: &mut String, lang: Lang, s: &Sizes) {
    let heading = lang.pick(
        "Absorbed, once after training: a step reads the cached c and unfolds no key or value",
        "吸收（训练后做一次）：一步直接读缓存中的 c，不展开任何键或值",
    );
    bold(svg, (30.0, 372.0), "start", heading);
    for (at, colours, name, detail) in &absorbed_boxes(lang, s) {
        grid_box(
            svg,
            (&FOLDED, &ABSORBED_ROWS),
            *at,
            *colours,
            (name, detail),
        );
    }
    let [top, bottom] = ABSORBED_ROWS;
    for col in 0..3 {
        let (a, b) = (
            edge(FOLDED[col], top, true),
            edge(FOLDED[col + 1], top, false),
        );
        arrow(svg, a, b, GREY, 1.5, HEAD);
        let (a, b) = (
            edge(FOLDED[col + 1], bottom, false),
            edge(FOLDED[col], bottom, true),
        );
        arrow(svg, a, b, GREY, 1.5, HEAD);
    }
    let (a, b) = (edge(FOLDED[4], top, false), edge(FOLDED[3], top, true));
    arrow(svg, a, b, GREEN, 1.5, HEAD);
    let x = FOLDED[3].0 + FOLDED[3].1 / 2.0;
    arrow(svg, (x, top + BOX_H), (x, bottom), GREY, 1.5, HEAD);
}

/// The notes under the absorbed half: what W_query,h, W_key,h, W_value,h and W_out,h are, and how
/// many folded weights a layer holds.
fn absorbed_notes(svg: &mut String, lang: Lang, s: &Sizes) {
    let rows = lang.pick(
        "W_query,h, W_key,h, W_value,h: head h's rows of each layer; W_out,h: head h's columns of the output layer",
        "W_query,h、W_key,h、W_value,h：各层中头 h 的行；W_out,h：输出层中头 h 的列",
    );
    let n = s.per_layer;
    let biases = match lang {
        Lang::En => format!(
            "each bias rides as a last column, times the 1 in [x, 1] and in ĉ; absorb() folds {n} Â_h and {n} Ô_h a layer"
        ),
        Lang::ZhCn => format!(
            "每个偏置作为最后一列，乘以 [x, 1] 和 ĉ 中的 1；absorb() 每层合并出 {n} 个 Â_h 和 {n} 个 Ô_h"
        ),
    };
    note(svg, (LATENT_SIZE.0 / 2.0, 544.0), rows);
    note(svg, (LATENT_SIZE.0 / 2.0, 562.0), &biases);
}

/// `s7_latent_absorb.svg`: latent attention at the chapter's sizes, unfolded above (x → W_DKV → c,
/// cached, → W_key / W_value → each head's keys and values, beside the decoupled rotary parts) and
/// absorbed below (Â_h = W_query,hᵀ·W_key,h so that a query reads c directly, Ô_h =
/// W_out,h·W_value,h, each with its biases).
fn latent_absorb(lang: Lang) -> Figure {
    let title = lang.pick(
        "Stage 7: latent attention, unfolded and absorbed",
        "第 7 阶段：潜在注意力的展开与吸收",
    );
    let (size, s) = (LATENT_SIZE, Sizes::of_the_chapter());
    let mut svg = open_svg(lang, size.0, size.1, title);
    unfolded(&mut svg, lang, &s);
    Tag::new("line")
        .ends((30.0, 342.0), (size.0 - 30.0, 342.0))
        .set("stroke", "#dddddd")
        .close(&mut svg);
    absorbed(&mut svg, lang, &s);
    absorbed_notes(&mut svg, lang, &s);
    let words = match lang {
        Lang::En => [
            "a layer's weight",
            "cached: the latent c",
            "cached: the rotary key",
            "weights folded together",
        ],
        Lang::ZhCn => [
            "一层的权重",
            "缓存：潜向量 c",
            "缓存：旋转键",
            "合并后的权重",
        ],
    };
    let colours = [
        (BLUE, BLUE_FILL),
        (GREEN, GREEN_FILL),
        (PURPLE, PURPLE_FILL),
        (ORANGE, ORANGE_FILL),
    ];
    let (c, l, r, h, d) = (s.c, s.l, s.r, s.h, s.d);
    let (kept, full) = (l + r, 2 * h * d);
    let en = format!(
        "the chapter's MLA + RoPE model: C = {c}, H = {h} heads of D = {d}, L = {l}, R = D/2 = {r}; a token caches L + R = {kept} numbers a layer, not 2·H·D = {full}"
    );
    let zh = format!(
        "本章的 MLA + RoPE 模型：C = {c}，H = {h} 个 D = {d} 的头，L = {l}，R = D/2 = {r}；每个词元每层缓存 L + R = {kept} 个数，而不是 2·H·D = {full}"
    );
    let legend = (((90.0, 600.0), 220.0), colours, words);
    sign_off(svg, lang, ("s7_latent_absorb.svg", size), legend, [en, zh])
}

/// These pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Vec<Figure> {
    vec![latent_absorb(lang)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s5_gpt::latent::rotary_width;

    #[test]
    fn the_sizes_are_the_chapter_models_own() {
        let s = Sizes::of_the_chapter();
        assert_eq!((s.c, s.h, s.d, s.l, s.r), (64, 4, 16, 32, rotary_width(16)));
        // W_query, W_DKV, W_key, W_value, W_KR, W_QR as (out, in).
        assert_eq!(
            s.weights,
            [(64, 64), (32, 64), (64, 32), (64, 32), (8, 64), (32, 64)]
        );
        assert_eq!(s.absorbed, [(65, 33), (64, 33)]);
        assert_eq!(s.per_layer, 4);
    }
}
