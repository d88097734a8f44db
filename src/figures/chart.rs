//! Line charts: series of points against two axes, each linear or logarithmic, drawn in one of the
//! book's two chart styles ([`Style`]): the stage-5 step charts' ([`STEPS`]) and stage 2's.

use super::draw::{
    GREY, Tag, axes, close_svg, dot, legend_key, note, open_svg, polyline, text, vertical_text,
};
use crate::lang::Lang;

/// One line of a chart.
pub struct Series<'a> {
    pub name: &'a str,
    pub colour: &'a str,
    /// (x, y) points, in the chart's units.
    pub points: Vec<(f64, f64)>,
}

/// How an axis spaces its numbers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scale {
    Linear,
    /// Equal steps for equal ratios: 2, 4, 8, … equally spaced, for a number that doubles.
    Log2,
}

/// One axis of a chart: its name, the numbers at its two ends, how it spaces the numbers between,
/// and its ticks, each a number and its label.
pub(super) struct Axis<'a> {
    pub name: &'a str,
    pub ends: (f64, f64),
    pub scale: Scale,
    pub ticks: Vec<(f64, String)>,
}

impl Axis<'_> {
    /// How far `v` lies along the axis drawn `length` px long: from its low end, or from its high
    /// end if `from_high` (a vertical axis, whose y grows downwards on the page).
    fn offset(&self, v: f64, length: f64, from_high: bool) -> f64 {
        let (low, high) = self.ends;
        let (a, b) = if from_high { (v, high) } else { (low, v) };
        match self.scale {
            Scale::Linear => length * (b - a) / (high - low).max(1e-9),
            Scale::Log2 => length * ((b.log2() - a.log2()) / (high.log2() - low.log2())),
        }
    }
}

/// The side of the frame a legend stands on.
#[derive(Clone, Copy, Debug)]
pub(super) enum Side {
    Left,
    Right,
}

/// Where a chart's legend stands: its first key `inset` (x, y) px inside the frame's top corner on
/// `side`, a row per series, each key a line `key` px long with the series' name after it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Legend {
    pub side: Side,
    pub inset: (f64, f64),
    pub row: f64,
    pub key: f64,
}

/// Which of a style's two sizes of words a chart's words take: the ticks' and the legend's, or
/// the axes' names.
#[derive(Clone, Copy, Debug)]
enum Role {
    Tick,
    Name,
}

/// How a chart is laid out and written.
#[derive(Clone, Copy, Debug)]
pub(super) struct Style {
    pub size: (f64, f64),
    /// Room left, right, above and below the frame.
    pub margins: [f64; 4],
    /// The size of the ticks' and the legend's words, and of the axes' names; `None`: the
    /// picture's own size and colour, left unwritten.
    pub words: Option<(u32, u32)>,
    /// The x axis's name stands this far above the picture's bottom edge, the y axis's this far
    /// right of its left edge.
    pub names: (f64, f64),
    /// Ticks drawn an x and a y in turn (each axis has as many), or every x and then every y.
    pub paired_ticks: bool,
    /// A light line across the frame at every tick of y.
    pub grid: bool,
    pub line_width: f64,
    /// The radius of a dot at every point, or no dots.
    pub dots: Option<f64>,
    pub legend: Legend,
}

/// The style of the stage-5 step charts: the loss curves and the learning rate.
pub(super) const STEPS: Style = Style {
    size: (720.0, 420.0),
    margins: [70.0, 20.0, 40.0, 50.0],
    words: None,
    names: (10.0, 16.0),
    paired_ticks: true,
    grid: false,
    line_width: 1.5,
    dots: None,
    legend: Legend {
        side: Side::Right,
        inset: (190.0, 10.0),
        row: 18.0,
        key: 20.0,
    },
};

/// The style of the charts of a few measured points (stage 2's scaling, stage 6's bits): a dot at
/// each point, grid lines at the ticks, and the legend at the top left, clear of the curves.
pub(super) const POINTS: Style = Style {
    size: (740.0, 420.0),
    margins: [80.0, 30.0, 44.0, 70.0],
    words: Some((12, 13)),
    names: (30.0, 22.0),
    paired_ticks: false,
    grid: true,
    line_width: 2.0,
    dots: Some(3.5),
    legend: Legend {
        side: Side::Left,
        inset: (16.0, 16.0),
        row: 20.0,
        key: 24.0,
    },
};

