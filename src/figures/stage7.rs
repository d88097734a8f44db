//! The pictures of stage 7, drawn from the crate's own numbers: which key/value head each query
//! head reads as K shrinks from H to 1 (`s7_gqa.svg`), the causal mask beside the sliding window's
//! band (`s7_window.svg`), the turns of rotary positions, pair by pair (`s7_rope.svg`), the KV
//! cache of rasbt's examples (`s7_kv_memory.svg`), and the scores the cached model computes, the
//! prefill then one step, with and without a window (`s7_cache_steps.svg`), and what one token leaves
//! in each layer's cache for each of the chapter's variants (`s7_latent.svg`).

use super::cache::variant_name as variant_name_of;
use super::colours::{MASKED, blue};
use super::draw::{
    BLUE, GREEN, GREY, ORANGE, PURPLE, RED, Tag, arrow, bar, bold, dot, footer, frame,
    legend_label, note, open_svg, rect, rounded, sized, text, thousands, vertical_text,
};
use super::{Figure, finish};
use crate::lang::Lang;
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::latent::rotary_width;
use crate::s5_gpt::ops::{MASK_VALUE, tril_forward};
use crate::s5_gpt::variants::{rope_angles, window_forward};
use crate::s7_variants::bench::short_name;
use crate::s7_variants::{
    KvShape, gigabytes, kv_head_of_each_query_head, rasbt_examples, variants,
};

/// H, the query heads of the grouped-query picture: the chapter's 4.
const QUERY_HEADS: usize = 4;
/// K, the key/value heads of its three rows: multi-head, grouped-query, multi-query.
const KV_HEADS: [usize; 3] = [4, 2, 1];
/// The colour of each K/V head, and of the arrows of the query heads that read it.
const KV_COLOURS: [&str; 4] = [BLUE, ORANGE, GREEN, PURPLE];
/// Their fills: the same colours, pale enough for black text.
const KV_FILLS: [&str; 4] = ["#a5c9e1", "#ffc999", "#b4e0b0", "#d8cbe9"];
/// A head's box.
const HEAD_BOX: (f64, f64) = (84.0, 28.0);
/// The centre of query head 0's box, and the distance between two query heads' centres.
const HEAD_X: (f64, f64) = (236.0, 104.0);
/// The height of one row of the grouped-query picture, and the top of its first row.
const GQA_ROW: (f64, f64) = (136.0, 44.0);
/// The grouped-query picture's width and height.
const GQA_SIZE: (f64, f64) = (820.0, 480.0);

/// What a row of K key/value heads for H query heads is called: multi-head (K = H), multi-query
/// (K = 1), grouped-query between; its short name, then its long one.
fn grouping(lang: Lang, heads: usize, kv_heads: usize) -> (&'static str, &'static str) {
    match kv_heads {
        k if k == heads => ("MHA", lang.pick("multi-head", "多头注意力")),
        1 => ("MQA", lang.pick("multi-query", "多查询注意力")),
        _ => ("GQA", lang.pick("grouped-query", "分组查询注意力")),
    }
}

/// A head's box centred on (x, y), filled `fill`, outlined `stroke`, with its name inside.
fn head_box(svg: &mut String, (x, y): (f64, f64), (stroke, fill): (&str, &str), name: &str) {
    let (w, h) = HEAD_BOX;
    rounded(svg, (x - w / 2.0, y - h / 2.0), (w, h), stroke, fill);
    text(svg, (x, y + 4.5), "middle", 13, "black", name);
}

/// The centre of query head `h`'s box.
fn query_x(h: usize) -> f64 {
    HEAD_X.0 + HEAD_X.1 * h as f64
}

/// Row `r` of the grouped-query picture, K key/value heads: its name on the left, the H query
/// heads above, each in the colour of the K/V head it reads, the K/V heads below, and what the
/// cache keeps on the right.
fn gqa_row(svg: &mut String, lang: Lang, r: usize, kv_heads: usize) {
    let reads = kv_head_of_each_query_head(QUERY_HEADS, kv_heads);
    let top = GQA_ROW.1 + GQA_ROW.0 * r as f64;
    let (short, long) = grouping(lang, QUERY_HEADS, kv_heads);
    bold(svg, (30.0, top + 54.0), "start", short);
    text(svg, (30.0, top + 74.0), "start", 12, "black", long);
    note_start(svg, (30.0, top + 94.0), &format!("K = {kv_heads}"));
    for (h, &k) in reads.iter().enumerate() {
        let colours = (KV_COLOURS[k % 4], KV_FILLS[k % 4]);
        let name = format!("{} {h}", lang.pick("query", "查询头"));
        head_box(svg, (query_x(h), top + 30.0), colours, &name);
    }
    kv_boxes(svg, lang, &reads, (top + 30.0, top + 104.0));
    cache_note(svg, lang, top, &reads);
}

/// The K/V heads of a row whose query head h reads K/V head `reads[h]`, each centred under the
/// query heads that read it, with an arrow from each of them; `q_y` and `kv_y` are the centres of
/// the query heads' and the K/V heads' boxes.
fn kv_boxes(svg: &mut String, lang: Lang, reads: &[usize], (q_y, kv_y): (f64, f64)) {
    let kv_heads = reads.iter().max().map_or(0, |&k| k + 1);
    for k in 0..kv_heads {
        let readers: Vec<usize> = (0..reads.len()).filter(|&h| reads[h] == k).collect();
        let x = readers.iter().map(|&h| query_x(h)).sum::<f64>() / readers.len() as f64;
        for &h in &readers {
            let from = (query_x(h), q_y + HEAD_BOX.1 / 2.0);
            let to = (x, kv_y - HEAD_BOX.1 / 2.0 - 1.0);
            arrow(svg, from, to, KV_COLOURS[k % 4], 1.5, (8.0, 4.0));
        }
        let name = format!("{} {k}", lang.pick("K/V", "键/值"));
        head_box(svg, (x, kv_y), (KV_COLOURS[k % 4], KV_FILLS[k % 4]), &name);
    }
}

