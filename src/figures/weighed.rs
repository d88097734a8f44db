//! Stage 7's variants weighed side by side, as the chapter shows them: one Markdown table per
//! edition, drawn from two committed records: `book/src/generated/s7_weighed.txt` (each variant
//! trained with the tutorial's recipe, `tools/s7_weigh_record.sh`) and
//! `book/src/generated/s7_bench.txt` (generation with the KV cache, read by [`super::cache`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::cache::{Record, committed_record, variant_name};
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
}
