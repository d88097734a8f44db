//! Stage 8's pictures and tables. From the committed record of the study
//! (`book/src/generated/s8_phase.txt`, written by `tools/s8_phase_record.sh`): the phase change
//! over steps, the copies' losses beside the training loss, the head grid and the study's table.
//! From the two-block model trained again (`book_figures` without `--quick`): the induction stripe,
//! the OV and QK circuits and the ablation table. This module only lays the numbers out.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ndarray::ArrayView2;

use super::cache::machine;
use super::chart::{Axis, Legend, LineChart, POINTS, Scale, Series, Side, Style};
use super::colours::blue;
use super::draw::{
    BLUE, GREEN, GREY, ORANGE, PURPLE, RED, close_svg, footer, open_svg, rect, text,
};
use super::heatmap::heatmap_grid;
use super::record::Line;
use super::{Figure, visible};
use crate::Error;
use crate::lang::Lang;
use crate::s8_heads::Trained;
use crate::s8_heads::circuits::Matrix;

/// The committed record.
pub const RECORD: &str = include_str!("../../book/src/generated/s8_phase.txt");

/// One probe of one model, as the record keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub step: usize,
    pub train_loss: f64,
    pub first_copy: f64,
    pub second_copy: f64,
    pub icl: f64,
    /// `heads[block][head]`: previous-token, duplicate-token and induction scores.
    pub heads: Vec<Vec<[f64; 3]>>,
}

impl Row {
    /// The highest score of `kind` in the last block.
    pub fn best_last(&self, kind: usize) -> f64 {
        let last = self.heads.last().map_or(&[][..], Vec::as_slice);
        last.iter().map(|s| s[kind]).fold(f64::NAN, f64::max)
    }

    /// The highest score of `kind` in block 0.
    pub fn best_first(&self, kind: usize) -> f64 {
        self.heads[0]
            .iter()
            .map(|s| s[kind])
            .fold(f64::NAN, f64::max)
    }
}

/// The record: its machine, its command, the seconds the study took, and each model's probes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Study {
    pub machine: Option<String>,
    pub command: Option<String>,
    pub seconds: Option<usize>,
    pub models: BTreeMap<String, Vec<Row>>,
}

/// A number of a record's line; NaN is kept (the first probe has no training loss yet).
fn number(line: &Line, key: &str) -> Result<f64, String> {
    let value = line.word(key)?.parse::<f64>();
    value.map_err(|_| line.bad(&format!("has a {key} that is no number")))
}

/// `b1h3=0.120/0.050/0.810` as (1, 3, the three scores).
fn head(key: &str, value: &str) -> Option<(usize, usize, [f64; 3])> {
    let (b, h) = key.strip_prefix('b')?.split_once('h')?;
    let scores: Vec<f64> = value.split('/').filter_map(|s| s.parse().ok()).collect();
    Some((b.parse().ok()?, h.parse().ok()?, scores.try_into().ok()?))
}

/// One line of the record: `model=aon2 step=100 train_loss=… first_copy=… second_copy=… icl=…
/// b0h0=…/…/… …`.
fn row(text: &str) -> Result<(String, Row), String> {
    let line = Line::parse("phase", text)?;
    let mut heads: Vec<Vec<[f64; 3]>> = vec![];
    for (b, h, scores) in text.split_whitespace().filter_map(|w| {
        let (k, v) = w.split_once('=')?;
        head(k, v)
    }) {
        heads.resize(heads.len().max(b + 1), vec![]);
        let len = heads[b].len().max(h + 1);
        heads[b].resize(len, [f64::NAN; 3]);
        heads[b][h] = scores;
    }
    let row = Row {
        step: line.count("step")?,
        train_loss: number(&line, "train_loss")?,
        first_copy: number(&line, "first_copy")?,
        second_copy: number(&line, "second_copy")?,
        icl: number(&line, "icl")?,
        heads,
    };
    Ok((line.word("model")?.to_string(), row))
}

