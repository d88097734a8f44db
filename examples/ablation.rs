//! The chapter "What the tutorial's model leaves out": `cargo run --release --example ablation`.
//!
//! Trains the tutorial's model, each thing it leaves out added alone, all of them, and all with
//! dropout, each for the tutorial's two epochs (31,368 steps), then the tutorial's model and all of
//! them with the mask writing 0: nine runs of 1–3 minutes each on two cores. It keeps what it
//! measured in `book/src/generated/ablation.json` and the best model's attention maps in
//! `ablation_attention.json` beside it, then draws from them the tables and the picture of both
//! editions: the English ones in `book/src/generated/` and `book/src/img/`, the Chinese ones in their
//! `zh-CN/` folders.
//!
//! `--render` draws the tables and the picture again from those two files, without training.
//! `--max-steps N` trains N steps per model instead and only prints the tables.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::figures;
use attention_from_scratch::figures::ablation::{
    self, ALL_OF_THEM, Measured, Record, TUTORIAL, chapter_tables, variants,
};
use attention_from_scratch::lang::Lang;
use attention_from_scratch::s5_gpt::Trainer;
use attention_from_scratch::s5_gpt::app::ablation::{LINE, attention_maps, mask_value_0, measure};
use clap::Parser;

/// Trains each model of the chapter "What the tutorial's model leaves out" and writes its tables.
#[derive(Debug, Parser)]
#[command(name = "ablation")]
struct Args {
    /// Train N steps per model and print the tables, instead of the full runs the book shows
    #[arg(long, value_name = "N", conflicts_with = "render")]
    max_steps: Option<usize>,
    /// Draw the book's tables and picture from the recorded runs, without training
    #[arg(long)]
    render: bool,
    /// Show no progress bars
    #[arg(long)]
    quiet: bool,
}

/// The record of the full runs, and the best model's attention maps.
const RECORD: &str = "book/src/generated/ablation.json";
const ATTENTION: &str = "book/src/generated/ablation_attention.json";

fn under_crate(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Writes `text` to `path` under the crate, beside it first and then renamed into place.
fn write(path: &str, text: &str) -> std::io::Result<()> {
    let path = under_crate(path);
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    println!("wrote {}", path.display());
    Ok(())
}

/// Reads and parses one of the recorded files.
fn read<T: serde::de::DeserializeOwned>(path: &str) -> Result<T, String> {
    let text = std::fs::read_to_string(under_crate(path)).map_err(|e| {
        format!("cannot read {path}: {e}; run the example without --render to measure it")
    })?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{path} is damaged ({e}); run the example without --render"))
}

/// The attention weights of every head of every block, as [`attention_maps`] gives them.
type Maps = Vec<Vec<Vec<f32>>>;

/// Trains the eight models, then the two masked with 0, for `max_steps` each (the two epochs if
/// `None`); returns the record and the best model.
fn train(
    max_steps: Option<usize>,
    progress: bool,
) -> Result<(Record, Trainer), Box<dyn std::error::Error>> {
    let mut rows: Vec<Measured> = vec![];
    let mut best: Option<Trainer> = None;
    for variant in variants() {
        let (trainer, measured) = measure(&variant, max_steps, progress)?;
        eprintln!(
            "{}: test loss {:.4}, {:.2} ms per step",
            variant.name, measured.test_loss, measured.ms_per_step
        );
        if ablation::best(&rows).is_none_or(|b| measured.test_loss < b.test_loss) {
            best = Some(trainer);
        }
        rows.push(measured);
    }
    // The tutorial's model, and all of them, masked with 0.
    let masked_with_0 = vec![
        mask_value_0(&rows[TUTORIAL].variant, max_steps, progress)?,
        mask_value_0(&rows[ALL_OF_THEM].variant, max_steps, progress)?,
    ];
    let record = Record {
        models: rows,
        masked_with_0,
    };
    Ok((record, best.expect("eight models")))
}

/// Both editions' tables and picture, drawn from `record` and `maps`.
fn render(record: &Record, maps: &Maps) -> Result<(), Box<dyn std::error::Error>> {
    let flags = &record.best()?.variant.flags;
    for lang in Lang::ALL {
        for (file, text) in chapter_tables(lang, record)? {
            write(&format!("book/src/generated/{}{file}", lang.dir()), &text)?;
        }
        let figure = figures::s5_attention_maps(lang, flags, maps, LINE);
        write(&format!("book/src/img/{}", figure.file), &figure.svg)?;
    }
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let progress = !args.quiet;
    if let Some(steps) = args.max_steps {
        let (record, _) = train(Some(steps), progress)?;
        let [(_, all), (_, mask), _] = chapter_tables(Lang::En, &record)?;
        println!("{all}\n{mask}");
        return Ok(());
    }
    let (record, maps): (Record, Maps) = if args.render {
        (read(RECORD)?, read(ATTENTION)?)
    } else {
        let (record, mut best) = train(None, progress)?;
        let maps = attention_maps(&mut best, LINE)?;
        write(RECORD, &(serde_json::to_string_pretty(&record)? + "\n"))?;
        write(ATTENTION, &(serde_json::to_string(&maps)? + "\n"))?;
        (record, maps)
    };
    render(&record, &maps)
}

fn main() -> ExitCode {
    exit_code(run(&Args::parse()))
}
