//! The heat maps of attention weights: one matrix, matrices side by side on one colour scale, or a
//! grid of small ones, each drawn in either edition's words ([`Lang`]) on the same geometry.

use ndarray::ArrayView2;

use super::colours::{BLUES, MASKED, blue};
use super::draw::{Tag, bar, close_svg, footer, open_svg, rect, weight};
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
/// The top of the colour scale: the largest weight shown, rounded up to the next label of the scale
/// (see [`scale_step`]), so that the darkest blue is about the largest weight and small differences
/// between weights still show.
fn scale_top<'a>(weights: impl Iterator<Item = &'a f32>) -> f64 {
    let max = weights.fold(0.0f64, |m, &w| m.max(f64::from(w)));
    let round_up = |x: f64, step: f64| ((x / step - 1e-9).ceil() * step).max(step);
    let top = round_up(max, 0.05);
    round_up(top, scale_step(top))
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
    let height = TOP + CELL * n as f64 + BOTTOM;
    let mut svg = open_svg(lang, grid_right + LEGEND, height, title);
    for (k, panel) in panels.iter().enumerate() {
        let left = k as f64 * (panel_width + GAP) + ROW_LABELS;
        draw_labels(&mut svg, panel.title, tokens, left);
        draw_rows(&mut svg, panel, tokens, left, top_of_scale, &is_masked);
    }
    let words = lang.pick(
        "row: the query token · column: the key token it attends to",
        "行：查询词元 · 列：它所关注的键词元",
    );
    footer(&mut svg, (grid_right, height), words);
    let scale = Scale {
        left: grid_right + 22.0,
        top: top_of_scale,
        height: CELL * n as f64,
    };
    scale.draw(lang, &mut svg, masked.is_some());
    close_svg(svg)
}

/// One panel's title and the token labels slanted along the top of cells starting at `left`.
fn draw_labels(svg: &mut String, title: &str, tokens: &[&str], left: f64) {
    if !title.is_empty() {
        Tag::new("text")
            .px("x", left + CELL * tokens.len() as f64 / 2.0)
            .set("y", 44)
            .set("text-anchor", "middle")
            .set("font-weight", "bold")
            .holding(svg, title);
    }
    for (j, token) in tokens.iter().enumerate() {
        let at = (left + CELL * (j as f64 + 0.5), TOP - 8.0);
        Tag::new("text").at(at).rotated(-45, at).holding(svg, token);
    }
}

