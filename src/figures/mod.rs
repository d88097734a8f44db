//! The book's pictures, drawn from the stages' own numbers:
//! `cargo run --release --example book_figures` writes them to `book/src/img/`, and the tests check
//! that the committed files are what this code draws. Each picture is drawn for both editions from
//! the same numbers: the English one in `book/src/img/`, the Chinese one, in Chinese words, in
//! `book/src/img/zh-CN/`.
//!
//! | module | what it draws |
//! |---|---|
//! | `draw` | the vocabulary every picture is written in: text, boxes, arrows, axes, legends |
//! | [`colours`] | the heat maps' colour scale, shared by every shaded weight |
//! | [`heatmap`] | attention weights as heat maps |
//! | `chart` | line charts, on linear or log axes: the stage-5 curves and stage 2's scaling |
//! | `stage1` … `stage7`, [`trained`] | the pictures of each stage's ideas, and of the trained model |
//! | `stage6_more`, `stage7_more` | stage 6's backward pass and memory traffic, stage 7's latent attention absorbed |
//! | [`cost`] | stage 6's table and charts of attention's cost as T grows, from a measured record |
//! | [`weighed`] | stage 7's table and chart of the variants weighed side by side, from two measured records |
//! | [`cache`] | stage 7's table and chart of what the KV cache saves as T grows, from a measured record |
//! | [`heads`] | stage 8's pictures and tables: the phase change from its record, and the circuits of a trained model |
//! | [`rolling`] | stage 7's table and chart of the rolling cache far past the context, from a measured record |
//! | [`peak`] | Appendix B's table and chart of the product kernel's share of the core's peak, product by product, from a measured record |
//! | [`ablation`] | the Markdown tables of the chapter "What the tutorial's model leaves out" |

use ndarray::{Array2, Array3, ArrayView2, Axis};

use self::chart::{Series, line_chart};
use self::draw::{BLUE, GREEN, ORANGE, PURPLE, RED};
use self::heatmap::{Panel, heatmap_grid};
use crate::lang::Lang;
use crate::rng::torch::Generator;
use crate::s1_simple::{TOKENS, inputs, simple_attention};
use crate::s2_trainable::D_OUT;
use crate::s3_causal::{CausalAttention, batch};
use crate::s4_multihead::MultiHeadAttention;
use crate::s5_gpt::train::Estimate;
use crate::{BookSeeds, Error};

pub mod ablation;
pub mod cache;
mod chart;
pub mod colours;
pub mod cost;
mod draw;
pub mod heads;
pub mod heatmap;
pub mod peak;
mod record;
pub mod rolling;
mod stage1;
mod stage2;
mod stage3;
mod stage4;
mod stage5;
mod stage6;
mod stage6_more;
mod stage7;
mod stage7_more;
pub mod trained;
pub mod weighed;

/// A picture: its path under `book/src/img/` (`zh-CN/…` for the Chinese edition's) and its SVG text.
pub struct Figure {
    pub file: String,
    pub svg: String,
}

impl Figure {
    /// `file` in `lang`'s edition: the English one in `book/src/img/`, the Chinese one in `zh-CN/`.
    fn new(lang: Lang, file: &str, svg: String) -> Self {
        Figure {
            file: format!("{}{file}", lang.dir()),
            svg,
        }
    }
}

/// Closes a picture (one opened with `draw::open_svg`) and files it as `file` in
/// `lang`'s edition.
fn finish(lang: Lang, file: &str, svg: String) -> Figure {
    Figure::new(lang, file, draw::close_svg(svg))
}

/// True above the diagonal: the cells a causal mask hides.
fn future(i: usize, j: usize) -> bool {
    j > i
}

/// A figure of one or more heat maps on one colour scale, greyed above the diagonal when `causal`.
fn heatmaps(lang: Lang, file: &str, title: &str, panels: &[Panel], causal: bool) -> Figure {
    let masked: Option<&dyn Fn(usize, usize) -> bool> = if causal { Some(&future) } else { None };
    Figure::new(
        lang,
        file,
        heatmap::heatmaps(lang, title, panels, &TOKENS, masked),
    )
}

/// Stage 1's heat map: the weights of `simple_attention`, (T, T).
pub fn s1_weights() -> Array2<f32> {
    simple_attention(&inputs().view()).1
}

