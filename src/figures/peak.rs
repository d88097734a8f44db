//! The product kernel's share of the core's own FMA peak, product by product, as Appendix B shows
//! it: the table drawn from the record of a measurement, `book/src/generated/peak_shapes.txt`
//! (`s5_gpt --peak --threads 1`, run by `tools/peak_record.sh`). This module only takes each
//! share's median and range over the runs and lays them out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::Error;
use crate::lang::Lang;

/// The committed record.
pub const RECORD: &str = include_str!("../../book/src/generated/peak_shapes.txt");

/// What the 1024³ product's line and the whole step's line are called in [`Peak::shares`].
pub const CUBE: &str = "1024 x 1024 x 1024";
pub const STEP: &str = "all of a step's products";

/// The record: each product's shares of its run's peak, in percent, over the runs (the record's
/// own header names the machine, and Appendix B shows the record whole beneath the table).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Peak {
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
        let mut sorted = shares.clone();
        sorted.sort_by(f64::total_cmp);
        let (Some(low), Some(high)) = (sorted.first(), sorted.last()) else {
            continue;
        };
        let median = (sorted[(sorted.len() - 1) / 2] + sorted[sorted.len() / 2]) / 2.0;
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
        let (name, shape, _) = &peak.shares[1];
        assert_eq!(
            (&name[..], &shape[..]),
            ("Q, K, V, out: x·Wᵀ", "768 × 128 × 128, 16")
        );
    }
}