/// On the right of the row from `top` whose query head h reads K/V head `reads[h]`: how many K/V
/// heads the cache keeps, and how many query heads read each.
fn cache_note(svg: &mut String, lang: Lang, top: f64, reads: &[usize]) {
    let kv_heads = reads.iter().max().map_or(0, |&k| k + 1);
    let shared = reads.iter().filter(|&&k| k == 0).count();
    let (cached, each) = match lang {
        Lang::En => (
            format!("cache: {kv_heads} K/V {}", plural(kv_heads, "head")),
            format!("each read by {shared} query {}", plural(shared, "head")),
        ),
        Lang::ZhCn => (
            format!("缓存：{kv_heads} 个键/值头"),
            format!("每个由 {shared} 个查询头读取"),
        ),
    };
    let right = query_x(QUERY_HEADS - 1) + HEAD_BOX.0 / 2.0 + 24.0;
    text(svg, (right, top + 60.0), "start", 12, "black", &cached);
    text(svg, (right, top + 80.0), "start", 12, GREY, &each);
}

/// `word` as many of them take it: "head", "heads".
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// Grey words of a note, starting at (x, y).
fn note_start(svg: &mut String, at: (f64, f64), words: &str) {
    text(svg, at, "start", 12, GREY, words);
}

/// `s7_gqa.svg`: 4 query heads over K = 4, 2 and 1 key/value heads, an arrow from each query head
/// to the K/V head it reads, as `kv_head_of_each_query_head` (that is, `repeat_kv_forward`) maps
/// them. Fewer K/V heads, the same queries: the cache shrinks by H / K.
fn gqa(lang: Lang) -> Figure {
    let size = GQA_SIZE;
    let title = match lang {
        Lang::En => format!("Stage 7: {QUERY_HEADS} query heads read K key/value heads"),
        Lang::ZhCn => format!("第 7 阶段：{QUERY_HEADS} 个查询头读取 K 个键/值头"),
    };
    let mut svg = open_svg(lang, size.0, size.1, &title);
    for (r, &kv_heads) in KV_HEADS.iter().enumerate() {
        if r > 0 {
            let y = GQA_ROW.1 + GQA_ROW.0 * r as f64 - 8.0;
            let line = Tag::new("line").ends((20.0, y), (size.0 - 20.0, y));
            line.set("stroke", "#ddd").close(&mut svg);
        }
        gqa_row(&mut svg, lang, r, kv_heads);
    }
    let words = lang.pick(
        "query head h reads K/V head h / G, G = H / K: repeat_kv_forward copies each K/V head G times",
        "查询头 h 读取键/值头 h / G，G = H / K：repeat_kv_forward 把每个键/值头复制 G 次",
    );
    footer(&mut svg, size, words);
    finish(lang, "s7_gqa.svg", svg)
}

/// T and W of the sliding-window picture: the chapter's 8 tokens and a window of 3.
const BAND: (usize, usize) = (8, 3);
/// The side of one cell of the masks.
const MASK_CELL: f64 = 34.0;
/// The left edges of the two masks' cells, and the top of their cells.
const MASK_AT: ([f64; 2], f64) = ([90.0, 490.0], 112.0);
/// The fill of a kept score.
const KEPT: &str = "#a5c9e1";
/// The sliding-window picture's width and height.
const WINDOW_SIZE: (f64, f64) = (860.0, 470.0);

/// Which scores of T tokens are kept, (T, T) in row-major order: after `tril_forward` alone, and
/// after `tril_forward` then `window_forward` with a window of W.
fn masks(t: usize, w: usize) -> [Vec<bool>; 2] {
    let ones = vec![1.0f32; t * t]; // (T, T) scores, all kept
    let mut causal = vec![0.0; t * t];
    tril_forward(&mut causal, &ones, t, MASK_VALUE); // (T, T): the future masked
    let mut band = vec![0.0; t * t];
    window_forward(&mut band, &causal, t, w, MASK_VALUE); // (T, T): and the old past
    let kept = |scores: &[f32]| scores.iter().map(|&s| s != MASK_VALUE).collect();
    [kept(&causal), kept(&band)]
}

/// How many keys a row sees, in `lang`'s words.
fn keys_seen(lang: Lang, n: usize) -> String {
    match lang {
        Lang::En => format!("{n} {}", plural(n, "key")),
        Lang::ZhCn => format!("{n} 个键"),
    }
}