/// A chart to draw: its axes and series, and what it marks besides.
pub(super) struct LineChart<'a> {
    pub title: &'a str,
    pub style: Style,
    pub x: Axis<'a>,
    pub y: Axis<'a>,
    pub series: &'a [Series<'a>],
    /// Dashed grey levels across the frame, each with its words under its right end: a value the
    /// curves are read against.
    pub levels: Vec<(f64, &'a str)>,
    /// A note centred at the foot of the picture.
    pub footer: Option<&'a str>,
}

impl LineChart<'_> {
    /// The page position of the point (x, y).
    fn to_px(&self, (x, y): (f64, f64)) -> (f64, f64) {
        let [left, right, top, bottom] = self.style.margins;
        let (width, height) = self.style.size;
        (
            left + self.x.offset(x, width - left - right, false),
            top + self.y.offset(y, height - top - bottom, true),
        )
    }

    /// The frame's bottom-left and top-right corners.
    fn corners(&self) -> ((f64, f64), (f64, f64)) {
        let low = self.to_px((self.x.ends.0, self.y.ends.0));
        (low, self.to_px((self.x.ends.1, self.y.ends.1)))
    }

    /// The chart as SVG, layer by layer.
    pub(super) fn draw(&self, lang: Lang) -> String {
        let (width, height) = self.style.size;
        let mut svg = open_svg(lang, width, height, self.title);
        let (low, high) = self.corners();
        axes(&mut svg, low, high);
        self.draw_ticks(&mut svg);
        self.draw_names(&mut svg);
        for &(y, words) in &self.levels {
            self.draw_level(&mut svg, y, words);
        }
        for (n, series) in self.series.iter().enumerate() {
            self.draw_series(&mut svg, series);
            self.draw_legend_entry(&mut svg, n, series);
        }
        if let Some(footer) = self.footer {
            note(&mut svg, (width / 2.0, height - 10.0), footer);
        }
        close_svg(svg)
    }

    /// `words` at `at`, anchored `anchor`, in the style's size for their `role`.
    fn words(&self, svg: &mut String, at: (f64, f64), anchor: &str, role: Role, words: &str) {
        match self.style.words {
            Some(sizes) => {
                let size = match role {
                    Role::Tick => sizes.0,
                    Role::Name => sizes.1,
                };
                text(svg, at, anchor, size, "black", words);
            }
            None if anchor == "start" => Tag::new("text").at(at).holding(svg, words),
            None => {
                let tag = Tag::new("text").at(at).set("text-anchor", anchor);
                tag.holding(svg, words);
            }
        }
    }

    /// The ticks' labels, below the x axis and left of the y axis, each y tick with its grid line
    /// if the style draws one.
    fn draw_ticks(&self, svg: &mut String) {
        let ((x0, y0), (x1, _)) = self.corners();
        let x_tick = |svg: &mut String, (v, label): &(f64, String)| {
            let (px, _) = self.to_px((*v, self.y.ends.0));
            self.words(svg, (px, y0 + 18.0), "middle", Role::Tick, label);
        };
        let y_tick = |svg: &mut String, (v, label): &(f64, String)| {
            let (_, py) = self.to_px((self.x.ends.0, *v));
            self.words(svg, (x0 - 6.0, py + 4.0), "end", Role::Tick, label);
            if self.style.grid {
                let line = Tag::new("line").ends((x0, py), (x1, py));
                line.set("stroke", "#eee").close(svg);
            }
        };
        if self.style.paired_ticks {
            for (x, y) in self.x.ticks.iter().zip(&self.y.ticks) {
                x_tick(svg, x);
                y_tick(svg, y);
            }
        } else {
            self.x.ticks.iter().for_each(|x| x_tick(svg, x));
            self.y.ticks.iter().for_each(|y| y_tick(svg, y));
        }
    }

    /// The axes' names: the x axis's centred below it, the y axis's upwards on its left.
    fn draw_names(&self, svg: &mut String) {
        let ((x0, y0), (x1, y1)) = self.corners();
        let (below, left) = self.style.names;
        let height = self.style.size.1;
        let name = self.x.name;
        self.words(
            svg,
            ((x0 + x1) / 2.0, height - below),
            "middle",
            Role::Name,
            name,
        );
        let mid = (y0 + y1) / 2.0;
        match self.style.words {
            Some((_, size)) => vertical_text(svg, (left, mid), size, "black", self.y.name),
            None => Tag::new("text")
                .set("x", left)
                .px("y", mid)
                .set("transform", format_args!("rotate(-90 {left} {mid:.1})"))
                .set("text-anchor", "middle")
                .holding(svg, self.y.name),
        }
    }

    /// A dashed grey level at `y` across the frame, `words` under its right end.
    fn draw_level(&self, svg: &mut String, y: f64, words: &str) {
        let ((x0, _), (x1, _)) = self.corners();
        let (_, py) = self.to_px((self.x.ends.0, y));
        Tag::new("line")
            .ends((x0, py), (x1, py))
            .set("stroke", GREY)
            .set("stroke-dasharray", "4 4")
            .close(svg);
        text(svg, (x1 - 4.0, py + 16.0), "end", 12, GREY, words);
    }

    /// One series' line, and its dots if the style draws them.
    fn draw_series(&self, svg: &mut String, series: &Series) {
        let at: Vec<(f64, f64)> = series.points.iter().map(|&p| self.to_px(p)).collect();
        polyline(svg, &at, series.colour, self.style.line_width);
        let Some(r) = self.style.dots else { return };
        for &p in &at {
            dot(svg, p, r, series.colour);
        }
    }

    /// Row `n` of the legend: `series`' key and name.
    fn draw_legend_entry(&self, svg: &mut String, n: usize, series: &Series) {
        let ((x0, _), (x1, y1)) = self.corners();
        let legend = self.style.legend;
        let x = match legend.side {
            Side::Left => x0 + legend.inset.0,
            Side::Right => x1 - legend.inset.0,
        };
        let y = y1 + legend.inset.1 + legend.row * n as f64;
        legend_key(svg, (x, y), (x + legend.key, y), series.colour);
        let at = (x + legend.key + 6.0, y + 4.0);
        self.words(svg, at, "start", Role::Tick, series.name);
    }
}

