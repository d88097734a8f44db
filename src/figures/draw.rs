//! The drawing primitives the stages' pictures share: text, rectangles and shaded cells, arrows,
//! and the palette. Every coordinate is written with one decimal, so that a picture's bytes change
//! only when what it shows does, and the tests can compare the committed files with the code.

use std::fmt::Write;

use crate::plot::{blue, escape};

// The palette: the first colours of matplotlib's, which the heat maps and loss curves of the book
// also use, so that a colour means the same thing from one picture to the next.
pub(super) const BLUE: &str = "#1f77b4";
pub(super) const ORANGE: &str = "#ff7f0e";
pub(super) const GREEN: &str = "#2ca02c";
pub(super) const RED: &str = "#d62728";
pub(super) const PURPLE: &str = "#9467bd";
/// Notes, axes and the arrows of secondary steps: quieter than the black of what a picture shows.
pub(super) const GREY: &str = "#555";

/// `content` at (x, y), anchored `anchor` (`start`, `middle`, `end`), `size` px, in `fill`.
pub(super) fn text(
    svg: &mut String,
    (x, y): (f64, f64),
    anchor: &str,
    size: u32,
    fill: &str,
    content: &str,
) {
    let _ = writeln!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-size=\"{size}\" \
         fill=\"{fill}\">{}</text>",
        escape(content)
    );
}

/// A heading in bold at (x, y), at the picture's own font size.
pub(super) fn bold(svg: &mut String, (x, y): (f64, f64), anchor: &str, content: &str) {
    let _ = writeln!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" font-weight=\"bold\">{}</text>",
        escape(content)
    );
}

/// `content` written upwards, centred on (x, y): the name of a vertical axis or of a tall frame,
/// which would not fit across.
pub(super) fn vertical_text(
    svg: &mut String,
    (x, y): (f64, f64),
    size: u32,
    fill: &str,
    content: &str,
) {
    let _ = writeln!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"middle\" font-size=\"{size}\" \
         fill=\"{fill}\" transform=\"rotate(-90 {x:.1} {y:.1})\">{}</text>",
        escape(content)
    );
}

/// A note centred on x: what a reader needs to read the picture, in grey so that it does not
/// compete with what the picture shows.
pub(super) fn note(svg: &mut String, at: (f64, f64), content: &str) {
    text(svg, at, "middle", 12, GREY, content);
}

/// A `w`×`h` rectangle at (x, y) filled `fill` and outlined `stroke` (`none` for no fill).
pub(super) fn rect(
    svg: &mut String,
    (x, y): (f64, f64),
    (w, h): (f64, f64),
    fill: &str,
    stroke: &str,
) {
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" \
         stroke=\"{stroke}\"/>"
    );
}

/// A rectangle with no outline: a bar, whose length is the number it shows, or the pale ground
/// behind a chart's bars.
pub(super) fn bar(svg: &mut String, (x, y): (f64, f64), (length, h): (f64, f64), fill: &str) {
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{length:.1}\" height=\"{h:.1}\" fill=\"{fill}\"/>"
    );
}

/// An outline that singles out a row or a result (filled `fill`, or `none`): 2 px and rounded, so
/// that it reads as a highlight, not as a cell.
pub(super) fn frame(
    svg: &mut String,
    (x, y): (f64, f64),
    (w, h): (f64, f64),
    stroke: &str,
    fill: &str,
) {
    let _ = writeln!(
        svg,
        "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{fill}\" \
         stroke=\"{stroke}\" stroke-width=\"2\" rx=\"4\"/>"
    );
}

/// One cell as drawn: its fill, and the word printed in it in `ink`.
pub(super) struct Shade {
    pub fill: String,
    pub ink: &'static str,
    pub word: String,
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
    let (ex, ey) = (to.0 - dir.0 * (head.0 - 1.0), to.1 - dir.1 * (head.0 - 1.0));
    let _ = writeln!(
        svg,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{ex:.1}\" y2=\"{ey:.1}\" stroke=\"{colour}\" \
         stroke-width=\"{width:.1}\"/>",
        from.0, from.1
    );
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
    let _ = writeln!(
        svg,
        "<polygon points=\"{x:.1},{y:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{colour}\"/>",
        bx + px,
        by + py,
        bx - px,
        by - py
    );
}
