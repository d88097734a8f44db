//! How stage 5's fast layer scales with the model: `cargo run --release --example scaling`.
//!
//! Times training steps of three models, the tutorial's, nanoGPT's CPU configuration of the same
//! task and one between, on one thread and on two, with the code of `s5_gpt --bench`. It prints a
//! Markdown table: the median time per step, the GFLOP/s of the matrix products, and their share
//! of the machine's limit and of the core's FMA peak (`s5_gpt --peak`'s measure, the higher of one
//! before each row's steps and one after them). The limit is a product kernel whose speed nobody
//! disputes, measured on the same machine in the same run: PyTorch's `torch.mm` on one 1024 × 1024
//! × 1024 product on one thread (times the threads), which `--torch-bench SCRIPT` runs (a
//! `torch_gpt_bench.py` with `--matmul-limit`, under `--python`) before the crate's runs and after
//! them. Without PyTorch the
//! table says there is no limit, rather than measuring the crate against itself. Given
//! `--pytorch FILE`, a CSV of PyTorch's times for the same models (see
//! `book/src/generated/scaling_pytorch.csv`), it adds those and the ratio. `--write` puts the
//! table into `book/src/generated/scaling.md`, which Appendix B shows, and the same numbers in
//! Chinese words into `book/src/generated/zh-CN/scaling.md`, for the Chinese edition.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::lang::Lang;
use attention_from_scratch::s5_gpt::app::Config;
use attention_from_scratch::s5_gpt::app::bench::{self, BenchReport};
use attention_from_scratch::s5_gpt::app::error::ToolError;
use attention_from_scratch::s5_gpt::beyond::Architecture;
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
    /// torch_gpt_bench.py, whose --matmul-limit measures the limit (torch.mm, one thread)
    #[arg(long, value_name = "SCRIPT")]
    torch_bench: Option<PathBuf>,
    /// The Python that has PyTorch, to run --torch-bench with
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    python: PathBuf,
}

/// The machine's limit for one thread's products, measured twice: before the crate's runs and
/// after them.
struct Limit {
    /// PyTorch's version, as the script prints it.
    torch: String,
    /// `torch.mm`'s best GFLOP/s on 1024 × 1024 × 1024, one thread, before and after.
    gflops: [f64; 2],
}

impl Limit {
    /// The limit per thread: the better of the two measurements, since the machine reached it.
    fn per_thread(&self) -> f64 {
        self.gflops[0].max(self.gflops[1])
    }
}

