//! The tables of the chapter "What the tutorial's model leaves out", drawn from what the ablation
//! measured: the chapter's models ([`variants`]), what training each gave ([`Measured`]), and the
//! [`Record`] of a full run, from which both editions' Markdown is drawn ([`chapter_tables`]).
//! The measuring is the tool's (`s5_gpt::app::ablation`); this is what the book shows of it, so
//! that `--render` and the tests redraw the tables from the record alone.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::draw::thousands;
use crate::lang::Lang;
use crate::s5_gpt::beyond::Architecture;

/// One model of the table: its name in each edition, the flags that make it, and its architecture.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub name: String,
    /// The name in the Chinese edition's tables.
    pub name_zh: String,
    pub flags: String,
    pub architecture: Architecture,
}

impl Variant {
    /// The name in `lang`'s tables.
    pub fn name_in(&self, lang: Lang) -> &str {
        lang.pick(&self.name, &self.name_zh)
    }

    /// The model of the chapter that `flags` make: one of [`variants`], or one of them masked with
    /// 0.
    pub fn from_flags(flags: &str) -> Option<Variant> {
        variants()
            .into_iter()
            .flat_map(|v| [v.masked_with_0(), v])
            .find(|v| v.flags == flags)
    }

    /// The same model with the causal mask writing 0 instead of −1e9.
    pub fn masked_with_0(&self) -> Variant {
        Variant {
            name: format!("{}, masked with 0", self.name),
            name_zh: format!("{}，掩码值为 0", self.name_zh),
            flags: format!("{} --mask-value 0", self.flags).trim().to_string(),
            architecture: Architecture {
                mask_value: 0.0,
                ..self.architecture
            },
        }
    }
}

/// Where [`variants`] puts the tutorial's model and the one with all the additions but dropout: the
/// two that are also trained masked with 0.
pub const TUTORIAL: usize = 0;
pub const ALL_OF_THEM: usize = 6;

/// The table's models, in its order: the tutorial's, one addition at a time, all of them but
/// LayerNorm, all of them, all and dropout.
pub fn variants() -> [Variant; 8] {
    let tutorial = Architecture::default();
    let everything = Architecture::everything(4, 0.0);
    let variant = |[name, name_zh]: [&str; 2], flags: &str, architecture| Variant {
        name: name.to_string(),
        name_zh: name_zh.to_string(),
        flags: flags.to_string(),
        architecture,
    };
    [
        variant(["the tutorial's", "教程的模型"], "", tutorial),
        variant(
            ["+ Q/K/V", "+ Q/K/V"],
            "--qkv",
            Architecture {
                qkv: true,
                ..tutorial
            },
        ),
        variant(
            ["+ 4 heads", "+ 4 个头"],
            "--heads 4",
            Architecture {
                qkv: true,
                heads: 4,
                ..tutorial
            },
        ),
        variant(
            ["+ residual", "+ 残差连接"],
            "--residual",
            Architecture {
                residual: true,
                ..tutorial
            },
        ),
        variant(
            ["+ LayerNorm", "+ 层归一化"],
            "--layer-norm",
            Architecture {
                layer_norm: true,
                ..tutorial
            },
        ),
        variant(
            ["4 heads and residual", "4 个头和残差连接"],
            "--heads 4 --residual",
            Architecture {
                layer_norm: false,
                ..everything
            },
        ),
        variant(
            ["all of them", "全部加上"],
            "--heads 4 --residual --layer-norm",
            everything,
        ),
        variant(
            ["all, and dropout 0.1", "全部加上，再加 Dropout 0.1"],
            "--heads 4 --residual --layer-norm --dropout 0.1",
            Architecture {
                dropout: 0.1,
                ..everything
            },
        ),
    ]
}

/// What training one model gave.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Recorded as its flags.
    #[serde(rename = "flags", with = "by_flags")]
    pub variant: Variant,
    pub parameters: usize,
    pub steps: usize,
    /// The mean training loss of the last `TRAIN_WINDOW` steps of `s5_gpt::app::ablation` (fewer
    /// if the run is shorter).
    pub train_loss: f64,
    /// The mean loss over the test batches after training.
    pub test_loss: f64,
    /// The median time of a training step, in milliseconds.
    pub ms_per_step: f64,
    /// The mean weight a character gives itself, over every block and head, on the ablation's
    /// `LINE` (from its second character on: the first can attend to nothing else).
    pub self_weight: f64,
    /// "ROMEO:" and [`SAMPLE_LEN`] characters sampled after training, as the chapter samples;
    /// empty where a [`Record`] does not hold it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sample: String,
}