/// One panel's rows from `left`, each its token's label and its cells: each cell shaded by its
/// weight and printing it, or grey where `is_masked`.
fn draw_rows(
    svg: &mut String,
    panel: &Panel,
    tokens: &[&str],
    left: f64,
    top_of_scale: f64,
    is_masked: &dyn Fn(usize, usize) -> bool,
) {
    for (i, (token, row)) in tokens.iter().zip(panel.weights.rows()).enumerate() {
        let y = TOP + CELL * i as f64;
        Tag::new("text")
            .at((left - 8.0, y + CELL / 2.0 + 4.0))
            .set("text-anchor", "end")
            .holding(svg, token);
        for (j, &w) in row.iter().enumerate() {
            let x = left + CELL * j as f64;
            if is_masked(i, j) {
                rect(svg, (x, y), (CELL, CELL), MASKED, "white");
                continue;
            }
            let shade = weight(w, top_of_scale);
            rect(svg, (x, y), (CELL, CELL), &shade.fill, "white");
            Tag::new("text")
                .at((x + CELL / 2.0, y + CELL / 2.0 + 5.0))
                .set("text-anchor", "middle")
                .set("fill", shade.ink)
                .holding(svg, &shade.word);
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

/// Words of the colour scale, 12 px, starting at (x, y).
fn scale_words(svg: &mut String, at: (f64, f64), words: &str) {
    Tag::new("text")
        .at(at)
        .set("font-size", 12)
        .holding(svg, words);
}

/// The colour scale: a bar from 0 at the bottom to `top` at the top, `height` px tall from the
/// cells' top, its left side at `left`.
struct Scale {
    left: f64,
    top: f64,
    height: f64,
}

impl Scale {
    /// The bar's width, and the side of the masked cells' swatch.
    const WIDTH: f64 = 16.0;

    /// The bar labelled at every [`scale_step`], and a grey swatch for masked cells when there are
    /// any.
    fn draw(&self, lang: Lang, svg: &mut String, masked: bool) {
        svg.push_str("<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n");
        for k in 0..BLUES.len() {
            let t = k as f64 / (BLUES.len() - 1) as f64;
            Tag::new("stop")
                .set("offset", format_args!("{t:.2}"))
                .set("stop-color", blue(t))
                .close(svg);
        }
        svg.push_str("</linearGradient></defs>\n");
        let size = (Self::WIDTH, self.height);
        rect(svg, (self.left, TOP), size, "url(#scale)", "#999");
        scale_words(svg, (self.left, TOP - 10.0), lang.pick("weight", "权重"));
        let step = scale_step(self.top);
        let ticks = (self.top / step).round() as u32;
        for k in 0..=ticks {
            let value = step * f64::from(k);
            let y = TOP + self.height * (1.0 - value / self.top);
            scale_words(svg, (self.words_x(), y + 4.0), &format!("{value:.2}"));
        }
        if masked {
            let y = TOP + self.height + 12.0;
            let swatch = (Self::WIDTH, Self::WIDTH);
            rect(svg, (self.left, y), swatch, MASKED, "#999");
            let masked = lang.pick("masked", "已遮盖");
            scale_words(svg, (self.words_x(), y + 12.0), masked);
        }
    }

    /// Where the scale's labels start, right of the bar.
    fn words_x(&self) -> f64 {
        self.left + Self::WIDTH + 6.0
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
    let side = SMALL_CELL * labels.len() as f64;
    let (margin, gap) = (24.0, 40.0); // room for the labels; between panels
    let rows = panels.len().div_ceil(per_row.max(1));
    let width = margin + (side + gap) * per_row.min(panels.len()) as f64;
    let height = 40.0 + (margin + 20.0 + side + 16.0) * rows as f64;
    let mut svg = open_svg(lang, width, height, title);
    for (k, (name, weights)) in panels.iter().enumerate() {
        let left = margin + (side + gap) * (k % per_row) as f64;
        let top = 40.0 + (margin + 20.0 + side + 16.0) * (k / per_row) as f64 + 16.0;
        Tag::new("text")
            .at((left + side / 2.0, top))
            .set("text-anchor", "middle")
            .holding(&mut svg, name);
        small_panel(&mut svg, (left, top + margin), weights, labels);
    }
    close_svg(svg)
}

/// One panel of a [`heatmap_grid`], its cells from (left, top): the labels, 9 px, then the cells,
/// grey above the diagonal.
fn small_panel(
    svg: &mut String,
    (left, top): (f64, f64),
    weights: &ArrayView2<f32>,
    labels: &[String],
) {
    let t = labels.len();
    assert_eq!(weights.dim(), (t, t), "one label per row and column");
    let small = |at, anchor| {
        Tag::new("text")
            .at(at)
            .set("font-size", 9)
            .set("text-anchor", anchor)
    };
    for (i, label) in labels.iter().enumerate() {
        let along = SMALL_CELL * (i as f64 + 0.5);
        small((left + along, top - 4.0), "middle").holding(svg, label);
        small((left - 3.0, top + along + 3.0), "end").holding(svg, label);
    }
    for ((i, j), &w) in weights.indexed_iter() {
        let fill = if j > i {
            "#e0e0e0".to_string()
        } else {
            blue(f64::from(w))
        };
        let at = (left + SMALL_CELL * j as f64, top + SMALL_CELL * i as f64);
        bar(svg, at, (SMALL_CELL, SMALL_CELL), &fill);
    }
}

#[cfg(test)]
mod tests {
    use crate::figures::heatmap::*;

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
}