/// One mask of T × T cells from `left`: its title, the keys' numbers along the top, the query
/// tokens' down the left, each cell blue where the score is kept and grey where it is masked, and
/// how many keys each row sees on its right.
fn mask_panel(svg: &mut String, lang: Lang, left: f64, title: &str, kept: &[bool]) {
    let t = BAND.0;
    let top = MASK_AT.1;
    let side = MASK_CELL * t as f64;
    bold(svg, (left + side / 2.0, 56.0), "middle", title);
    note(svg, (left + side / 2.0, 78.0), lang.pick("keys", "键"));
    for (i, row) in kept.chunks(t).enumerate() {
        let y = top + MASK_CELL * i as f64;
        let along = MASK_CELL * (i as f64 + 0.5);
        text(
            svg,
            (left + along, top - 8.0),
            "middle",
            12,
            "black",
            &i.to_string(),
        );
        text(
            svg,
            (left - 8.0, top + along + 4.0),
            "end",
            12,
            "black",
            &i.to_string(),
        );
        for (j, &keep) in row.iter().enumerate() {
            let fill = if keep { KEPT } else { MASKED };
            rect(
                svg,
                (left + MASK_CELL * j as f64, y),
                (MASK_CELL, MASK_CELL),
                fill,
                "white",
            );
        }
        let seen = keys_seen(lang, row.iter().filter(|&&k| k).count());
        note_start(svg, (left + side + 10.0, y + MASK_CELL / 2.0 + 4.0), &seen);
    }
    let middle = (left - 40.0, top + side / 2.0);
    vertical_text(svg, middle, 12, GREY, lang.pick("query token", "查询词元"));
}

/// `s7_window.svg`: the causal mask beside the sliding window's band for T = 8 and W = 3, the
/// cells `tril_forward` and then `window_forward` keep: a token sees W keys, itself included,
/// however long the text grows.
fn window(lang: Lang) -> Figure {
    let (t, w) = BAND;
    let size = WINDOW_SIZE;
    let title = match lang {
        Lang::En => format!("Stage 7: the causal mask and the sliding window, T = {t}, W = {w}"),
        Lang::ZhCn => format!("第 7 阶段：因果掩码与滑动窗口，T = {t}，W = {w}"),
    };
    let mut svg = open_svg(lang, size.0, size.1, &title);
    let [causal, band] = masks(t, w);
    let titles = match lang {
        Lang::En => [
            "causal: tril_forward".to_string(),
            format!("sliding window, W = {w}: then window_forward"),
        ],
        Lang::ZhCn => [
            "因果：tril_forward".to_string(),
            format!("滑动窗口，W = {w}：再 window_forward"),
        ],
    };
    for ((left, title), kept) in MASK_AT.0.iter().zip(&titles).zip([&causal, &band]) {
        mask_panel(&mut svg, lang, *left, title, kept);
    }
    let y = MASK_AT.1 + MASK_CELL * t as f64 + 20.0;
    let swatch = (14.0, 14.0);
    rect(&mut svg, (MASK_AT.0[0], y), swatch, KEPT, "#999");
    legend_label(
        &mut svg,
        (MASK_AT.0[0] + 14.0, y + 12.0),
        lang.pick("kept", "保留"),
    );
    rect(&mut svg, (MASK_AT.0[0] + 90.0, y), swatch, MASKED, "#999");
    let masked = lang.pick("masked before the softmax", "在 softmax 之前遮盖");
    legend_label(&mut svg, (MASK_AT.0[0] + 104.0, y + 12.0), masked);
    let words = match lang {
        Lang::En => format!(
            "a token sees W keys, itself included: token i keeps keys i − {} … i",
            w - 1
        ),
        Lang::ZhCn => format!(
            "一个词元看到 W 个键，包括它自己：词元 i 保留键 i − {} … i",
            w - 1
        ),
    };
    footer(&mut svg, size, &words);
    finish(lang, "s7_window.svg", svg)
}

/// D, the head of the rotary picture: 8 coordinates, so 4 pairs.
const ROPE_D: usize = 8;
/// The positions it turns: p = 0 … 7.
const ROPE_POSITIONS: usize = 8;
/// The radius of a pair's circle, and how far outside it the positions' numbers stand.
const RADIUS: (f64, f64) = (76.0, 10.0);
/// The centre of pair 0's circle, and the distance between two circles' centres.
const CIRCLE_AT: (f64, f64, f64) = (120.0, 200.0, 200.0);
/// Two numbers of positions closer than this (px) are written as one, "0–2".
const LABEL_ROOM: f64 = 22.0;
/// The rotary picture's width and height.
const ROPE_SIZE: (f64, f64) = (840.0, 390.0);

/// `i` written as a subscript: θ₀, θ₁, ….
fn subscript(i: usize) -> String {
    let digit = |c: char| char::from_u32(0x2080 + c.to_digit(10).unwrap_or(0)).unwrap_or(c);
    i.to_string().chars().map(digit).collect()
}

/// The positions' numbers around a circle centred on `centre`, at `angles` (one per position):
/// a run of positions too close to be told apart is numbered once, "first–last", at the first.
fn position_numbers(svg: &mut String, centre: (f64, f64), angles: &[f64]) {
    let ring = RADIUS.0 + RADIUS.1;
    let at = |a: f64| (centre.0 + ring * a.cos(), centre.1 - ring * a.sin());
    let mut runs: Vec<(usize, usize)> = vec![];
    for p in 0..angles.len() {
        match runs.last_mut() {
            Some(run) if distance(at(angles[run.0]), at(angles[p])) < LABEL_ROOM => run.1 = p,
            _ => runs.push((p, p)),
        }
    }
    for (first, last) in runs {
        let a = angles[first];
        let (x, y) = at(a);
        let words = match first == last {
            true => first.to_string(),
            false => format!("{first}–{last}"),
        };
        // Outwards from the circle: after it on the right, before it on the left, above or below
        // it at the top and the bottom.
        let anchor = match a.cos() {
            c if c > 0.4 => "start",
            c if c < -0.4 => "end",
            _ => "middle",
        };
        text(svg, (x, y + 4.0 - 6.0 * a.sin()), anchor, 11, GREY, &words);
    }
}

