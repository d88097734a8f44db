//! Stage 7's variants weighed side by side, as the chapter shows them: one Markdown table per
//! edition, and a chart of each variant's test loss against its cache (`s7_weighed.svg`), drawn from
//! two committed records: `book/src/generated/s7_weighed.txt` (each variant
//! trained with the tutorial's recipe, `tools/s7_weigh_record.sh`) and
//! `book/src/generated/s7_bench.txt` (generation with the KV cache, read by [`super::cache`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cache::{Record, committed_record, variant_name};
use super::draw::{BLUE, Tag, axes, dot, footer, open_svg, text, vertical_text};
use super::{Figure, finish};
use crate::Error;
use crate::lang::Lang;
use crate::s7_variants::bench::short_name;
use crate::s7_variants::variants;

/// The record of the training runs.
pub const WEIGHED: &str = include_str!("../../book/src/generated/s7_weighed.txt");

/// Where the table goes, under `book/src/generated/` (the Chinese one in `zh-CN/`).
pub const TABLE_FILE: &str = "s7_weighed.md";

/// A record's measured lines, each `key=value …`, as maps; comments (`#`) are left out.
fn lines(record: &str) -> Vec<BTreeMap<&str, &str>> {
    let measured = record
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'));
    measured
        .map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.split_once('='))
                .collect()
        })
        .collect()
}

/// The value of `key` in the line whose other fields are `fields`, or "—".
fn find<'a>(lines: &[BTreeMap<&str, &'a str>], fields: &[(&str, &str)], key: &str) -> &'a str {
    let line = lines
        .iter()
        .find(|l| fields.iter().all(|(k, v)| l.get(k) == Some(v)));
    line.and_then(|l| l.get(key)).copied().unwrap_or("—")
}

/// The table in `lang`'s words: for each variant, its parameters and KV bytes per token, the test
/// loss after 3,000 steps and after the two epochs, the median training step, and the tokens per
/// second it writes with the cache at contexts of 256 and 1,024 (one thread).
pub fn table(lang: Lang, weighed: &str, bench: &Record) -> String {
    let weighed = lines(weighed);
    let header = match lang {
        Lang::En => {
            "| variant | parameters | KV bytes per token | test loss, 3,000 steps | test loss, two epochs | ms per training step | tokens/s with the cache, T = 256 | tokens/s, T = 1,024 |"
        }
        Lang::ZhCn => {
            "| 变体 | 参数量 | 每个词元的 KV 字节数 | 测试损失（3,000 步） | 测试损失（两轮） | 每个训练步的毫秒数 | 有缓存时每秒词元数（T = 256） | 每秒词元数（T = 1,024） |"
        }
    };
    let mut out = format!("{header}\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (_, arch) in variants() {
        let id = short_name(&arch);
        let short = find(&weighed, &[("variant", id), ("steps", "3000")], "test_loss");
        let full = |key| find(&weighed, &[("variant", id), ("steps", "31368")], key);
        let speed = |t| match bench.find(t, id, true, 1) {
            Some(timing) => format!("{:.1}", 1e3 / timing.ms_per_token),
            None => "—".to_string(),
        };
        let (params, kv, ms) = (
            full("parameters"),
            full("kv_bytes_per_token"),
            full("ms_per_step"),
        );
        let _ = writeln!(
            out,
            "| {} | {params} | {kv} | {short} | {} | {ms} | {} | {} |",
            variant_name(lang, id),
            full("test_loss"),
            speed(256),
            speed(1024)
        );
    }
    out
}

/// The table of each edition from the committed records.
pub fn committed_tables() -> Result<Vec<(String, String)>, Error> {
    let bench = committed_record()?;
    let table = |lang: Lang| {
        (
            format!("{}{TABLE_FILE}", lang.dir()),
            table(lang, WEIGHED, &bench),
        )
    };
    Ok([Lang::En, Lang::ZhCn].into_iter().map(table).collect())
}

/// The loss chart's frame: its left, top, right and bottom edges, in px of a 820 × 500 picture.
const FRAME: (f64, f64, f64, f64) = (110.0, 60.0, 700.0, 400.0);
/// Its x axis: bytes per token from 0 to this, a tick every 256.
const BYTES_TOP: f64 = 1280.0;

/// Each variant's KV bytes per token and test loss after the two epochs, with its name in `lang`.
fn loss_points(lang: Lang, weighed: &str) -> Vec<(String, f64, f64)> {
    let weighed = lines(weighed);
    let point = |(_, arch): &(&str, _)| {
        let id = short_name(arch);
        let get = |key| {
            find(&weighed, &[("variant", id), ("steps", "31368")], key)
                .parse()
                .ok()
        };
        Some((
            variant_name(lang, id),
            get("kv_bytes_per_token")?,
            get("test_loss")?,
        ))
    };
    variants().iter().filter_map(point).collect()
}

