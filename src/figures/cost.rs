//! What attention costs as the context grows, as stage 6's chapter shows it: the table and the two
//! log-log charts (time, and memory held, against T) drawn from the record of a measurement,
//! `book/src/generated/s6_bench.txt`. The record holds the lines `s6_flash --bench` and
//! `tools/torch_attention_bench.py` printed, round after round, run alternately on one machine
//! (`tools/s6_bench_record.sh` writes it); this module only takes each figure's median and range
//! over the rounds and lays them out, so the tests can redraw every table and chart from the record alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Figure;
use super::chart::{Axis, LineChart, POINTS, Scale, Series};
use super::draw::{BLUE, GREEN, ORANGE, PURPLE};
use crate::Error;
use crate::lang::Lang;

/// The committed record the chapter's figures are drawn from.
pub const RECORD: &str = include_str!("../../book/src/generated/s6_bench.txt");

/// One measured line: `T=… path=… threads=… forward_ms=…` (or `module=…` for the layers at
/// rasbt's shapes), its numbers by name.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// `T` for a length, or the module's name.
    pub what: What,
    /// `naive`, `tiled`, `exact` or `torch_sdpa` (`torch` for PyTorch's modules).
    pub path: String,
    pub threads: usize,
    pub fields: BTreeMap<String, f64>,
}

/// What a line measured.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum What {
    Length(usize),
    Module(String),
}

/// The record's measured lines, in order; comments (`#`) and `not run` lines are left out.
pub fn parse(record: &str) -> Result<Vec<Line>, String> {
    let measured = record
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains("not run"));
    measured.map(parse_line).collect()
}

/// One `key=value …` line.
fn parse_line(line: &str) -> Result<Line, String> {
    let bad = |why: &str| format!("the bench record's line {line:?} {why}");
    let mut pairs = BTreeMap::new();
    for pair in line.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad("has a word without ="))?;
        pairs.insert(key, value);
    }
    let what = match (pairs.remove("T"), pairs.remove("module")) {
        (Some(t), None) => What::Length(t.parse().map_err(|_| bad("has a T that is no number"))?),
        (None, Some(m)) => What::Module(m.to_string()),
        _ => return Err(bad("names neither one T nor one module")),
    };
    let path = pairs.remove("path").unwrap_or("torch").to_string();
    let threads = pairs
        .remove("threads")
        .ok_or_else(|| bad("has no threads="))?;
    let threads = threads
        .parse()
        .map_err(|_| bad("has threads that are no number"))?;
    let fields = pairs.into_iter().map(|(key, value)| {
        let value = value
            .parse()
            .map_err(|_| bad("has a figure that is no number"))?;
        Ok((key.to_string(), value))
    });
    Ok(Line {
        what,
        path,
        threads,
        fields: fields.collect::<Result<_, String>>()?,
    })
}

/// One measurement's median over the rounds: what, path, threads, and each figure's median and
/// range.
#[derive(Clone, Debug, PartialEq)]
pub struct Median {
    pub what: What,
    pub path: String,
    pub threads: usize,
    pub rounds: usize,
    pub fields: BTreeMap<String, f64>,
    /// Each figure's lowest and highest value over the rounds.
    pub ranges: BTreeMap<String, (f64, f64)>,
}

impl Median {
    fn get(&self, field: &str) -> Option<f64> {
        self.fields.get(field).copied()
    }

    /// A time in milliseconds as the tables show it: the median, and the range when more than one
    /// round measured it.
    fn time(&self, field: &str) -> Option<String> {
        let median = ms(self.get(field)?);
        Some(match self.ranges.get(field) {
            Some(&(low, high)) if self.rounds > 1 => format!("{median} ({}–{})", ms(low), ms(high)),
            _ => median,
        })
    }
}

/// The median of each figure of each measurement (the same what, path and threads) over the rounds
/// that measured it, sorted by what, threads and the paths' order.
pub fn medians(lines: &[Line]) -> Vec<Median> {
    let mut groups: BTreeMap<(What, usize, usize, String), Vec<&Line>> = BTreeMap::new();
    for line in lines {
        let key = (
            line.what.clone(),
            line.threads,
            path_rank(&line.path),
            line.path.clone(),
        );
        groups.entry(key).or_default().push(line);
    }
    let median = |(key, lines): ((What, usize, usize, String), Vec<&Line>)| {
        let names: Vec<String> = lines
            .iter()
            .flat_map(|l| l.fields.keys())
            .cloned()
            .collect();
        let values = |name: &String| -> Vec<f64> {
            lines
                .iter()
                .filter_map(|l| l.fields.get(name))
                .copied()
                .collect()
        };
        let range = |values: Vec<f64>| {
            let low = values.iter().copied().fold(f64::INFINITY, f64::min);
            (low, values.into_iter().fold(f64::NEG_INFINITY, f64::max))
        };
        Median {
            what: key.0,
            threads: key.1,
            path: key.3,
            rounds: lines.len(),
            fields: names
                .iter()
                .map(|n| (n.clone(), median_of(values(n))))
                .collect(),
            ranges: names
                .iter()
                .map(|n| (n.clone(), range(values(n))))
                .collect(),
        }
    };
    groups.into_iter().map(median).collect()
}

