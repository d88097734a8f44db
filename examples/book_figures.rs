//! Draws the book's pictures into `book/src/img/`: `cargo run --release --example book_figures`.
//! Stage 6's tables of attention's cost and stage 7's table of the KV cache's speed go into
//! `book/src/generated/`, each from the record beside it.
//! Each is drawn twice from the same numbers: in English, and in Chinese into `book/src/img/zh-CN/`.
//!
//! The pictures of the stages' ideas take a moment; the stage-5 loss curves train the GPT first
//! (about a minute), unless `--quick` is given.

use std::path::Path;
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::figures::{self, Figure, trained};
use attention_from_scratch::lang::Lang;
use attention_from_scratch::s5_gpt;
use attention_from_scratch::s5_gpt::app::files::write_atomic;
use attention_from_scratch::s5_gpt::app::{Config, error::ToolError};
use attention_from_scratch::s8_heads;
use clap::Parser;

/// Draws the book's SVG pictures from the stages' own numbers into book/src/img/.
#[derive(Debug, Parser)]
#[command(name = "book_figures")]
struct Args {
    /// Draw only the pictures that need no training, and skip training stage 5.
    #[arg(long, alias = "attention-only")]
    quick: bool,
    /// Draw only stage 8's pictures of its trained two-block model (it trains for a minute or two)
    #[arg(long, conflicts_with = "quick")]
    heads: bool,
}

/// Writes `figure` into `book/src/img/`, whole or not at all.
fn write(figure: &Figure) -> Result<(), ToolError> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("book/src/img")
        .join(&figure.file);
    let dir = path.parent().expect("a file in a folder");
    std::fs::create_dir_all(dir).map_err(|source| ToolError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    write_atomic(&path, figure.svg.as_bytes())?;
    println!("wrote book/src/img/{}", figure.file);
    Ok(())
}

/// Writes `text` into `book/src/generated/file`, whole or not at all: stage 6's tables of what
/// attention costs and stage 7's table of the KV cache's speed, drawn, like their charts, from the
/// records `book/src/generated/s6_bench.txt` and `s7_bench.txt`.
fn write_generated(file: &str, text: &str) -> Result<(), ToolError> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("book/src/generated")
        .join(file);
    write_atomic(&path, text.as_bytes())?;
    println!("wrote book/src/generated/{file}");
    Ok(())
}

/// Trains stage 5 with the tutorial's settings, estimating the loss every 1,000 steps, and draws
/// its curves, its learning rate and its next-character distributions, in both editions' words
/// (about a minute in release).
fn training_curves() -> Result<Vec<Figure>, ToolError> {
    let cfg = Config {
        progress: true,
        eval_every: trained::EVAL_EVERY,
        ..Config::default()
    };
    let (report, seen) = s5_gpt::app::run_and(&mut std::io::sink(), &cfg, trained::look_at)?;
    let seen = seen?;
    let figures = Lang::ALL.into_iter().flat_map(|lang| {
        let (losses, estimates) = (&report.losses, &report.estimates);
        let [heldout, next] = trained::figures(lang, losses, estimates, report.test_loss, &seen);
        [
            figures::loss_curve(lang, losses, Some(report.test_loss)),
            figures::learning_rate_curve(lang, &report.lrs),
            heldout,
            next,
        ]
    });
    Ok(figures.collect())
}

/// Stage 8's two-block attention-only model, trained as the study trains it, looked at.
fn s8_trained() -> Result<s8_heads::Trained, Box<dyn std::error::Error>> {
    let model = s8_heads::study_models()[0];
    let settings = s8_heads::Settings {
        data: s5_gpt::app::files::default_data_path(),
        threads: 0,
    };
    let mut trainer = s8_heads::study_trainer(&model, &settings, s8_heads::PHASE_STEPS)?;
    let vocab = trainer.dataset.vocab_size();
    let probes = s8_heads::study::Probes::new(s8_heads::PROBE_SEED, 8, 64, vocab);
    eprintln!("training stage 8's two-block model for its pictures…");
    let mut each = |_: &s8_heads::study::Probe| {};
    let every = s8_heads::PHASE_STEPS;
    s8_heads::study::train_probed(&mut trainer, model.repeats, (&probes, every), &mut each)?;
    Ok(s8_heads::look_at(&mut trainer, &probes))
}

/// Stage 8's pictures and table of its trained two-block model, in both editions.
fn s8_figures() -> Result<(), Box<dyn std::error::Error>> {
    let trained = s8_trained()?;
    for lang in Lang::ALL {
        let (pictures, (file, table)) = figures::heads::trained_figures(lang, &trained);
        for figure in pictures {
            write(&figure)?;
        }
        write_generated(&file, &table)?;
    }
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.heads {
        return s8_figures();
    }
    for lang in Lang::ALL {
        for figure in figures::quick_figures(lang)? {
            write(&figure)?;
        }
        for (file, table) in figures::cost::tables(lang, &figures::cost::committed_medians()?) {
            write_generated(&file, &table)?;
        }
        for (file, table) in figures::cache::tables(lang, &figures::cache::committed_record()?) {
            write_generated(&file, &table)?;
        }
        for (file, table) in figures::rolling::tables(lang, &figures::rolling::committed()?) {
            write_generated(&file, &table)?;
        }
        for (file, table) in figures::heads::tables(lang, &figures::heads::committed()?) {
            write_generated(&file, &table)?;
        }
        for (file, table) in figures::peak::tables(lang, &figures::peak::committed()?) {
            write_generated(&file, &table)?;
        }
    }
    for (file, table) in figures::weighed::committed_tables()? {
        write_generated(&file, &table)?;
    }
    if !args.quick {
        for figure in training_curves()? {
            write(&figure)?;
        }
        s8_figures()?;
    }
    Ok(())
}

fn main() -> ExitCode {
    exit_code(run(&Args::parse()))
}
