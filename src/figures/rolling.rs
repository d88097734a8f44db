//! What stage 7's rolling cache costs far past the context, as the chapter shows it: the chart of
//! the time per character against the characters written, and the table of the whole run, drawn
//! from the record of a measurement, `book/src/generated/s7_rolling.txt`
//! (`s7_variants --bench --rolling`, written by `tools/s7_bench_record.sh`). This module only lays
//! the numbers out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Figure;
use super::cache::machine;
use super::chart::{Axis, LineChart, POINTS, Scale, Series, Style};
use super::draw::{BLUE, ORANGE, RED, close_svg, note, thousands};
use super::record::Line;
use crate::Error;
use crate::lang::Lang;

/// The committed record.
pub const RECORD: &str = include_str!("../../book/src/generated/s7_rolling.txt");

/// The record: its machine, its command, and for each way the median over the rounds of each
/// stretch's time per character, (first character of the stretch, characters, ms).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rolling {
    pub machine: Option<String>,
    pub command: Option<String>,
    pub context: usize,
    pub window: usize,
    pub ways: BTreeMap<String, Vec<(usize, usize, f64)>>,
}

impl Rolling {
    /// The milliseconds the whole run took in `way`: each stretch's median time per character
    /// times its characters.
    pub fn total_ms(&self, way: &str) -> Option<f64> {
        let stretches = self.ways.get(way)?;
        Some(stretches.iter().map(|&(_, n, ms)| n as f64 * ms).sum())
    }
}

/// Reads the record: `T=32 W=8 way=rolling threads=1 round=0 from=0 to=320 ms_per_token=…`
/// lines at one thread, and its `# Machine:` and command comments.
pub fn parse(record: &str) -> Result<Rolling, String> {
    let mut rolling = Rolling::default();
    let mut rounds: BTreeMap<(String, usize, usize), Vec<f64>> = BTreeMap::new();
    for line in record.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            match comment.strip_prefix("Machine:") {
                Some(words) => rolling.machine = Some(words.trim().to_string()),
                None if comment.contains("--rolling") => rolling.command = Some(comment.into()),
                None => {}
            }
            continue;
        }
        let line = Line::parse("rolling", line)?;
        let ms = line.ms("ms_per_token")?;
        if line.count("threads")? != 1 {
            continue;
        }
        (rolling.context, rolling.window) = (line.count("T")?, line.count("W")?);
        let key = (
            line.word("way")?.to_string(),
            line.count("from")?,
            line.count("to")?,
        );
        rounds.entry(key).or_default().push(ms);
    }
    for ((way, from, to), mut ms) in rounds {
        ms.sort_by(f64::total_cmp);
        let median = (ms[(ms.len() - 1) / 2] + ms[ms.len() / 2]) / 2.0;
        rolling
            .ways
            .entry(way)
            .or_default()
            .push((from, to - from, median));
    }
    Ok(rolling)
}

/// The committed record, read.
pub fn committed() -> Result<Rolling, Error> {
    Ok(parse(RECORD).map_err(std::io::Error::other)?)
}

/// The ways in the chapter's order, each with its colour.
const WAYS: [(&str, &str); 3] = [("rolling", BLUE), ("reach", ORANGE), ("window_cache", RED)];

/// A way in `lang`'s words.
fn way_name(lang: Lang, way: &str) -> &'static str {
    match way {
        "rolling" => lang.pick(
            "rolling cache (W keys per block)",
            "滚动缓存（每个模块 W 个键）",
        ),
        "reach" => lang.pick(
            "no cache: the last blocks·(W − 1) + 1 characters again",
            "无缓存：重新计算最后 模块数·(W − 1) + 1 个字符",
        ),
        _ => lang.pick(
            "the KV cache of the chapter's windows",
            "本章窗口的 KV 缓存",
        ),
    }
}

/// The chapter's table: for each way, the whole run's time and its ratio to the rolling cache's.
pub fn table(lang: Lang, rolling: &Rolling) -> String {
    let mut md = String::from(lang.pick(
        "| way | ms per character (median of the stretches) | the whole run, s | against the rolling cache |\n",
        "| 方式 | 每个字符的毫秒数（各段的中位数） | 整个运行，秒 | 与滚动缓存相比 |\n",
    ));
    md.push_str("|---|---:|---:|---:|\n");
    let base = rolling.total_ms("rolling");
    for (way, _) in WAYS {
        let (Some(stretches), Some(total)) = (rolling.ways.get(way), rolling.total_ms(way)) else {
            continue;
        };
        let mut ms: Vec<f64> = stretches.iter().map(|s| s.2).collect();
        ms.sort_by(f64::total_cmp);
        let median = ms[ms.len() / 2];
        let ratio = base.map_or("—".to_string(), |b| format!("{:.1}×", total / b));
        writeln!(
            md,
            "| {} | {median:.3} | {:.2} | {ratio} |",
            way_name(lang, way),
            total / 1e3
        )
        .expect("a String takes every write");
    }
    md
}