/// The middle value (the mean of the middle two for an even count).
fn median_of(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The order the table and legends list the paths in.
const PATHS: [&str; 4] = ["naive", "tiled", "exact", "torch_sdpa"];

fn path_rank(path: &str) -> usize {
    PATHS.iter().position(|&p| p == path).unwrap_or(PATHS.len())
}

/// The path's name in `lang`'s table and legends.
fn path_name(lang: Lang, path: &str) -> &'static str {
    match path {
        "naive" => lang.pick("naive (stage 4's graph)", "朴素（第 4 阶段的图）"),
        "tiled" => lang.pick("tiled", "分块"),
        "exact" => lang.pick("exact", "精确"),
        "torch_sdpa" => lang.pick("PyTorch SDPA", "PyTorch SDPA"),
        _ => lang.pick("other", "其他"),
    }
}

/// A module's name in `lang`'s table: the crate's layer with its attention form, or PyTorch's
/// module of rasbt's comparison.
fn module_name(lang: Lang, module: &str, path: &str) -> String {
    let torch = |en, zh| format!("PyTorch{}{}", lang.pick(": ", "："), lang.pick(en, zh));
    match (module, path) {
        ("multihead", "torch") => torch(
            "the chapter's `MultiHeadAttention`",
            "本章的 `MultiHeadAttention`",
        ),
        ("wrapper", _) => torch(
            "the chapter's wrapper of `CausalAttention` heads",
            "本章由 `CausalAttention` 头组成的包装",
        ),
        ("combined_qkv", _) => torch("one combined Q/K/V projection", "合并为一个的 Q/K/V 投影"),
        ("combined_qkv_sdpa", _) => torch("combined Q/K/V with SDPA", "合并的 Q/K/V 加 SDPA"),
        (_, path) => {
            let form = match path {
                "naive" => lang.pick(
                    "naive attention (the graph of six ops)",
                    "朴素注意力（六个操作的图）",
                ),
                "tiled" => lang.pick(
                    "tiled attention (one FlashAttention node)",
                    "分块注意力（一个 FlashAttention 节点）",
                ),
                _ => lang.pick("exact attention", "精确注意力"),
            };
            format!(
                "{}{form}",
                lang.pick("the crate: stage 4's layer, ", "本 crate：第 4 阶段的层，")
            )
        }
    }
}

/// The order the modules table lists them in: rasbt's comparison's order, the crate's layer after
/// the chapter's `MultiHeadAttention` it ports.
fn module_rank(module: &str, path: &str) -> usize {
    match (module, path) {
        ("wrapper", _) => 0,
        ("multihead", "torch") => 1,
        ("multihead", "naive") => 2,
        ("multihead", _) => 3,
        ("combined_qkv", _) => 4,
        _ => 5,
    }
}

/// `1,234.5` milliseconds, one decimal below 1,000 and none above.
fn ms(v: f64) -> String {
    if v >= 1000.0 {
        let whole = super::draw::thousands(v.round() as usize);
        whole.to_string()
    } else {
        format!("{v:.1}")
    }
}

/// `1,536`, `12.3` or `0.11` MiB: as `--bench` prints them (two decimals), fewer above 10.
fn mib(v: f64) -> String {
    match v {
        v if v >= 100.0 => super::draw::thousands(v.round() as usize),
        v if v >= 10.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    }
}