/// Stage 3's heat map: the causal weights of the first batch item, (T, T). A CausalAttention drawn
/// at seed 789 has SelfAttention_v2's weights, so these are the weights the chapter masks. With
/// `dropout` p (0 ≤ p ≤ 1) above 0 they are then dropped as §3.5.2 drops them, by
/// `nn.Dropout(p)` after `torch.manual_seed(123)`; a `p` outside 0..=1 is an error.
pub fn s3_weights(seeds: BookSeeds, dropout: f64) -> Result<Array2<f32>, Error> {
    if !(0.0..=1.0).contains(&dropout) {
        return Err(Error::DropoutOutOfRange { p: dropout });
    }
    let batch = batch(); // (B, T, C)
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_789);
    let ca = CausalAttention::new(&mut rng, d_in, D_OUT, context_length, 0.0, false);
    let weights = ca.attn_weights(&batch.view())?.index_axis_move(Axis(0), 0); // (T, T)
    let mut rng = Generator::manual_seed(seeds.seed_123);
    Ok(rng.dropout(&weights, dropout)) // (T, T)
}

/// The heads of stage 4's heat maps: the weights of a `MultiHeadAttention` of `heads` heads drawn
/// at seed 123, for the first batch item, (H, T, T). The chapter's layer has 2.
pub fn s4_weights(seeds: BookSeeds, heads: usize) -> Result<Array3<f32>, Error> {
    let batch = batch(); // (B, T, C)
    let (_, context_length, d_in) = batch.dim();
    let mut rng = Generator::manual_seed(seeds.seed_123);
    let mha = MultiHeadAttention::new(&mut rng, d_in, D_OUT, context_length, 0.0, heads, false)?;
    Ok(mha.attn_weights(&batch.view())?.index_axis_move(Axis(0), 0)) // (H, T, T)
}

/// The pictures of stages 1, 3 and 4, at the book's seeds, in `lang`'s words. They draw no
/// training, so they are quick.
pub fn attention_figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    let whole = |weights| [Panel { title: "", weights }];
    let (simple, causal) = (s1_weights(), s3_weights(seeds, 0.0)?); // (T, T) each
    let mut figures = vec![heatmaps(
        lang,
        "s1_simple_weights.svg",
        lang.pick(
            "Stage 1: the weights of simple_attention",
            "第 1 阶段：simple_attention 的权重",
        ),
        &whole(simple.view()),
        false,
    )];
    figures.push(heatmaps(
        lang,
        "s3_causal_weights.svg",
        lang.pick(
            "Stage 3: CausalAttention::attn_weights at seed 789",
            "第 3 阶段：种子 789 下的 CausalAttention::attn_weights",
        ),
        &whole(causal.view()),
        true,
    ));

    let first_item = s4_weights(seeds, 2)?; // (H, T, T)
    let titles = [lang.pick("head 0", "头 0"), lang.pick("head 1", "头 1")];
    let panels: Vec<Panel> = first_item
        .outer_iter()
        .zip(titles)
        .map(|(weights, title)| Panel { title, weights })
        .collect();
    figures.push(heatmaps(
        lang,
        "s4_multihead_heads.svg",
        lang.pick(
            "Stage 4: MultiHeadAttention::attn_weights at seed 123",
            "第 4 阶段：种子 123 下的 MultiHeadAttention::attn_weights",
        ),
        &panels,
        true,
    ));
    Ok(figures)
}

/// Every picture that needs no training, in `lang`'s words: the heat maps of stages 1, 3 and 4,
/// and the pictures of each stage's ideas. `book_figures --quick` draws these; a test in
/// `tests/book.rs` checks that the committed files are what they draw now.
pub fn quick_figures(lang: Lang) -> Result<Vec<Figure>, Error> {
    let mut figures = attention_figures(lang)?;
    figures.extend(stage1::figures(lang)?);
    figures.extend(stage2::figures(lang)?);
    figures.extend(stage3::figures(lang)?);
    figures.extend(stage4::figures(lang)?);
    figures.extend(stage5::figures(lang)?);
    figures.extend(stage6::figures(lang)?);
    figures.extend(stage6_more::figures(lang));
    figures.extend(stage7::figures(lang));
    figures.extend(stage7_more::figures(lang));
    figures.extend(cost::figures(lang, &cost::committed_medians()?));
    figures.extend(cache::figures(lang, &cache::committed_record()?));
    figures.extend(rolling::figures(lang, &rolling::committed()?));
    figures.push(weighed::chart(lang, weighed::WEIGHED));
    figures.extend(heads::figures(lang, &heads::committed()?));
    figures.extend(peak::figures(lang, &peak::committed()?));
    Ok(figures)
}

