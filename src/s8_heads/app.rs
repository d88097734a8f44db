//! Tool layer, not shown in the chapter: the command line of `cargo run --example s8_heads`.
//! Without flags it prints the chapter's short run ([`super::run`]); `--phase` trains the study's
//! models and prints the record the chapter's tables and figures are drawn from
//! ([`super::phase`]).

use std::io::Write;

use crate::s5_gpt::app::config::Config;
use crate::s5_gpt::app::error::ToolError;

/// Prints stage 8's outputs: the detectors on hand-made patterns, then a short run of the
/// two-layer attention-only model, its heads' scores, circuits and ablations.
/// With --phase (in release mode), trains each of the study's models instead and prints its probes,
/// the record the chapter is drawn from; with --book-models, the heads of the book's other models.
#[derive(Debug, clap::Parser)]
#[command(name = "s8_heads")]
pub struct Cli {
    /// Train the study's models instead, probing every --every steps, one line per probe
    #[arg(long)]
    pub phase: bool,
    /// With --phase: steps per model, 1 to 100,000
    #[arg(long, value_name = "N", default_value_t = super::PHASE_STEPS, requires = "phase")]
    pub steps: usize,
    /// With --phase: steps between probes, 1 to --steps
    #[arg(long, value_name = "N", default_value_t = 100, requires = "phase")]
    pub every: usize,
    /// With --phase: only the model NAME (aon2, aon1, aon1-offset, aon2-small-emb, aon2-half, aon2-text, full)
    #[arg(long, value_name = "NAME", requires = "phase")]
    pub model: Option<String>,
    /// Instead, train the tutorial's model and each of stage 7's variants with the tutorial's
    /// recipe and print their heads' scores on repeated random text
    #[arg(long, conflicts_with = "phase")]
    pub book_models: bool,
    /// With --book-models: steps per model, 1 to 100,000 [default: the two epochs]
    #[arg(long, value_name = "N", requires = "book_models")]
    pub max_steps: Option<usize>,
    /// Threads of the fast layer, 1 to 64; the results do not depend on it
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// The corpus [default: data/tinyshakespeare.txt, downloaded on first use]
    #[arg(long, value_name = "PATH")]
    pub data: Option<std::path::PathBuf>,
    /// Never download the corpus (to mirror it, set TINY_SHAKESPEARE_URL instead)
    #[arg(long)]
    pub no_download: bool,
}

impl Cli {
    pub fn run<W: Write>(&self, out: &mut W) -> Result<(), ToolError> {
        let bad = |why: String| Err(ToolError::Config(why));
        if !(1..=64).contains(&self.threads) {
            return bad(format!(
                "--threads {} is out of range; use 1 to 64",
                self.threads
            ));
        }
        if !(1..=100_000).contains(&self.steps) {
            return bad(format!(
                "--steps {} is out of range; use 1 to 100000",
                self.steps
            ));
        }
        if !(1..=self.steps).contains(&self.every) {
            return bad(format!(
                "--every {} is out of range; use 1 to --steps ({})",
                self.every, self.steps
            ));
        }
        let models = super::study_models();
        if let Some(name) = &self.model
            && !models.iter().any(|m| m.name == name)
        {
            let names: Vec<&str> = models.iter().map(|m| m.name).collect();
            return bad(format!(
                "--model {name} is not one of the study's; use one of {}",
                names.join(", ")
            ));
        }
        // The corpus as stage 5 finds it: --data, else a copy on disk, else downloaded once.
        let corpus = Config {
            data: self.data.clone(),
            download: !self.no_download,
            progress: true,
            ..Config::default()
        };
        let data = corpus.corpus()?;
        if !data.is_file() {
            return bad(format!(
                "no corpus at {}; run data/fetch.sh or pass --data PATH",
                data.display()
            ));
        }
        let settings = super::Settings {
            data,
            threads: self.threads,
        };
        if let Some(n) = self.max_steps
            && !(1..=100_000).contains(&n)
        {
            return bad(format!("--max-steps {n} is out of range; use 1 to 100000"));
        }
        if self.book_models {
            return super::book_models(out, &settings, self.max_steps);
        }
        match self.phase {
            false => super::run(out, &settings),
            true => super::phase(
                out,
                &settings,
                (self.steps, self.every),
                self.model.as_deref(),
            ),
        }
    }
}