/// The chapter's table of the lengths: per T and threads, each path's forward and backward time,
/// the memory it held, and its forward time over PyTorch's SDPA's.
pub fn lengths_table(lang: Lang, medians: &[Median]) -> String {
    let mut md = String::from(lang.pick(
        "| T | threads | form | forward, ms: median (range) | backward, ms: median (range) | held, MiB | forward ÷ SDPA's |\n",
        "| T | 线程 | 形式 | 前向，毫秒：中位数（范围） | 反向，毫秒：中位数（范围） | 占用，MiB | 前向 ÷ SDPA 的 |\n",
    ));
    md.push_str("|---:|---:|---|---:|---:|---:|---:|\n");
    let lengths = medians.iter().filter(|m| matches!(m.what, What::Length(_)));
    for m in lengths.clone() {
        let What::Length(t) = m.what else { continue };
        let sdpa = lengths
            .clone()
            .find(|s| s.what == m.what && s.threads == m.threads && s.path == "torch_sdpa");
        let forward = m.get("forward_ms");
        let ratio = match (forward, sdpa.and_then(|s| s.get("forward_ms"))) {
            (Some(f), Some(s)) if m.path != "torch_sdpa" => format!("{:.2}", f / s),
            _ => "".to_string(),
        };
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "—".to_string());
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {ratio} |",
            super::draw::thousands(t),
            m.threads,
            path_name(lang, &m.path),
            or_dash(m.time("forward_ms")),
            or_dash(m.time("backward_ms")),
            or_dash(m.get("peak_mib").map(mib)),
        )
        .expect("a String takes every write");
    }
    md
}

/// The chapter's table of the layers at rasbt's comparison's shapes: each module's forward time.
pub fn modules_table(lang: Lang, medians: &[Median]) -> String {
    let mut md = String::from(lang.pick(
        "| module | threads | forward, ms: median (range) |\n",
        "| 模块 | 线程 | 前向，毫秒：中位数（范围） |\n",
    ));
    md.push_str("|---|---:|---:|\n");
    let mut modules: Vec<(&Median, &str)> = medians
        .iter()
        .filter_map(|m| match &m.what {
            What::Module(module) => Some((m, module.as_str())),
            What::Length(_) => None,
        })
        .collect();
    modules.sort_by_key(|(m, module)| (m.threads, module_rank(module, &m.path)));
    for (m, module) in modules {
        let forward = m.time("forward_ms").unwrap_or_else(|| "—".to_string());
        let name = module_name(lang, module, &m.path);
        writeln!(md, "| {name} | {} | {forward} |", m.threads).expect("a String takes every write");
    }
    md
}

/// The lengths the record measured, in order.
fn lengths(medians: &[Median]) -> Vec<usize> {
    let mut ts: Vec<usize> = medians
        .iter()
        .filter_map(|m| match m.what {
            What::Length(t) => Some(t),
            What::Module(_) => None,
        })
        .collect();
    ts.dedup();
    ts
}

/// Each path's (T, `field`) points at `threads`, where the record has them.
fn path_points(medians: &[Median], path: &str, threads: usize, field: &str) -> Vec<(f64, f64)> {
    let at = medians
        .iter()
        .filter(|m| m.path == path && m.threads == threads);
    at.filter_map(|m| match m.what {
        What::Length(t) => m.get(field).map(|v| (t as f64, v)),
        What::Module(_) => None,
    })
    .collect()
}

/// Ticks at the powers of ten from `low` to `high`, at least two.
fn decades(low: f64, high: f64) -> Vec<(f64, String)> {
    let from = low.log10().floor() as i32;
    let to = (high.log10().ceil() as i32).max(from + 1);
    (from..=to)
        .map(|e| 10f64.powi(e))
        .map(|v| {
            (
                v,
                if v >= 1.0 {
                    super::draw::thousands(v as usize)
                } else {
                    format!("{v}")
                },
            )
        })
        .collect()
}

