//! The pictures drawn from the chapter's trained model (stage 5), after its 31,368 steps: the
//! estimated train and held-out losses along the run against a bigram model's, and the
//! distribution the model draws the next character from at several temperatures and a top-k.
//! `book_figures` trains the model to draw them; the test that runs the chapter checks them.

use super::chart::Series;
use super::draw::{BLUE, GREY, RED, Tag, bar, bold, open_svg};
use super::finish;
use super::{Figure, estimate_curves, step_chart, train_loss, visible};
use crate::lang::Lang;
use crate::s5_gpt::GptError;
use crate::s5_gpt::baseline::Bigram;
use crate::s5_gpt::data::Split;
use crate::s5_gpt::generate::{Sampling, next_char_probabilities};
use crate::s5_gpt::train::{Estimate, Trainer};

/// Steps between two estimates of the chapter's curves.
pub const EVAL_EVERY: usize = 1000;

/// The prompt whose next character the distribution picture shows.
pub const NEXT_PROMPT: &str = "ROMEO:\nI will th";

/// The sampling settings of the distribution picture's panels, left to right.
pub const NEXT_SETTINGS: [Sampling; 4] = [
    Sampling {
        temperature: 0.5,
        top_k: None,
    },
    Sampling {
        temperature: 1.0,
        top_k: None,
    },
    Sampling {
        temperature: 2.0,
        top_k: None,
    },
    Sampling {
        temperature: 1.0,
        top_k: Some(5),
    },
];

/// What the pictures need of the trained model besides its run's losses and estimates.
#[derive(Clone, Debug, PartialEq)]
pub struct Trained {
    /// The bigram model's mean loss over the test batches ([`Bigram`]).
    pub bigram: f64,
    /// [`next_char_distributions`].
    pub next: Vec<Vec<(char, f64)>>,
}

/// Reads [`Trained`] off a trained model.
pub fn look_at(trainer: &mut Trainer) -> Result<Trained, GptError> {
    let bigram = Bigram::fit(&trainer.dataset).mean_loss(&trainer.dataset, Split::Test);
    let next = next_char_distributions(trainer)?;
    Ok(Trained { bigram, next })
}

/// The two pictures of the trained model in `lang`'s words: [`heldout_curves`] and
/// [`next_char_picture`].
pub fn figures(
    lang: Lang,
    losses: &[f32],
    estimates: &[Estimate],
    test_loss: f64,
    trained: &Trained,
) -> [Figure; 2] {
    [
        heldout_curves(lang, losses, estimates, trained.bigram, test_loss),
        next_char_picture(lang, &trained.next),
    ]
}

/// The distribution of the character after [`NEXT_PROMPT`] under each of [`NEXT_SETTINGS`].
pub fn next_char_distributions(trainer: &mut Trainer) -> Result<Vec<Vec<(char, f64)>>, GptError> {
    let (tape, model, dataset) = (&mut trainer.tape, &trainer.model, &trainer.dataset);
    (NEXT_SETTINGS.iter())
        .map(|&sampling| next_char_probabilities(tape, model, dataset, NEXT_PROMPT, sampling))
        .collect()
}

/// The training loss's colour in [`heldout_curves`]: the palette's blue, paled, so that the
/// estimates drawn over it stand out.
const PALE_BLUE: &str = "#c6dbef";

/// The whole run's curves: the training loss (200-step means), the estimates on fixed train and
/// held-out batches every [`EVAL_EVERY`] steps, the test loss after training and the bigram
/// model's held-out loss, the line a model must get under to know more than pairs of letters.
pub fn heldout_curves(
    lang: Lang,
    losses: &[f32],
    estimates: &[Estimate],
    bigram: f64,
    test_loss: f64,
) -> Figure {
    let level = |y: f64| vec![(0.0, y), (losses.len() as f64, y)];
    let bigram_name = match lang {
        Lang::En => format!("bigram model, held out: {bigram:.3}"),
        Lang::ZhCn => format!("二元模型（留出）：{bigram:.3}"),
    };
    let test_name = match lang {
        Lang::En => format!("test loss after training: {test_loss:.3}"),
        Lang::ZhCn => format!("训练后的测试损失：{test_loss:.3}"),
    };
    let [on_train, held_out] = estimate_curves(lang, estimates);
    let series = [
        train_loss(lang, losses, PALE_BLUE),
        on_train,
        held_out,
        Series {
            name: &bigram_name,
            colour: "#7f7f7f",
            points: level(bigram),
        },
        Series {
            name: &test_name,
            colour: RED,
            points: level(test_loss),
        },
    ];
    step_chart(
        lang,
        "s5_gpt_heldout.svg",
        lang.pick(
            "Stage 5: what the model learns, measured on text it never trains on",
            "第 5 阶段：模型学到了什么——在从不训练的文本上测量",
        ),
        lang.pick("cross-entropy loss", "交叉熵损失"),
        &series,
    )
}

