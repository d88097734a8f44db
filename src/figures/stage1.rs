//! The pictures of stage 1 (§3.3), drawn from the crate's own numbers: the inputs and their scores
//! with the query x⁽²⁾ (`s1_inputs.svg`), and the query's three steps, score → weight → context
//! vector, in one picture (`s1_journey.svg`).
//!
//! The colours of the query, the scores and the weights here are shared with stage 2's pictures.

use ndarray::{Array1, Array2};

use super::Figure;
use super::draw::{
    BLUE, GREEN, GREY, ORANGE, PURPLE, Tag, arrow, bar, cell, frame, note, open_svg, text, weight,
};
use super::finish;
use crate::Error;
use crate::lang::Lang;
use crate::s1_simple::{JOURNEY, TOKENS, attn_scores_for, context_vector, inputs, softmax};

/// The query's colour: the row of x⁽²⁾ is outlined and its arrow drawn in it.
pub(super) const QUERY: &str = ORANGE;
/// The colour of the score bars.
pub(super) const SCORE: &str = BLUE;
/// The colour of the weight bars.
pub(super) const WEIGHT: &str = GREEN;
/// The outline of a vector's cells, which white would lose against the page.
const OUTLINE: &str = "#999";

/// A component's cell at (x, y) on the Blues scale, its value printed in it.
fn component(svg: &mut String, at: (f64, f64), value: f32) {
    cell(svg, at, (CELL_W, CELL_H), OUTLINE, &weight(value, 1.0));
}

/// A horizontal bar from (x, y), `length` px long and `h` high, in `colour`, with `label` just
/// after its end: the number the bar stands for, to read it exactly.
fn labelled_bar(
    svg: &mut String,
    (x, y): (f64, f64),
    (length, h): (f64, f64),
    colour: &str,
    label: &str,
) {
    bar(svg, (x, y), (length, h), colour);
    text(
        svg,
        (x + length + 5.0, y + h / 2.0 + 4.5),
        "start",
        12,
        "black",
        label,
    );
}

/// The label of a row of cells, right-aligned at `x` and level with the row's middle.
fn row_label(svg: &mut String, x: f64, y: f64, label: &str) {
    text(svg, (x, y + CELL_H / 2.0 + 4.5), "end", 13, "black", label);
}

/// The notes at the foot of a picture `width` × `height`, a line of `lines` each, the last 16 px
/// above the bottom edge and each other 18 px above the next.
fn notes(svg: &mut String, (width, height): (f64, f64), lines: &str) {
    let count = lines.lines().count();
    for (k, line) in lines.lines().enumerate() {
        let y = height - 16.0 - 18.0 * (count - 1 - k) as f64;
        note(svg, (width / 2.0, y), line);
    }
}

/// The numbers of §3.3.1 for the query x⁽²⁾: the inputs (T, d_in), the scores ω₂ (T), the
/// weights α₂ = softmax(ω₂) (T) and the context vector z⁽²⁾ (d_in), from the stage's functions.
struct Journey {
    inputs: Array2<f32>,
    scores: Array1<f32>,
    weights: Array1<f32>,
    context: Array1<f32>,
}

impl Journey {
    fn new() -> Self {
        let inputs = inputs(); // (T, d_in)
        let query = inputs.row(JOURNEY); // (d_in)
        let scores = attn_scores_for(&query, &inputs.view()); // (T)
        let weights = softmax(&scores); // (T)
        let context = context_vector(&weights.view(), &inputs.view()); // (d_in)
        Journey {
            inputs,
            scores,
            weights,
            context,
        }
    }
}

/// The side of a component's cell, in pixels.
const CELL_W: f64 = 48.0;
const CELL_H: f64 = 32.0;

/// The inputs picture's columns: the row labels' right edge, and the left edges of the
/// components, of the products and of the score bars.
const INPUTS_COLUMNS: (f64, f64, f64, f64) = (100.0, 112.0, 300.0, 486.0);
/// The inputs picture's first input row, and the pitch of its rows.
const INPUTS_ROWS: (f64, f64) = (136.0, 46.0);

