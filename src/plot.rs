//! The book's pictures as SVG: attention heat maps and the stage-5 loss curve.
//!
//! The SVG is written as text, element by element, with every coordinate rounded to one decimal.
//! That keeps the files byte-stable, so a test can check that the committed pictures are what the
//! code draws now, and it needs no fonts or native libraries at build time: the browser lays out
//! the labels.
//!
//! Each picture is drawn in either edition's words ([`Lang`]), on the same geometry.

use std::fmt::Write;

use ndarray::ArrayView2;

use crate::lang::Lang;

/// Side of one heat-map cell, in pixels.
const CELL: f64 = 52.0;
/// Room for the row labels on the left of a heat map.
const ROW_LABELS: f64 = 72.0;
/// Room above a heat map's cells: the figure's title, the panel's title and the slanted column
/// labels.
const TOP: f64 = 128.0;
/// Room below the cells, for the line that says what rows and columns are.
const BOTTOM: f64 = 40.0;
/// Space between two panels.
const GAP: f64 = 24.0;
/// Room on the right for the colour scale and its labels.
const LEGEND: f64 = 96.0;
/// The fill of a cell the causal mask removed.
pub const MASKED: &str = "#e4e4e4";

/// ColorBrewer's "Blues", from white to deep blue: the stops of the heat maps' colour scale.
pub const BLUES: [(u8, u8, u8); 5] = [
    (247, 251, 255),
    (198, 219, 239),
    (107, 174, 214),
    (33, 113, 181),
    (8, 48, 107),
];

/// The colour of `t` in [0, 1] on the [`BLUES`] scale: 0 white, 1 deep blue.
pub(crate) fn blue(t: f64) -> String {
    let t = t.clamp(0.0, 1.0) * (BLUES.len() - 1) as f64;
    let k = (t.floor() as usize).min(BLUES.len() - 2);
    let f = t - k as f64;
    let (a, b) = (BLUES[k], BLUES[k + 1]);
    let mix = |x: u8, y: u8| (f64::from(x) + (f64::from(y) - f64::from(x)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// The top of the colour scale: the largest weight shown, rounded up to the next label of the scale
/// (see [`scale_step`]), so that the darkest blue is about the largest weight and small differences
/// between weights still show.
fn scale_top<'a>(weights: impl Iterator<Item = &'a f32>) -> f64 {
    let max = weights.fold(0.0f64, |m, &w| m.max(f64::from(w)));
    let round_up = |x: f64, step: f64| ((x / step - 1e-9).ceil() * step).max(step);
    let top = round_up(max, 0.05);
    round_up(top, scale_step(top))
}

/// The fonts of the Chinese pictures: the common Chinese system fonts of Linux, macOS and Windows,
/// then any sans-serif. Nothing is fetched: a picture shown with `<img>` may load no font anyway.
const CJK_FONTS: &str = "'Noto Sans CJK SC', 'Source Han Sans SC', 'PingFang SC', \
                         'Hiragino Sans GB', 'Microsoft YaHei', 'WenQuanYi Micro Hei', sans-serif";

/// The opening tag, a white background and the title centred on top.
pub(crate) fn open_svg(lang: Lang, width: f64, height: f64, title: &str) -> String {
    let fonts = lang.pick("sans-serif", CJK_FONTS);
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"{fonts}\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        width / 2.0,
        escape(title)
    )
}

/// Escapes the characters XML reserves.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One panel of a [`heatmaps`] figure: its title and its `(T, T)` attention weights.
pub struct Panel<'a> {
    pub title: &'a str,
    pub weights: ArrayView2<'a, f32>,
}

/// A heat map of attention weights `(T, T)`: row `i` is the query, column `j` the key, and each
/// cell shows its weight, darker for more. A cell the causal mask removed (`-inf` before softmax,
/// so weight 0) is grey.
pub fn heatmap(
    lang: Lang,
    title: &str,
    weights: &ArrayView2<f32>,
    tokens: &[&str],
    masked: Option<&dyn Fn(usize, usize) -> bool>,
) -> String {
    let panel = Panel {
        title: "",
        weights: weights.view(),
    };
    heatmaps(lang, title, &[panel], tokens, masked)
}

