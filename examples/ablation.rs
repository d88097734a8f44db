//! The chapter "What the tutorial's model leaves out": `cargo run --release --example ablation`.
//!
//! Trains the tutorial's model, each thing it leaves out added alone, all of them, and all with
//! dropout, each for the tutorial's two epochs (31,368 steps), then the tutorial's model and all of
//! them with the mask writing 0. It writes the tables to `book/src/generated/` and the best model's
//! attention maps to `book/src/img/`: nine runs of 1–3 minutes each on two cores.
//!
//! `--max-steps N` trains N steps per model instead and only prints the tables.

use std::path::Path;
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::figures;
use attention_from_scratch::s5_gpt::Trainer;
use attention_from_scratch::s5_gpt::app::ablation::{
    self, ALL_OF_THEM, LINE, Measured, TUTORIAL, attention_maps, mask_table, mask_value_0, measure,
    table, variants,
};
use clap::Parser;

/// Trains each model of the chapter "What the tutorial's model leaves out" and writes its tables.
#[derive(Debug, Parser)]
#[command(name = "ablation")]
struct Args {
    /// Train N steps per model and print the tables, instead of the full runs the book shows
    #[arg(long, value_name = "N")]
    max_steps: Option<usize>,
    /// Show no progress bars
    #[arg(long)]
    quiet: bool,
}

/// Writes `text` to `path` under the crate, beside it first and then renamed into place.
fn write(path: &str, text: &str) -> std::io::Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)?;
    println!("wrote {}", path.display());
    Ok(())
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let progress = !args.quiet;
    let mut rows: Vec<Measured> = vec![];
    let mut best: Option<Trainer> = None;
    for variant in variants() {
        let (trainer, measured) = measure(&variant, args.max_steps, progress)?;
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
    let (tutorial, everything) = (&rows[TUTORIAL], &rows[ALL_OF_THEM]);
    let zero = [
        mask_value_0(&tutorial.variant, args.max_steps, progress)?,
        mask_value_0(&everything.variant, args.max_steps, progress)?,
    ];
    let all = table(&rows, true);
    let mask = mask_table(&[(tutorial, &zero[0]), (everything, &zero[1])]);
    if args.max_steps.is_some() {
        println!("{all}\n{mask}");
        return Ok(());
    }
    let (mut trainer, winner) = (best.expect("eight models"), ablation::best(&rows).unwrap());
    write("book/src/generated/ablation_full.md", &all)?;
    write("book/src/generated/mask_value_0.md", &mask)?;
    let sample = format!("```text\n{}\n```\n", winner.sample);
    write("book/src/generated/ablation_best_sample.md", &sample)?;
    let maps = attention_maps(&mut trainer, LINE)?;
    let title = format!(
        "Attention weights of the model trained with {}",
        winner.variant.flags
    );
    let figure = figures::s5_attention_maps(&title, &maps, LINE);
    write(&format!("book/src/img/{}", figure.file), &figure.svg)?;
    Ok(())
}

fn main() -> ExitCode {
    exit_code(run(&Args::parse()))
}
