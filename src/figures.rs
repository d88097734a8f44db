//! The book's pictures, drawn from the stages' own numbers:
//! `cargo run --release --example book_figures` writes them to `book/src/img/`, and the tests check
//! that the committed files are what this code draws.

use ndarray::{Array2, Array3, ArrayView2, Axis};

use crate::plot::{self, Panel, Series};
use crate::rng::torch::Generator;
use crate::s1_simple::{TOKENS, inputs, simple_attention};
use crate::s2_trainable::D_OUT;
use crate::s3_causal::{CausalAttention, batch};
use crate::s4_multihead::MultiHeadAttention;
use crate::{BookSeeds, Error};

/// A picture: its file name under `book/src/img/` and its SVG text.
pub struct Figure {
    pub file: String,
    pub svg: String,
}

/// True above the diagonal: the cells a causal mask hides.
fn future(i: usize, j: usize) -> bool {
    j > i
}

/// A figure of one or more heat maps on one colour scale, greyed above the diagonal when `causal`.
fn heatmaps(file: &str, title: &str, panels: &[Panel], causal: bool) -> Figure {
    let masked: Option<&dyn Fn(usize, usize) -> bool> = if causal { Some(&future) } else { None };
    Figure {
        file: file.into(),
        svg: plot::heatmaps(title, panels, &TOKENS, masked),
    }
}

/// Stage 1's heat map: the weights of `simple_attention`, (T, T).
pub fn s1_weights() -> Array2<f32> {
    simple_attention(&inputs().view()).1
}

/// Stage 3's heat map: the causal weights of the first batch item, (T, T). A CausalAttention drawn
/// at seed 789 has SelfAttention_v2's weights, so these are the weights the chapter masks. With
/// `dropout` p (0 ≤ p ≤ 1) above 0 they are then dropped as §3.5.2 drops them, by
/// `nn.Dropout(p)` after `torch.manual_seed(123)`.
pub fn s3_weights(seeds: BookSeeds, dropout: f64) -> Result<Array2<f32>, Error> {
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

/// The pictures of stages 1, 3 and 4, at the book's seeds. They draw no training, so they are
/// quick.
pub fn attention_figures() -> Result<Vec<Figure>, Error> {
    let seeds = BookSeeds::default();
    let whole = |weights| [Panel { title: "", weights }];
    let (simple, causal) = (s1_weights(), s3_weights(seeds, 0.0)?); // (T, T) each
    let mut figures = vec![heatmaps(
        "s1_simple_weights.svg",
        "Stage 1: the weights of simple_attention",
        &whole(simple.view()),
        false,
    )];
    figures.push(heatmaps(
        "s3_causal_weights.svg",
        "Stage 3: CausalAttention::attn_weights at seed 789",
        &whole(causal.view()),
        true,
    ));

    let first_item = s4_weights(seeds, 2)?; // (H, T, T)
    let titles = ["head 0", "head 1"];
    let panels: Vec<Panel> = first_item
        .outer_iter()
        .zip(titles)
        .map(|(weights, title)| Panel { title, weights })
        .collect();
    figures.push(heatmaps(
        "s4_multihead_heads.svg",
        "Stage 4: MultiHeadAttention::attn_weights at seed 123",
        &panels,
        true,
    ));
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
pub fn loss_curve(losses: &[f32], test_loss: Option<f64>) -> Figure {
    let mut series = vec![Series {
        name: "train loss (200-step mean)",
        colour: "#1f77b4",
        points: smoothed(losses, 200),
    }];
    if let Some(test_loss) = test_loss {
        let last = losses.len() as f64;
        series.push(Series {
            name: "test loss after training",
            colour: "#d62728",
            points: vec![(0.0, test_loss), (last, test_loss)],
        });
    }
    let svg = plot::line_chart(
        "Stage 5: training on Tiny Shakespeare",
        "step",
        "cross-entropy loss",
        &series,
    );
    Figure {
        file: "s5_gpt_loss.svg".into(),
        svg,
    }
}

/// Stage 5's learning rate at every step: the warm-up–cosine schedule the run used.
pub fn learning_rate_curve(lrs: &[f64]) -> Figure {
    let series = [Series {
        name: "learning rate",
        colour: "#2ca02c",
        points: lrs
            .iter()
            .enumerate()
            .step_by(50)
            .map(|(s, &lr)| (s as f64, lr))
            .collect(),
    }];
    let svg = plot::line_chart(
        "Stage 5: warm-up, then a cosine",
        "step",
        "learning rate",
        &series,
    );
    Figure {
        file: "s5_gpt_lr.svg".into(),
        svg,
    }
}

/// The attention weights of a trained stage-5 model on `line`: `maps[b][h]` is block b's head h, a
/// (T, T) matrix in row-major order. One panel per head, a row of panels per block.
pub fn s5_attention_maps(title: &str, maps: &[Vec<Vec<f32>>], line: &str) -> Figure {
    let labels: Vec<String> = line
        .chars()
        .map(|c| match c {
            ' ' => "␣".to_string(),
            '\n' => "⏎".to_string(),
            c => c.to_string(),
        })
        .collect();
    let t = labels.len();
    let mut panels = vec![];
    for (b, heads) in maps.iter().enumerate() {
        for (h, weights) in heads.iter().enumerate() {
            let view = ArrayView2::from_shape((t, t), &weights[..]).expect("(T, T) weights");
            panels.push((format!("block {b}, head {h}"), view));
        }
    }
    let per_row = maps.first().map_or(1, Vec::len);
    Figure {
        file: "s5_beyond_attention.svg".into(),
        svg: plot::heatmap_grid(title, &panels, &labels, per_row),
    }
}

/// Tests and the figure example compare against the committed copy under `book/src/img/`.
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
    fn causal_figures_hide_the_future() {
        let figures = attention_figures().unwrap();
        assert_eq!(figures.len(), 3);
        let masked_cells = |svg: &str| svg.matches("fill=\"#e4e4e4\" stroke=\"white\"").count();
        // 15 of the 36 cells lie above the diagonal, in each of stage 4's two heads too.
        assert_eq!(masked_cells(&figures[0].svg), 0);
        assert_eq!(masked_cells(&figures[1].svg), 15);
        assert_eq!(masked_cells(&figures[2].svg), 30);
    }
}