/// Reads the record.
pub fn parse(record: &str) -> Result<Study, String> {
    let mut study = Study::default();
    for line in record.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some(comment) = line.strip_prefix('#') else {
            let (model, row) = row(line)?;
            study.models.entry(model).or_default().push(row);
            continue;
        };
        let comment = comment.trim();
        if let Some(words) = comment.strip_prefix("Machine:") {
            study.machine = Some(words.trim().to_string());
        } else if comment.contains("--phase") {
            study.command = Some(comment.rsplit('/').next().unwrap_or(comment).to_string());
        } else if let Some((_, rest)) = comment.split_once(": ") {
            study.seconds = rest.split_whitespace().next().and_then(|s| s.parse().ok());
        }
    }
    Ok(study)
}

/// The committed record, read.
pub fn committed() -> Result<Study, Error> {
    Ok(parse(RECORD).map_err(std::io::Error::other)?)
}

/// The study's models in the chapter's order, each with its colour and its words.
const MODELS: [(&str, &str); 7] = [
    ("aon2", BLUE),
    ("aon1", GREY),
    ("aon1-offset", GREEN),
    ("aon2-small-emb", ORANGE),
    ("aon2-half", PURPLE),
    ("aon2-text", RED),
    ("full", "#8c564b"),
];

/// A model of the study in `lang`'s words.
pub fn model_name(lang: Lang, model: &str) -> &'static str {
    match model {
        "aon2" => lang.pick("two blocks, attention only", "两个模块，只有注意力"),
        "aon1" => lang.pick("one block", "一个模块"),
        "aon1-offset" => lang.pick("one block, key offset", "一个模块，键偏移"),
        "aon2-small-emb" => lang.pick(
            "two blocks, the tutorial's 0.02 embeddings",
            "两个模块，教程的 0.02 嵌入",
        ),
        "aon2-half" => lang.pick(
            "two blocks, half the rows repeated",
            "两个模块，一半的行带重复",
        ),
        "aon2-text" => lang.pick("two blocks, the text alone", "两个模块，只有文本"),
        _ => lang.pick(
            "the fullest model (with feed-forward)",
            "最完整的模型（带前馈网络）",
        ),
    }
}

/// The machine and the command, for a picture's foot.
fn foot(lang: Lang, study: &Study) -> String {
    let machine = study.machine.as_deref().map(|m| machine(lang, m));
    let parts = [
        machine.unwrap_or_default(),
        study.command.clone().unwrap_or_default(),
    ];
    let parts: Vec<String> = parts.into_iter().filter(|w| !w.is_empty()).collect();
    parts.join(lang.pick("; ", "；"))
}

/// The layout of the study's charts: the legend at the top left, room below for the foot.
const PHASE_CHART: Style = Style {
    size: (760.0, 460.0),
    margins: [70.0, 30.0, 44.0, 90.0],
    dots: None,
    ..POINTS
};

/// The study's charts' x axis: training steps from 0 to `last`.
fn step_axis(lang: Lang, last: f64) -> Axis<'static> {
    Axis {
        name: lang.pick("training step", "训练步数"),
        ends: (0.0, last),
        scale: Scale::Linear,
        ticks: step_ticks(last),
    }
}

/// Ticks at every 1,000 steps up to `last`.
fn step_ticks(last: f64) -> Vec<(f64, String)> {
    (0..=(last as usize) / 1000)
        .map(|k| ((k * 1000) as f64, super::draw::thousands(k * 1000)))
        .collect()
}

