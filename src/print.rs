//! PyTorch-style printing, so each line a stage prints can be compared with the book's, and the
//! section headings and notebook cells every stage of chapter 3 prints.
//!
//! This follows `torch/_tensor_str.py` for the cases the book shows: four decimals, every element
//! padded to the widest one, nested brackets with one blank line per level between blocks, `1.`
//! when every finite value is a whole number, scientific notation when the magnitudes span more
//! than a factor of 1000, and lines wrapped at 80 characters. The `grad_fn=<…>` suffixes are left
//! out.

use std::io::Write;

use ndarray::{ArrayBase, ArrayViewD, Axis, Data, Dimension};

/// PyTorch's default `precision`.
const PRECISION: usize = 4;
/// PyTorch's default `linewidth`.
const LINE_WIDTH: usize = 80;
/// `"tensor("`: nested lines are indented past it.
const PREFIX: &str = "tensor(";

/// How every element of one tensor is written: the style is chosen once from all the values.
#[derive(Clone, Copy, Debug)]
enum Style {
    /// Every finite value is whole: `2.`, `0.`, `-inf`.
    Int,
    /// `0.9544`.
    Fixed,
    /// `1.2346e-05`, as Python writes it.
    Sci,
}

#[derive(Clone, Copy, Debug)]
struct Formatter {
    style: Style,
    width: usize,
}

impl Formatter {
    /// Chooses the style and the column width from the finite non-zero values, as
    /// `_Formatter.__init__` does: zeros and infinities neither pick the style nor widen the
    /// columns.
    fn new<'a>(values: impl Iterator<Item = &'a f32>) -> Self {
        let nonzero_finite: Vec<f32> = values
            .filter(|v| v.is_finite() && **v != 0.0)
            .copied()
            .collect();
        let abs = nonzero_finite.iter().map(|v| f64::from(v.abs()));
        let max = abs.clone().fold(0.0, f64::max);
        let min = abs.fold(f64::INFINITY, f64::min);
        let wide_range = max / min > 1000.0 || max > 1e8;
        let style = if nonzero_finite.iter().all(|v| v.fract() == 0.0) {
            if wide_range { Style::Sci } else { Style::Int }
        } else if wide_range || min < 1e-4 {
            Style::Sci
        } else {
            Style::Fixed
        };
        let mut formatter = Formatter { style, width: 1 };
        let widest = nonzero_finite
            .iter()
            .map(|&v| formatter.format(v).len())
            .max();
        formatter.width = widest.unwrap_or(1);
        formatter
    }

    /// One element, unpadded.
    fn format(&self, v: f32) -> String {
        if !v.is_finite() {
            return if v.is_nan() {
                "nan".into()
            } else if v > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            };
        }
        match self.style {
            Style::Int => format!("{v:.0}."),
            Style::Fixed => format!("{v:.PRECISION$}"),
            Style::Sci => python_exponent(&format!("{v:.PRECISION$e}")),
        }
    }

    /// One element, right-aligned to the widest (a longer `-inf` is not cut).
    fn padded(&self, v: f32) -> String {
        format!("{:>width$}", self.format(v), width = self.width)
    }
}

