//! Stage 8 in the page: the study's two-block attention-only model (`s8_heads --phase --model
//! aon2`), trained a few steps per call, probed, drawn and ablated. Every number comes from the
//! lesson: [`mixed_step`] trains, [`Probe`] measures, [`attention_maps`] draws and
//! [`ablated_copy_loss`] takes a head out.
//! The probe's line is the line of the study's record at the same step.

use std::path::Path;

use attention_from_scratch::s5_gpt::GptError;
use attention_from_scratch::s5_gpt::app::config::Config;
use attention_from_scratch::s5_gpt::beyond::attention_maps;
use attention_from_scratch::s5_gpt::data::{CharDataset, DATA_FILE};
use attention_from_scratch::s5_gpt::train::Trainer as LessonTrainer;
use attention_from_scratch::s8_heads::ablation::{Ablation, HeadId};
use attention_from_scratch::s8_heads::icl::copy_losses;
use attention_from_scratch::s8_heads::study::{self, Probe, Probes, mean_loss_since, mixed_step};
use attention_from_scratch::s8_heads::{
    PHASE_STEPS, PROBE_SEED, StudyModel, ablated_copy_loss, study_models, study_recipe,
    study_trainer_on,
};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use super::{fail, json, on_every_thread};

/// The study's first model, the one whose induction heads the chapter watches form.
fn watched() -> StudyModel {
    study_models()[0]
}

/// The two-block attention-only model of stage 8's study, trained in the page as `s8_heads --phase
/// --model aon2` trains it: the same batches with the same repeats, so that its probe at step N is
/// the record's line at step N.
#[wasm_bindgen]
pub struct Heads {
    trainer: LessonTrainer,
    probes: Probes,
    /// The step of the last probe, from which the next one's training loss is averaged.
    probed: Option<usize>,
}

#[wasm_bindgen]
impl Heads {
    /// The model on `corpus` (Tiny Shakespeare), before its first step.
    #[wasm_bindgen(constructor)]
    pub fn new(corpus: &str) -> Result<Heads, JsError> {
        let model = watched();
        let recipe = study_recipe(&model);
        let (b, t) = (recipe.batch_size, recipe.context_size);
        let dataset = CharDataset::from_corpus(corpus, Path::new(DATA_FILE), b, t).map_err(fail)?;
        let v = dataset.vocab_size();
        let backend = Config::default().backend();
        Ok(Heads {
            trainer: study_trainer_on(&model, dataset, PHASE_STEPS, backend),
            probes: Probes::new(PROBE_SEED, 8, t, v),
            probed: None,
        })
    }

    /// Trains `n` more steps (fewer at the study's last) and returns them as JSON, `{"rows":
    /// [{"step": s, "loss": l}, …]}`.
    pub fn run(&mut self, n: usize) -> Result<String, JsError> {
        let trainer = &mut self.trainer;
        let stop = (trainer.losses.len() + n).min(trainer.steps);
        let mut rows = vec![];
        on_every_thread(|| {
            while trainer.losses.len() < stop {
                let step = trainer.losses.len();
                let loss = mixed_step(trainer, watched().repeats)?;
                rows.push(Row { step, loss });
            }
            Ok(())
        })
        .map_err(|e: GptError| fail(e))?;
        Ok(json(&Rows { rows }))
    }

    /// Steps trained so far, and in the whole study.
    pub fn steps(&self) -> usize {
        self.trainer.losses.len()
    }

    pub fn total_steps(&self) -> usize {
        self.trainer.steps
    }

    /// The model probed now, as JSON: `{"line": …, "step": s, "heads": [block][head][previous,
    /// duplicate, induction], "first_copy": …, "second_copy": …, "icl": …}`, `line` being the
    /// record's line (`s8_heads --phase`) when the probes fall where `--every` puts them.
    pub fn probe(&mut self) -> String {
        let step = self.trainer.losses.len();
        let loss = self.probed.map_or(f64::NAN, |p| {
            if p < step {
                mean_loss_since(&self.trainer, p)
            } else {
                f64::NAN
            }
        });
        let p = on_every_thread(|| study::probe(&mut self.trainer, &self.probes, loss));
        self.probed = Some(step);
        json(&Probed::of(&p, watched().name))
    }