/// `s8_phase.svg`: each model's best induction score in its last block, probe by probe.
pub fn phase_chart(lang: Lang, study: &Study) -> Figure {
    let series: Vec<Series> = MODELS
        .iter()
        .filter_map(|&(model, colour)| {
            let rows = study.models.get(model)?;
            Some(Series {
                name: model_name(lang, model),
                colour,
                points: rows
                    .iter()
                    .map(|r| (r.step as f64, r.best_last(2)))
                    .collect(),
            })
        })
        .collect();
    let last = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    let foot = foot(lang, study);
    let chart = LineChart {
        title: lang.pick(
            "Stage 8: the best induction score of each model's last block while it trains",
            "第 8 阶段：训练中每个模型最后一个模块的最佳归纳分数",
        ),
        style: PHASE_CHART,
        x: step_axis(lang, last),
        y: Axis {
            name: lang.pick("induction score", "归纳分数"),
            ends: (0.0, 1.0),
            scale: Scale::Linear,
            ticks: (0..=5)
                .map(|k| (k as f64 / 5.0, format!("{:.1}", k as f64 / 5.0)))
                .collect(),
        },
        series: &series,
        levels: vec![],
        footer: Some(&foot),
    };
    Figure::new(lang, "s8_phase.svg", chart.draw(lang))
}

/// The layout of the losses' chart: the legend at the top right, above the curves' ends.
const COPIES_CHART: Style = Style {
    legend: Legend {
        side: Side::Right,
        inset: (250.0, 12.0),
        ..PHASE_CHART.legend
    },
    ..PHASE_CHART
};

/// `s8_copies.svg`: the two-block model's loss on the first copy, on the second, and its training
/// loss, probe by probe: the bump in the loss curve is the induction head forming.
pub fn copies_chart(lang: Lang, study: &Study) -> Option<Figure> {
    let rows = study.models.get("aon2")?;
    let curve = |name, colour, f: fn(&Row) -> f64| Series {
        name,
        colour,
        points: rows
            .iter()
            .filter(|r| f(r).is_finite())
            .map(|r| (r.step as f64, f(r)))
            .collect(),
    };
    let series = [
        curve(
            lang.pick("first copy of random text", "随机文本的第一份"),
            ORANGE,
            |r| r.first_copy,
        ),
        curve(lang.pick("second copy", "第二份"), BLUE, |r| {
            r.second_copy
        }),
        curve(
            lang.pick(
                "training loss since the last probe",
                "自上次探测以来的训练损失",
            ),
            GREY,
            |r| r.train_loss,
        ),
    ];
    let last = rows.last()?.step as f64;
    let foot = foot(lang, study);
    let chart = LineChart {
        title: lang.pick(
            "Stage 8: the two-block attention-only model's losses while it trains",
            "第 8 阶段：两个模块的纯注意力模型在训练中的损失",
        ),
        style: COPIES_CHART,
        x: step_axis(lang, last),
        y: Axis {
            name: lang.pick("loss (nats)", "损失（奈特）"),
            ends: (0.0, 6.0),
            scale: Scale::Linear,
            ticks: (0..=6).map(|k| (k as f64, k.to_string())).collect(),
        },
        series: &series,
        levels: vec![(65f64.ln(), lang.pick("ln 65", "ln 65"))],
        footer: Some(&foot),
    };
    Some(Figure::new(lang, "s8_copies.svg", chart.draw(lang)))
}

/// Side of a cell of the head grid and of the circuits, in pixels.
const GRID_CELL: f64 = 64.0;