/// `s1_inputs.svg`: the query x⁽²⁾ and the six inputs as rows of three shaded components, the
/// products x⁽ⁱ⁾ₖ·qₖ, and each input's score ω₂ᵢ, their sum, as a bar.
fn inputs_figure(lang: Lang, journey: &Journey) -> Figure {
    let (width, height) = (740.0, 470.0);
    let mut svg = open_svg(
        lang,
        width,
        height,
        lang.pick(
            "Stage 1: how much each input resembles the query x⁽²⁾ (journey)",
            "第 1 阶段：每个输入与查询 x⁽²⁾（journey）有多相似",
        ),
    );
    inputs_headers(lang, &mut svg);
    let (label_x, comp_x, _, _) = INPUTS_COLUMNS;
    let query_box = (comp_x + 3.0 * CELL_W + 6.0, CELL_H + 12.0);
    frame(&mut svg, (6.0, 60.0), query_box, QUERY, "#fff5eb");
    let query_label = lang.pick("query q = x⁽²⁾", "查询 q = x⁽²⁾");
    row_label(&mut svg, label_x, 66.0, query_label);
    for (k, &q) in journey.inputs.row(JOURNEY).iter().enumerate() {
        component(&mut svg, (comp_x + CELL_W * k as f64, 66.0), q);
    }
    for i in 0..TOKENS.len() {
        input_row(&mut svg, journey, i, width);
    }
    let lines = lang.pick(
        "An input whose large components sit where the query's are gives large products and a long bar.\n\
         Cells: darker blue for larger numbers. Bars: the scores of attn_scores_for.",
        "输入的大分量若与查询的大分量位置相同，乘积就大，条形就长。\n\
         格子：数越大，蓝色越深。条形：attn_scores_for 算出的得分。",
    );
    notes(&mut svg, (width, height), lines);
    finish(lang, "s1_inputs.svg", svg)
}

/// The inputs picture's column headers.
fn inputs_headers(lang: Lang, svg: &mut String) {
    let (_, comp_x, prod_x, bar_x) = INPUTS_COLUMNS;
    let top = INPUTS_ROWS.0;
    let header = |svg: &mut String, x: f64, y: f64, words: &str| {
        text(svg, (x, y), "middle", 13, "black", words)
    };
    let components = lang.pick("components", "分量");
    header(svg, comp_x + 1.5 * CELL_W, 52.0, components);
    let products = lang.pick("products x⁽ⁱ⁾ₖ · qₖ", "乘积 x⁽ⁱ⁾ₖ · qₖ");
    header(svg, prod_x + 1.5 * CELL_W, top - 12.0, products);
    let score = lang.pick(
        "score ω₂ᵢ = x⁽ⁱ⁾ · q (their sum)",
        "得分 ω₂ᵢ = x⁽ⁱ⁾ · q（乘积之和）",
    );
    header(svg, bar_x + 100.0, top - 12.0, score);
}

/// Input `i`'s row in a picture `width` wide: its components, their products with the query, and
/// its score as a bar; the query's own row framed.
fn input_row(svg: &mut String, journey: &Journey, i: usize, width: f64) {
    let (label_x, comp_x, prod_x, bar_x) = INPUTS_COLUMNS;
    let bar_per_unit = 130.0; // px per unit of score
    let (top, row) = INPUTS_ROWS;
    let y = top + row * i as f64;
    if i == JOURNEY {
        let row_box = (width - 12.0, CELL_H + 12.0);
        frame(svg, (6.0, y - 6.0), row_box, QUERY, "none");
    }
    let label = format!("x⁽{}⁾ {}", superscript(i + 1), TOKENS[i]);
    row_label(svg, label_x, y, &label);
    let query = journey.inputs.row(JOURNEY);
    for (k, (&x, &q)) in journey.inputs.row(i).iter().zip(query).enumerate() {
        component(svg, (comp_x + CELL_W * k as f64, y), x);
        component(svg, (prod_x + CELL_W * k as f64, y), x * q);
    }
    let between = |svg: &mut String, x: f64, operator: &str| {
        let at = (x, y + CELL_H / 2.0 + 5.0);
        text(svg, at, "middle", 15, GREY, operator)
    };
    between(svg, (comp_x + 3.0 * CELL_W + prod_x) / 2.0, "×q");
    between(svg, (prod_x + 3.0 * CELL_W + bar_x) / 2.0, "Σ");
    let score = journey.scores[i];
    labelled_bar(
        svg,
        (bar_x, y + 4.0),
        (f64::from(score) * bar_per_unit, CELL_H - 8.0),
        SCORE,
        &format!("{score:.4}"),
    );
}

/// `n` (1 to 9) as a superscript digit.
pub(super) fn superscript(n: usize) -> char {
    ['⁰', '¹', '²', '³', '⁴', '⁵', '⁶', '⁷', '⁸', '⁹'][n % 10]
}

