//! The `s5_gpt` command line: the chapter run, and `train`, `generate` and `eval` to go on from it.
//!
//! Without a subcommand, `s5_gpt` runs the tutorial's chapter (train, test, sample) and prints what the
//! snapshot locks. The subcommands split that run into parts that keep their results in a checkpoint
//! folder (see [`super::checkpoint`]), so that a reader can train longer, resume, and sample again.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use super::checkpoint::{self, Checkpoint};
use super::data::{CharDataset, corpus_warning, default_data_path};
use super::generate::{Sampling, generate};
use super::{Config, Error, Progress, Trainer, check_prompt, describe, evaluate, with_threads};
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::tape::Tape;

/// Train the tiny GPT of the NumPy causal-attention chapter, test it, and sample from it.
///
/// Without a subcommand this is the chapter: 31,368 steps on Tiny Shakespeare, the test loss, and 512
/// characters after "ROMEO:". `train`, `eval` and `generate` do the same in parts, with checkpoints.
#[derive(Debug, Parser)]
#[command(name = "s5_gpt", version, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub chapter: ChapterArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train the model, saving and resuming checkpoints (Ctrl-C saves one and stops)
    Train(TrainArgs),
    /// Sample text from a checkpoint
    Generate(GenerateArgs),
    /// Print a checkpoint's mean loss on the test part of the text
    Eval(EvalArgs),
}

/// The model's sizes and the training recipe; the defaults are the tutorial's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model and training")]
pub struct ModelArgs {
    /// The corpus [default: data/tinyshakespeare.txt, fetched by data/fetch.sh]
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Passes over the training batches (2 epochs = 31,368 steps), 1 to 1000
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub epochs: usize,
    /// Windows per batch (B), 1 to 1024
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub batch_size: usize,
    /// Characters per window (T), 1 to 1024; windows start every T/2 characters
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub context_size: usize,
    /// Width of every token vector (C), 1 to 1024
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub embedding_size: usize,
    /// Transformer blocks (attention, then feed-forward), 1 to 64
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub blocks: usize,
    /// Peak learning rate, above 0 (warm-up over 100 steps, cosine down to a tenth)
    #[arg(long, default_value_t = 1e-3, allow_negative_numbers = true)]
    pub lr: f64,
    /// np.random.seed: the initial weights, and the chapter's sampling
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u32,
}

/// How a run goes: when it stops, on how many threads, what it shows and writes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Run")]
pub struct RunArgs {
    /// Stop training after step N of the schedule [default: the end of the last epoch]
    #[arg(long, value_name = "N")]
    pub max_steps: Option<usize>,
    /// Write step,lr,loss of every step to this CSV file
    #[arg(long, value_name = "PATH")]
    pub loss_csv: Option<PathBuf>,
    /// Draw the loss curve into this SVG file
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Print a line every N steps (0: never)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub log_every: usize,
    /// Worker threads [default: one per core]; the results are the same for any number
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
    /// Show no progress bar (it is shown only when stderr is a terminal anyway)
    #[arg(long)]
    pub quiet: bool,
}