/// `s8_head_grid.svg`: the two-block model's heads after training, a row each, its three scores
/// as shaded cells.
pub fn head_grid(lang: Lang, study: &Study) -> Option<Figure> {
    let row = study.models.get("aon2")?.last()?;
    let names = [
        lang.pick("previous-token", "前一个字符"),
        lang.pick("duplicate-token", "重复字符"),
        lang.pick("induction", "归纳"),
    ];
    let heads: Vec<(String, [f64; 3])> = row
        .heads
        .iter()
        .enumerate()
        .flat_map(|(b, hs)| {
            hs.iter()
                .enumerate()
                .map(move |(h, s)| (format!("b{b}h{h}"), *s))
        })
        .collect();
    let (left, top) = (190.0, 80.0);
    let cell = (GRID_CELL * 2.0, 30.0);
    let (width, height) = (
        left + 3.0 * cell.0 + 40.0,
        top + heads.len() as f64 * cell.1 + 60.0,
    );
    let title = match lang {
        Lang::En => format!("Stage 8: each head's scores after {} steps", row.step),
        Lang::ZhCn => format!("第 8 阶段：{} 步后每个头的分数", row.step),
    };
    let mut svg = open_svg(lang, width, height, &title);
    for (k, name) in names.iter().enumerate() {
        text(
            &mut svg,
            (left + (k as f64 + 0.5) * cell.0, top - 12.0),
            "middle",
            13,
            "black",
            name,
        );
    }
    for (r, (name, scores)) in heads.iter().enumerate() {
        let y = top + r as f64 * cell.1;
        text(&mut svg, (left - 10.0, y + 20.0), "end", 13, "black", name);
        for (k, &s) in scores.iter().enumerate() {
            let x = left + k as f64 * cell.0;
            rect(&mut svg, (x, y), cell, &blue(s.clamp(0.0, 1.0)), "white");
            let ink = if s > 0.5 { "white" } else { "black" };
            text(
                &mut svg,
                (x + cell.0 / 2.0, y + 20.0),
                "middle",
                13,
                ink,
                &format!("{s:.2}"),
            );
        }
    }
    footer(&mut svg, (width, height), lang.pick("b1h3: block 1, head 3; 1 = all of the head's attention where the kind of head would put it", "b1h3：模块 1 的头 3；1 表示该头的注意力全部落在这类头会看的位置"));
    Some(Figure::new(lang, "s8_head_grid.svg", close_svg(svg)))
}

/// The first probe at which `score` reaches 0.5, if any.
fn formed_at(rows: &[Row], score: fn(&Row) -> f64) -> Option<usize> {
    rows.iter().find(|r| score(r) >= 0.5).map(|r| r.step)
}

/// The study's table: for each model, where its heads ended and when its induction head formed.
pub fn table(lang: Lang, study: &Study) -> String {
    let mut md = String::from(lang.pick(
        "| model | steps | best previous-token head, block 0 | best induction head, last block | induction ≥ 0.5 from step | loss, 1st copy | loss, 2nd copy | Olsson's score |\n",
        "| 模型 | 步数 | 模块 0 最佳前一个字符头 | 最后模块最佳归纳头 | 归纳分数 ≥ 0.5 的起始步 | 第一份损失 | 第二份损失 | Olsson 分数 |\n",
    ));
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (model, _) in MODELS {
        let Some(rows) = study.models.get(model) else {
            continue;
        };
        let Some(last) = rows.last() else { continue };
        let formed =
            formed_at(rows, |r| r.best_last(2)).map_or("—".to_string(), super::draw::thousands);
        writeln!(
            md,
            "| {} | {} | {:.2} | {:.2} | {formed} | {:.2} | {:.2} | {:+.3} |",
            model_name(lang, model),
            super::draw::thousands(last.step),
            last.best_first(0),
            last.best_last(2),
            last.first_copy,
            last.second_copy,
            last.icl
        )
        .expect("a String takes every write");
    }
    md
}

/// The study's table as (file under `book/src/generated/`, Markdown), for `lang`.
pub fn tables(lang: Lang, study: &Study) -> Vec<(String, String)> {
    vec![(
        format!("{}s8_study_table.md", lang.dir()),
        table(lang, study),
    )]
}

/// Every picture drawn from the record, in `lang`'s words.
pub fn figures(lang: Lang, study: &Study) -> Vec<Figure> {
    let mut figures = vec![detectors(lang), phase_chart(lang, study)];
    figures.extend(copies_chart(lang, study));
    figures.extend(head_grid(lang, study));
    figures
}