/// Heat maps side by side, on one colour scale, with the scale drawn on the right as a bar. Each
/// cell is filled by its weight and also prints it, two decimals, in white on the darker half of
/// the scale.
pub fn heatmaps(
    lang: Lang,
    title: &str,
    panels: &[Panel],
    tokens: &[&str],
    masked: Option<&dyn Fn(usize, usize) -> bool>,
) -> String {
    let n = tokens.len();
    for panel in panels {
        assert_eq!(
            panel.weights.dim(),
            (n, n),
            "one token label per row and column"
        );
    }
    let is_masked = |i: usize, j: usize| masked.is_some_and(|m| m(i, j));
    let shown = panels.iter().flat_map(|p| {
        p.weights
            .indexed_iter()
            .filter(|&((i, j), _)| !is_masked(i, j))
            .map(|(_, w)| w)
    });
    let top_of_scale = scale_top(shown);
    let panel_width = ROW_LABELS + CELL * n as f64;
    let grid_right = panels.len() as f64 * (panel_width + GAP) - GAP;
    let width = grid_right + LEGEND;
    let height = TOP + CELL * n as f64 + BOTTOM;
    let mut svg = open_svg(lang, width, height, title);
    for (k, panel) in panels.iter().enumerate() {
        let left = k as f64 * (panel_width + GAP) + ROW_LABELS;
        draw_panel(&mut svg, panel, tokens, left, top_of_scale, &is_masked);
    }
    let note = lang.pick(
        "row: the query token · column: the key token it attends to",
        "行：查询词元 · 列：它所关注的键词元",
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\" fill=\"#555\">\
         {note}</text>",
        grid_right / 2.0,
        height - 14.0
    );
    draw_scale(
        lang,
        &mut svg,
        grid_right + 22.0,
        top_of_scale,
        n,
        masked.is_some(),
    );
    svg.push_str("</svg>\n");
    svg
}

/// One panel's title, token labels and cells, its cells starting at `left`.
fn draw_panel(
    svg: &mut String,
    panel: &Panel,
    tokens: &[&str],
    left: f64,
    top_of_scale: f64,
    is_masked: &dyn Fn(usize, usize) -> bool,
) {
    let n = tokens.len();
    if !panel.title.is_empty() {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"44\" text-anchor=\"middle\" font-weight=\"bold\">{}</text>",
            left + CELL * n as f64 / 2.0,
            escape(panel.title)
        );
    }
    for (j, token) in tokens.iter().enumerate() {
        let x = left + CELL * (j as f64 + 0.5);
        let y = TOP - 8.0;
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" transform=\"rotate(-45 {x:.1} {y:.1})\">{}</text>",
            escape(token)
        );
    }
    for (i, token) in tokens.iter().enumerate() {
        let y = TOP + CELL * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + CELL / 2.0 + 4.0,
            escape(token)
        );
        for j in 0..n {
            let x = left + CELL * j as f64;
            let cell =
                format!("<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{CELL:.1}\" height=\"{CELL:.1}\"");
            if is_masked(i, j) {
                let _ = writeln!(svg, "{cell} fill=\"{MASKED}\" stroke=\"white\"/>");
                continue;
            }
            let w = panel.weights[(i, j)];
            let t = f64::from(w) / top_of_scale;
            let ink = if t > 0.55 { "white" } else { "black" };
            let _ = writeln!(svg, "{cell} fill=\"{}\" stroke=\"white\"/>", blue(t));
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"{ink}\">{w:.2}</text>",
                x + CELL / 2.0,
                y + CELL / 2.0 + 5.0
            );
        }
    }
}

/// The distance between two labels of the colour scale: 0.05, 0.1 or 0.25, whichever gives at most
/// six labels after 0.
fn scale_step(top_of_scale: f64) -> f64 {
    [0.05, 0.1, 0.25]
        .into_iter()
        .find(|step| top_of_scale / step <= 6.0 + 1e-9)
        .unwrap_or(0.25)
}

/// The colour scale: a bar from 0 at the bottom to `top_of_scale` at the top, as tall as `n` cells,
/// labelled at every [`scale_step`], and a grey swatch for masked cells when there are any.
fn draw_scale(lang: Lang, svg: &mut String, left: f64, top_of_scale: f64, n: usize, masked: bool) {
    let (bar_width, bar_height) = (16.0, CELL * n as f64);
    svg.push_str("<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n");
    for k in 0..BLUES.len() {
        let t = k as f64 / (BLUES.len() - 1) as f64;
        let _ = writeln!(svg, "<stop offset=\"{t:.2}\" stop-color=\"{}\"/>", blue(t));
    }
    svg.push_str("</linearGradient></defs>\n");
    let _ = writeln!(
        svg,
        "<rect x=\"{left:.1}\" y=\"{TOP:.1}\" width=\"{bar_width:.1}\" height=\"{bar_height:.1}\" \
         fill=\"url(#scale)\" stroke=\"#999\"/>"
    );
    let _ = writeln!(
        svg,
        "<text x=\"{left:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>",
        TOP - 10.0,
        lang.pick("weight", "权重")
    );
    let step = scale_step(top_of_scale);
    let ticks = (top_of_scale / step).round() as u32;
    for k in 0..=ticks {
        let value = step * f64::from(k);
        let y = TOP + bar_height * (1.0 - value / top_of_scale);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{value:.2}</text>",
            left + bar_width + 6.0,
            y + 4.0
        );
    }
    if masked {
        let y = TOP + bar_height + 12.0;
        let _ = writeln!(
            svg,
            "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{bar_width:.1}\" height=\"{bar_width:.1}\" \
             fill=\"{MASKED}\" stroke=\"#999\"/>"
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\">{}</text>",
            left + bar_width + 6.0,
            y + 12.0,
            lang.pick("masked", "已遮盖")
        );
    }
}