/// The chapter run's own flags.
#[derive(Debug, Args)]
pub struct ChapterArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Text the sample starts from; every character must occur in the corpus
    #[arg(long, default_value = "ROMEO:", help_heading = "Sampling")]
    pub prompt: String,
    /// Characters to generate after the prompt
    #[arg(
        long,
        value_name = "N",
        default_value_t = 512,
        help_heading = "Sampling"
    )]
    pub sample_len: usize,
    /// Instead of the chapter, time N training steps (after 20 untimed), print the median ms per step
    /// and GFLOP/s, then time N more with per-part timers for a breakdown
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "200", help_heading = "Run")]
    pub bench: Option<usize>,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Save a checkpoint to DIR at the end, every --save-every steps, and on Ctrl-C
    #[arg(long, value_name = "DIR", help_heading = "Checkpoints")]
    pub save: Option<PathBuf>,
    /// Continue the run saved in DIR (and save back to it unless --save says otherwise); the model and
    /// training flags then come from DIR's config.json
    #[arg(long, value_name = "DIR", help_heading = "Checkpoints")]
    pub resume: Option<PathBuf>,
    /// Replace a checkpoint already in the --save folder (otherwise that is refused, to keep it)
    #[arg(long, help_heading = "Checkpoints")]
    pub overwrite: bool,
    /// Also save every N steps (0: only at the end and on Ctrl-C)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        help_heading = "Checkpoints"
    )]
    pub save_every: usize,
    /// The model and training flags given on the command line (a resumed run checks them).
    #[arg(skip)]
    pub given: Vec<String>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The checkpoint folder, as written by `train --save`
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    /// Text the sample starts from; every character must be in the checkpoint's vocabulary
    #[arg(long, default_value = "ROMEO:")]
    pub prompt: String,
    /// Characters to generate after the prompt
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub sample_len: usize,
    /// np.random.seed for the sampling; with the chapter's 42 and temperature 1, a checkpoint of the full
    /// chapter run writes the chapter's sample
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u32,
    /// Divide the logits by T before the softmax: below 1 is bolder, above 1 more varied
    #[arg(
        long,
        value_name = "T",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    pub temperature: f32,
    /// Draw only among the K likeliest characters [default: all]
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// Worker threads [default: one per core]
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The checkpoint folder, as written by `train --save`
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    /// The corpus the checkpoint was trained on [default: data/tinyshakespeare.txt]
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Worker threads [default: one per core]
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub threads: usize,
    /// Show no progress bar
    #[arg(long)]
    pub quiet: bool,
}

/// The exit status of a run stopped by Ctrl-C, as a shell reports one killed by SIGINT.
pub const INTERRUPTED: u8 = 130;

/// Set by Ctrl-C: training saves a checkpoint and stops at the next step.
static STOP: AtomicBool = AtomicBool::new(false);

// ANCHOR: main
/// The program `s5_gpt`: parses `args` (program name first), catches Ctrl-C when there is a checkpoint to
/// save, runs, and returns the exit status: 0 done, 1 failed (the error printed on one line), 130 stopped.
pub fn main(args: impl IntoIterator<Item = OsString>) -> u8 {
    let cli = Cli::try_parse_args(args).unwrap_or_else(|e| e.exit());
    if cli.saves_checkpoints() {
        // A first Ctrl-C asks for a checkpoint; a second one quits at once (the last checkpoint stays).
        let handler = || {
            if STOP.swap(true, Ordering::Relaxed) {
                std::process::exit(INTERRUPTED.into());
            }
        };
        if let Err(e) = ctrlc::set_handler(handler) {
            eprintln!("warning: Ctrl-C will not save a checkpoint: {e}");
        }
    }
    match cli.run(&mut std::io::stdout(), &STOP) {
        Ok(Outcome::Interrupted) => INTERRUPTED,
        other => crate::cli::status(other.map(drop)),
    }
}
// ANCHOR_END: main

/// How a command ended, for the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// Ctrl-C stopped training (after saving, if there was somewhere to save).
    Interrupted,
}

/// The model and training flags a resumed run takes from its checkpoint: clap's id, and the flag.
const MODEL_FLAGS: [(&str, &str); 7] = [
    ("epochs", "--epochs"),
    ("batch_size", "--batch-size"),
    ("context_size", "--context-size"),
    ("embedding_size", "--embedding-size"),
    ("blocks", "--blocks"),
    ("lr", "--lr"),
    ("seed", "--seed"),
];