/// `s8_stripe.svg`: every head's weights on n random characters written twice.
pub fn stripe(lang: Lang, trained: &Trained) -> Figure {
    let labels: Vec<String> = trained
        .text
        .iter()
        .map(|&t| visible(trained.vocab[t]))
        .collect();
    let t = labels.len();
    let mut panels = vec![];
    for (b, heads) in trained.maps.iter().enumerate() {
        for (h, weights) in heads.iter().enumerate() {
            let view = ArrayView2::from_shape((t, t), &weights[..]).expect("(T, T) weights");
            let name = match lang {
                Lang::En => format!("block {b}, head {h}"),
                Lang::ZhCn => format!("模块 {b}，头 {h}"),
            };
            panels.push((name, view));
        }
    }
    let title = match lang {
        Lang::En => format!(
            "Stage 8: the two-block model's heads on {} random characters written twice",
            t / 2
        ),
        Lang::ZhCn => format!(
            "第 8 阶段：两个模块的模型的各个头，在写了两遍的 {} 个随机字符上",
            t / 2
        ),
    };
    let per_row = trained.maps.first().map_or(1, Vec::len);
    Figure::new(
        lang,
        "s8_stripe.svg",
        heatmap_grid(lang, &title, &panels, &labels, per_row),
    )
}

/// Side of a circuit's cell, in pixels.
const CIRCUIT_CELL: f64 = 8.0;

/// A signed value's colour: blue for positive, red for negative, white at 0, full at ±`top`.
fn signed(v: f64, top: f64) -> String {
    let t = (v.abs() / top).clamp(0.0, 1.0);
    let fade = |full: f64| (255.0 - t * (255.0 - full)).round() as u8;
    match v >= 0.0 {
        true => format!("#{:02x}{:02x}{:02x}", fade(31.0), fade(119.0), fade(180.0)),
        false => format!("#{:02x}{:02x}{:02x}", fade(214.0), fade(39.0), fade(40.0)),
    }
}

/// A V × V circuit as a picture: rows and columns labelled with the characters.
fn circuit(
    lang: Lang,
    file: &str,
    title: &str,
    (rows, cols): (&str, &str),
    m: &Matrix,
    vocab: &[char],
) -> Figure {
    let (left, top) = (40.0, 70.0);
    let side = CIRCUIT_CELL * vocab.len() as f64;
    let (width, height) = (left + side + 30.0, top + side + 80.0);
    let mut svg = open_svg(lang, width, height, title);
    let peak = m.data.iter().fold(0f64, |a, x| a.max(x.abs()));
    for (k, &c) in vocab.iter().enumerate() {
        let at = k as f64 * CIRCUIT_CELL + CIRCUIT_CELL * 0.8;
        text(
            &mut svg,
            (left - 3.0, top + at),
            "end",
            7,
            "black",
            &visible(c),
        );
        text(
            &mut svg,
            (left + at - 2.0, top - 4.0),
            "middle",
            7,
            "black",
            &visible(c),
        );
    }
    for (i, row) in m.data.chunks_exact(m.cols).enumerate() {
        for (j, &v) in row.iter().enumerate() {
            let at = (
                left + j as f64 * CIRCUIT_CELL,
                top + i as f64 * CIRCUIT_CELL,
            );
            rect(
                &mut svg,
                at,
                (CIRCUIT_CELL, CIRCUIT_CELL),
                &signed(v, peak),
                "none",
            );
        }
    }
    text(
        &mut svg,
        (width / 2.0, top - 22.0),
        "middle",
        12,
        GREY,
        cols,
    );
    let share = 100.0 * m.diagonal_share();
    let (first, second) = match lang {
        Lang::En => (
            format!("rows: {rows}; blue above 0, red below, full at ±{peak:.1}"),
            format!("the diagonal holds the largest entry of {share:.0}% of the columns"),
        ),
        Lang::ZhCn => (
            format!("行：{rows}；蓝色为正，红色为负，±{peak:.1} 处最深"),
            format!("{share:.0}% 的列的最大值在对角线上"),
        ),
    };
    super::draw::note(&mut svg, (width / 2.0, height - 34.0), &first);
    footer(&mut svg, (width, height), &second);
    Figure::new(lang, file, close_svg(svg))
}