/// A log-log chart of `field` against T at one thread, a line per path.
fn cost_chart(lang: Lang, medians: &[Median], field: &str, words: ChartWords) -> Option<String> {
    let colours = [ORANGE, BLUE, GREEN, PURPLE];
    let paths = PATHS.iter().zip(colours);
    let series: Vec<Series> = paths
        .map(|(&path, colour)| Series {
            name: path_name(lang, path),
            colour,
            points: path_points(medians, path, 1, field),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (low, high) = ys.fold((f64::INFINITY, 0f64), |(l, h), y| (l.min(y), h.max(y)));
    let ts = lengths(medians);
    let (first, last) = (*ts.first()?, *ts.last()?);
    // One length alone still gets an axis: from half of it to twice it.
    let (first, last) = if first == last {
        (first / 2, first * 2)
    } else {
        (first, last)
    };
    let y_ticks = decades(low, high);
    let chart = LineChart {
        title: words.title,
        style: POINTS,
        x: Axis {
            name: lang.pick("T, the tokens (log scale)", "T：词元数（对数刻度）"),
            ends: (first as f64, last as f64),
            scale: Scale::Log2,
            ticks: ts
                .iter()
                .map(|&t| (t as f64, super::draw::thousands(t)))
                .collect(),
        },
        y: Axis {
            name: words.y,
            ends: (y_ticks[0].0, y_ticks[y_ticks.len() - 1].0),
            scale: Scale::Log2,
            ticks: y_ticks,
        },
        series: &series,
        levels: vec![],
        footer: Some(words.footer),
    };
    Some(chart.draw(lang))
}

/// A chart's title, y axis and footer.
struct ChartWords<'a> {
    title: &'a str,
    y: &'a str,
    footer: &'a str,
}

/// `s6_cost_time.svg` and `s6_cost_memory.svg`, drawn from the record's medians.
pub fn figures(lang: Lang, medians: &[Median]) -> Vec<Figure> {
    let footer = lang.pick(
        "one thread; 12 heads of 64 columns, causal, batch 1; tiles of 16 × 16; medians of the record's rounds",
        "单线程；12 个 64 列的头，因果，批量 1；分块 16 × 16；记录中各轮的中位数",
    );
    let time = ChartWords {
        title: lang.pick(
            "Stage 6: the forward pass's time as the context grows",
            "第 6 阶段：前向传播的时间随上下文增长",
        ),
        y: lang.pick("milliseconds (log scale)", "毫秒（对数刻度）"),
        footer,
    };
    let memory = ChartWords {
        title: lang.pick(
            "Stage 6: the memory each form holds as the context grows",
            "第 6 阶段：每种形式占用的内存随上下文增长",
        ),
        y: lang.pick(
            "MiB held beyond Q, K, V and O (log scale)",
            "Q、K、V、O 之外占用的 MiB（对数刻度）",
        ),
        footer,
    };
    let charts = [
        (
            "s6_cost_time.svg",
            cost_chart(lang, medians, "forward_ms", time),
        ),
        (
            "s6_cost_memory.svg",
            cost_chart(lang, medians, "peak_mib", memory),
        ),
    ];
    charts
        .into_iter()
        .filter_map(|(file, svg)| svg.map(|svg| Figure::new(lang, file, svg)))
        .collect()
}

/// The chapter's tables, each as (file under `book/src/generated/`, Markdown), for `lang`.
pub fn tables(lang: Lang, medians: &[Median]) -> Vec<(String, String)> {
    [
        ("s6_cost.md", lengths_table(lang, medians)),
        ("s6_modules.md", modules_table(lang, medians)),
    ]
    .into_iter()
    .map(|(file, md)| (format!("{}{file}", lang.dir()), md))
    .collect()
}

/// The medians of the committed record.
pub fn committed_medians() -> Result<Vec<Median>, Error> {
    let lines = parse(RECORD).map_err(std::io::Error::other)?;
    Ok(medians(&lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = "# a comment\n\
        T=256 path=tiled threads=1 forward_ms=3 backward_ms=9 peak_mib=0.03\n\
        T=256 path=torch_sdpa threads=1 forward_ms=2 backward_ms=4\n\
        T=256 path=tiled threads=1 forward_ms=5 backward_ms=7 peak_mib=0.03\n\
        T=256 path=tiled threads=1 forward_ms=4 backward_ms=8 peak_mib=0.03\n\
        T=16384 path=naive not run: it needs 24 GiB\n\
        module=multihead path=naive threads=2 forward_ms=10\n\
        module=wrapper threads=2 forward_ms=20\n";

    #[test]
    fn each_figure_is_the_median_of_its_rounds() {
        let medians = medians(&parse(RECORD).unwrap());
        let tiled = &medians[0];
        assert_eq!((tiled.path.as_str(), tiled.rounds), ("tiled", 3));
        assert_eq!(tiled.get("forward_ms"), Some(4.0));
        assert_eq!(tiled.get("backward_ms"), Some(8.0));
        assert_eq!(medians[1].path, "torch_sdpa");
        let table = lengths_table(Lang::En, &medians);
        assert!(
            table.contains("| 256 | 1 | tiled | 4.0 (3.0–5.0) | 8.0 (7.0–9.0) | 0.03 | 2.00 |"),
            "{table}"
        );
        let modules = modules_table(Lang::En, &medians);
        assert!(
            modules.contains("| PyTorch: the chapter's wrapper"),
            "{modules}"
        );
    }

    #[test]
    fn a_line_that_is_not_key_value_is_named() {
        let err = parse("T=1 path=tiled threads=1 forward_ms=fast\n").unwrap_err();
        assert!(err.contains("no number"), "{err}");
        assert!(parse("path=tiled threads=1\n").is_err());
    }

    #[test]
    fn the_committed_record_draws_both_charts_in_both_editions() {
        let medians = committed_medians().unwrap();
        for lang in Lang::ALL {
            assert_eq!(figures(lang, &medians).len(), 2);
        }
    }
}