impl Cli {
    /// Parses a command line; a clap error (or `--help`) comes back to be printed with `.exit()`.
    pub fn try_parse_args(
        args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    ) -> Result<Cli, clap::Error> {
        let matches = Cli::command().try_get_matches_from(args)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        if let (Some(Command::Train(train)), Some(("train", m))) =
            (&mut cli.command, matches.subcommand())
        {
            let given = |id: &&str| m.value_source(id) == Some(ValueSource::CommandLine);
            let ids = MODEL_FLAGS.iter().map(|(id, _)| *id);
            train.given = ids.filter(given).map(String::from).collect();
        }
        Ok(cli)
    }

    /// Whether this command may write a checkpoint, and so should catch Ctrl-C.
    pub fn saves_checkpoints(&self) -> bool {
        matches!(&self.command, Some(Command::Train(t)) if t.save.is_some() || t.resume.is_some())
    }

    /// Runs the command, writing its report to `out`. Training stops at the next step once `stop` is set.
    pub fn run(self, out: &mut impl Write, stop: &AtomicBool) -> Result<Outcome, Error> {
        match self.command {
            None => chapter(self.chapter, out).map(|()| Outcome::Done),
            Some(Command::Train(args)) => train(args, out, stop),
            Some(Command::Generate(args)) => generate_cmd(args, out).map(|()| Outcome::Done),
            Some(Command::Eval(args)) => eval(args, out).map(|()| Outcome::Done),
        }
    }
}

impl ModelArgs {
    fn config(&self, run: &RunArgs) -> Config {
        Config {
            data: self.data.clone(),
            epochs: self.epochs,
            batch_size: self.batch_size,
            context_size: self.context_size,
            embedding_size: self.embedding_size,
            blocks: self.blocks,
            lr: self.lr,
            seed: self.seed,
            max_steps: run.max_steps,
            loss_csv: run.loss_csv.clone(),
            plot: run.plot.clone(),
            log_every: run.log_every,
            threads: run.threads,
            progress: !run.quiet,
            ..Config::default()
        }
    }
}

/// Prints a warning on stderr if the default corpus is not the expected Tiny Shakespeare.
fn warn_about_corpus(data: &Option<PathBuf>) {
    if data.is_none()
        && let Some(warning) = corpus_warning(&default_data_path())
    {
        eprintln!("{warning}");
    }
}

fn chapter(args: ChapterArgs, out: &mut impl Write) -> Result<(), Error> {
    let cfg = Config {
        prompt: args.prompt,
        sample_len: args.sample_len,
        ..args.model.config(&args.run)
    };
    warn_about_corpus(&cfg.data);
    match args.bench {
        Some(steps) => bench(&cfg, steps, out),
        None => super::run(out, &cfg).map(drop),
    }
}

fn bench(cfg: &Config, steps: usize, out: &mut impl Write) -> Result<(), Error> {
    write!(out, "{}", super::bench::run(cfg, 20, steps)?)?;
    Ok(())
}

// ANCHOR: train
/// `s5_gpt train`: trains from scratch or from `--resume DIR`, logs, saves, and stops cleanly on Ctrl-C.
fn train(args: TrainArgs, out: &mut impl Write, stop: &AtomicBool) -> Result<Outcome, Error> {
    let mut cfg = args.model.config(&args.run);
    let resumed = match &args.resume {
        Some(dir) => {
            let saved = checkpoint::load(dir)?;
            cfg = resume_config(&args, &saved)?;
            Some(saved)
        }
        None => None,
    };
    warn_about_corpus(&cfg.data);
    let save = save_folder(&args)?;
    with_threads(cfg.threads, || {
        let mut trainer = Trainer::new(&cfg)?;
        if let Some(saved) = &resumed {
            same_vocabulary(&trainer.dataset, &cfg, saved)?;
            trainer.restore(saved)?;
            let (dir, step) = (saved.dir.display(), trainer.losses.len());
            writeln!(out, "resuming {dir} after step {step}")?;
        }
        describe(out, &mut trainer)?;
        let outcome = train_steps(&mut trainer, &args, save.as_ref(), out, stop)?;
        super::write_curves(&cfg, &trainer, None)?;
        if let Some(dir) = &save {
            checkpoint::save(dir, &trainer)?;
        }
        report_end(out, &trainer, save.as_ref(), outcome)?;
        Ok(outcome)
    })?
}

