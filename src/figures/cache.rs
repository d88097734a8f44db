//! What stage 7's KV cache saves as the context grows, as the chapter shows it: the table and the
//! log-log chart drawn from the record of a measurement, `book/src/generated/s7_bench.txt`. The
//! record holds the lines `s7_variants --bench` printed at 1 thread and at 2 (one per context,
//! variant and way of generating, each already the median of the bench's runs), and, in comments,
//! the machine and the commands (`tools/s7_bench_record.sh` writes it); this module only lays the
//! numbers out, so the tests can redraw the table and the chart from the record alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Figure;
use super::chart::{Axis, Legend, LineChart, POINTS, Scale, Series, Side, Style};
use super::draw::{BLUE, GREEN, ORANGE, PURPLE, RED, close_svg, note, thousands};
use super::record::Line;
use crate::Error;
use crate::lang::Lang;
use crate::s7_variants::bench::{NEW_TOKENS, short_name};
use crate::s7_variants::variants;

/// The committed record the chapter's table and chart are drawn from.
pub const RECORD: &str = include_str!("../../book/src/generated/s7_bench.txt");

/// One measured line: `T=… variant=… cache=on|off threads=… ms_per_token=… …`.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// T, the context: the prompt fills it but for [`NEW_TOKENS`] tokens.
    pub context: usize,
    /// The bench's short name: `full`, `gqa`, `mqa`, `swa` or `rope`.
    pub variant: String,
    /// With the KV cache, or recomputing the whole window for every token.
    pub cached: bool,
    pub threads: usize,
    /// The median over the rounds.
    pub ms_per_token: f64,
    /// The fastest and the slowest round.
    pub range: (f64, f64),
    /// The rounds measured.
    pub rounds: usize,
    /// Of the timed steps, those that computed the whole window (`None` in older records).
    pub recomputed: Option<usize>,
    /// What the cache keeps for one token, over all the blocks.
    pub kv_bytes_per_token: usize,
}

/// The record: its machine, the commands it ran, and its timings.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// The `# Machine:` comment's words, without the label.
    pub machine: Option<String>,
    /// The comments that name a `--bench` command, as written.
    pub commands: Vec<String>,
    /// One per line, in the record's order; a measurement given more than once keeps the median.
    pub timings: Vec<Timing>,
}

impl Record {
    /// The timing of `variant` at `context` and `threads`, with the cache or without.
    pub fn find(
        &self,
        context: usize,
        variant: &str,
        cached: bool,
        threads: usize,
    ) -> Option<&Timing> {
        self.timings.iter().find(|t| {
            (t.context, t.variant.as_str(), t.cached, t.threads)
                == (context, variant, cached, threads)
        })
    }

    /// The contexts, the variants (in the chapter's order) and the thread counts the record
    /// measured.
    fn axes(&self) -> (Vec<usize>, Vec<&str>, Vec<usize>) {
        let mut contexts: Vec<usize> = self.timings.iter().map(|t| t.context).collect();
        let mut names: Vec<&str> = self.timings.iter().map(|t| t.variant.as_str()).collect();
        let mut threads: Vec<usize> = self.timings.iter().map(|t| t.threads).collect();
        contexts.sort_unstable();
        contexts.dedup();
        names.sort_by_key(|&name| (variant_rank(name), name));
        names.dedup();
        threads.sort_unstable();
        threads.dedup();
        (contexts, names, threads)
    }

    /// The comment naming the command that ran at `threads` threads, shortened to the program's
    /// file name and its flags.
    fn command(&self, threads: usize) -> Option<String> {
        let n = threads.to_string();
        let at = |c: &&String| {
            let mut words = c.split_whitespace().skip_while(|w| *w != "--threads");
            words.nth(1) == Some(n.as_str())
        };
        let line = self.commands.iter().find(at)?;
        let (program, flags) = line.split_once(' ').unwrap_or((line, ""));
        let program = program.rsplit('/').next().unwrap_or(program);
        Some(format!("{program} {flags}"))
    }
}

