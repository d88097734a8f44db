//! How stage 5's fast layer scales with the model: `cargo run --release --example scaling`.
//!
//! Times training steps of three models, the tutorial's, nanoGPT's CPU configuration of the same
//! task and one between, on one thread and on two, with the code of `s5_gpt --bench`. It prints a
//! Markdown table: the median time per step, the GFLOP/s of the matrix products, and their share
//! of the limit (the product kernel's own speed on one large product, times the threads). Given
//! `--pytorch FILE`, a CSV of PyTorch's times for the same models (see
//! `book/src/generated/scaling_pytorch.csv`), it adds those and the ratio. `--write` puts the
//! table into `book/src/generated/scaling.md`, which Appendix B shows, and the same numbers in
//! Chinese words into `book/src/generated/zh-CN/scaling.md`, for the Chinese edition.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::lang::Lang;
use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::app::bench::{self, BenchReport};
use attention_from_scratch::s5_gpt::error::GptError;
use attention_from_scratch::s5_gpt::model::Architecture;
use attention_from_scratch::s5_gpt::train::Recipe;
use clap::Parser;

/// Times the tutorial's model, one between and nanoGPT's CPU configuration, on 1 and 2 threads.
#[derive(Debug, Parser)]
#[command(name = "scaling")]
struct Args {
    /// Timed steps per model and thread count (after 20 untimed)
    #[arg(long, value_name = "N", default_value_t = 200)]
    steps: usize,
    /// A CSV of PyTorch's times (model,threads,ms_per_step) to show beside the crate's
    #[arg(long, value_name = "FILE")]
    pytorch: Option<PathBuf>,
    /// Write the table to book/src/generated/scaling.md (and zh-CN/scaling.md) as well
    #[arg(long)]
    write: bool,
}

/// A model of the table: its name in each edition, `s5_gpt`'s flags for it, and the recipe they
/// give.
struct Model {
    name: &'static str,
    name_zh: &'static str,
    flags: &'static str,
    recipe: Recipe,
}

/// The sizes of one model: B, T, C, blocks, heads; heads > 1 also turns on the projections,
/// residual connections and LayerNorm, as nanoGPT's model has them.
fn model(name: [&'static str; 2], flags: &'static str, sizes: [usize; 5]) -> Model {
    let [name, name_zh] = name;
    let [batch_size, context_size, embedding_size, blocks, heads] = sizes;
    let sequel = heads > 1;
    let architecture = Architecture {
        qkv: sequel,
        heads,
        residual: sequel,
        layer_norm: sequel,
        ..Architecture::default()
    };
    let recipe = Recipe {
        batch_size,
        context_size,
        embedding_size,
        blocks,
        architecture,
        ..Recipe::default()
    };
    Model {
        name,
        name_zh,
        flags,
        recipe,
    }
}

fn models() -> [Model; 3] {
    [
        model(
            ["the tutorial's", "教程的模型"],
            "(none)",
            [4, 32, 64, 2, 1],
        ),
        model(
            ["between", "居中的模型"],
            "`--batch-size 8 --context-size 48 --embedding-size 96 --blocks 3 --heads 3 --residual --layer-norm`",
            [8, 48, 96, 3, 3],
        ),
        model(
            ["nanoGPT's CPU configuration", "nanoGPT 的 CPU 配置"],
            "`--batch-size 12 --context-size 64 --embedding-size 128 --blocks 4 --heads 4 --residual --layer-norm`",
            [12, 64, 128, 4, 4],
        ),
    ]
}

/// PyTorch's median ms per step for (model, threads), from a CSV whose `#` lines are comments.
fn pytorch_times(path: &Path) -> Result<Vec<(String, usize, f64)>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut rows = vec![];
    for line in text.lines().filter(|l| !l.starts_with('#')).skip(1) {
        let bad = || format!("{}: a line is not model,threads,ms: {line}", path.display());
        let [model, threads, ms] = line.split(',').collect::<Vec<_>>()[..] else {
            return Err(bad());
        };
        let threads = threads.parse().map_err(|_| bad())?;
        let ms = ms.parse().map_err(|_| bad())?;
        rows.push((model.to_string(), threads, ms));
    }
    Ok(rows)
}