/// `torch.mm`'s GFLOP/s and PyTorch's version from one run of `script --matmul-limit --threads 1`,
/// or why there is none (no script given, no Python, no PyTorch).
fn torch_mm(args: &Args) -> Result<(String, f64), String> {
    let script = args
        .torch_bench
        .as_ref()
        .ok_or("no --torch-bench script was given")?;
    let output = Command::new(&args.python)
        .arg(script)
        .args(["--matmul-limit", "--threads", "1"])
        .output()
        .map_err(|e| format!("{}: {e}", args.python.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    // "torch 2.15.0, 1 thread(s): torch.mm 1024x1024x1024 best 162.1 GFLOP/s"
    let parsed = text.lines().find_map(|line| {
        let version = line.strip_prefix("torch ")?.split(',').next()?;
        let gflops = line
            .split(" best ")
            .nth(1)?
            .split(' ')
            .next()?
            .parse()
            .ok()?;
        Some((version.to_string(), gflops))
    });
    parsed.ok_or_else(|| {
        let why = String::from_utf8_lossy(&output.stderr);
        format!(
            "PyTorch did not run: {}",
            why.lines().last().unwrap_or("no output")
        )
    })
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
    (limit, own): (&Option<Limit>, f64),
    pytorch: &[(String, usize, f64)],
) -> String {
    let mut out = String::from(lang.pick(
        "| model | flags | MFLOP of products per step | threads | ms per step | GFLOP/s | share of the limit | share of the FMA peak |",
        "| 模型 | 参数 | 每步矩阵乘法的 MFLOP | 线程数 | 每步毫秒数 | GFLOP/s | 占上限的比例 | 占 FMA 峰值的比例 |",
    ));
    if !pytorch.is_empty() {
        out += lang.pick(
            " PyTorch, ms per step | PyTorch's time ÷ the crate's |",
            " PyTorch 每步毫秒数 | PyTorch 的用时 ÷ 本 crate 的用时 |",
        );
    }
    out += "\n|---|---|---:|---:|---:|---:|---:|---:|";
    if !pytorch.is_empty() {
        out += "---:|---:|";
    }
    out += "\n";
    for (model, report) in rows {
        let ms = report.median.as_secs_f64() * 1e3;
        let share = match limit {
            Some(limit) => {
                let limit = limit.per_thread() * report.threads as f64;
                format!("{:.0} %", 100.0 * report.gflops() / limit)
            }
            None => "–".into(),
        };
        let peak_share = match &report.peak {
            Some(p) => format!("{:.0} %", 100.0 * p.share(report.gflops(), report.threads)),
            None => "–".into(),
        };
        out += &format!(
            "| {} | {} | {:.1} | {} | {ms:.2} | {:.1} | {share} | {peak_share} |",
            lang.pick(model.name, model.name_zh),
            match model.flags {
                "(none)" => lang.pick("(none)", "（无）"),
                flags => flags,
            },
            report.flops_per_step as f64 / 1e6,
            report.threads,
            report.gflops(),
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
    out + &limit_note(lang, limit, own) + peak_note(lang)
}

/// The sentence on the last column: what the FMA peak is.
fn peak_note(lang: Lang) -> &'static str {
    lang.pick(
        "\nThe FMA peak: this core's own limit, independent chains of fused multiply-adds in its \
         widest vectors, the higher of a measure before each row's steps and one after them \
         (`s5_gpt --peak`; one thread's peak times the threads, at most what all of them reached \
         together).\n",
        "\nFMA 峰值：这颗核心自己的上限，即在它最宽的向量中独立的融合乘加链，取每一行训练步之前和\
         之后两次测量中较高的那个（`s5_gpt --peak`；单线程峰值乘以线程数，但不超过所有线程一起\
         达到的值）。\n",
    )
}

/// The sentence under the table: what the limit is and where it came from, or that there is none.
fn limit_note(lang: Lang, limit: &Option<Limit>, own: f64) -> String {
    match (lang, limit) {
        (Lang::En, Some(limit)) => format!(
            "\nThe limit: {:.1} GFLOP/s per thread, PyTorch {}'s `torch.mm` on one 1024 × 1024 × \
             1024 product on one thread (best of five rounds; {:.1} before the crate's runs, {:.1} \
             after), times the threads. The crate's own product kernel ran the same product at \
             {own:.1} GFLOP/s in this run.\n",
            limit.per_thread(),
            limit.torch,
            limit.gflops[0],
            limit.gflops[1],
        ),
        (Lang::ZhCn, Some(limit)) => format!(
            "\n上限：每个线程 {:.1} GFLOP/s，即 PyTorch {} 的 `torch.mm` 在单线程上做一次 \
             1024 × 1024 × 1024 矩阵乘法的速度（五轮取最快；本 crate 运行之前 {:.1}，之后 \
             {:.1}），再乘以线程数。本 crate 自己的乘法内核在这次运行中做同一乘法的速度是 \
             {own:.1} GFLOP/s。\n",
            limit.per_thread(),
            limit.torch,
            limit.gflops[0],
            limit.gflops[1],
        ),
        (Lang::En, None) => format!(
            "\nNo limit: PyTorch was not available to this run, so no product kernel of undisputed \
             speed was measured on this machine, and the share is left empty. (The crate's own \
             product kernel ran one 1024 × 1024 × 1024 product at {own:.1} GFLOP/s on one thread; \
             a kernel measured against itself says nothing about how far it is from the machine's \
             limit.)\n"
        ),
        (Lang::ZhCn, None) => format!(
            "\n没有上限：这次运行没有可用的 PyTorch，因此没有在这台机器上测量一个速度公认的乘法内核，\
             占比一栏留空。（本 crate 自己的乘法内核在单线程上做一次 1024 × 1024 × 1024 矩阵乘法的\
             速度是 {own:.1} GFLOP/s；拿一个内核和它自己比，说明不了它离机器的上限有多远。）\n"
        ),
    }
}

/// Both editions' tables, English first, from the same measurements.
fn run(args: &Args) -> Result<[String; 2], ToolError> {
    let pytorch = match &args.pytorch {
        Some(path) => pytorch_times(path).map_err(ToolError::Config)?,
        None => vec![],
    };
    let before = torch_mm(args);
    let own = bench::product_peak(1024);
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
    let limit = match (before, torch_mm(args)) {
        (Ok((torch, before)), Ok((_, after))) => Some(Limit {
            torch,
            gflops: [before, after],
        }),
        (Err(why), _) | (_, Err(why)) => {
            eprintln!("no limit: {why}");
            None
        }
    };
    Ok(Lang::ALL.map(|lang| table(lang, &rows, (&limit, own), &pytorch)))
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