/// Reads a record: its comments for the machine and the commands, and its measured lines.
pub fn parse(record: &str) -> Result<Record, String> {
    let mut machine = None;
    let mut commands = vec![];
    let mut lines: BTreeMap<(usize, String, bool, usize), Vec<Timing>> = BTreeMap::new();
    let mut order = vec![];
    for line in record.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(words) = comment.strip_prefix("Machine:") {
                machine = Some(words.trim().to_string());
            } else if comment.contains("--bench") {
                commands.push(comment.to_string());
            }
            continue;
        }
        let timing = parse_line(line)?;
        let key = (
            timing.context,
            timing.variant.clone(),
            timing.cached,
            timing.threads,
        );
        if !lines.contains_key(&key) {
            order.push(key.clone());
        }
        lines.entry(key).or_default().push(timing);
    }
    let median = |key| {
        let mut runs = lines.remove(&key).expect("each key has its lines");
        runs.sort_by(|a, b| a.ms_per_token.total_cmp(&b.ms_per_token));
        let n = runs.len();
        let ms = (runs[(n - 1) / 2].ms_per_token + runs[n / 2].ms_per_token) / 2.0;
        let range = (runs[0].ms_per_token, runs[n - 1].ms_per_token);
        Timing {
            ms_per_token: ms,
            range,
            rounds: n,
            ..runs.swap_remove(0)
        }
    };
    Ok(Record {
        machine,
        commands,
        timings: order.into_iter().map(median).collect(),
    })
}

/// One `key=value …` line.
fn parse_line(text: &str) -> Result<Timing, String> {
    let line = Line::parse("bench", text)?;
    let cached = match line.word("cache")? {
        "on" => true,
        "off" => false,
        _ => return Err(line.bad("has a cache that is neither on nor off")),
    };
    let ms_per_token = line.ms("ms_per_token")?;
    let recomputed = line.word("recomputed").ok().map(str::parse).transpose();
    Ok(Timing {
        context: line.count("T")?,
        variant: line.word("variant")?.to_string(),
        cached,
        threads: line.count("threads")?,
        ms_per_token,
        range: (ms_per_token, ms_per_token),
        rounds: 1,
        recomputed: recomputed.map_err(|_| line.bad("has a recomputed that is no count"))?,
        kv_bytes_per_token: line.count("kv_bytes_per_token")?,
    })
}

/// Where the chapter lists the variant the bench calls `short` (after them all if it lists none),
/// an absorbed or rolling form right after its own.
fn variant_rank(short: &str) -> (usize, usize) {
    let (base, after) = match short.strip_suffix("_absorbed") {
        Some(latent) => (latent, 1),
        None if short == "swa_rope" => ("swa", 1),
        None => (short, 0),
    };
    let chapter = variants();
    let rank = chapter
        .iter()
        .position(|(_, arch)| short_name(arch) == base);
    (rank.unwrap_or(chapter.len()), after)
}