    /// Every head's attention weights on `text`, as JSON: `{"labels": [characters], "maps":
    /// [block][head][row][column]}`.
    pub fn pattern(&mut self, text: &str) -> Result<String, JsError> {
        let t = self.trainer.recipe.context_size;
        let ids = self.trainer.dataset.encode(text).map_err(fail)?;
        if ids.is_empty() || ids.len() > t {
            let n = ids.len();
            return Err(fail(format!(
                "the text has {n} characters; type 1 to {t} (the model's context)"
            )));
        }
        let (model, tape) = (&self.trainer.model, &mut self.trainer.tape);
        let maps = on_every_thread(|| attention_maps(model, tape, &ids));
        let n = ids.len();
        let maps: Vec<Vec<Vec<Vec<f32>>>> = (maps.iter())
            .map(|heads| {
                heads
                    .iter()
                    .map(|w| w.chunks(n).map(<[f32]>::to_vec).collect())
                    .collect()
            })
            .collect();
        let labels = text.chars().map(String::from).collect();
        Ok(json(&Pattern { labels, maps }))
    }

    /// The mean loss on the probes' second copies with head `head` of block `block` zeroed, and
    /// with every head kept, as JSON: `{"head": "b1h2", "kept": …, "ablated": …}`.
    pub fn ablate(&mut self, block: usize, head: usize) -> Result<String, JsError> {
        let blocks = &self.trainer.model.blocks;
        let heads = blocks.first().map_or(0, |b| b.attn.num_heads);
        if block >= blocks.len() || head >= heads {
            let (b, h) = (blocks.len(), heads);
            return Err(fail(format!(
                "there is no head b{block}h{head}; the model has blocks 0 to {} of heads 0 to {}",
                b - 1,
                h - 1
            )));
        }
        let (trainer, probes) = (&mut self.trainer, &self.probes);
        let kept =
            on_every_thread(|| copy_losses(&trainer.model, &mut trainer.tape, &probes.sequences).1);
        let id = HeadId { block, head };
        let ablated = on_every_thread(|| ablated_copy_loss(trainer, probes, (id, Ablation::Zero)));
        let head = format!("b{block}h{head}");
        Ok(json(&Ablated {
            head,
            kept,
            ablated,
        }))
    }
}

/// What [`Heads::run`] returns.
#[derive(Serialize)]
struct Rows {
    rows: Vec<Row>,
}

#[derive(Serialize)]
struct Row {
    step: usize,
    loss: f32,
}

/// What [`Heads::probe`] returns.
#[derive(Serialize)]
struct Probed {
    line: String,
    step: usize,
    heads: Vec<Vec<[f64; 3]>>,
    first_copy: f64,
    second_copy: f64,
    icl: f64,
}

impl Probed {
    fn of(p: &Probe, model: &str) -> Self {
        Probed {
            line: p.line(model),
            step: p.step,
            heads: p.heads.clone(),
            first_copy: p.first_copy,
            second_copy: p.second_copy,
            icl: p.icl_score,
        }
    }
}

/// What [`Heads::pattern`] returns.
#[derive(Serialize)]
struct Pattern {
    labels: Vec<String>,
    maps: Vec<Vec<Vec<Vec<f32>>>>,
}

/// What [`Heads::ablate`] returns.
#[derive(Serialize)]
struct Ablated {
    head: String,
    kept: f64,
    ablated: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use attention_from_scratch::s5_gpt::app::files::default_data_path;
    use attention_from_scratch::s8_heads::{Settings, phase};

    /// Trained and probed a step count at a time, the page's model writes the record's lines, and
    /// an ablation leaves the model as it was. (Bad input is the browser test's: a `JsError` cannot
    /// be made natively.)
    #[test]
    fn the_page_probes_what_the_record_prints() {
        let data = default_data_path();
        let settings = Settings {
            data: data.clone(),
            threads: 1,
        };
        let mut record = Vec::new();
        phase(&mut record, &settings, (60, 30), Some(watched().name)).unwrap();
        let record = String::from_utf8(record).unwrap();
        let want: Vec<&str> = record.lines().filter(|l| !l.starts_with('#')).collect();

        let mut heads = Heads::new(&std::fs::read_to_string(data).unwrap()).unwrap();
        let probe = |heads: &mut Heads| {
            let p: serde_json::Value = serde_json::from_str(&heads.probe()).unwrap();
            p["line"].as_str().unwrap().to_string()
        };
        let mut got = vec![probe(&mut heads)];
        for _ in 0..2 {
            heads.run(30).unwrap();
            got.push(probe(&mut heads));
        }
        assert_eq!(got, want);

        let a: serde_json::Value = serde_json::from_str(&heads.ablate(1, 2).unwrap()).unwrap();
        assert_ne!(a["kept"], a["ablated"]);
        assert_eq!(
            probe(&mut heads).split(" first_copy").nth(1),
            want[2].split(" first_copy").nth(1)
        );
        let p: serde_json::Value =
            serde_json::from_str(&heads.pattern("ROMEO: ROMEO").unwrap()).unwrap();
        assert_eq!(p["maps"][1][3].as_array().unwrap().len(), 12);
    }
}
