//! The book's pictures as SVG: attention heat maps and the stage-5 loss curve.
//!
//! The SVG is written as text, element by element, with every coordinate rounded to one decimal. That keeps
//! the files byte-stable, so a test can check that the committed pictures are what the code draws now, and
//! it needs no fonts or native libraries at build time: the browser lays out the labels.

use std::fmt::Write;

use ndarray::ArrayView2;

/// Side of one heat-map cell, in pixels.
const CELL: f64 = 56.0;
/// Room for the row labels on the left and the column labels on top.
const LABEL_ROOM: f64 = 90.0;

/// A colour between white (0) and deep blue (1), for weights in [0, 1].
fn blue(t: f32) -> String {
    let t = f64::from(t.clamp(0.0, 1.0));
    let channel = |from: f64, to: f64| (from + (to - from) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        channel(247.0, 8.0),
        channel(251.0, 48.0),
        channel(255.0, 107.0)
    )
}

/// The opening tag, a white background and the title centred on top.
fn open_svg(width: f64, height: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"13\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{:.1}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        width / 2.0,
        escape(title)
    )
}

/// Escapes the characters XML reserves.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A heat map of attention weights `(T, T)`: row `i` is the query, column `j` the key, and each cell shows
/// its weight. A cell the causal mask removed (`-inf` before softmax, so weight 0) is drawn grey.
pub fn heatmap(
    title: &str,
    weights: &ArrayView2<f32>,
    tokens: &[&str],
    masked: Option<&dyn Fn(usize, usize) -> bool>,
) -> String {
    let (rows, cols) = weights.dim();
    assert_eq!(
        (rows, cols),
        (tokens.len(), tokens.len()),
        "one token label per row and column"
    );
    let width = LABEL_ROOM + CELL * cols as f64 + 20.0;
    let height = LABEL_ROOM + 30.0 + CELL * rows as f64 + 20.0;
    let top = LABEL_ROOM + 30.0;
    let mut svg = open_svg(width, height, title);
    for (j, token) in tokens.iter().enumerate() {
        let x = LABEL_ROOM + CELL * (j as f64 + 0.5);
        let _ = writeln!(
            svg,
            "<text x=\"{x:.1}\" y=\"{:.1}\" transform=\"rotate(-45 {x:.1} {:.1})\">{}</text>",
            top - 8.0,
            top - 8.0,
            escape(token)
        );
    }
    for (i, token) in tokens.iter().enumerate() {
        let y = top + CELL * i as f64;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            LABEL_ROOM - 8.0,
            y + CELL / 2.0 + 4.0,
            escape(token)
        );
        for j in 0..cols {
            let x = LABEL_ROOM + CELL * j as f64;
            let w = weights[(i, j)];
            let is_masked = masked.is_some_and(|m| m(i, j));
            let fill = if is_masked {
                "#e0e0e0".to_string()
            } else {
                blue(w)
            };
            let ink = if !is_masked && w > 0.5 {
                "white"
            } else {
                "black"
            };
            let _ = writeln!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{CELL:.1}\" height=\"{CELL:.1}\" fill=\"{fill}\" stroke=\"white\"/>"
            );
            let _ = writeln!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\" fill=\"{ink}\">{w:.2}</text>",
                x + CELL / 2.0,
                y + CELL / 2.0 + 4.0
            );
        }
    }
    svg.push_str("</svg>\n");
    svg
}

/// Side of one cell of a [`heatmap_grid`] panel, in pixels.
const SMALL_CELL: f64 = 12.0;

/// Heat maps of several attention-weight matrices, all (T, T), in rows of `per_row` panels, each titled.
/// The cells carry no numbers; `labels` (one per token) run down the left and along the top of each
/// panel, and the cells above the diagonal (the future a causal mask hides) are grey.
pub fn heatmap_grid(
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
    let mut svg = open_svg(width, height, title);
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
                blue(w)
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
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
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
    let mut svg = open_svg(width, height, title);
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
        let svg = heatmap("t", &w.view(), &["a", "b"], Some(&causal));
        assert_eq!(svg.matches("<rect x=").count(), 4);
        assert_eq!(svg.matches("#e0e0e0").count(), 1);
        assert!(svg.contains(">0.60</text>"));
    }

    #[test]
    fn heatmap_grid_draws_every_panel() {
        let w = ndarray::arr2(&[[1.0f32, 0.0], [0.4, 0.6]]);
        let panels = vec![("head 0".to_string(), w.view()); 3];
        let labels = ["a".to_string(), "b".to_string()];
        let svg = heatmap_grid("t", &panels, &labels, 2);
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
        let svg = line_chart("t", "step", "loss", &[s]);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("points=\"70.0,40.0 700.0,370.0\""));
    }
}