/// The variant the bench calls `short` in `lang`'s words, its numbers from the chapter's
/// architecture: `MHA (full, 4 heads)`, `GQA, K = 2`, `MQA, K = 1`, `SWA, W = 8`, `RoPE`.
pub(super) fn variant_name(lang: Lang, short: &str) -> String {
    if let Some(latent) = short.strip_suffix("_absorbed") {
        let absorbed = lang.pick(", absorbed", "，吸收权重");
        return format!("{}{absorbed}", variant_name(lang, latent));
    }
    if short == "swa_rope" {
        let swa = variant_name(lang, "swa");
        return format!("{swa} + RoPE{}", lang.pick(", rolling", "，滚动缓存"));
    }
    let chapter = variants();
    let Some((_, arch)) = chapter.iter().find(|(_, arch)| short_name(arch) == short) else {
        return short.to_string();
    };
    match (lang, short) {
        (Lang::En, "full") => format!("MHA (full, {} heads)", arch.heads),
        (Lang::ZhCn, "full") => format!("MHA（完整，{} 个头）", arch.heads),
        (Lang::En, "gqa" | "mqa") => format!("{}, K = {}", short.to_uppercase(), arch.kv_heads()),
        (Lang::ZhCn, "gqa" | "mqa") => {
            format!("{}，{} 个键/值头", short.to_uppercase(), arch.kv_heads())
        }
        (Lang::En, "swa") => format!("SWA, W = {}", arch.window.unwrap_or(0)),
        (Lang::ZhCn, "swa") => format!("SWA，窗口 {}", arch.window.unwrap_or(0)),
        (_, "rope") => "RoPE".to_string(),
        (Lang::En, "mla") => format!("MLA, L = {}", arch.latent.unwrap_or(0)),
        (Lang::ZhCn, "mla") => format!("MLA，潜向量 {} 维", arch.latent.unwrap_or(0)),
        (Lang::En, "mla_rope") => format!("MLA + RoPE, L = {}", arch.latent.unwrap_or(0)),
        (Lang::ZhCn, "mla_rope") => format!("MLA + RoPE，潜向量 {} 维", arch.latent.unwrap_or(0)),
        _ => short.to_string(),
    }
}

/// Milliseconds to three figures: `0.119`, `1.26`, `30.5`, `325`, `1,234`.
fn ms(v: f64) -> String {
    match v {
        v if v >= 100.0 => thousands(v.round() as usize),
        v if v >= 10.0 => format!("{v:.1}"),
        v if v >= 1.0 => format!("{v:.2}"),
        v => format!("{v:.3}"),
    }
}

/// The chapter's table: a row per context and variant, with what the cache keeps per token, and
/// for each thread count the time per token with the cache and without it, and the ratio.
pub fn table(lang: Lang, record: &Record) -> String {
    let (contexts, names, threads) = record.axes();
    let mut md = String::from(lang.pick(
        "| T | variant | KV cache, bytes per token | steps recomputed, with the cache |",
        "| T | 变体 | KV 缓存，每个词元的字节数 | 有缓存时重新计算的步数 |",
    ));
    let mut rule = String::from("|---:|---|---:|---:|");
    for &n in &threads {
        let at = match lang {
            Lang::En if n == 1 => "1 thread".to_string(),
            Lang::En => format!("{n} threads"),
            Lang::ZhCn => format!("{n} 个线程"),
        };
        let columns = match lang {
            Lang::En => {
                format!(" {at}: ms per token, with the cache | {at}: without it | {at}: speed-up |")
            }
            Lang::ZhCn => {
                format!(" {at}：每个词元的毫秒数，有缓存 | {at}：无缓存 | {at}：加速比 |")
            }
        };
        md.push_str(&columns);
        rule.push_str("---:|---:|---:|");
    }
    writeln!(md, "\n{rule}").expect("a String takes every write");
    for &t in &contexts {
        for &name in &names {
            let Some(any) = record
                .timings
                .iter()
                .find(|m| m.context == t && m.variant == name)
            else {
                continue;
            };
            let bytes = thousands(any.kv_bytes_per_token);
            let name_words = variant_name(lang, name);
            let recomputed = (threads.iter())
                .find_map(|&n| record.find(t, name, true, n)?.recomputed)
                .map_or("—".to_string(), |r| format!("{r} / {NEW_TOKENS}"));
            write!(
                md,
                "| {} | {name_words} | {bytes} | {recomputed} |",
                thousands(t)
            )
            .expect("a String takes every write");
            for &n in &threads {
                let with = record.find(t, name, true, n);
                let without = record.find(t, name, false, n);
                let ratio = match (with, without) {
                    (Some(w), Some(wo)) => format!("{:.1}×", wo.ms_per_token / w.ms_per_token),
                    _ => "—".to_string(),
                };
                write!(md, " {} | {} | {ratio} |", cell(with), cell(without))
                    .expect("a String takes every write");
            }
            md.push('\n');
        }
    }
    md
}