/// Every `window`-step mean of `losses`, one point per window: the curve a reader can see through
/// the step-to-step noise of batches of 4.
fn smoothed(losses: &[f32], window: usize) -> Vec<(f64, f64)> {
    losses
        .chunks(window)
        .enumerate()
        .map(|(k, chunk)| {
            let mean = chunk.iter().map(|&l| f64::from(l)).sum::<f64>() / chunk.len() as f64;
            ((k * window + chunk.len() / 2) as f64, mean)
        })
        .collect()
}

/// Stage 5's loss curve: the training loss of every step, averaged over windows of 200 steps, and
/// the test loss after training, when there is one, as a level line.
pub fn loss_curve(lang: Lang, losses: &[f32], test_loss: Option<f64>) -> Figure {
    loss_curves(lang, losses, &[], test_loss)
}

/// The training loss of every step as 200-step means, in `colour`.
fn train_loss<'a>(lang: Lang, losses: &[f32], colour: &'a str) -> Series<'a> {
    Series {
        name: lang.pick("train loss (200-step mean)", "训练损失（每 200 步的均值）"),
        colour,
        points: smoothed(losses, 200),
    }
}

/// The `--eval-every` estimates as two curves: the mean loss on the fixed train batches and on the
/// fixed held-out batches, at each estimate's step.
fn estimate_curves(lang: Lang, estimates: &[Estimate]) -> [Series<'static>; 2] {
    let at = |f: fn(&Estimate) -> f64| estimates.iter().map(|e| (e.step as f64, f(e))).collect();
    [
        Series {
            name: lang.pick("estimate on train batches", "训练批次上的估计"),
            colour: ORANGE,
            points: at(|e| e.train),
        },
        Series {
            name: lang.pick("estimate on held-out batches", "留出批次上的估计"),
            colour: PURPLE,
            points: at(|e| e.test),
        },
    ]
}

/// A line chart of a stage-5 run against its steps, filed as `file` in `lang`'s edition.
fn step_chart(lang: Lang, file: &str, title: &str, y_label: &str, series: &[Series]) -> Figure {
    let x_label = lang.pick("step", "步数");
    Figure::new(
        lang,
        file,
        line_chart(lang, title, x_label, y_label, series),
    )
}

/// [`loss_curve`] with the `--eval-every` estimates: the mean loss on the fixed train batches and
/// on the fixed held-out batches at each estimate's step.
pub fn loss_curves(
    lang: Lang,
    losses: &[f32],
    estimates: &[Estimate],
    test_loss: Option<f64>,
) -> Figure {
    let mut series = vec![train_loss(lang, losses, BLUE)];
    if !estimates.is_empty() {
        series.extend(estimate_curves(lang, estimates));
    }
    if let Some(test_loss) = test_loss {
        let last = losses.len() as f64;
        series.push(Series {
            name: lang.pick("test loss after training", "训练后的测试损失"),
            colour: RED,
            points: vec![(0.0, test_loss), (last, test_loss)],
        });
    }
    step_chart(
        lang,
        "s5_gpt_loss.svg",
        lang.pick(
            "Stage 5: training on Tiny Shakespeare",
            "第 5 阶段：在 Tiny Shakespeare 上训练",
        ),
        lang.pick("cross-entropy loss", "交叉熵损失"),
        &series,
    )
}

/// Stage 5's learning rate at every step: the warm-up–cosine schedule the run used.
pub fn learning_rate_curve(lang: Lang, lrs: &[f64]) -> Figure {
    let name = lang.pick("learning rate", "学习率");
    let series = [Series {
        name,
        colour: GREEN,
        points: lrs
            .iter()
            .enumerate()
            .step_by(50)
            .map(|(s, &lr)| (s as f64, lr))
            .collect(),
    }];
    step_chart(
        lang,
        "s5_gpt_lr.svg",
        lang.pick(
            "Stage 5: warm-up, then a cosine",
            "第 5 阶段：先预热，再余弦退火",
        ),
        name,
        &series,
    )
}

/// A character as a picture labels it: a space and a newline, which would not show, as ␣ and ⏎.
pub(super) fn visible(c: char) -> String {
    match c {
        ' ' => "␣".to_string(),
        '\n' => "⏎".to_string(),
        c => c.to_string(),
    }
}

