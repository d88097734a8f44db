//! The chapter "What the tutorial's model leaves out": `cargo run --release --example ablation`.
//!
//! Trains the tutorial's model, each thing it leaves out added alone, all of them, and all with dropout,
//! each for the tutorial's two epochs (31,368 steps), then the tutorial's model masked with 0. It writes
//! the tables to `book/src/generated/` and the best model's attention maps to `book/src/img/`. Seven plus
//! one runs of 1–3 minutes each on two cores.
//!
//! `--max-steps N` trains N steps per model instead and only prints the tables.

use std::path::Path;
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::figures;
use attention_from_scratch::s5_gpt::app::ablation::{
    self, LINE, Measured, attention_maps, mask_table, mask_value_0, measure, table, variants,
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
    let mut best = None;
    for variant in variants() {
        let (trainer, measured) = measure(&variant, args.max_steps, progress)?;
        eprintln!(
            "{}: test loss {:.4}, {:.2} ms per step",
            variant.name, measured.test_loss, measured.ms_per_step
        );
        let better = best
            .as_ref()
            .is_none_or(|(_, m): &(_, Measured)| measured.test_loss < m.test_loss);
        if better {
            best = Some((trainer, measured.clone()));
        }
        rows.push(measured);
    }
    let zero = mask_value_0(args.max_steps, progress)?;
    let (all, mask) = (table(&rows, true), mask_table(&rows[0], &zero));
    let Some((mut trainer, winner)) = best else {
        return Ok(());
    };
    if args.max_steps.is_some() {
        println!("{all}\n{mask}");
        return Ok(());
    }
    write("book/src/generated/ablation_full.md", &all)?;
    write("book/src/generated/mask_value_0.md", &mask)?;
    let best_sample = format!("```text\n{}\n```\n", winner.sample);
    write("book/src/generated/ablation_best_sample.md", &best_sample)?;
    let maps = attention_maps(&mut trainer, LINE)?;
    let title = format!(
        "Attention weights of the model trained with {}",
        winner.variant.flags
    );
    let figure = figures::s5_attention_maps(&title, &maps, LINE);
    write(&format!("book/src/img/{}", figure.file), &figure.svg)?;
    debug_assert_eq!(
        ablation::best(&rows).map(|m| m.variant),
        Some(winner.variant)
    );
    Ok(())
}

fn main() -> ExitCode {
    exit_code(run(&Args::parse()))
}