/// `s8_ov.svg` and `s8_qk.svg`: the induction head's two circuits.
pub fn circuits(lang: Lang, trained: &Trained) -> [Figure; 2] {
    let (prev, ind) = trained.heads;
    let ov_title = match lang {
        Lang::En => format!("Stage 8: the OV circuit of block 1, head {ind}: W_U·W_O·W_V·Eᵀ"),
        Lang::ZhCn => format!("第 8 阶段：模块 1 头 {ind} 的 OV 回路：W_U·W_O·W_V·Eᵀ"),
    };
    let qk_title = match lang {
        Lang::En => {
            format!("Stage 8: the QK circuit of block 1, head {ind}, through block 0, head {prev}")
        }
        Lang::ZhCn => format!("第 8 阶段：模块 1 头 {ind} 经由模块 0 头 {prev} 的 QK 回路"),
    };
    [
        circuit(
            lang,
            "s8_ov.svg",
            &ov_title,
            (
                lang.pick("the logit raised", "被抬高的 logit"),
                lang.pick("columns: the character attended to", "列：被关注的字符"),
            ),
            &trained.ov,
            &trained.vocab,
        ),
        circuit(
            lang,
            "s8_qk.svg",
            &qk_title,
            (
                lang.pick("the query's character", "查询的字符"),
                lang.pick("columns: the character before the key", "列：键前面的字符"),
            ),
            &trained.qk,
            &trained.vocab,
        ),
    ]
}

/// The ablation table, for `lang`.
pub fn ablation_table(lang: Lang, trained: &Trained) -> String {
    let mut md = String::from(lang.pick(
        "| head ablated | 2nd copy, zero | 2nd copy, mean | test split, zero | test split, mean |\n",
        "| 消融的头 | 第二份，零消融 | 第二份，均值消融 | 测试集，零消融 | 测试集，均值消融 |\n",
    ));
    md.push_str("|---|---:|---:|---:|---:|\n");
    for a in &trained.ablation {
        let name = if a.head == "none" {
            lang.pick("none", "无")
        } else {
            &a.head
        };
        let (zero, mean) = (a.zero, a.mean);
        writeln!(
            md,
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} |",
            zero.0, mean.0, zero.1, mean.1
        )
        .expect("a String takes every write");
    }
    md
}

/// The pictures and the table of a trained model, in `lang`'s words.
pub fn trained_figures(lang: Lang, trained: &Trained) -> (Vec<Figure>, (String, String)) {
    let [ov, qk] = circuits(lang, trained);
    let table = (
        format!("{}s8_ablation_table.md", lang.dir()),
        ablation_table(lang, trained),
    );
    (vec![stripe(lang, trained), ov, qk], table)
}

/// `s8_detectors.svg`: the three heads made by hand on ROMEO written twice, where each looks.
pub fn detectors(lang: Lang) -> Figure {
    use crate::s8_heads::detectors::{HAND_MADE_TEXT, hand_made};
    let labels: Vec<String> = HAND_MADE_TEXT.chars().map(String::from).collect();
    let t = labels.len();
    let made = hand_made(t);
    let names = [
        lang.pick("previous-token head", "前一个字符头"),
        lang.pick("duplicate-token head", "重复字符头"),
        lang.pick("induction head", "归纳头"),
    ];
    let panels: Vec<(String, ArrayView2<f32>)> = made
        .iter()
        .zip(names)
        .map(|((_, w), name)| {
            (
                name.to_string(),
                ArrayView2::from_shape((t, t), &w[..]).expect("(T, T)"),
            )
        })
        .collect();
    let title = lang.pick(
        "Stage 8: where each kind of head looks, on CAPULET written twice",
        "第 8 阶段：各类头在写了两遍的 CAPULET 上看向哪里",
    );
    Figure::new(
        lang,
        "s8_detectors.svg",
        heatmap_grid(lang, title, &panels, &labels, 3),
    )
}