/// The attention weights of a stage-5 model trained with `flags`, on `line`: `maps[b][h]` is block
/// b's head h, a (T, T) matrix in row-major order. One panel per head, a row of panels per block.
pub fn s5_attention_maps(lang: Lang, flags: &str, maps: &[Vec<Vec<f32>>], line: &str) -> Figure {
    let title = match lang {
        Lang::En => format!("Attention weights of the model trained with {flags}"),
        Lang::ZhCn => format!("用 {flags} 训练的模型的注意力权重"),
    };
    let labels: Vec<String> = line.chars().map(visible).collect();
    let t = labels.len();
    let mut panels = vec![];
    for (b, heads) in maps.iter().enumerate() {
        for (h, weights) in heads.iter().enumerate() {
            let view = ArrayView2::from_shape((t, t), &weights[..]).expect("(T, T) weights");
            let name = match lang {
                Lang::En => format!("block {b}, head {h}"),
                Lang::ZhCn => format!("模块 {b}，头 {h}"),
            };
            panels.push((name, view));
        }
    }
    let per_row = maps.first().map_or(1, Vec::len);
    let svg = heatmap_grid(lang, &title, &panels, &labels, per_row);
    Figure::new(lang, "s5_beyond_attention.svg", svg)
}

/// Tests and the figure example compare against the committed copy under `book/src/img/` (`file` is a
/// [`Figure::file`], so `zh-CN/…` for a Chinese one).
pub fn committed(file: &str) -> std::io::Result<String> {
    std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("book/src/img")
            .join(file),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothing_averages_each_window() {
        let points = smoothed(&[1.0, 3.0, 5.0, 7.0, 9.0], 2);
        assert_eq!(points, vec![(1.0, 2.0), (3.0, 6.0), (4.0, 9.0)]);
    }

    #[test]
    fn a_dropout_rate_outside_0_to_1_is_an_error_not_a_panic() {
        let seeds = BookSeeds::default();
        for p in [-0.1, 1.5, f64::NAN] {
            let e = s3_weights(seeds, p).unwrap_err();
            assert!(e.to_string().contains("out of range"), "{e}");
        }
        assert!(s3_weights(seeds, 1.0).is_ok());
    }

    #[test]
    fn causal_figures_hide_the_future() {
        let figures = attention_figures(Lang::En).unwrap();
        assert_eq!(figures.len(), 3);
        let masked_cells = |svg: &str| svg.matches("fill=\"#e4e4e4\" stroke=\"white\"").count();
        // 15 of the 36 cells lie above the diagonal, in each of stage 4's two heads too.
        assert_eq!(masked_cells(&figures[0].svg), 0);
        assert_eq!(masked_cells(&figures[1].svg), 15);
        assert_eq!(masked_cells(&figures[2].svg), 30);
    }

    /// The lines of `svg` with their words and the font list left out: what both editions share.
    fn geometry(svg: &str) -> Vec<String> {
        let cut = |line: &str, from: usize, to: usize| format!("{}{}", &line[..from], &line[to..]);
        svg.lines()
            .map(|line| {
                if let Some(at) = line.find("font-family=\"") {
                    let end = at + 13 + line[at + 13..].find('"').unwrap();
                    return cut(line, at, end + 1);
                }
                match (line.find("<text"), line.find("</text>")) {
                    (Some(open), Some(close)) => {
                        cut(line, open + line[open..].find('>').unwrap() + 1, close)
                    }
                    _ => line.to_string(),
                }
            })
            .collect()
    }

    #[test]
    fn both_editions_draw_the_same_picture_in_their_own_words() {
        let english = quick_figures(Lang::En).unwrap();
        let chinese = quick_figures(Lang::ZhCn).unwrap();
        assert_eq!(english.len(), chinese.len());
        for (n, (en, zh)) in english.iter().zip(&chinese).enumerate() {
            assert_eq!(zh.file, format!("zh-CN/{}", en.file));
            assert_eq!(geometry(&en.svg), geometry(&zh.svg), "{}", zh.file);
            if n < 3 {
                // The heat maps' colour scale.
                assert!(zh.svg.contains(">权重</text>") && !zh.svg.contains(">weight</text>"));
            }
            assert!(en.svg.contains("font-family=\"sans-serif\""));
            assert!(zh.svg.contains("'Noto Sans CJK SC'") && zh.svg.contains(", sans-serif\""));
        }
    }
}
