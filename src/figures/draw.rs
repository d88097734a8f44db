//! The drawing vocabulary the book's pictures share: the document, text, rectangles and shaded
//! cells, lines and arrows, axes, legends and footers, and the palette. Every element is written
//! through [`Tag`], each coordinate with one decimal, so that a picture's bytes change only when
//! what it shows does, and the tests can compare the committed files with the code. The SVG needs
//! no fonts or native libraries at build time: the browser lays out the words.

use std::fmt::{Display, Write};

use super::colours::blue;
use crate::lang::Lang;

// The palette: the first colours of matplotlib's, which the heat maps and loss curves of the book
// also use, so that a colour means the same thing from one picture to the next.
pub(super) const BLUE: &str = "#1f77b4";
pub(super) const ORANGE: &str = "#ff7f0e";
pub(super) const GREEN: &str = "#2ca02c";
pub(super) const RED: &str = "#d62728";
pub(super) const PURPLE: &str = "#9467bd";
/// Notes, axes and the arrows of secondary steps: quieter than the black of what a picture shows.
pub(super) const GREY: &str = "#555";

/// The fonts of the Chinese pictures: the common Chinese system fonts of Linux, macOS and Windows,
/// then any sans-serif. Nothing is fetched: a picture shown with `<img>` may load no font anyway.
const CJK_FONTS: &str = "'Noto Sans CJK SC', 'Source Han Sans SC', 'PingFang SC', \
                         'Hiragino Sans GB', 'Microsoft YaHei', 'WenQuanYi Micro Hei', sans-serif";