/// The chapter's table as (file under `book/src/generated/`, Markdown), for `lang`.
pub fn tables(lang: Lang, rolling: &Rolling) -> Vec<(String, String)> {
    vec![(
        format!("{}s7_rolling_table.md", lang.dir()),
        table(lang, rolling),
    )]
}

/// The chart's layout: room below for the axis's name and two lines of notes.
const ROLLING_CHART: Style = Style {
    size: (740.0, 460.0),
    margins: [80.0, 30.0, 44.0, 110.0],
    names: (70.0, 22.0),
    ..POINTS
};

/// The chart's lines: a way each, its stretches' medians at the character each stretch ends on.
fn series(lang: Lang, rolling: &Rolling) -> Vec<Series<'static>> {
    let line = |&(way, colour): &(&str, &'static str)| {
        let stretches = rolling.ways.get(way)?;
        let points = stretches
            .iter()
            .map(|&(from, n, ms)| ((from + n) as f64, ms));
        Some(Series {
            name: way_name(lang, way),
            colour,
            points: points.collect(),
        })
    };
    WAYS.iter().filter_map(line).collect()
}

/// The chart's note on its points, over `stretch` characters each, and its footer: the machine
/// and the command (as its program's file name and its flags).
fn notes(lang: Lang, rolling: &Rolling, stretch: f64) -> (String, String) {
    let (t, w) = (rolling.context, rolling.window);
    let words = match lang {
        Lang::En => format!(
            "context {t}, window {w}: each point is the mean over {stretch} characters, the median of the rounds"
        ),
        Lang::ZhCn => {
            format!("上下文 {t}，窗口 {w}：每个点是 {stretch} 个字符的平均值，取各轮的中位数")
        }
    };
    let command = (rolling.command.as_deref()).map(|c| c.rsplit('/').next().unwrap_or(c));
    let machine = rolling.machine.as_deref().map(|m| machine(lang, m));
    let footer = [
        machine.unwrap_or_default(),
        command.unwrap_or_default().to_string(),
    ];
    let footer: Vec<String> = footer.into_iter().filter(|w| !w.is_empty()).collect();
    (words, footer.join(lang.pick("; ", "；")))
}

/// `s7_rolling.svg`: the time per character against the characters written, a line per way, at
/// one thread; nothing when the record has no stretch.
pub fn figures(lang: Lang, rolling: &Rolling) -> Vec<Figure> {
    let series = series(lang, rolling);
    let points = || series.iter().flat_map(|s| s.points.iter());
    let (low, high) = points().fold((f64::INFINITY, 0f64), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let last = points().map(|p| p.0).fold(0.0, f64::max);
    let Some(first) = series.first().and_then(|s| s.points.first()) else {
        return vec![];
    };
    let (words, footer) = notes(lang, rolling, first.0);
    let y_ticks = powers_of_two(low, high);
    let x_ticks = (0..=5).map(|k| last * k as f64 / 5.0);
    let chart = LineChart {
        title: lang.pick(
            "Stage 7: the time per character far past the context, RoPE with a sliding window",
            "第 7 阶段：远超上下文时每个字符的时间，RoPE 加滑动窗口",
        ),
        style: ROLLING_CHART,
        x: Axis {
            name: lang.pick("characters written", "已写出的字符数"),
            ends: (0.0, last),
            scale: Scale::Linear,
            ticks: x_ticks.map(|x| (x, thousands(x as usize))).collect(),
        },
        y: Axis {
            name: lang.pick(
                "ms per character (log scale)",
                "每个字符的毫秒数（对数刻度）",
            ),
            ends: (y_ticks[0].0, y_ticks[y_ticks.len() - 1].0),
            scale: Scale::Log2,
            ticks: y_ticks,
        },
        series: &series,
        levels: vec![],
        footer: Some(&footer),
    };
    let drawn = chart.draw(lang);
    let mut svg = drawn.trim_end().trim_end_matches("</svg>").to_string();
    let (width, height) = ROLLING_CHART.size;
    note(&mut svg, (width / 2.0, height - 34.0), &words);
    vec![Figure::new(lang, "s7_rolling.svg", close_svg(svg))]
}

/// Ticks at the powers of two from below `low` to above `high`, with their labels.
fn powers_of_two(low: f64, high: f64) -> Vec<(f64, String)> {
    let from = low.log2().floor() as i32;
    let to = (high.log2().ceil() as i32).max(from + 1);
    (from..=to)
        .map(|e| {
            let v = 2f64.powi(e);
            let digits = (-v.log10().floor()).max(0.0) as usize + 1;
            (v, format!("{v:.digits$}"))
        })
        .collect()
}