/// The distance between two points on the page.
fn distance(a: (f64, f64), b: (f64, f64)) -> f64 {
    (a.0 - b.0).hypot(a.1 - b.1)
}

/// Pair `i`'s heading over its circle centred on x: which coordinates it turns, and θᵢ, the angle
/// of position 1.
fn pair_heading(svg: &mut String, lang: Lang, (i, theta): (usize, f64), x: f64) {
    let half = ROPE_D / 2;
    let (heading, coordinates, speed) = match lang {
        Lang::En => (
            format!("pair {i}"),
            format!("coordinates {i} and {}", i + half),
            format!("θ{} = {theta:.3} rad per position", subscript(i)),
        ),
        Lang::ZhCn => (
            format!("第 {i} 对"),
            format!("坐标 {i} 与 {}", i + half),
            format!("每个位置 θ{} = {theta:.3} 弧度", subscript(i)),
        ),
    };
    bold(svg, (x, 56.0), "middle", &heading);
    text(svg, (x, 74.0), "middle", 12, "black", &coordinates);
    text(svg, (x, 92.0), "middle", 12, "black", &speed);
}

/// A unit circle centred on `centre` with `points` on it, one per position, pale (p = 0) to dark,
/// and the radii to the first (grey) and the last (blue).
fn circle_of_points(svg: &mut String, centre: (f64, f64), points: &[(f64, f64)]) {
    Tag::new("circle")
        .px("cx", centre.0)
        .px("cy", centre.1)
        .px("r", RADIUS.0)
        .set("fill", "none")
        .set("stroke", "#bbb")
        .close(svg);
    let last = points.len() - 1;
    for (p, colour) in [(0, GREY), (last, BLUE)] {
        let hand = Tag::new("line").ends(centre, points[p]);
        hand.set("stroke", colour)
            .set("stroke-width", "1.5")
            .close(svg);
    }
    for (p, &at) in points.iter().enumerate() {
        dot(svg, at, 4.5, &blue(0.3 + 0.7 * p as f64 / last as f64));
    }
}

/// Pair `i`'s circle: its heading, the points (cos pθᵢ, sin pθᵢ) of `rope_angles`' cos and sin,
/// (positions, D/2) each, numbered, and how far the last position turned it.
fn rope_pair(svg: &mut String, lang: Lang, i: usize, (cos, sin): (&[f32], &[f32])) {
    let half = ROPE_D / 2;
    let centre = (CIRCLE_AT.0 + CIRCLE_AT.2 * i as f64, CIRCLE_AT.1);
    let c = |p: usize| f64::from(cos[p * half + i]);
    let s = |p: usize| f64::from(sin[p * half + i]);
    let theta = s(1).atan2(c(1));
    pair_heading(svg, lang, (i, theta), centre.0);
    let points: Vec<(f64, f64)> = (0..ROPE_POSITIONS)
        .map(|p| (centre.0 + RADIUS.0 * c(p), centre.1 - RADIUS.0 * s(p)))
        .collect();
    circle_of_points(svg, centre, &points);
    let angles: Vec<f64> = (0..ROPE_POSITIONS).map(|p| p as f64 * theta).collect();
    position_numbers(svg, centre, &angles);
    let last = ROPE_POSITIONS - 1;
    let degrees = last as f64 * theta.to_degrees();
    let turned = match lang {
        Lang::En => format!("by p = {last}: {degrees:.1}°"),
        Lang::ZhCn => format!("到 p = {last}：{degrees:.1}°"),
    };
    let at = (centre.0, CIRCLE_AT.1 + RADIUS.0 + 40.0);
    text(svg, at, "middle", 13, "black", &turned);
}

/// `s7_rope.svg`: for a head of D = 8, each of its 4 pairs as a unit circle with the point
/// (cos pθᵢ, sin pθᵢ) of positions p = 0 … 7, as `rope_angles` computes them: the first pair turns
/// a radian a position, the last a thousandth, so near and far positions each have a pair that
/// tells them apart.
fn rope(lang: Lang) -> Figure {
    let size = ROPE_SIZE;
    let title = match lang {
        Lang::En => format!(
            "Stage 7: rotary positions, a head of D = {ROPE_D}: each pair turns at its own speed"
        ),
        Lang::ZhCn => {
            format!("第 7 阶段：旋转位置编码，D = {ROPE_D} 的一个头：每一对以自己的速度旋转")
        }
    };
    let mut svg = open_svg(lang, size.0, size.1, &title);
    let (cos, sin) = rope_angles(0..ROPE_POSITIONS, ROPE_D); // (positions, D/2) each
    for i in 0..ROPE_D / 2 {
        rope_pair(&mut svg, lang, i, (&cos, &sin));
    }
    let last = ROPE_POSITIONS - 1;
    let (above, below) = match lang {
        Lang::En => (
            format!("the point (cos pθᵢ, sin pθᵢ) of each pair at positions p = 0 … {last}, pale to dark"),
            "pair i turns by θᵢ = 10,000^(−2i/D) per position: the first pair fastest, the last barely moves".to_string(),
        ),
        Lang::ZhCn => (
            format!("每一对在位置 p = 0 … {last} 的点 (cos pθᵢ, sin pθᵢ)，由浅到深"),
            "第 i 对每个位置转 θᵢ = 10,000^(−2i/D)：第一对转得最快，最后一对几乎不动".to_string(),
        ),
    };
    note(&mut svg, (size.0 / 2.0, size.1 - 34.0), &above);
    footer(&mut svg, size, &below);
    finish(lang, "s7_rope.svg", svg)
}

