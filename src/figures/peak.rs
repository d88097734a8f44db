//! The product kernel's share of the core's own FMA peak, product by product, as Appendix B shows
//! it: the table drawn from the record of a measurement, `book/src/generated/peak_shapes.txt`
//! (`s5_gpt --peak --threads 1`, run by `tools/peak_record.sh`), and its chart, `peak_shapes.svg`.
//! This module only takes each share's median and range over the runs and lays them out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cache::machine;
use super::draw::{BLUE, GREY, ORANGE, Tag, bar, footer, legend_label, note, open_svg, text};
use super::{Figure, finish};
use crate::Error;
use crate::lang::Lang;

/// The committed record.
pub const RECORD: &str = include_str!("../../book/src/generated/peak_shapes.txt");

/// What the 1024³ product's line and the whole step's line are called in [`Peak::shares`].
pub const CUBE: &str = "1024 x 1024 x 1024";
pub const STEP: &str = "all of a step's products";

/// The record: each product's shares of its run's peak, in percent, over the runs, and the
/// machine its header names (Appendix B shows the record whole beneath the table).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Peak {
    /// The `# Machine:` comment's words, and the `# CPU family …` comment's family and model.
    pub machine: Vec<String>,
    /// The products in the record's order, each with its shape and count (empty for [`CUBE`] and
    /// [`STEP`]) and its shares.
    pub shares: Vec<(String, String, Vec<f64>)>,
}

/// Reads the record: per run, `the product kernel, 1024 x 1024 x 1024 on 1 thread: … N % of it`,
/// a product's line `  NAME   M x K x N   COUNT   GFLOP/s   N %`, and the step's
/// `  all of a step's products at these speeds: … N %`.
pub fn parse(record: &str) -> Result<Peak, String> {
    let mut peak = Peak::default();
    let mut shares: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut order = vec![];
    for line in record.lines() {
        if let Some(words) = line.strip_prefix("# Machine:") {
            peak.machine.push(words.trim().to_string());
        } else if let Some(words) = line.strip_prefix("# CPU family") {
            peak.machine.push(format!(
                "CPU family{}",
                words.trim_end_matches(", as /proc/cpuinfo gives them.")
            ));
        }
        let (key, share) = if line.starts_with("the product kernel, ") {
            let share = line.rsplit(", ").next().and_then(percent);
            ((CUBE.to_string(), String::new()), share)
        } else if let Some(rest) = line.trim().strip_prefix(STEP) {
            (
                (STEP.to_string(), String::new()),
                rest.rsplit(", ").next().and_then(percent),
            )
        } else if let Some((name, numbers)) = line.strip_prefix("  ").and_then(product_line) {
            ((name, numbers), line.rsplit("  ").next().and_then(percent))
        } else {
            continue;
        };
        let share = share.ok_or_else(|| format!("no share in the line: {line}"))?;
        if !shares.contains_key(&key) {
            order.push(key.clone());
        }
        shares.entry(key).or_default().push(share);
    }
    peak.shares = order
        .into_iter()
        .map(|key| {
            let values = shares.remove(&key).unwrap_or_default();
            (key.0, key.1, values)
        })
        .collect();
    Ok(peak)
}

/// "73 %" or "73 % of it" → 73.
fn percent(text: &str) -> Option<f64> {
    text.trim().split(" %").next()?.trim().parse().ok()
}

/// A product's line without its indent → (name, "M x K x N, COUNT"): the name runs up to the
/// first run of two spaces, the shape is the three numbers joined by " x ".
fn product_line(line: &str) -> Option<(String, String)> {
    let (name, rest) = line.split_once("  ")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let [m, "x", k, "x", n, count, _, _, "%"] = words[..] else {
        return None;
    };
    Some((name.trim().to_string(), format!("{m} × {k} × {n}, {count}")))
}

/// The committed record, read.
pub fn committed() -> Result<Peak, Error> {
    Ok(parse(RECORD).map_err(std::io::Error::other)?)
}

/// A product's name in `lang`'s words: the record's own in English.
fn name(lang: Lang, name: &str) -> String {
    if lang == Lang::En {
        return match name {
            CUBE => "one 1024³ product".into(),
            STEP => "all of a step's products at these speeds".into(),
            _ => name.into(),
        };
    }
    let words = [
        ("Q, K, V, out", "Q、K、V 与输出投影"),
        ("MLP up", "MLP 升维"),
        ("MLP down", "MLP 降维"),
        ("head", "输出头"),
        ("a head's scores", "每个注意力头的得分"),
        ("a head's weights·v", "每个注意力头的 weights·v"),
        ("a head's dweights", "每个注意力头的 dweights"),
        ("a head's dv", "每个注意力头的 dv"),
        ("a head's dq", "每个注意力头的 dq"),
        ("a head's dk", "每个注意力头的 dk"),
    ];
    match name {
        CUBE => "一次 1024³ 乘法".into(),
        STEP => "按这些速度算，一步的全部乘法".into(),
        _ => {
            let (word, zh) = words
                .iter()
                .find(|(word, _)| name.starts_with(word))
                .copied()
                .unwrap_or((name, name));
            format!("{zh}{}", &name[word.len()..]).replace(": ", "：")
        }
    }
}