/// A [`Variant`] in a [`Record`]: its flags, which name it among the chapter's models.
mod by_flags {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    use super::Variant;

    pub fn serialize<S: Serializer>(variant: &Variant, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(&variant.flags)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<Variant, D::Error> {
        let flags = String::deserialize(from)?;
        Variant::from_flags(&flags).ok_or_else(|| {
            D::Error::custom(format!("no model of the chapter has the flags {flags:?}"))
        })
    }
}

/// Characters sampled after the prompt.
pub const SAMPLE_LEN: usize = 200;

/// `flags` in code quotes, or "(none)".
fn quoted(lang: Lang, flags: &str) -> String {
    if flags.is_empty() {
        lang.pick("(none)", "（无）").to_string()
    } else {
        format!("`{flags}`")
    }
}

/// The table as Markdown, in `lang`'s words: one row per model, with the time per step if `times`.
pub fn table(lang: Lang, rows: &[Measured], times: bool) -> String {
    let mut text = String::from(lang.pick(
        "| model | flags | parameters | train loss | test loss | weight on itself |",
        "| 模型 | 命令行参数 | 参数量 | 训练损失 | 测试损失 | 自身权重 |",
    ));
    text.push_str(if times {
        lang.pick(" ms per step |\n", " 每步毫秒数 |\n")
    } else {
        "\n"
    });
    text.push_str("|---|---|---:|---:|---:|---:|");
    text.push_str(if times { "---:|\n" } else { "\n" });
    for row in rows {
        let _ = write!(
            text,
            "| {} | {} | {} | {:.4} | {:.4} | {:.2} |",
            row.variant.name_in(lang),
            quoted(lang, &row.variant.flags),
            thousands(row.parameters),
            row.train_loss,
            row.test_loss,
            row.self_weight
        );
        text.push_str(&if times {
            format!(" {:.2} |\n", row.ms_per_step)
        } else {
            "\n".to_string()
        });
    }
    text
}

/// A model trained with the causal mask writing 0 instead of −1e9.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaskZero {
    #[serde(flatten)]
    pub measured: Measured,
    /// The test loss of the same weights with the mask back at −1e9: the future hidden, as it is
    /// when the model generates.
    pub test_loss_future_hidden: f64,
}

/// The mask study as Markdown, in `lang`'s words: each model masked with −1e9 and with 0, then the
/// samples of the latter.
pub fn mask_table(lang: Lang, pairs: &[(&Measured, &MaskZero)]) -> String {
    let mut text = String::from(lang.pick(
        "| model | flags | train loss | test loss | test loss, future hidden |\n",
        "| 模型 | 命令行参数 | 训练损失 | 测试损失 | 测试损失（遮住未来） |\n",
    ));
    text.push_str("|---|---|---:|---:|---:|\n");
    for (causal, zero) in pairs {
        let rows = [
            (*causal, causal.test_loss),
            (&zero.measured, zero.test_loss_future_hidden),
        ];
        for (row, hidden) in rows {
            let _ = writeln!(
                text,
                "| {} | {} | {:.4} | {:.4} | {hidden:.4} |",
                row.variant.name_in(lang),
                quoted(lang, &row.variant.flags),
                row.train_loss,
                row.test_loss
            );
        }
    }
    for (_, zero) in pairs {
        let (row, flags) = (&zero.measured, &zero.measured.variant.flags);
        let caption = match lang {
            Lang::En => format!(
                "{} (`{flags}`), {SAMPLE_LEN} characters after the prompt:",
                sentence_case(&row.variant.name)
            ),
            Lang::ZhCn => format!(
                "{}（`{flags}`），提示之后的 {SAMPLE_LEN} 个字符：",
                row.variant.name_zh
            ),
        };
        let _ = write!(text, "\n{caption}\n\n```text\n{}\n```\n", row.sample);
    }
    text
}

fn sentence_case(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The row with the lowest test loss.
pub fn best(rows: &[Measured]) -> Option<&Measured> {
    rows.iter()
        .min_by(|a, b| a.test_loss.total_cmp(&b.test_loss))
}

/// What a full run measured, as the ablation example keeps it in `book/src/generated/ablation.json`:
/// the eight models of [`variants`] and the two masked with 0. Both editions' tables are drawn from
/// it ([`chapter_tables`]), so the example's `--render` redraws them, in new words, without
/// training again. A record may hold a figure rounded as the tables print it, and a model's sample
/// only where the chapter shows it: the tables need no more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The models of [`variants`], in its order.
    pub models: Vec<Measured>,
    /// The tutorial's model and all of them, masked with 0.
    pub masked_with_0: Vec<MaskZero>,
}