/// A table cell: the median time per token, and the range of the rounds when there were several.
fn cell(timing: Option<&Timing>) -> String {
    match timing {
        None => "—".to_string(),
        Some(t) if t.rounds == 1 => ms(t.ms_per_token),
        Some(t) => format!(
            "{} ({}–{})",
            ms(t.ms_per_token),
            ms(t.range.0),
            ms(t.range.1)
        ),
    }
}

/// The chapter's table as (file under `book/src/generated/`, Markdown), for `lang`.
pub fn tables(lang: Lang, record: &Record) -> Vec<(String, String)> {
    let file = format!("{}s7_cache_table.md", lang.dir());
    vec![(file, table(lang, record))]
}

/// The colour of each variant's line, in the chapter's order: the chart's five, then five more of
/// the same palette.
const COLOURS: [&str; 10] = [
    BLUE, ORANGE, GREEN, RED, PURPLE, "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
];

/// The full model's line without the cache: its blue, dashed. The chart's lines take no dash of
/// their own, so it rides in the colour, written into the line's and the legend key's `stroke`.
const DASHED_BLUE: &str = "#1f77b4\" stroke-dasharray=\"7 5";

/// The chart's layout: stage 6's charts', with room below for the axis's name and three lines of
/// notes.
const CACHE_CHART: Style = Style {
    size: (1080.0, 490.0),
    margins: [80.0, 370.0, 44.0, 132.0],
    names: (92.0, 22.0),
    // The legend stands in the right margin, clear of the lines.
    legend: Legend {
        side: Side::Right,
        inset: (-16.0, 8.0),
        row: 20.0,
        key: 24.0,
    },
    ..POINTS
};

/// Ticks at the powers of ten from `low` to `high`, at least two.
fn decades(low: f64, high: f64) -> Vec<(f64, String)> {
    let from = low.log10().floor() as i32;
    let to = (high.log10().ceil() as i32).max(from + 1);
    let tick = |e: i32| {
        let v = 10f64.powi(e);
        let label = match e {
            e if e < 0 => format!("{v:.*}", e.unsigned_abs() as usize),
            _ => thousands(v as usize),
        };
        (v, label)
    };
    (from..=to).map(tick).collect()
}

/// The machine of the record's `# Machine:` comment in `lang`'s words: in Chinese, its cores and
/// its sharing said in Chinese, the processor's name as written.
pub(super) fn machine(lang: Lang, words: &str) -> String {
    let words = words.trim_end_matches('.');
    if lang == Lang::En {
        return words.to_string();
    }
    let part = |part: &str| match part.split_once(' ') {
        Some((n, "cores")) => format!("{n} 核"),
        _ if part == "shared with other jobs" => "与其他任务共享".to_string(),
        _ => part.to_string(),
    };
    words.split(", ").map(part).collect::<Vec<_>>().join("，")
}

/// The speed chart's lines: each variant with the cache in its colour, then the full model's
/// without it, dashed, each as (variant, cached, colour).
fn speed_lines<'a>(names: &[&'a str]) -> Vec<(&'a str, bool, &'static str)> {
    let colours = (0..names.len()).map(|n| COLOURS[n % COLOURS.len()]);
    let cached = names
        .iter()
        .zip(colours)
        .map(|(&name, colour)| (name, true, colour));
    cached.chain([("full", false, DASHED_BLUE)]).collect()
}

/// A line's name in the legend: the variant, with the cache or without it.
fn speed_label(lang: Lang, name: &str, cached: bool) -> String {
    let way = match cached {
        true => lang.pick("with the cache", "有缓存"),
        false => lang.pick("without the cache", "无缓存"),
    };
    format!("{}{}{way}", variant_name(lang, name), lang.pick(", ", "，"))
}