/// The left edge of the memory chart's bars, and the length of the longest.
const BARS: (f64, f64) = (270.0, 400.0);
/// The top of its first row, and the height of a row.
const BAR_ROWS: (f64, f64) = (56.0, 56.0);
/// Its grid's step: a line every 5 GB.
const GB_STEP: f64 = 5e9;
/// The colour of each bar, in rasbt's examples' order.
const BAR_COLOURS: [&str; 5] = [BLUE, ORANGE, GREEN, RED, PURPLE];
/// The memory chart's width and height.
const KV_SIZE: (f64, f64) = (780.0, 440.0);

/// A variant of rasbt's examples in `lang`'s words: the code's own name in English, and in Chinese
/// one made from the same shape.
fn variant_name(lang: Lang, name: &str, shape: &KvShape) -> String {
    if lang == Lang::En {
        return name.to_string();
    }
    match (shape.latent, shape.window, shape.kv_heads) {
        (Some(latent), _, _) => format!("MLA，潜在维度 {}", thousands(latent)),
        (None, Some(window), _) => format!("SWA，窗口 {}", thousands(window)),
        (None, None, k) if k == shape.heads => "MHA".to_string(),
        (None, None, 1) => "MQA".to_string(),
        (None, None, k) => format!("GQA，{k} 个键/值头"),
    }
}

/// The memory chart's grid below `rows` bars: a light line at every 5 GB up to `top` bytes,
/// numbered below the bars, and the axis's name.
fn kv_grid(svg: &mut String, lang: Lang, top: f64, rows: usize) {
    let bottom = BAR_ROWS.0 + BAR_ROWS.1 * rows as f64;
    for k in 0..=(top / GB_STEP).floor() as usize {
        let x = BARS.0 + BARS.1 * k as f64 * GB_STEP / top;
        let line = Tag::new("line").ends((x, BAR_ROWS.0 - 6.0), (x, bottom - 6.0));
        let stroke = if k == 0 { "black" } else { "#e4e4e4" };
        line.set("stroke", stroke).close(svg);
        let label = format!("{:.0}", k as f64 * GB_STEP / 1e9);
        text(svg, (x, bottom + 12.0), "middle", 12, "black", &label);
    }
    let axis = lang.pick(
        "GB (10⁹ bytes) for one sequence",
        "一个序列的 GB（10⁹ 字节）",
    );
    let at = (BARS.0 + BARS.1 / 2.0, bottom + 32.0);
    text(svg, at, "middle", 13, "black", axis);
}