/// Where `train` saves: `--save`, or else the `--resume` folder. The folder is made now (so that a bad path
/// fails before training), and one holding another run's checkpoint is refused unless `--overwrite`.
fn save_folder(args: &TrainArgs) -> Result<Option<PathBuf>, Error> {
    let Some(dir) = args.save.as_ref().or(args.resume.as_ref()) else {
        return Ok(None);
    };
    let continuing = args.resume.as_ref() == Some(dir);
    if dir.join(checkpoint::CONFIG_FILE).exists() && !continuing && !args.overwrite {
        return Err(Error::CheckpointExists { dir: dir.clone() });
    }
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.clone(),
        source,
    })?;
    Ok(Some(dir.clone()))
}

/// The training loop of `train`: a progress bar, a log line every `--log-every` steps, a checkpoint every
/// `--save-every` steps, and a stop at the first step after Ctrl-C.
fn train_steps(
    trainer: &mut Trainer,
    args: &TrainArgs,
    save: Option<&PathBuf>,
    out: &mut impl Write,
    stop: &AtomicBool,
) -> Result<Outcome, Error> {
    let start = trainer.losses.len();
    let mut progress = Progress::new("train", "steps", (start, trainer.steps), !args.run.quiet);
    let mut since = (Instant::now(), start);
    while trainer.losses.len() < trainer.steps {
        if stop.load(Ordering::Relaxed) {
            progress.finish();
            return Ok(Outcome::Interrupted);
        }
        let s = trainer.losses.len();
        let loss = trainer.step()?;
        progress.step(Some(loss));
        let log_every = args.run.log_every;
        if log_every > 0 && (s.is_multiple_of(log_every) || s + 1 == trainer.steps) {
            let ms = since.0.elapsed().as_secs_f64() * 1e3 / (s + 1 - since.1) as f64;
            since = (Instant::now(), s + 1);
            let lr = trainer.lrs[s];
            let line = format!("step {s}: loss {loss:.4}, lr {lr:.1e}, {ms:.1} ms/step");
            progress.suspend(|| writeln!(out, "{line}"))?;
        }
        if let Some(dir) = save
            && args.save_every > 0
            && (s + 1).is_multiple_of(args.save_every)
        {
            checkpoint::save(dir, trainer)?;
        }
    }
    progress.finish();
    Ok(Outcome::Done)
}
// ANCHOR_END: train

/// The settings of a resumed run: the checkpoint's, with this run's data, stop, outputs and threads.
/// A model or training flag given anew must agree with the checkpoint.
fn resume_config(args: &TrainArgs, saved: &Checkpoint) -> Result<Config, Error> {
    let given = args.model.config(&args.run);
    let cfg = Config {
        data: given.data.clone(),
        max_steps: given.max_steps,
        loss_csv: given.loss_csv.clone(),
        plot: given.plot.clone(),
        log_every: given.log_every,
        threads: given.threads,
        progress: given.progress,
        ..saved.config.run_config()
    };
    // In MODEL_FLAGS's order.
    let values = |c: &Config| {
        [
            c.epochs.to_string(),
            c.batch_size.to_string(),
            c.context_size.to_string(),
            c.embedding_size.to_string(),
            c.blocks.to_string(),
            c.lr.to_string(),
            c.seed.to_string(),
        ]
    };
    let flags = MODEL_FLAGS.iter().zip(values(&given)).zip(values(&cfg));
    for ((&(id, flag), given_value), saved_value) in flags {
        if args.given.iter().any(|g| g == id) && given_value != saved_value {
            return Err(Error::ResumeMismatch {
                flag,
                given: given_value,
                saved: saved_value,
            });
        }
    }
    Ok(cfg)
}