impl Record {
    /// Each model masked with 0, beside the same model masked with −1e9.
    fn mask_pairs(&self) -> Result<Vec<(&Measured, &MaskZero)>, String> {
        let causal = |zero: &MaskZero| {
            let flags = &zero.measured.variant.flags;
            self.models
                .iter()
                .find(|m| &m.variant.masked_with_0().flags == flags)
                .ok_or_else(|| {
                    format!("the record has no model without --mask-value 0 for {flags:?}")
                })
        };
        self.masked_with_0
            .iter()
            .map(|zero| Ok((causal(zero)?, zero)))
            .collect()
    }

    /// The model with the lowest test loss, whose sample and attention the chapter shows.
    pub fn best(&self) -> Result<&Measured, String> {
        best(&self.models).ok_or_else(|| "the record holds no model".to_string())
    }
}

/// The chapter's generated Markdown in `lang`'s words, each file named as under
/// `book/src/generated/`: the table of every model (with its times), the mask study, and the best
/// model's sample.
pub fn chapter_tables(lang: Lang, record: &Record) -> Result<[(&'static str, String); 3], String> {
    let best = record.best()?;
    if best.sample.is_empty() {
        return Err(format!(
            "the record holds no sample of {:?}",
            best.variant.name
        ));
    }
    Ok([
        ("ablation_full.md", table(lang, &record.models, true)),
        ("mask_value_0.md", mask_table(lang, &record.mask_pairs()?)),
        (
            "ablation_best_sample.md",
            format!("```text\n{}\n```\n", best.sample),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(variant: Variant, test_loss: f64) -> Measured {
        Measured {
            variant,
            parameters: 84_929,
            steps: 10,
            train_loss: 1.96671,
            test_loss,
            ms_per_step: 1.256,
            self_weight: 0.6912,
            sample: "ROMEO:\nWell".to_string(),
        }
    }

    fn record() -> Record {
        let [tutorial, qkv, ..] = variants();
        let zero = MaskZero {
            measured: measured(tutorial.masked_with_0(), 2.8734),
            test_loss_future_hidden: 6.38612,
        };
        Record {
            models: vec![measured(tutorial, 2.04079), measured(qkv, 1.88881)],
            masked_with_0: vec![zero],
        }
    }

    /// The cells of a Markdown table's rows, the header and its rule left out.
    fn cells(table: &str, column: usize) -> Vec<String> {
        table
            .lines()
            .take_while(|line| line.starts_with('|'))
            .skip(2)
            .map(|line| line.split('|').nth(column + 1).unwrap().trim().to_string())
            .collect()
    }

    #[test]
    fn both_editions_print_the_same_numbers_in_their_own_words() {
        let record = record();
        let [en, zh] = Lang::ALL.map(|lang| chapter_tables(lang, &record).unwrap());
        for ((file, en), (zh_file, zh)) in en.iter().zip(&zh) {
            assert_eq!(file, zh_file);
            for column in 2..5 {
                assert_eq!(
                    cells(en, column),
                    cells(zh, column),
                    "{file}, column {column}"
                );
            }
        }
        assert!(en[0].1.starts_with("| model | flags | parameters |"));
        assert!(zh[0].1.starts_with("| 模型 | 命令行参数 | 参数量 |"));
        assert_eq!(cells(&zh[0].1, 0), ["教程的模型", "+ Q/K/V"]);
        assert_eq!(cells(&zh[0].1, 1), ["（无）", "`--qkv`"]);
        assert_eq!(cells(&en[0].1, 4), ["2.0408", "1.8888"]);
        assert!(
            zh[1]
                .1
                .contains("教程的模型，掩码值为 0（`--mask-value 0`），提示之后的 200 个字符：")
        );
        assert_eq!(en[2], zh[2], "the sample is the same text in both");
    }

    #[test]
    fn a_record_reads_back_what_it_wrote() {
        let record = record();
        let json = serde_json::to_string_pretty(&record).unwrap();
        assert!(json.contains("\"flags\": \"--mask-value 0\""));
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
        let unknown = json.replace("\"--qkv\"", "\"--qkv --bogus\"");
        let error = serde_json::from_str::<Record>(&unknown)
            .unwrap_err()
            .to_string();
        assert!(error.contains("no model of the chapter has the flags \"--qkv --bogus\""));
    }
}