/// A dot for each variant at `at`, named with its loss: to the right of its dot, or below it where
/// the name would cross another dot.
fn dots(svg: &mut String, points: &[(String, f64, f64)], at: &[(f64, f64)]) {
    for ((name, _, loss), &(px, py)) in points.iter().zip(at) {
        dot(svg, (px, py), 5.0, BLUE);
        let label = format!("{name}: {loss:.4}");
        let reach = px + 7.0 * label.chars().count() as f64;
        let crossed = at
            .iter()
            .any(|&(qx, qy)| qx > px && qx < reach && (qy - py).abs() < 14.0);
        match crossed {
            false => text(svg, (px + 9.0, py + 4.0), "start", 12, "black", &label),
            true => text(svg, (px, py + 20.0), "middle", 12, "black", &label),
        }
    }
}

/// `s7_weighed.svg`: each variant's test loss after the two epochs against what a token adds to its
/// cache, a dot and a name each: further down is a better model, further left a smaller cache.
pub fn chart(lang: Lang, weighed: &str) -> Figure {
    let points = loss_points(lang, weighed);
    let (left, top, right, bottom) = FRAME;
    let losses = points.iter().map(|p| p.2);
    let low = (losses.clone().fold(f64::INFINITY, f64::min) * 100.0).floor() / 100.0;
    let high = (losses.fold(0.0, f64::max) * 100.0).ceil() / 100.0;
    let x = |bytes: f64| left + (right - left) * bytes / BYTES_TOP;
    let y = |loss: f64| bottom - (bottom - top) * (loss - low) / (high - low).max(1e-9);
    let title = lang.pick(
        "Stage 7: test loss after two epochs against the cache a token adds",
        "第 7 阶段：两轮后的测试损失与每个词元增加的缓存",
    );
    let mut svg = open_svg(lang, 820.0, 500.0, title);
    axes(&mut svg, (left, bottom), (right, top));
    for k in 0..=(BYTES_TOP / 256.0) as usize {
        let bytes = 256.0 * k as f64;
        text(
            &mut svg,
            (x(bytes), bottom + 18.0),
            "middle",
            12,
            "black",
            &format!("{bytes}"),
        );
    }
    for k in 0..=((high - low) * 100.0).round() as usize {
        let loss = low + 0.01 * k as f64;
        let line = Tag::new("line").ends((left, y(loss)), (right, y(loss)));
        line.set("stroke", "#e4e4e4").close(&mut svg);
        text(
            &mut svg,
            (left - 8.0, y(loss) + 4.0),
            "end",
            12,
            "black",
            &format!("{loss:.2}"),
        );
    }
    let at: Vec<(f64, f64)> = points.iter().map(|p| (x(p.1), y(p.2))).collect();
    dots(&mut svg, &points, &at);
    let (x_name, y_name, words) = match lang {
        Lang::En => (
            "KV cache, bytes a token adds (2 layers, float32)",
            "test loss after two epochs",
            "the tutorial's recipe from np.random.seed(42); record: book/src/generated/s7_weighed.txt",
        ),
        Lang::ZhCn => (
            "KV 缓存：每个词元增加的字节数（2 层，float32）",
            "两轮后的测试损失",
            "教程的训练配方，从 np.random.seed(42) 出发；记录：book/src/generated/s7_weighed.txt",
        ),
    };
    text(
        &mut svg,
        ((left + right) / 2.0, bottom + 42.0),
        "middle",
        13,
        "black",
        x_name,
    );
    vertical_text(
        &mut svg,
        (left - 62.0, (top + bottom) / 2.0),
        13,
        "black",
        y_name,
    );
    footer(&mut svg, (820.0, 500.0), words);
    finish(lang, "s7_weighed.svg", svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_is_read_from_the_records() {
        let table = table(Lang::En, WEIGHED, &committed_record().unwrap());
        assert!(
            !table.contains('—'),
            "a figure is missing from the records:\n{table}"
        );
        assert_eq!(table.lines().count(), 2 + variants().len());
    }

    #[test]
    fn the_chart_has_a_dot_for_every_variant() {
        let figure = chart(Lang::En, WEIGHED);
        assert_eq!(figure.svg.matches("<circle").count(), variants().len());
        assert!(
            figure.svg.contains("MLA + RoPE, L = 32: 1.7608"),
            "{}",
            figure.svg
        );
    }
}