/// Side of one cell of a [`heatmap_grid`] panel, in pixels.
const SMALL_CELL: f64 = 12.0;

/// Heat maps of several attention-weight matrices, all (T, T), in rows of `per_row` panels, each
/// titled. The cells carry no numbers; `labels` (one per token) run down the left and along the top
/// of each panel, and the cells above the diagonal (the future a causal mask hides) are grey.
pub fn heatmap_grid(
    lang: Lang,
    title: &str,
    panels: &[(String, ArrayView2<f32>)],
    labels: &[String],
    per_row: usize,
) -> String {
    let t = labels.len();
    let side = SMALL_CELL * t as f64;
    let (margin, gap) = (24.0, 40.0); // room for the labels; between panels
    let rows = panels.len().div_ceil(per_row.max(1));
    let width = margin + (side + gap) * per_row.min(panels.len()) as f64;
    let height = 40.0 + (margin + 20.0 + side + 16.0) * rows as f64;
    let mut svg = open_svg(lang, width, height, title);
    for (k, (name, weights)) in panels.iter().enumerate() {
        assert_eq!(weights.dim(), (t, t), "one label per row and column");
        let left = margin + (side + gap) * (k % per_row) as f64;
        let top = 40.0 + (margin + 20.0 + side + 16.0) * (k / per_row) as f64 + 16.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{top:.1}\" text-anchor=\"middle\">{}</text>",
            left + side / 2.0,
            escape(name)
        );
        let top = top + margin;
        for (i, label) in labels.iter().enumerate() {
            let at = SMALL_CELL * (i as f64 + 0.5);
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"middle\">{}</text>\n\
                 <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\" text-anchor=\"end\">{}</text>",
                left + at,
                top - 4.0,
                escape(label),
                left - 3.0,
                top + at + 3.0,
                escape(label)
            );
        }
        for ((i, j), &w) in weights.indexed_iter() {
            let fill = if j > i {
                "#e0e0e0".to_string()
            } else {
                blue(f64::from(w))
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{SMALL_CELL:.1}\" height=\"{SMALL_CELL:.1}\" fill=\"{fill}\"/>",
                left + SMALL_CELL * j as f64,
                top + SMALL_CELL * i as f64
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// One line of a [`line_chart`].
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    /// (x, y) points, in the chart's units.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with axes, tick labels, and a legend; the axes fit the data.
pub fn line_chart(
    lang: Lang,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> String {
    let (width, height) = (720.0, 420.0);
    let (left, right, top, bottom) = (70.0, 20.0, 40.0, 50.0);
    let all = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_min, y_max) = all.fold(
        (0f64, f64::INFINITY, f64::NEG_INFINITY),
        |(xm, lo, hi), &(x, y)| (xm.max(x), lo.min(y), hi.max(y)),
    );
    // With no points at all, an empty 0–1 frame.
    let (y_min, y_max) = if y_min <= y_max {
        (y_min.floor(), y_max.ceil())
    } else {
        (0.0, 1.0)
    };
    let to_px = |x: f64, y: f64| {
        let px = left + (width - left - right) * x / x_max.max(1.0);
        let py = top + (height - top - bottom) * (y_max - y) / (y_max - y_min).max(1e-9);
        (px, py)
    };
    let mut svg = open_svg(lang, width, height, title);
    let (x0, y0) = to_px(0.0, y_min);
    let (x1, y1) = to_px(x_max, y_max);
    let _ = writeln!(
        svg,
        "<path d=\"M{x0:.1},{y1:.1} V{y0:.1} H{x1:.1}\" fill=\"none\" stroke=\"black\"/>"
    );
    for k in 0..=4 {
        let x = x_max * f64::from(k) / 4.0;
        let (px, _) = to_px(x, y_min);
        let _ = writeln!(
            svg,
            "<text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{x:.0}</text>",
            y0 + 18.0
        );
        let y = y_min + (y_max - y_min) * f64::from(k) / 4.0;
        let (_, py) = to_px(0.0, y);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{y:.2}</text>",
            x0 - 6.0,
            py + 4.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
        (x0 + x1) / 2.0,
        height - 10.0,
        escape(x_label)
    );
    let _ = writeln!(
        svg,
        "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\">{}</text>",
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0,
        escape(y_label)
    );
    for (n, s) in series.iter().enumerate() {
        let path: Vec<String> = s
            .points
            .iter()
            .map(|&(x, y)| {
                let (px, py) = to_px(x, y);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            path.join(" "),
            s.colour
        );
        let ly = top + 10.0 + 18.0 * n as f64;
        let _ = writeln!(
            svg,
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{}\" stroke-width=\"3\"/>",
            x1 - 190.0,
            x1 - 170.0,
            s.colour
        );
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x1 - 164.0,
            ly + 4.0,
            escape(s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heatmap_has_one_cell_per_weight_and_greys_masked_cells() {
        let w = ndarray::arr2(&[[1.0f32, 0.0], [0.4, 0.6]]);
        let causal = |i: usize, j: usize| j > i;
        let svg = heatmap(Lang::En, "t", &w.view(), &["a", "b"], Some(&causal));
        // Four cells, the scale's bar and the swatch for masked cells.
        assert_eq!(svg.matches("<rect x=").count(), 4 + 2);
        assert_eq!(svg.matches(MASKED).count(), 1 + 1);
        assert!(svg.contains(">0.60</text>"));
        let zeros = svg.matches(">0.00</text>").count();
        assert_eq!(
            zeros, 1,
            "only the scale says 0.00: a masked cell prints no weight"
        );
    }

    #[test]
    fn the_darkest_blue_is_the_largest_weight() {
        assert_eq!(blue(0.0), "#f7fbff");
        assert_eq!(blue(1.0), "#08306b");
        assert_eq!(blue(0.5), "#6baed6");
        let w = ndarray::arr2(&[[0.24f32, 0.09], [0.1, 0.2]]);
        assert_eq!(scale_top(w.iter()), 0.25);
        assert_eq!(scale_top([1.0f32].iter()), 1.0);
        assert_eq!(scale_top([0.33f32].iter()), 0.4);
        assert_eq!(scale_step(0.25), 0.05);
        let svg = heatmap(Lang::En, "t", &w.view(), &["a", "b"], None);
        assert!(svg.contains(">0.25</text>"), "the scale's top label");
        assert!(!svg.contains(MASKED), "no mask, no swatch");
    }

    #[test]
    fn panels_share_one_scale() {
        let a = ndarray::arr2(&[[1.0f32, 0.0], [0.5, 0.5]]);
        let b = ndarray::arr2(&[[1.0f32, 0.0], [0.2, 0.8]]);
        let panels = [
            Panel {
                title: "head 0",
                weights: a.view(),
            },
            Panel {
                title: "head 1",
                weights: b.view(),
            },
        ];
        let svg = heatmaps(Lang::En, "t", &panels, &["a", "b"], None);
        assert_eq!(svg.matches("url(#scale)").count(), 1);
        assert!(svg.contains(">head 0</text>") && svg.contains(">head 1</text>"));
        assert_eq!(svg.matches(&format!("fill=\"{}\"", blue(1.0))).count(), 2);
    }

    #[test]
    fn heatmap_grid_draws_every_panel() {
        let w = ndarray::arr2(&[[1.0f32, 0.0], [0.4, 0.6]]);
        let panels = vec![("head 0".to_string(), w.view()); 3];
        let labels = ["a".to_string(), "b".to_string()];
        let svg = heatmap_grid(Lang::En, "t", &panels, &labels, 2);
        assert_eq!(svg.matches("<rect x=").count(), 3 * 4);
        assert_eq!(svg.matches("#e0e0e0").count(), 3);
        assert_eq!(svg.matches(">head 0</text>").count(), 3);
    }

    #[test]
    fn line_chart_draws_each_series() {
        let s = Series {
            name: "loss",
            colour: "red",
            points: vec![(0.0, 4.0), (10.0, 2.0)],
        };
        let svg = line_chart(Lang::En, "t", "step", "loss", &[s]);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("points=\"70.0,40.0 700.0,370.0\""));
    }
}