/// The table's Markdown, in `lang`'s words.
fn table(
    lang: Lang,
    rows: &[(&Model, BenchReport)],
    peak: f64,
    pytorch: &[(String, usize, f64)],
) -> String {
    let mut out = String::from(lang.pick(
        "| model | flags | MFLOP of products per step | threads | ms per step | GFLOP/s | share of the limit |",
        "| 模型 | 参数 | 每步矩阵乘法的 MFLOP | 线程数 | 每步毫秒数 | GFLOP/s | 占上限的比例 |",
    ));
    if !pytorch.is_empty() {
        out += lang.pick(
            " PyTorch, ms per step | PyTorch's time ÷ the crate's |",
            " PyTorch 每步毫秒数 | PyTorch 的用时 ÷ 本 crate 的用时 |",
        );
    }
    out += "\n|---|---|---:|---:|---:|---:|---:|";
    if !pytorch.is_empty() {
        out += "---:|---:|";
    }
    out += "\n";
    for (model, report) in rows {
        let ms = report.median.as_secs_f64() * 1e3;
        let limit = peak * report.threads as f64;
        out += &format!(
            "| {} | {} | {:.1} | {} | {ms:.2} | {:.1} | {:.0} % |",
            lang.pick(model.name, model.name_zh),
            match model.flags {
                "(none)" => lang.pick("(none)", "（无）"),
                flags => flags,
            },
            report.flops_per_step as f64 / 1e6,
            report.threads,
            report.gflops(),
            100.0 * report.gflops() / limit,
        );
        if !pytorch.is_empty() {
            let torch = pytorch
                .iter()
                .find(|(name, threads, _)| name == model.name && *threads == report.threads);
            match torch {
                Some((_, _, torch)) => out += &format!(" {torch:.2} | {:.2} |", torch / ms),
                None => out += " | |",
            }
        }
        out += "\n";
    }
    out += &match lang {
        Lang::En => format!(
            "\nThe limit: {peak:.1} GFLOP/s per thread, the product kernel's own speed on one \
             1024 × 1024 × 1024 product on one thread, measured in the same run.\n"
        ),
        Lang::ZhCn => format!(
            "\n上限：每个线程 {peak:.1} GFLOP/s，即乘法内核在单线程上做一次 1024 × 1024 × 1024 \
             矩阵乘法的速度，在同一次运行中测得。\n"
        ),
    };
    out
}

/// Both editions' tables, English first, from the same measurements.
fn run(args: &Args) -> Result<[String; 2], GptError> {
    let pytorch = match &args.pytorch {
        Some(path) => pytorch_times(path).map_err(GptError::Config)?,
        None => vec![],
    };
    let peak = bench::product_peak(1024);
    let models = models();
    let mut rows = vec![];
    for model in &models {
        for threads in [1, 2] {
            let cfg = Config {
                recipe: model.recipe,
                threads,
                ..Config::default()
            };
            let report = bench::run(&cfg, args.steps)?;
            eprintln!("{}, {threads} thread(s): {report}", model.name);
            rows.push((model, report));
        }
    }
    Ok(Lang::ALL.map(|lang| table(lang, &rows, peak, &pytorch)))
}

/// Writes each edition's table to `book/src/generated/[zh-CN/]scaling.md` under the crate.
fn write(tables: &[String; 2]) -> Result<(), String> {
    for (lang, table) in Lang::ALL.iter().zip(tables) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("book/src/generated/{}scaling.md", lang.dir()));
        std::fs::write(&path, table).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    exit_code(run(&args).map_err(|e| e.to_string()).and_then(|tables| {
        print!("{}", tables[0]);
        if args.write { write(&tables) } else { Ok(()) }
    }))
}