/// Rust writes `1.2346e-5`; Python writes `1.2346e-05` (a sign and at least two exponent digits).
fn python_exponent(rust: &str) -> String {
    let (mantissa, exponent) = rust
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let (sign, digits) = match exponent.strip_prefix('-') {
        Some(digits) => ('-', digits),
        None => ('+', exponent),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}

/// A tensor as PyTorch's `print` shows it: `tensor([[0.4300, 0.1500], ...])`, or `tensor(0.9544)`
/// for a 0-dimensional one.
pub fn tensor<S, D>(a: &ArrayBase<S, D>) -> String
where
    S: Data<Elem = f32>,
    D: Dimension,
{
    let view = a.view().into_dyn();
    let formatter = Formatter::new(view.iter());
    format!("{PREFIX}{})", nested(&view, &formatter, PREFIX.len()))
}

/// A scalar as `tensor(0.9544)`: what printing `x.sum()` or `torch.dot(a, b)` shows.
pub fn scalar(v: f32) -> String {
    tensor(&ndarray::arr0(v))
}

/// A shape as `torch.Size([6, 2])`.
pub fn size(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("torch.Size([{}])", dims.join(", "))
}

/// The bracketed body at `indent` columns, recursing over the first axis
/// (`_tensor_str_with_formatter`).
fn nested(a: &ArrayViewD<f32>, formatter: &Formatter, indent: usize) -> String {
    match a.ndim() {
        0 => formatter.format(*a.first().expect("a 0-d array holds one value")),
        1 => vector(a, formatter, indent),
        ndim => {
            // Blocks of a 3-D tensor are separated by one blank line, of a 4-D one by two, and so
            // on.
            let separator = format!(",{}{}", "\n".repeat(ndim - 1), " ".repeat(indent + 1));
            let blocks: Vec<String> = a
                .axis_iter(Axis(0))
                .map(|block| nested(&block, formatter, indent + 1))
                .collect();
            format!("[{}]", blocks.join(&separator))
        }
    }
}

/// The innermost row, wrapped so that no line passes [`LINE_WIDTH`].
fn vector(a: &ArrayViewD<f32>, formatter: &Formatter, indent: usize) -> String {
    let per_line = ((LINE_WIDTH - indent) / (formatter.width + 2)).max(1);
    let values: Vec<String> = a.iter().map(|&v| formatter.padded(v)).collect();
    let lines: Vec<String> = values
        .chunks(per_line)
        .map(|line| line.join(", "))
        .collect();
    format!(
        "[{}]",
        lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
    )
}

/// A Python float as `print` shows it: the shortest text that reads back as the same f64 (`1.0`,
/// `0.9999999999999999`). Rust's `{:?}` writes the same for the magnitudes printed here.
pub fn python_float(v: f64) -> String {
    format!("{v:?}")
}

/// Writes a section heading,
/// `## 3.3.1 A simple self-attention mechanism without trainable weights`, and a blank line. Every
/// stage of chapter 3 prints its sections this way.
pub fn heading<W: Write>(out: &mut W, section: &str) -> std::io::Result<()> {
    writeln!(out, "## {section}\n")
}

/// Writes one notebook cell: its label line, `[#2] attn_scores_2` for `number` `"#2"` and `prints`
/// `"attn_scores_2"`, then the lines it prints, then a blank line.
pub fn cell<W: Write>(
    out: &mut W,
    number: &str,
    prints: &str,
    lines: &[String],
) -> std::io::Result<()> {
    writeln!(out, "[{number}] {prints}")?;
    for line in lines {
        writeln!(out, "{line}")?;
    }
    writeln!(out)
}

/// 84929 as "84,929": a count as the book prints it.
pub fn thousands(n: usize) -> String {
    thousands_wide(n as u64)
}

/// [`thousands`] of a count in 64 bits, whatever the width of `usize` (32 bits in the page's
/// WebAssembly).
pub fn thousands_wide(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array, arr1, arr2};

    #[test]
    fn vector_with_four_decimals() {
        let v = arr1(&[0.9544f32, 1.495, 1.4754]);
        assert_eq!(tensor(&v), "tensor([0.9544, 1.4950, 1.4754])");
    }

    #[test]
    fn negative_values_widen_every_column() {
        let m = arr2(&[[-0.0739f32, 0.0713], [-0.0748, 0.0703]]);
        assert_eq!(
            tensor(&m),
            "tensor([[-0.0739,  0.0713],\n        [-0.0748,  0.0703]])"
        );
    }

    #[test]
    fn whole_numbers_print_with_a_bare_point() {
        assert_eq!(scalar(1.0), "tensor(1.)");
        assert_eq!(scalar(1.000_000_1), "tensor(1.0000)");
        assert_eq!(
            tensor(&arr2(&[[2.0f32, 0.0], [0.0, 2.0]])),
            "tensor([[2., 0.],\n        [0., 2.]])"
        );
    }

    #[test]
    fn minus_infinity_is_right_aligned() {
        let m = arr2(&[[0.2899f32, f32::NEG_INFINITY]]);
        assert_eq!(tensor(&m), "tensor([[0.2899,   -inf]])");
    }

    #[test]
    fn zeros_and_infinities_do_not_widen_the_columns() {
        assert_eq!(
            tensor(&arr1(&[1.0f32, f32::NEG_INFINITY])),
            "tensor([1., -inf])"
        );
        assert_eq!(tensor(&arr1(&[0.0f32, 0.0])), "tensor([0., 0.])");
    }

    #[test]
    fn three_dimensions_leave_a_blank_line_between_blocks() {
        let a = Array::from_shape_vec((2, 1, 2), vec![0.5f32, -0.25, 0.5, -0.25]).unwrap();
        assert_eq!(
            tensor(&a),
            "tensor([[[ 0.5000, -0.2500]],\n\n        [[ 0.5000, -0.2500]]])"
        );
    }

    #[test]
    fn magnitudes_over_a_thousand_apart_switch_to_scientific() {
        let v = arr1(&[1.0f32, 0.00001]);
        assert_eq!(tensor(&v), "tensor([1.0000e+00, 1.0000e-05])");
    }

    #[test]
    fn long_rows_wrap_at_eighty_columns() {
        let v = Array::from_elem(10, 0.5f32);
        let printed = tensor(&v);
        assert_eq!(printed.lines().count(), 2);
        assert!(printed.lines().all(|line| line.len() <= 80));
        assert!(printed.starts_with("tensor([0.5000, 0.5000"));
        assert!(printed.contains(",\n        0.5000"));
    }

    #[test]
    fn shapes() {
        assert_eq!(size(&[6, 2]), "torch.Size([6, 2])");
    }
}