/// A step chart in the [`STEPS`] style: each series against x from 0 to its largest x, y from its
/// smallest y rounded down to its largest rounded up, each axis with five ticks evenly spaced.
pub(super) fn line_chart(
    lang: Lang,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> String {
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
    let x_max = x_max.max(1.0);
    let quarters = |label: fn(f64) -> String, at: &dyn Fn(f64) -> f64| {
        (0..=4u8)
            .map(|k| at(f64::from(k)))
            .map(|v| (v, label(v)))
            .collect()
    };
    let x = Axis {
        name: x_label,
        ends: (0.0, x_max),
        scale: Scale::Linear,
        ticks: quarters(|x| format!("{x:.0}"), &|k| x_max * k / 4.0),
    };
    let y = Axis {
        name: y_label,
        ends: (y_min, y_max),
        scale: Scale::Linear,
        ticks: quarters(|y| format!("{y:.2}"), &|k| {
            y_min + (y_max - y_min) * k / 4.0
        }),
    };
    let chart = LineChart {
        title,
        style: STEPS,
        x,
        y,
        series,
        levels: vec![],
        footer: None,
    };
    chart.draw(lang)
}

#[cfg(test)]
mod tests {
    use crate::figures::chart::*;

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

    #[test]
    fn a_log_axis_spaces_doublings_equally() {
        let axis = Axis {
            name: "d_k",
            ends: (2.0, 1024.0),
            scale: Scale::Log2,
            ticks: vec![],
        };
        let step = axis.offset(4.0, 90.0, false);
        assert!((step - 10.0).abs() < 1e-9, "{step}");
        assert!((axis.offset(512.0, 90.0, false) - 80.0).abs() < 1e-9);
        assert!((axis.offset(512.0, 90.0, true) - 10.0).abs() < 1e-9);
    }
}
