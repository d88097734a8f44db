//! Stage 7's variants weighed side by side, as the chapter shows them: one Markdown table per
//! edition, drawn from two committed records, `book/src/generated/s7_weighed.txt` (each variant
//! trained with the tutorial's recipe, `tools/s7_weigh_record.sh`) and
//! `book/src/generated/s7_bench.txt` (generation with the KV cache, `tools/s7_bench_record.sh`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::lang::Lang;

/// The record of the training runs.
pub const WEIGHED: &str = include_str!("../../book/src/generated/s7_weighed.txt");
/// The record of the generation bench.
pub const BENCH: &str = include_str!("../../book/src/generated/s7_bench.txt");

/// Where the table goes, under `book/src/generated/` (the Chinese one in `zh-CN/`).
pub const TABLE_FILE: &str = "s7_weighed.md";

/// The variants in the table's order, by the records' names, with each edition's name.
const VARIANTS: [(&str, &str, &str); 5] = [
    ("full", "full, 4 heads", "完整模型，4 个头"),
    ("gqa", "GQA, K = 2", "GQA，K = 2"),
    ("mqa", "MQA, K = 1", "MQA，K = 1"),
    ("swa", "SWA, W = 8", "SWA，W = 8"),
    ("rope", "RoPE", "RoPE"),
];

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
pub fn table(lang: Lang, weighed: &str, bench: &str) -> String {
    let (weighed, bench) = (lines(weighed), lines(bench));
    let header = match lang {
        Lang::En => {
            "| variant | parameters | KV bytes per token | test loss, 3,000 steps | test loss, two epochs | ms per training step | tokens/s with the cache, T = 256 | tokens/s, T = 1,024 |"
        }
        Lang::ZhCn => {
            "| 变体 | 参数量 | 每个词元的 KV 字节数 | 测试损失（3,000 步） | 测试损失（两轮） | 每个训练步的毫秒数 | 有缓存时每秒词元数（T = 256） | 每秒词元数（T = 1,024） |"
        }
    };
    let mut out = format!("{header}\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (id, en, zh) in VARIANTS {
        let short = find(&weighed, &[("variant", id), ("steps", "3000")], "test_loss");
        let full = |key| find(&weighed, &[("variant", id), ("steps", "31368")], key);
        let speed = |t| {
            let at = [("variant", id), ("T", t), ("cache", "on"), ("threads", "1")];
            find(&bench, &at, "tokens_per_s")
        };
        let name = lang.pick(en, zh);
        let (params, kv, ms) = (
            full("parameters"),
            full("kv_bytes_per_token"),
            full("ms_per_step"),
        );
        let _ = writeln!(
            out,
            "| {name} | {params} | {kv} | {short} | {} | {ms} | {} | {} |",
            full("test_loss"),
            speed("256"),
            speed("1024")
        );
    }
    out
}

/// The table of each edition from the committed records.
pub fn committed_tables() -> Vec<(String, String)> {
    [Lang::En, Lang::ZhCn]
        .into_iter()
        .map(|lang| {
            (
                format!("{}{TABLE_FILE}", lang.dir()),
                table(lang, WEIGHED, BENCH),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_is_read_from_the_records() {
        let table = table(Lang::En, WEIGHED, BENCH);
        assert!(
            !table.contains('—'),
            "a figure is missing from the records:\n{table}"
        );
        assert_eq!(table.lines().count(), 2 + VARIANTS.len());
    }
}