/// A checkpoint only makes sense on the text it was trained on: the same characters, in the same order.
fn same_vocabulary(dataset: &CharDataset, cfg: &Config, saved: &Checkpoint) -> Result<(), Error> {
    if dataset.vocab == saved.config.vocab() {
        return Ok(());
    }
    Err(Error::VocabularyMismatch {
        data_path: cfg.data.clone().unwrap_or_else(default_data_path),
        dir: saved.dir.clone(),
        data: dataset.vocab_size(),
        saved: saved.config.vocab_size,
    })
}

fn report_end(
    out: &mut impl Write,
    trainer: &Trainer,
    save: Option<&PathBuf>,
    outcome: Outcome,
) -> Result<(), Error> {
    let done = trainer.losses.len();
    let recent = &trainer.losses[done.saturating_sub(100)..];
    if outcome == Outcome::Interrupted {
        writeln!(out, "interrupted after step {done} of {}", trainer.steps)?;
    } else if recent.is_empty() {
        writeln!(out, "trained no steps")?;
    } else {
        let mean = recent.iter().map(|&l| f64::from(l)).sum::<f64>() / recent.len() as f64;
        writeln!(
            out,
            "trained {done} steps; mean loss of the last 100: {mean:.4}"
        )?;
    }
    match save {
        Some(dir) => {
            let dir = dir.display();
            writeln!(out, "saved {dir}")?;
            if outcome == Outcome::Interrupted {
                writeln!(out, "continue with: s5_gpt train --resume {dir}")?;
            }
        }
        None => writeln!(out, "not saved (pass --save DIR to keep the model)")?,
    }
    Ok(())
}

/// `s5_gpt generate`: a sample from a checkpoint.
fn generate_cmd(args: GenerateArgs, out: &mut impl Write) -> Result<(), Error> {
    let saved = checkpoint::load(&args.checkpoint)?;
    let t = args.temperature;
    if !(t.is_finite() && t > 0.0) {
        let msg = format!("--temperature must be a positive number, got {t}; 1 is the chapter's");
        return Err(Error::Config(msg));
    }
    if args.top_k == Some(0) {
        return Err(Error::Config("--top-k must be at least 1".into()));
    }
    let vocab = CharDataset::from_vocab(saved.config.vocab());
    check_prompt(&vocab, &args.prompt)?;
    let sampling = Sampling {
        temperature: t,
        top_k: args.top_k,
    };
    with_threads(args.threads, || {
        let mut tape = Tape::new();
        // Seeded as the chapter is, and past the initial weights' draws, as the chapter is when it samples.
        let mut rng = NumpyRandom::seed(args.seed);
        let model = saved.model(&mut tape, &mut rng);
        let (prompt, len) = (&args.prompt, args.sample_len);
        let text = generate(&mut tape, &model, &vocab, prompt, len, &mut rng, sampling)?;
        writeln!(out, "{text}")?;
        Ok(())
    })?
}

/// `s5_gpt eval`: the checkpoint's mean loss over the test batches of its corpus.
fn eval(args: EvalArgs, out: &mut impl Write) -> Result<(), Error> {
    let saved = checkpoint::load(&args.checkpoint)?;
    warn_about_corpus(&args.data);
    let cfg = Config {
        data: args.data.clone(),
        threads: args.threads,
        progress: !args.quiet,
        ..saved.config.run_config()
    };
    with_threads(args.threads, || {
        let mut trainer = Trainer::new(&cfg)?;
        same_vocabulary(&trainer.dataset, &cfg, &saved)?;
        trainer.restore_weights(&saved);
        let result = evaluate(&mut trainer, cfg.progress);
        let (b, t) = (cfg.batch_size, cfg.context_size);
        writeln!(out, "test loss: {}", result.mean())?;
        writeln!(
            out,
            "({} test batches of {b}×{t} characters, after {} training steps)",
            result.batches, saved.config.step
        )?;
        Ok(())
    })?
}