/// `s7_kv_memory.svg`: the KV cache of one sequence in each of rasbt's examples, as
/// `KvShape::total_bytes` computes it, a bar each on one linear scale with `gigabytes`' words and
/// the layers and context each assumes: grouped-query and multi-query attention cache fewer heads,
/// a sliding window fewer tokens, latent attention a narrower vector.
fn kv_memory(lang: Lang) -> Figure {
    let size = KV_SIZE;
    let examples = rasbt_examples();
    let total = |(_, shape, context): &(&str, KvShape, usize)| shape.total_bytes(1, *context);
    let top = examples.iter().map(total).max().unwrap_or(1) as f64;
    let title = lang.pick(
        "Stage 7: the KV cache of one sequence, rasbt's examples",
        "第 7 阶段：一个序列的 KV 缓存，rasbt 的示例",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    kv_grid(&mut svg, lang, top, examples.len());
    for (r, example) in examples.iter().enumerate() {
        kv_bar(&mut svg, lang, r, example, total(example) as f64 / top);
    }
    let bytes = examples.first().map_or(0, |(_, shape, _)| shape.bytes);
    let (above, below) = match lang {
        Lang::En => (
            format!("KvShape::total_bytes(1, context): a token keeps 2·K·D values per layer (MLA: L), {bytes} bytes each"),
            "a sliding window keeps only the newest W tokens; MLA's row is another model at another context".to_string(),
        ),
        Lang::ZhCn => (
            format!("KvShape::total_bytes(1, 上下文)：每个词元每层存 2·K·D 个值（MLA：L 个），每个 {bytes} 字节"),
            "滑动窗口只保留最新的 W 个词元；MLA 一行是另一个模型、另一个上下文长度".to_string(),
        ),
    };
    note(&mut svg, (size.0 / 2.0, size.1 - 34.0), &above);
    footer(&mut svg, size, &below);
    finish(lang, "s7_kv_memory.svg", svg)
}

/// Row `r` of the memory chart: the example's name, its layers and context, and its bar, `share`
/// of the longest, with its total in `gigabytes`' words.
fn kv_bar(svg: &mut String, lang: Lang, r: usize, example: &(&str, KvShape, usize), share: f64) {
    let (name, shape, context) = example;
    let y = BAR_ROWS.0 + BAR_ROWS.1 * r as f64;
    let label_x = BARS.0 - 12.0;
    let name = variant_name(lang, name, shape);
    text(svg, (label_x, y + 14.0), "end", 13, "black", &name);
    let assumes = match lang {
        Lang::En => format!("{} layers, context {}", shape.layers, thousands(*context)),
        Lang::ZhCn => format!("{} 层，上下文 {}", shape.layers, thousands(*context)),
    };
    text(svg, (label_x, y + 31.0), "end", 12, GREY, &assumes);
    let length = BARS.1 * share;
    bar(
        svg,
        (BARS.0, y),
        (length, 26.0),
        BAR_COLOURS[r % BAR_COLOURS.len()],
    );
    let total = gigabytes(shape.total_bytes(1, *context));
    text(
        svg,
        (BARS.0 + length + 8.0, y + 18.0),
        "start",
        13,
        "black",
        &total,
    );
}

/// The cached steps' picture: the prompt's tokens (the prefill's L), and the window W of its third
/// panel.
const STEPS: (usize, usize) = (4, 3);
/// The side of one cell of its scores.
const STEP_CELL: f64 = 40.0;
/// The left edges of its three panels' cells, and the top of their cells.
const STEP_AT: ([f64; 3], f64) = ([90.0, 350.0, 650.0], 140.0);
/// The cached steps' picture's width and height.
const STEPS_SIZE: (f64, f64) = (900.0, 400.0);

/// Which scores the cached model computes, queries × keys, for a prompt of L tokens then one step
/// with a window of W, each as (rows, keys kept): the prefill's (L, L) after `tril_forward`; the
/// step's one row against the L + 1 keys, the last row of the (L + 1, L + 1) causal mask, whose
/// future is empty; and that row after `window_forward`, whose oldest keys the cache forgot.
fn step_scores(l: usize, w: usize) -> [(usize, Vec<bool>); 3] {
    let [prefill, _] = masks(l, w); // (L, L)
    let [causal, band] = masks(l + 1, w); // (L + 1, L + 1)
    let last = |kept: Vec<bool>| kept[l * (l + 1)..].to_vec(); // (1, L + 1): the new query
    [(l, prefill), (1, last(causal)), (1, last(band))]
}

/// The mask's value as the cells show it: "−1e9".
fn mask_value() -> String {
    format!("{MASK_VALUE:e}").replace('-', "−")
}

/// One panel of the cached steps from `left`: its caption and what it computes, the keys' numbers
/// along the top and the queries' down the left (the first query is token `first`), each score
/// blue where kept and grey with the mask's value where masked; a masked cell outside the cache
/// (`forgotten`) is outlined dashed.
fn step_panel(
    svg: &mut String,
    lang: Lang,
    (left, first): (f64, usize),
    (caption, what): (&str, &str),
    (rows, kept): (usize, &[bool]),
    forgotten: bool,
) {
    let top = STEP_AT.1;
    let keys = kept.len() / rows;
    let middle = left + STEP_CELL * keys as f64 / 2.0;
    bold(svg, (middle, 56.0), "middle", caption);
    note(svg, (middle, 76.0), what);
    note(svg, (middle, top - 28.0), lang.pick("keys", "键"));
    for j in 0..keys {
        let at = (left + STEP_CELL * (j as f64 + 0.5), top - 8.0);
        text(svg, at, "middle", 12, "black", &j.to_string());
    }
    for (i, row) in kept.chunks(keys).enumerate() {
        let y = top + STEP_CELL * i as f64;
        let at = (left - 8.0, y + STEP_CELL / 2.0 + 4.0);
        text(svg, at, "end", 12, "black", &(first + i).to_string());
        for (j, &keep) in row.iter().enumerate() {
            let x = left + STEP_CELL * j as f64;
            if keep {
                rect(svg, (x, y), (STEP_CELL, STEP_CELL), KEPT, "white");
                continue;
            }
            match forgotten {
                true => sized(
                    "rect",
                    (x + 1.0, y + 1.0),
                    (STEP_CELL - 2.0, STEP_CELL - 2.0),
                )
                .set("fill", MASKED)
                .set("stroke", GREY)
                .set("stroke-dasharray", "4 3")
                .close(svg),
                false => rect(svg, (x, y), (STEP_CELL, STEP_CELL), MASKED, "white"),
            }
            let at = (x + STEP_CELL / 2.0, y + STEP_CELL / 2.0 + 4.0);
            text(svg, at, "middle", 11, GREY, &mask_value());
        }
    }
    let height = STEP_CELL * rows as f64;
    vertical_text(
        svg,
        (left - 30.0, top + height / 2.0),
        12,
        GREY,
        lang.pick("queries", "查询"),
    );
}

/// Under a step's row from `left`: a frame round the keys the cache holds (the kept ones, after
/// `forgotten` masked ones) and its words, and under the forgotten ones what their scores are.
fn cache_frame(svg: &mut String, lang: Lang, left: f64, (forgotten, held): (usize, usize)) {
    let top = STEP_AT.1;
    let x = left + STEP_CELL * forgotten as f64;
    let width = STEP_CELL * held as f64;
    frame(
        svg,
        (x - 2.0, top - 2.0),
        (width + 4.0, STEP_CELL + 4.0),
        BLUE,
        "none",
    );
    let words = match lang {
        Lang::En => format!("the cache: {}", keys_seen(lang, held)),
        Lang::ZhCn => format!("缓存：{}", keys_seen(lang, held)),
    };
    let below = top + STEP_CELL + 22.0;
    text(svg, (x + width / 2.0, below), "middle", 12, BLUE, &words);
    if forgotten > 0 {
        let middle = left + STEP_CELL * forgotten as f64 / 2.0;
        let (gone, put) = match lang {
            Lang::En => ("forgotten,", "put back in front"),
            Lang::ZhCn => ("已被遗忘，", "补回到前面"),
        };
        note(svg, (middle, below), gone);
        note(svg, (middle, below + 18.0), put);
    }
}

/// `s7_cache_steps.svg`: the shape of the scores the cached model computes, queries × keys, for a
/// prompt of 4 tokens: the prefill's 4 × 4 with `tril_forward`'s causal mask; the next step's one
/// row against the 5 keys the cache keeps, nothing to mask; and that row with a window of 3, where
/// the 2 keys the cache forgot are put back in front as the mask's value, as `window_forward`'s
/// band writes them.
fn cache_steps(lang: Lang) -> Figure {
    let (l, w) = STEPS;
    let size = STEPS_SIZE;
    let title = lang.pick(
        "Stage 7: the scores the KV cache computes, queries × keys",
        "第 7 阶段：KV 缓存计算的分数，查询 × 键",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    let panels = step_scores(l, w);
    let counts = |kept: &[bool]| {
        let masked = kept.iter().filter(|&&k| !k).count();
        (masked, kept.len() - masked)
    };
    let (forgotten, held) = counts(&panels[2].1);
    let texts = match lang {
        Lang::En => [
            (
                format!("prefill: {l} × {l}"),
                "the prompt at once, tril_forward".to_string(),
            ),
            (
                format!("one step: 1 × {}", l + 1),
                "no future to mask".to_string(),
            ),
            (
                format!("with a window, W = {w}: 1 × {}", l + 1),
                format!("{forgotten} keys forgotten: window_forward's band"),
            ),
        ],
        Lang::ZhCn => [
            (
                format!("预填充：{l} × {l}"),
                "一次算完提示，tril_forward".to_string(),
            ),
            (
                format!("一步：1 × {}", l + 1),
                "没有未来需要遮盖".to_string(),
            ),
            (
                format!("有窗口，W = {w}：1 × {}", l + 1),
                format!("{forgotten} 个键被遗忘：window_forward 的带"),
            ),
        ],
    };
    for (p, ((rows, kept), (caption, what))) in panels.iter().zip(&texts).enumerate() {
        let first = if p == 0 { 0 } else { l };
        let at = (STEP_AT.0[p], first);
        step_panel(&mut svg, lang, at, (caption, what), (*rows, kept), p == 2);
    }
    cache_frame(&mut svg, lang, STEP_AT.0[1], counts(&panels[1].1));
    cache_frame(&mut svg, lang, STEP_AT.0[2], (forgotten, held));
    let filled = match lang {
        Lang::En => format!("fills the cache: {}", keys_seen(lang, l)),
        Lang::ZhCn => format!("填入缓存：{}", keys_seen(lang, l)),
    };
    let middle = STEP_AT.0[0] + STEP_CELL * l as f64 / 2.0;
    let below = STEP_AT.1 + STEP_CELL * l as f64 + 22.0;
    text(&mut svg, (middle, below), "middle", 12, BLUE, &filled);
    let y = below + 26.0;
    let swatch = (14.0, 14.0);
    let left = STEP_AT.0[0];
    rect(&mut svg, (left, y), swatch, KEPT, "#999");
    legend_label(
        &mut svg,
        (left + 14.0, y + 12.0),
        lang.pick("computed score", "计算的分数"),
    );
    rect(&mut svg, (left + 150.0, y), swatch, MASKED, "#999");
    let masked = match lang {
        Lang::En => format!("masked before the softmax: {}", mask_value()),
        Lang::ZhCn => format!("在 softmax 之前遮盖：{}", mask_value()),
    };
    legend_label(&mut svg, (left + 164.0, y + 12.0), &masked);
    let words = lang.pick(
        "the cache keeps K and V of the rows it has seen (with a window, the W newest): a step computes one row of scores",
        "缓存保存它见过的各行的 K 和 V（有窗口时只保存最新的 W 行）：一步只计算一行分数",
    );
    footer(&mut svg, size, words);
    finish(lang, "s7_cache_steps.svg", svg)
}

/// The chapter's model's width and layers, whose variants the latent picture compares.
const CHAPTER_MODEL: (usize, usize) = (64, 2);
/// The latent picture's strip: its left edge, and its length per number kept.
const STRIP: (f64, f64) = (250.0, 3.0);
/// The latent picture's rows: the top of the first, and the height of each.
const STRIP_ROWS: (f64, f64) = (96.0, 44.0);

/// What one token leaves in one layer's cache for `arch` at width `c`, part by part: the keys and
/// the values (K·D each), or the latent (L) and the rotary key (R), each with its colour and name.
fn cache_parts(
    lang: Lang,
    arch: &Architecture,
    c: usize,
) -> Vec<(usize, &'static str, &'static str)> {
    let d = c / arch.heads;
    match arch.latent {
        Some(l) => {
            let mut parts = vec![(l, GREEN, lang.pick("latent c", "潜向量 c"))];
            if arch.rope {
                parts.push((rotary_width(d), PURPLE, lang.pick("rotary key", "旋转键")));
            }
            parts
        }
        None => {
            let kd = arch.kv_heads() * d;
            vec![
                (kd, BLUE, lang.pick("keys", "键")),
                (kd, ORANGE, lang.pick("values", "值")),
            ]
        }
    }
}

/// One row of the latent picture: the variant's name, its parts as one strip, and what a token
/// costs in all layers (`KvShape::bytes_per_token`).
fn cache_strip(svg: &mut String, lang: Lang, r: usize, arch: &Architecture) {
    let (c, layers) = CHAPTER_MODEL;
    let y = STRIP_ROWS.0 + STRIP_ROWS.1 * r as f64;
    let name = variant_name_of(lang, short_name(arch));
    text(svg, (STRIP.0 - 12.0, y + 19.0), "end", 13, "black", &name);
    let mut x = STRIP.0;
    let parts = cache_parts(lang, arch, c);
    for &(n, colour, _) in &parts {
        let length = STRIP.1 * n as f64;
        rect(svg, (x, y), (length, 28.0), colour, "white");
        text(
            svg,
            (x + length / 2.0, y + 19.0),
            "middle",
            12,
            "white",
            &n.to_string(),
        );
        x += length;
    }
    let numbers: usize = parts.iter().map(|p| p.0).sum();
    let bytes = KvShape::of(arch, layers, c, 4).bytes_per_token();
    let words = match lang {
        Lang::En => format!(
            "{numbers} numbers · {} bytes a token",
            thousands(bytes as usize)
        ),
        Lang::ZhCn => format!(
            "{numbers} 个数 · 每个词元 {} 字节",
            thousands(bytes as usize)
        ),
    };
    text(svg, (x + 10.0, y + 19.0), "start", 12, GREY, &words);
}

/// `s7_latent.svg`: what one token leaves in one layer's cache for each of the chapter's variants,
/// one strip each, its length the numbers kept: keys and values for multi-head attention, fewer for
/// grouped and multi-query, the same for a window and RoPE (a window keeps fewer tokens, not fewer
/// numbers), a latent for MLA and the rotary key beside it with RoPE.
fn latent_cache(lang: Lang) -> Figure {
    let chapter = variants();
    let size = (
        900.0,
        STRIP_ROWS.0 + STRIP_ROWS.1 * chapter.len() as f64 + 56.0,
    );
    let title = lang.pick(
        "Stage 7: what one token leaves in each layer's cache",
        "第 7 阶段：一个词元在每层缓存中留下什么",
    );
    let mut svg = open_svg(lang, size.0, size.1, title);
    let legend = [
        (BLUE, lang.pick("keys, K·D", "键，K·D")),
        (ORANGE, lang.pick("values, K·D", "值，K·D")),
        (GREEN, lang.pick("latent c, L", "潜向量 c，L")),
        (PURPLE, lang.pick("rotary key, R = D/2", "旋转键，R = D/2")),
    ];
    for (i, (colour, words)) in legend.iter().enumerate() {
        let x = STRIP.0 + 150.0 * i as f64;
        rect(&mut svg, (x, 52.0), (14.0, 14.0), colour, "none");
        legend_label(&mut svg, (x + 14.0, 64.0), words);
    }
    for (r, (_, arch)) in chapter.iter().enumerate() {
        cache_strip(&mut svg, lang, r, arch);
    }
    let words = lang.pick(
        "the chapter's model: width 64, 4 heads of D = 16, 2 layers, float32 (KvShape::bytes_per_token); a window keeps W tokens, not fewer numbers",
        "本章的模型：宽 64，4 个 D = 16 的头，2 层，float32（KvShape::bytes_per_token）；窗口只保留 W 个词元，每个词元的数并不少",
    );
    footer(&mut svg, size, words);
    finish(lang, "s7_latent.svg", svg)
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Vec<Figure> {
    vec![
        gqa(lang),
        window(lang),
        rope(lang),
        kv_memory(lang),
        cache_steps(lang),
        latent_cache(lang),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_w_keys_a_row_and_the_causal_mask_all_the_past() {
        let (t, w) = BAND;
        let [causal, band] = masks(t, w);
        let seen = |kept: &[bool]| -> Vec<usize> {
            kept.chunks(t)
                .map(|row| row.iter().filter(|&&k| k).count())
                .collect()
        };
        assert_eq!(seen(&causal), (1..=t).collect::<Vec<_>>());
        assert_eq!(seen(&band), [1, 2, 3, 3, 3, 3, 3, 3]);
    }

    #[test]
    fn the_chinese_names_are_made_from_the_same_shapes() {
        let names: Vec<String> = rasbt_examples()
            .iter()
            .map(|(name, shape, _)| variant_name(Lang::ZhCn, name, shape))
            .collect();
        assert_eq!(
            names,
            [
                "MHA",
                "GQA，8 个键/值头",
                "MQA",
                "SWA，窗口 4,096",
                "MLA，潜在维度 1,024"
            ]
        );
        let (name, shape, _) = &rasbt_examples()[1];
        assert_eq!(variant_name(Lang::En, name, shape), "GQA, 8 K/V heads");
    }

    #[test]
    fn each_query_head_has_one_arrow() {
        let svg = gqa(Lang::En).svg;
        assert_eq!(
            svg.matches("<polygon").count(),
            QUERY_HEADS * KV_HEADS.len()
        );
        assert!(
            svg.contains(">MHA</text>")
                && svg.contains(">GQA</text>")
                && svg.contains(">MQA</text>")
        );
    }
    #[test]
    fn a_cached_step_computes_one_row_and_a_window_forgets_the_oldest_keys() {
        let (l, w) = STEPS;
        let [(rows, prefill), (1, step), (1, windowed)] = step_scores(l, w) else {
            panic!("a step computes one row");
        };
        assert_eq!(rows, l);
        let kept = |row: &[bool]| row.iter().filter(|&&k| k).count();
        let seen: Vec<usize> = prefill.chunks(l).map(kept).collect();
        assert_eq!(seen, (1..=l).collect::<Vec<_>>());
        assert_eq!(kept(&step), l + 1); // no future to mask
        // The cache's rule: it keeps min(L', W) keys; the forgotten ones come first.
        let position = l;
        let forgotten = position + 1 - (position + 1).min(w);
        assert_eq!(kept(&windowed), w);
        assert!(windowed[..forgotten].iter().all(|&k| !k));
        assert_eq!(mask_value(), "−1e9");
    }
}
