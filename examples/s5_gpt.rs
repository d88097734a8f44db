//! Stage 5: train the tutorial's tiny GPT on Tiny Shakespeare, test it, and generate a sample.
//!
//! `cargo run --release --example s5_gpt` runs the whole chapter (31,368 steps); `--max-steps 300` stops
//! early, `--bench` times training steps instead. See `--help` for every flag.

use std::path::PathBuf;
use std::process::ExitCode;

use attention_from_scratch::cli::exit_code;
use attention_from_scratch::s5_gpt::{self, Config};
use clap::Parser;

/// Train the tiny GPT of the NumPy causal-attention chapter and print its test loss and a sample.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The corpus (default: data/tinyshakespeare.txt, fetched by data/fetch.sh)
    #[arg(long, value_name = "PATH")]
    data: Option<PathBuf>,
    /// Passes over the training batches (2 epochs = 31,368 steps)
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// Windows per batch (B)
    #[arg(long, default_value_t = 4)]
    batch_size: usize,
    /// Characters per window (T); windows start every T/2 characters
    #[arg(long, default_value_t = 32)]
    context_size: usize,
    /// Width of every token vector (C)
    #[arg(long, default_value_t = 64)]
    embedding_size: usize,
    /// Transformer blocks (attention, then feed-forward)
    #[arg(long, default_value_t = 2)]
    blocks: usize,
    /// Peak learning rate (warm-up over 100 steps, cosine down to a tenth)
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// np.random.seed: the initial weights and the sampling
    #[arg(long, default_value_t = 42)]
    seed: u32,
    /// Stop training after N steps, then test and sample as usual
    #[arg(long, value_name = "N")]
    max_steps: Option<usize>,
    /// Write step,lr,loss of every step to this CSV file
    #[arg(long, value_name = "PATH")]
    loss_csv: Option<PathBuf>,
    /// Print the training loss every N steps (0: never)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    log_every: usize,
    /// Text the sample starts from; every character must occur in the corpus
    #[arg(long, default_value = "ROMEO:")]
    prompt: String,
    /// Characters to generate after the prompt
    #[arg(long, default_value_t = 512)]
    sample_len: usize,
    /// Worker threads (default: one per core); the results are the same for any number
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Print no progress on stderr
    #[arg(long)]
    quiet: bool,
    /// Instead of the chapter, time 20 + N training steps and print the median ms per step
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "200")]
    bench: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let cfg = Config {
        data: args.data,
        epochs: args.epochs,
        batch_size: args.batch_size,
        context_size: args.context_size,
        embedding_size: args.embedding_size,
        blocks: args.blocks,
        lr: args.lr,
        seed: args.seed,
        max_steps: args.max_steps,
        loss_csv: args.loss_csv,
        log_every: args.log_every,
        prompt: args.prompt,
        sample_len: args.sample_len,
        threads: args.threads,
        progress: !args.quiet,
    };
    let result = match args.bench {
        Some(steps) => bench(&cfg, steps),
        None => s5_gpt::run(&mut std::io::stdout(), &cfg).map(drop),
    };
    exit_code(result)
}

fn bench(cfg: &Config, steps: usize) -> Result<(), s5_gpt::Error> {
    print!("{}", s5_gpt::bench::run(cfg, 20, steps)?);
    Ok(())
}