/// The journey picture's columns: the row labels' right edge, and the left edges of the score
/// bars, of the weight bars and of the weighted inputs.
const JOURNEY_COLUMNS: (f64, f64, f64, f64) = (82.0, 92.0, 300.0, 526.0);
/// The journey picture's first row, and the pitch of its rows.
const JOURNEY_ROWS: (f64, f64) = (84.0, 44.0);

/// `s1_journey.svg`: for the query journey, the six scores as bars, their softmax weights as bars
/// (summing to 1), each input times its weight, and the context vector z⁽²⁾ as the sum of those.
fn journey_figure(lang: Lang, journey: &Journey) -> Figure {
    let (width, height) = (740.0, 440.0);
    let mut svg = open_svg(
        lang,
        width,
        height,
        lang.pick(
            "Stage 1: score → weight → context vector, for the query journey",
            "第 1 阶段：查询 journey 的得分 → 权重 → 上下文向量",
        ),
    );
    journey_headers(lang, &mut svg);
    for i in 0..TOKENS.len() {
        journey_row(&mut svg, journey, i, width);
    }
    journey_sums(&mut svg, journey);
    let lines = lang.pick(
        "Softmax keeps the scores' order and makes the weights sum to 1;\n\
         z⁽²⁾ adds up the inputs, each scaled by its weight: the high scorers count most.",
        "softmax 保持得分的大小顺序，并使权重之和为 1；\n\
         z⁽²⁾ 把各输入按其权重缩放后相加：得分高的输入贡献最大。",
    );
    notes(&mut svg, (width, height), lines);
    finish(lang, "s1_journey.svg", svg)
}

/// The journey picture's three headers, and the arrows between them.
fn journey_headers(lang: Lang, svg: &mut String) {
    let (_, score_x, weight_x, sum_x) = JOURNEY_COLUMNS;
    let top = JOURNEY_ROWS.0;
    let header = |svg: &mut String, x: f64, words: &str| {
        text(svg, (x, top - 16.0), "middle", 13, "black", words)
    };
    header(
        svg,
        score_x + 60.0,
        lang.pick("1. scores ω₂ᵢ", "1. 得分 ω₂ᵢ"),
    );
    header(
        svg,
        weight_x + 70.0,
        lang.pick("2. weights α₂ᵢ", "2. 权重 α₂ᵢ"),
    );
    let weighted = lang.pick("3. α₂ᵢ · x⁽ⁱ⁾", "3. α₂ᵢ · x⁽ⁱ⁾");
    header(svg, sum_x + 1.5 * CELL_W, weighted);
    let between = |svg: &mut String, x0: f64, x1: f64, words: &str| {
        let y = top - 36.0;
        arrow(svg, (x0, y), (x1, y), GREY, 1.5, (8.0, 3.6));
        text(svg, ((x0 + x1) / 2.0, y - 6.0), "middle", 12, GREY, words);
    };
    between(svg, score_x + 150.0, weight_x + 10.0, "softmax");
    let times = lang.pick("× x⁽ⁱ⁾", "× x⁽ⁱ⁾");
    between(svg, weight_x + 150.0, sum_x + 10.0, times);
}

/// Input `i`'s row in a picture `width` wide: its score and its weight as bars, and the input
/// times its weight; the query's own row framed.
fn journey_row(svg: &mut String, journey: &Journey, i: usize, width: f64) {
    let (label_x, score_x, weight_x, sum_x) = JOURNEY_COLUMNS;
    let score_px = 100.0 / 1.6; // px per unit of score
    let weight_px = 110.0 / 0.25; // px per unit of weight
    let (top, row) = JOURNEY_ROWS;
    let y = top + row * i as f64;
    if i == JOURNEY {
        let row_box = (width - 12.0, CELL_H + 10.0);
        frame(svg, (6.0, y - 5.0), row_box, QUERY, "#fff5eb");
    }
    row_label(svg, label_x, y, TOKENS[i]);
    let (score, weight) = (journey.scores[i], journey.weights[i]);
    let bar_h = CELL_H - 10.0;
    let score_bar = (f64::from(score) * score_px, bar_h);
    let words = format!("{score:.4}");
    labelled_bar(svg, (score_x, y + 5.0), score_bar, SCORE, &words);
    let weight_bar = (f64::from(weight) * weight_px, bar_h);
    let words = format!("{weight:.4}");
    labelled_bar(svg, (weight_x, y + 5.0), weight_bar, WEIGHT, &words);
    for (k, &x) in journey.inputs.row(i).iter().enumerate() {
        component(svg, (sum_x + CELL_W * k as f64, y), weight * x);
    }
}