/// The opening tag, a white background and the title centred on top: the start of every picture,
/// which [`close_svg`] ends.
pub(super) fn open_svg(lang: Lang, width: f64, height: f64, title: &str) -> String {
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

/// The end of every picture.
pub(super) fn close_svg(mut svg: String) -> String {
    svg.push_str("</svg>\n");
    svg
}

/// Escapes the characters XML reserves.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One SVG element as it is written: its name, then its attributes in the order they are set.
/// Every helper below writes through it, so that a picture is built of words, not of SVG text.
pub(super) struct Tag {
    name: &'static str,
    open: String,
}

impl Tag {
    pub(super) fn new(name: &'static str) -> Self {
        Tag {
            name,
            open: format!("<{name}"),
        }
    }

    /// The attribute `key`, written as `value` displays.
    pub(super) fn set(mut self, key: &str, value: impl Display) -> Self {
        let _ = write!(self.open, " {key}=\"{value}\"");
        self
    }

    /// A coordinate or a length, with one decimal.
    pub(super) fn px(self, key: &str, value: f64) -> Self {
        self.set(key, format_args!("{value:.1}"))
    }

    /// The element's position (x, y).
    pub(super) fn at(self, (x, y): (f64, f64)) -> Self {
        self.px("x", x).px("y", y)
    }

    /// A line's two ends.
    pub(super) fn ends(self, from: (f64, f64), to: (f64, f64)) -> Self {
        self.px("x1", from.0)
            .px("y1", from.1)
            .px("x2", to.0)
            .px("y2", to.1)
    }

    /// Turned by `degrees` about (x, y): words that run upwards or slant.
    pub(super) fn rotated(self, degrees: i32, (x, y): (f64, f64)) -> Self {
        self.set("transform", format_args!("rotate({degrees} {x:.1} {y:.1})"))
    }

    /// Writes the element with nothing inside it.
    pub(super) fn close(self, svg: &mut String) {
        let _ = writeln!(svg, "{}/>", self.open);
    }

    /// Writes the element around `words`, escaped.
    pub(super) fn holding(self, svg: &mut String, words: &str) {
        let _ = writeln!(svg, "{}>{}</{}>", self.open, escape(words), self.name);
    }
}

/// The points of a polyline or a polygon: `x,y` pairs, one decimal each.
pub(super) fn points(at: &[(f64, f64)]) -> String {
    let pairs: Vec<String> = at.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
    pairs.join(" ")
}

/// `content` at (x, y), anchored `anchor` (`start`, `middle`, `end`), `size` px, in `fill`.
pub(super) fn text(
    svg: &mut String,
    at: (f64, f64),
    anchor: &str,
    size: u32,
    fill: &str,
    content: &str,
) {
    Tag::new("text")
        .at(at)
        .set("text-anchor", anchor)
        .set("font-size", size)
        .set("fill", fill)
        .holding(svg, content);
}

/// A heading in bold at (x, y), at the picture's own font size.
pub(super) fn bold(svg: &mut String, at: (f64, f64), anchor: &str, content: &str) {
    Tag::new("text")
        .at(at)
        .set("text-anchor", anchor)
        .set("font-weight", "bold")
        .holding(svg, content);
}

/// `content` written upwards, centred on (x, y): the name of a vertical axis or of a tall frame,
/// which would not fit across.
pub(super) fn vertical_text(
    svg: &mut String,
    at: (f64, f64),
    size: u32,
    fill: &str,
    content: &str,
) {
    Tag::new("text")
        .at(at)
        .set("text-anchor", "middle")
        .set("font-size", size)
        .set("fill", fill)
        .rotated(-90, at)
        .holding(svg, content);
}

/// A note centred on x: what a reader needs to read the picture, in grey so that it does not
/// compete with what the picture shows. At the foot of a picture it is its footer.
pub(super) fn note(svg: &mut String, at: (f64, f64), content: &str) {
    text(svg, at, "middle", 12, GREY, content);
}

pub(super) use crate::print::thousands;

/// The footer of a picture `width` × `height`: a note centred 14 px above its bottom edge.
pub(super) fn footer(svg: &mut String, (width, height): (f64, f64), words: &str) {
    note(svg, (width / 2.0, height - 14.0), words);
}

/// What one key of a legend stands for: `words` 6 px after the key's right edge, on `baseline`.
pub(super) fn legend_label(svg: &mut String, (key_right, baseline): (f64, f64), words: &str) {
    text(
        svg,
        (key_right + 6.0, baseline),
        "start",
        12,
        "black",
        words,
    );
}

/// A `w`×`h` rectangle at (x, y) filled `fill` and outlined `stroke` (`none` for no fill).
pub(super) fn rect(svg: &mut String, at: (f64, f64), (w, h): (f64, f64), fill: &str, stroke: &str) {
    sized("rect", at, (w, h))
        .set("fill", fill)
        .set("stroke", stroke)
        .close(svg);
}

/// An element of `name` at (x, y), `w`×`h`.
pub(super) fn sized(name: &'static str, at: (f64, f64), (w, h): (f64, f64)) -> Tag {
    Tag::new(name).at(at).px("width", w).px("height", h)
}

/// A rectangle with no outline: a bar, whose length is the number it shows, or the pale ground
/// behind a chart's bars.
pub(super) fn bar(svg: &mut String, at: (f64, f64), size: (f64, f64), fill: &str) {
    sized("rect", at, size).set("fill", fill).close(svg);
}

/// An outline that singles out a row or a result (filled `fill`, or `none`): 2 px and rounded, so
/// that it reads as a highlight, not as a cell.
pub(super) fn frame(svg: &mut String, at: (f64, f64), size: (f64, f64), stroke: &str, fill: &str) {
    sized("rect", at, size)
        .set("fill", fill)
        .set("stroke", stroke)
        .set("stroke-width", "2")
        .set("rx", "4")
        .close(svg);
}

/// A box with rounded corners: a step of a diagram, filled `fill` and outlined `stroke`.
pub(super) fn rounded(
    svg: &mut String,
    at: (f64, f64),
    size: (f64, f64),
    stroke: &str,
    fill: &str,
) {
    sized("rect", at, size)
        .set("rx", "4")
        .set("fill", fill)
        .set("stroke", stroke)
        .close(svg);
}

/// A line through `at`, unfilled, `width` px thick in `colour`: a chart's curve, or a path that
/// bends on its way.
pub(super) fn polyline(svg: &mut String, at: &[(f64, f64)], colour: &str, width: f64) {
    Tag::new("polyline")
        .set("points", points(at))
        .set("fill", "none")
        .set("stroke", colour)
        .set("stroke-width", width)
        .close(svg);
}

/// A dot of radius `r` centred on (x, y).
pub(super) fn dot(svg: &mut String, (x, y): (f64, f64), r: f64, fill: &str) {
    Tag::new("circle")
        .px("cx", x)
        .px("cy", y)
        .set("r", r)
        .set("fill", fill)
        .close(svg);
}

/// The axes of a chart, left and bottom, from their corner (x0, y0) up to y1 and across to x1.
pub(super) fn axes(svg: &mut String, (x0, y0): (f64, f64), (x1, y1): (f64, f64)) {
    Tag::new("path")
        .set("d", format_args!("M{x0:.1},{y1:.1} V{y0:.1} H{x1:.1}"))
        .set("fill", "none")
        .set("stroke", "black")
        .close(svg);
}

/// The key of one legend entry: a short thick line in the series' colour, from `from` to `to`.
pub(super) fn legend_key(svg: &mut String, from: (f64, f64), to: (f64, f64), colour: &str) {
    Tag::new("line")
        .ends(from, to)
        .set("stroke", colour)
        .set("stroke-width", "3")
        .close(svg);
}

/// One cell as drawn: its fill, and the word printed in it in `ink`.
pub(super) struct Shade {
    pub fill: String,
    pub ink: &'static str,
    pub word: String,
}

impl Shade {
    pub(super) fn new(fill: &str, ink: &'static str, word: &str) -> Self {
        Shade {
            fill: fill.to_string(),
            ink,
            word: word.to_string(),
        }
    }
}

/// A cell of one weight on the Blues scale, where `top` is the darkest blue, its value printed to
/// two decimals: the same scale as the heat maps, so that a weight looks the same everywhere. The
/// ink turns white on the darker half, where black would not read.
pub(super) fn weight(w: f32, top: f64) -> Shade {
    let t = f64::from(w) / top;
    let ink = if t > 0.55 { "white" } else { "black" };
    Shade {
        fill: blue(t),
        ink,
        word: format!("{w:.2}"),
    }
}

/// A `w`×`h` cell at (x, y) drawn as `shade`, outlined `stroke`: white to part the cells of a
/// matrix, grey to set a vector's cells apart from the white page.
pub(super) fn cell(
    svg: &mut String,
    (x, y): (f64, f64),
    (w, h): (f64, f64),
    stroke: &str,
    shade: &Shade,
) {
    rect(svg, (x, y), (w, h), &shade.fill, stroke);
    text(
        svg,
        (x + w / 2.0, y + h / 2.0 + 4.5),
        "middle",
        12,
        shade.ink,
        &shade.word,
    );
}

/// A matrix of `rows` × `cols` cells of `w`×`h` px from (left, top), cell (i, j) drawn as
/// `shade(i, j)`, parted by white lines.
pub(super) fn matrix(
    svg: &mut String,
    (left, top): (f64, f64),
    (rows, cols): (usize, usize),
    (w, h): (f64, f64),
    shade: impl Fn(usize, usize) -> Shade,
) {
    for i in 0..rows {
        for j in 0..cols {
            let at = (left + w * j as f64, top + h * i as f64);
            cell(svg, at, (w, h), "white", &shade(i, j));
        }
    }
}

/// An arrow from `from` to `to`, its shaft `width` px thick; `head` is the head's (length, half
/// width). The shaft stops 1 px inside the head: short of the tip, so that a thick shaft cannot
/// blunt it, and overlapping the head, so that no seam shows between them.
pub(super) fn arrow(
    svg: &mut String,
    from: (f64, f64),
    to: (f64, f64),
    colour: &str,
    width: f64,
    head: (f64, f64),
) {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let len = dx.hypot(dy).max(1e-9);
    let dir = (dx / len, dy / len);
    let end = (to.0 - dir.0 * (head.0 - 1.0), to.1 - dir.1 * (head.0 - 1.0));
    Tag::new("line")
        .ends(from, end)
        .set("stroke", colour)
        .px("stroke-width", width)
        .close(svg);
    arrowhead(svg, to, dir, colour, head);
}

/// An arrowhead alone, its tip at (x, y), pointing along the unit vector (dx, dy); `head` is its
/// (length, half width). For the paths that bend before they arrive.
pub(super) fn arrowhead(
    svg: &mut String,
    (x, y): (f64, f64),
    (dx, dy): (f64, f64),
    colour: &str,
    (length, half): (f64, f64),
) {
    let (bx, by) = (x - dx * length, y - dy * length);
    let (px, py) = (-dy * half, dx * half);
    let corners = [(x, y), (bx + px, by + py), (bx - px, by - py)];
    Tag::new("polygon")
        .set("points", points(&corners))
        .set("fill", colour)
        .close(svg);
}