/// Bars shown per panel of the distribution picture: the likeliest characters.
const BARS: usize = 10;

/// The distribution of the character after [`NEXT_PROMPT`], one panel per setting of
/// [`NEXT_SETTINGS`]: the likeliest characters as bars on one scale from 0 to 1, each with its
/// probability, and how many more characters share what is left.
pub fn next_char_picture(lang: Lang, distributions: &[Vec<(char, f64)>]) -> Figure {
    let (panel_w, gap, left, top, bar_h) = (172.0, 14.0, 16.0, 92.0, 22.0);
    let width = left * 2.0 + panel_w * 4.0 + gap * 3.0;
    let height = top + bar_h * BARS as f64 + 54.0;
    let prompt = NEXT_PROMPT.replace('\n', "⏎");
    let title = match lang {
        Lang::En => format!("Stage 5: the next character after \"{prompt}\""),
        Lang::ZhCn => format!("第 5 阶段：\"{prompt}\" 之后的下一个字符"),
    };
    let mut svg = open_svg(lang, width, height, &title);
    for (n, (next, sampling)) in distributions.iter().zip(NEXT_SETTINGS).enumerate() {
        let x0 = left + (panel_w + gap) * n as f64;
        let heading = match (lang, sampling.top_k) {
            (Lang::En, None) => format!("temperature {}", sampling.temperature),
            (Lang::En, Some(k)) => format!("temperature {}, top-k {k}", sampling.temperature),
            (Lang::ZhCn, None) => format!("温度 {}", sampling.temperature),
            (Lang::ZhCn, Some(k)) => format!("温度 {}，top-k {k}", sampling.temperature),
        };
        bold(
            &mut svg,
            (x0 + panel_w / 2.0, top - 30.0),
            "middle",
            &heading,
        );
        draw_bars(&mut svg, x0, top, panel_w, bar_h, next);
        let rest = next.len().saturating_sub(BARS);
        let more = match lang {
            Lang::En => format!("+ {rest} more characters"),
            Lang::ZhCn => format!("另有 {rest} 个字符"),
        };
        Tag::new("text")
            .at((x0, top + bar_h * BARS as f64 + 18.0))
            .set("fill", GREY)
            .holding(&mut svg, &more);
    }
    finish(lang, "s5_gpt_next.svg", svg)
}

/// The first [`BARS`] of `next` as bars from `x0`: the quoted character, a bar as long as its
/// probability (the whole bar area is probability 1), and the probability, three decimals.
fn draw_bars(svg: &mut String, x0: f64, top: f64, panel_w: f64, bar_h: f64, next: &[(char, f64)]) {
    let (label_w, number_w) = (34.0, 44.0);
    let full = panel_w - label_w - number_w;
    let ground = (full, bar_h * BARS as f64 + 4.0);
    bar(svg, (x0 + label_w, top - 8.0), ground, "#f4f4f4");
    for (i, &(c, p)) in next.iter().take(BARS).enumerate() {
        let y = top + bar_h * i as f64;
        Tag::new("text")
            .at((x0 + label_w / 2.0, y + 8.0))
            .set("text-anchor", "middle")
            .set("font-family", "monospace")
            .holding(svg, &visible(c));
        bar(svg, (x0 + label_w, y - 4.0), (full * p, bar_h - 6.0), BLUE);
        Tag::new("text")
            .at((x0 + label_w + full * p + 3.0, y + 8.0))
            .set("font-size", 12)
            .holding(svg, &format!("{p:.3}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_as_long_as_their_probabilities() {
        let next = vec![vec![('e', 0.5), (' ', 0.25), ('a', 0.25)]; 4];
        let svg = next_char_picture(Lang::En, &next).svg;
        // Panel width 172 − 34 − 44 = 94 px for probability 1.
        assert_eq!(svg.matches("width=\"47.0\"").count(), 4, "{svg}");
        assert_eq!(svg.matches("width=\"23.5\"").count(), 8);
        assert!(svg.contains(">␣</text>") && svg.contains(">+ 0 more characters</text>"));
        assert!(svg.contains("temperature 1, top-k 5"));
    }
}