/// The sums under the rows: the weights add up to 1, the weighted inputs to z⁽²⁾, framed.
fn journey_sums(svg: &mut String, journey: &Journey) {
    let (_, _, weight_x, sum_x) = JOURNEY_COLUMNS;
    let (top, row) = JOURNEY_ROWS;
    let y = top + row * TOKENS.len() as f64 + 4.0;
    let rule = |svg: &mut String, x0: f64, x1: f64| {
        let line = Tag::new("line").ends((x0, y - 6.0), (x1, y - 6.0));
        line.set("stroke", "black").close(svg);
    };
    rule(svg, weight_x, weight_x + 170.0);
    rule(svg, sum_x, sum_x + 3.0 * CELL_W);
    let total: f32 = journey.weights.sum();
    let sum_label = (weight_x, y + CELL_H / 2.0 + 4.5);
    let words = format!("Σ α₂ᵢ = {total:.4}");
    text(svg, sum_label, "start", 13, "black", &words);
    row_label(svg, sum_x - 8.0, y, "z⁽²⁾ = Σ");
    for (k, &z) in journey.context.iter().enumerate() {
        component(svg, (sum_x + CELL_W * k as f64, y), z);
    }
    let z_box = (3.0 * CELL_W + 4.0, CELL_H + 4.0);
    frame(svg, (sum_x - 2.0, y - 2.0), z_box, PURPLE, "none");
}

/// This stage's pictures in `lang`'s words.
pub fn figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let journey = Journey::new();
    Ok(vec![
        inputs_figure(lang, &journey),
        journey_figure(lang, &journey),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lengths of the bars in `colour`, in the order drawn.
    fn bars(svg: &str, colour: &str) -> Vec<f64> {
        svg.lines()
            .filter(|l| l.starts_with("<rect") && l.ends_with(&format!("fill=\"{colour}\"/>")))
            .map(|l| {
                let at = l.find("width=\"").unwrap() + 7;
                l[at..at + l[at..].find('"').unwrap()].parse().unwrap()
            })
            .collect()
    }

    /// The token whose bar in `colour` is the longest, of the six.
    fn longest(svg: &str, colour: &str) -> &'static str {
        let lengths = bars(svg, colour);
        assert_eq!(lengths.len(), 6);
        let longest = (0..6)
            .max_by(|&a, &b| lengths[a].total_cmp(&lengths[b]))
            .unwrap();
        TOKENS[longest]
    }

    #[test]
    fn the_inputs_picture_draws_the_scores_of_attn_scores_for_and_journey_scores_highest() {
        let figure = &figures(Lang::En).unwrap()[0];
        assert_eq!(figure.file, "s1_inputs.svg");
        assert_eq!(longest(&figure.svg, SCORE), "journey");
        // The chapter's printed scores, as the bars' labels.
        for score in ["0.9544", "1.4950", "1.4754", "0.8434", "0.7070", "1.0865"] {
            assert!(figure.svg.contains(&format!(">{score}</text>")), "{score}");
        }
        // The query's 3 cells, then 3 components and 3 products per input.
        let cells = figure.svg.matches(&format!("stroke=\"{OUTLINE}\"")).count();
        assert_eq!(cells, 3 + 6 * 6);
    }

    #[test]
    fn the_journey_picture_sums_the_weighted_inputs_to_the_context_vector() {
        let figure = &figures(Lang::En).unwrap()[1];
        assert_eq!(figure.file, "s1_journey.svg");
        assert_eq!(longest(&figure.svg, WEIGHT), "journey");
        assert!(figure.svg.contains(">Σ α₂ᵢ = 1.0000</text>"));
        // z⁽²⁾ as `context_vector` prints it, to the cells' two decimals: 0.4419, 0.6515, 0.5683.
        let z_row = figure.svg.split("z⁽²⁾ = Σ</text>").nth(1).unwrap();
        for z in ["0.44", "0.65", "0.57"] {
            assert!(z_row.contains(&format!(">{z}</text>")), "{z}");
        }
        // Each column of the weighted inputs adds up to z⁽²⁾'s component.
        let journey = Journey::new();
        for k in 0..3 {
            let column: f32 = (0..6)
                .map(|i| journey.weights[i] * journey.inputs[[i, k]])
                .sum();
            assert!((column - journey.context[k]).abs() < 1e-6);
        }
    }
}