/// The speed chart's two notes on how each point was timed, and its footer: the threads, the
/// machine and the command.
fn speed_notes(lang: Lang, record: &Record) -> ([String; 2], String) {
    let how = match lang {
        Lang::En => [
            format!(
                "each point: the time to write {NEW_TOKENS} tokens after a prompt of T − {NEW_TOKENS}, ÷ {NEW_TOKENS}"
            ),
            "with the cache, every step that computed the whole window included; without it, the whole window computed again for each token".to_string(),
        ],
        Lang::ZhCn => [
            format!(
                "每个点：在 T − {NEW_TOKENS} 个词元的提示之后写出 {NEW_TOKENS} 个词元的时间 ÷ {NEW_TOKENS}"
            ),
            "有缓存时含所有重新计算整个窗口的步骤；无缓存时，每个词元都重新计算整个窗口".to_string(),
        ],
    };
    let machine = record.machine.as_deref().map(|m| machine(lang, m));
    let ran = [
        lang.pick("one thread", "单线程").to_string(),
        machine.unwrap_or_default(),
        record.command(1).unwrap_or_default(),
    ];
    let ran: Vec<String> = ran.into_iter().filter(|w| !w.is_empty()).collect();
    (how, ran.join(lang.pick("; ", "；")))
}

/// `s7_cache_speed.svg`: the time per token against T at one thread, log-log, a solid line per
/// variant with the cache and the full model's dashed line without it; `None` when the record has
/// no such timings.
fn speed_chart(lang: Lang, record: &Record) -> Option<Figure> {
    let (contexts, names, _) = record.axes();
    let points = |name: &str, cached: bool| -> Vec<(f64, f64)> {
        let at = contexts
            .iter()
            .filter_map(|&t| record.find(t, name, cached, 1));
        at.map(|m| (m.context as f64, m.ms_per_token)).collect()
    };
    let lines = speed_lines(&names);
    let labels: Vec<String> = lines
        .iter()
        .map(|&(name, cached, _)| speed_label(lang, name, cached))
        .collect();
    let series: Vec<Series> = lines
        .iter()
        .zip(&labels)
        .map(|(&(name, cached, colour), label)| Series {
            name: label,
            colour,
            points: points(name, cached),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (low, high) = ys.fold((f64::INFINITY, 0f64), |(l, h), y| (l.min(y), h.max(y)));
    let (first, last) = (*contexts.first()?, *contexts.last()?);
    if series.is_empty() {
        return None;
    }
    // One context alone still gets an axis: from half of it to twice it.
    let (first, last) = if first == last {
        (first / 2, first * 2)
    } else {
        (first, last)
    };
    let y_ticks = decades(low, high);
    let (how, ran) = speed_notes(lang, record);
    let chart = LineChart {
        title: lang.pick(
            "Stage 7: the time per token with the KV cache and without it, as the context grows",
            "第 7 阶段：有 KV 缓存与无缓存时每个词元的时间，随上下文增长",
        ),
        style: CACHE_CHART,
        x: Axis {
            name: lang.pick("T, the context (log scale)", "T：上下文长度（对数刻度）"),
            ends: (first as f64, last as f64),
            scale: Scale::Log2,
            ticks: contexts.iter().map(|&t| (t as f64, thousands(t))).collect(),
        },
        y: Axis {
            name: lang.pick(
                "milliseconds per token (log scale)",
                "每个词元的毫秒数（对数刻度）",
            ),
            ends: (y_ticks[0].0, y_ticks[y_ticks.len() - 1].0),
            scale: Scale::Log2,
            ticks: y_ticks,
        },
        series: &series,
        levels: vec![],
        footer: Some(&ran),
    };
    // The chart closes its picture; the notes on how each point was timed go above its footer.
    let drawn = chart.draw(lang);
    let mut svg = drawn.trim_end().trim_end_matches("</svg>").to_string();
    let (width, height) = CACHE_CHART.size;
    note(&mut svg, (width / 2.0, height - 56.0), &how[0]);
    note(&mut svg, (width / 2.0, height - 34.0), &how[1]);
    Some(Figure::new(lang, "s7_cache_speed.svg", close_svg(svg)))
}

/// `s7_cache_speed.svg`, drawn from the record (none if it holds no timing at one thread).
pub fn figures(lang: Lang, record: &Record) -> Vec<Figure> {
    speed_chart(lang, record).into_iter().collect()
}

/// The committed record, read.
pub fn committed_record() -> Result<Record, Error> {
    Ok(parse(RECORD).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = "# a comment\n\
        # Machine: Some CPU, 2 cores, 8 GiB, shared with other jobs.\n\
        #   target/release/examples/s7_variants --bench --threads 1\n\
        T=64 variant=gqa cache=on threads=1 ms_per_token=0.2 tokens_per_s=5000 kv_bytes_per_token=512\n\
        T=64 variant=full cache=on threads=1 ms_per_token=0.25 tokens_per_s=4000 recomputed=4 kv_bytes_per_token=1024\n\
        T=64 variant=full cache=off threads=1 ms_per_token=1.0 tokens_per_s=1000 kv_bytes_per_token=1024\n\
        T=64 variant=full cache=off threads=1 ms_per_token=3.0 tokens_per_s=333 kv_bytes_per_token=1024\n\
        T=1024 variant=full cache=on threads=2 ms_per_token=12.5 tokens_per_s=80 kv_bytes_per_token=1024\n";

    #[test]
    fn the_table_lists_the_chapter_order_and_the_ratio() {
        let record = parse(RECORD).unwrap();
        assert_eq!(record.find(64, "full", false, 1).unwrap().ms_per_token, 2.0);
        assert_eq!(
            record.command(1).unwrap(),
            "s7_variants --bench --threads 1"
        );
        let english = table(Lang::En, &record);
        let rows: Vec<&str> = english.lines().skip(2).collect();
        assert_eq!(
            rows,
            [
                "| 64 | MHA (full, 4 heads) | 1,024 | 4 / 32 | 0.250 | 2.00 (1.00–3.00) | 8.0× | — | — | — |",
                "| 64 | GQA, K = 2 | 512 | — | 0.200 | — | — | — | — | — |",
                "| 1,024 | MHA (full, 4 heads) | 1,024 | — | — | — | — | 12.5 | — | — |",
            ]
        );
        assert!(table(Lang::ZhCn, &record).contains("| 64 | GQA，2 个键/值头 | 512 |"));
    }

    #[test]
    fn the_chart_names_the_machine_and_the_command() {
        let record = parse(RECORD).unwrap();
        let figure = &figures(Lang::ZhCn, &record)[0];
        assert_eq!(figure.file, "zh-CN/s7_cache_speed.svg");
        assert!(figure.svg.contains("Some CPU，2 核，8 GiB，与其他任务共享"));
        assert!(figure.svg.contains("s7_variants --bench --threads 1"));
        // The full model's line without the cache, and its legend key, are dashed; no other.
        let dashed = |tag: &str| {
            let lines = figure.svg.lines().filter(|l| l.starts_with(tag));
            lines.filter(|l| l.contains("stroke-dasharray")).count()
        };
        assert_eq!((dashed("<polyline"), dashed("<line")), (1, 1));
    }

    #[test]
    fn a_line_that_is_not_a_timing_is_named() {
        let err =
            parse("T=64 variant=full cache=maybe threads=1 ms_per_token=1 kv_bytes_per_token=1")
                .unwrap_err();
        assert!(err.contains("neither on nor off"), "{err}");
        assert!(parse("T=64 variant=full cache=on threads=1").is_err());
    }

    #[test]
    fn the_committed_record_draws_the_chart_in_both_editions() {
        let record = committed_record().unwrap();
        for lang in Lang::ALL {
            assert_eq!(figures(lang, &record).len(), 1);
        }
    }
}