/// Appendix B's table: each product, its shape and count, and its share of the peak, median and
/// range over the runs.
pub fn table(lang: Lang, peak: &Peak) -> String {
    let mut md = String::from(lang.pick(
        "| product | m×k×n | per step | share of the peak, median (range) |\n",
        "| 乘法 | m×k×n | 每步次数 | 占峰值的比例，中位数（范围） |\n",
    ));
    md.push_str("|---|---:|---:|---:|\n");
    for (product, shape, shares) in &peak.shares {
        let Some((median, low, high)) = summary(shares) else {
            continue;
        };
        let (shape, count) = shape.split_once(", ").unwrap_or((shape, ""));
        let shape = shape.replace(" × ", "×"); // one unbroken word in a narrow column
        let [open, close] = [lang.pick("(", "（"), lang.pick(")", "）")];
        writeln!(
            md,
            "| {} | {shape} | {count} | {median:.0} % {open}{low:.0}–{high:.0} %{close} |",
            name(lang, product)
        )
        .expect("a String takes every write");
    }
    md
}

/// The median, lowest and highest of `shares`; `None` if there are none.
fn summary(shares: &[f64]) -> Option<(f64, f64, f64)> {
    let mut sorted = shares.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (&low, &high) = (sorted.first()?, sorted.last()?);
    let median = (sorted[(sorted.len() - 1) / 2] + sorted[sorted.len() / 2]) / 2.0;
    Some((median, low, high))
}

/// The chart's width and its bars' left edge and full length (100 % of the peak).
const CHART: (f64, f64, f64) = (940.0, 400.0, 440.0);
/// The width of the column of shapes and counts, between the names and the bars.
const SHAPE_COLUMN: f64 = 140.0;
/// The top of the chart's first row, and the height of a row.
const ROWS: (f64, f64) = (70.0, 24.0);
/// The goals the bars are read against: the 1024³ product's, and a training step's products'.
const GOALS: [f64; 2] = [85.0, 70.0];

/// `peak_shapes.svg`: each product's share of the peak as a bar to its median (written at the
/// right), a line across its range, on one scale from 0 to 100 %, the 1024³ product and the whole
/// step in orange; a dashed line at each goal. Nothing when the record holds no product.
pub fn figures(lang: Lang, peak: &Peak) -> Vec<Figure> {
    let rows: Vec<_> = peak
        .shares
        .iter()
        .filter_map(|(product, shape, shares)| Some((product, shape, summary(shares)?)))
        .collect();
    if rows.is_empty() {
        return vec![];
    }
    let (width, left, length) = CHART;
    let bottom = ROWS.0 + ROWS.1 * rows.len() as f64;
    let height = bottom + 110.0;
    let title = lang.pick(
        "The product kernel's share of this core's FMA peak, product by product, one thread",
        "乘法内核占这颗核心 FMA 峰值的比例，逐个乘法，单线程",
    );
    let mut svg = open_svg(lang, width, height, title);
    let x = |share: f64| left + length * share.clamp(0.0, 100.0) / 100.0;
    share_grid(&mut svg, lang, x, bottom);
    for (r, (product, shape, (median, low, high))) in rows.iter().enumerate() {
        let y = ROWS.0 + ROWS.1 * r as f64;
        let whole = *product == CUBE || *product == STEP;
        let (name_end, shape_end) = (left - SHAPE_COLUMN, left - 10.0);
        text(
            &mut svg,
            (name_end, y + 15.0),
            "end",
            12,
            "black",
            &name(lang, product),
        );
        if let Some((mkn, count)) = shape.split_once(", ") {
            let shape = format!("{} ×{count}", mkn.replace(" × ", "×"));
            text(&mut svg, (shape_end, y + 15.0), "end", 12, GREY, &shape);
        }
        let colour = if whole { ORANGE } else { BLUE };
        bar(&mut svg, (left, y + 4.0), (x(*median) - left, 14.0), colour);
        let range = Tag::new("line").ends((x(*low), y + 11.0), (x(*high), y + 11.0));
        range
            .set("stroke", "black")
            .set("stroke-width", "1.5")
            .close(&mut svg);
        let at = (x(100.0) + 40.0, y + 15.0);
        text(&mut svg, at, "end", 12, "black", &format!("{median:.0} %"));
    }
    let median = lang.pick("median", "中位数");
    text(
        &mut svg,
        (x(100.0) + 40.0, ROWS.0 - 16.0),
        "end",
        11,
        GREY,
        median,
    );
    let key_y = bottom + 52.0;
    let key = |svg: &mut String, at: f64, colour: &str, words: &str| {
        bar(svg, (at, key_y - 10.0), (14.0, 10.0), colour);
        legend_label(svg, (at + 14.0, key_y), words);
    };
    key(
        &mut svg,
        left - 200.0,
        BLUE,
        lang.pick("one product's shape", "一种乘法的形状"),
    );
    key(
        &mut svg,
        left + 20.0,
        ORANGE,
        lang.pick("1024³, and the whole step", "1024³，以及整步"),
    );
    let range = lang.pick(
        "bar: the median over the runs; line: their range",
        "条形：各轮的中位数；横线：各轮的范围",
    );
    note(&mut svg, (width / 2.0, key_y + 22.0), range);
    let machine_words: Vec<String> = peak
        .machine
        .iter()
        .map(|m| match lang {
            Lang::En => machine(lang, m),
            Lang::ZhCn => machine(lang, m)
                .replace("CPU family", "CPU 系列")
                .replace(" model ", "，型号 "),
        })
        .collect();
    let below = match lang {
        Lang::En => format!(
            "{}; bash tools/peak_record.sh (s5_gpt --peak --threads 1)",
            machine_words.join(", ")
        ),
        Lang::ZhCn => format!(
            "{}；bash tools/peak_record.sh（s5_gpt --peak --threads 1）",
            machine_words.join("，")
        ),
    };
    footer(&mut svg, (width, height), &below);
    vec![finish(lang, "peak_shapes.svg", svg)]
}

/// The chart's scale: a light line every 10 % from 0 to 100 % of the peak, numbered below the
/// rows, a dashed line at each of [`GOALS`], and the axis's name.
fn share_grid(svg: &mut String, lang: Lang, x: impl Fn(f64) -> f64, bottom: f64) {
    for k in 0..=10 {
        let share = 10.0 * k as f64;
        let line = Tag::new("line").ends((x(share), ROWS.0 - 4.0), (x(share), bottom));
        let stroke = if k == 0 { "black" } else { "#e4e4e4" };
        line.set("stroke", stroke).close(svg);
        text(
            svg,
            (x(share), bottom + 14.0),
            "middle",
            11,
            "black",
            &format!("{share:.0}"),
        );
    }
    for goal in GOALS {
        Tag::new("line")
            .ends((x(goal), ROWS.0 - 12.0), (x(goal), bottom))
            .set("stroke", GREY)
            .set("stroke-dasharray", "4 4")
            .close(svg);
        let words = match lang {
            Lang::En => format!("goal {goal:.0} %"),
            Lang::ZhCn => format!("目标 {goal:.0} %"),
        };
        text(svg, (x(goal), ROWS.0 - 16.0), "middle", 11, GREY, &words);
    }
    let axis = lang.pick(
        "% of the core's measured FMA peak",
        "占实测 FMA 峰值的百分比",
    );
    text(svg, (x(50.0), bottom + 32.0), "middle", 12, "black", axis);
}

/// The table as (file under `book/src/generated/`, Markdown), for `lang`.
pub fn tables(lang: Lang, peak: &Peak) -> Vec<(String, String)> {
    vec![(format!("{}peak_shapes.md", lang.dir()), table(lang, peak))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_gives_every_product_a_share_per_run() {
        let peak = committed().unwrap();
        let runs = RECORD.matches("## run ").count();
        assert_eq!(peak.shares.len(), 20, "1024³, 18 products and the step");
        assert!(peak.shares.iter().all(|(_, _, s)| s.len() == runs));
        assert_eq!(peak.shares[0].0, CUBE);
        assert_eq!(peak.shares[19].0, STEP);
        let second_measure = "  (the higher of two measures, before the products and after \
                              them: 56.4 and 92.0 on 1 thread)\n";
        let with_it = RECORD.replacen(
            "the product kernel, ",
            &format!("{second_measure}the product kernel, "),
            1,
        );
        assert_eq!(
            parse(&with_it).unwrap(),
            peak,
            "the second measure's line is no product"
        );
        let (name, shape, _) = &peak.shares[1];
        assert_eq!(
            (&name[..], &shape[..]),
            ("Q, K, V, out: x·Wᵀ", "768 × 128 × 128, 16")
        );
    }
}
