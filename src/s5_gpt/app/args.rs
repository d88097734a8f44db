//! Tool layer. The `s5_gpt` command line: each flag declared once, grouped, and shared between
//! subcommands with clap's `flatten`. The `config` methods here are the one place where flags
//! become a [`Config`].

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use super::config::{
    BATCH_SIZE, BENCH, BLOCKS, CONTEXT_SIZE, Config, EMBEDDING_SIZE, EPOCHS, EVAL_BATCHES,
    EVAL_EVERY, HEADS, LOG_EVERY, MAX_STEPS, SAMPLE_LEN, SAVE_EVERY, THREADS, TOP_K,
};
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::flash::AttentionForm;
use crate::s5_gpt::ops::MASK_VALUE;
use crate::s5_gpt::train::Recipe;

/// Train the tiny GPT of GPTmini's chapter on causal attention, test it, and sample from it.
///
/// Without a subcommand this is the chapter: 31,368 steps on Tiny Shakespeare, the test loss, and
/// 512 characters after "ROMEO:". `train`, `eval` and `generate` do the same in parts, with
/// checkpoints.
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
    Train(Box<TrainArgs>),
    /// Sample text from a checkpoint
    Generate(GenerateArgs),
    /// Print a checkpoint's mean loss on the test part of the text
    Eval(EvalArgs),
}

/// The model's sizes and the training recipe; the defaults are the tutorial's.
#[derive(Debug, Args)]
#[command(next_help_heading = "Model and training")]
pub struct RecipeArgs {
    #[arg(long, value_name = "N", default_value_t = 2,
          help = EPOCHS.help("Passes over the training batches (2 epochs = 31,368 steps)"))]
    pub epochs: usize,
    #[arg(long, value_name = "N", default_value_t = 4, help = BATCH_SIZE.help("Windows per batch (B)"))]
    pub batch_size: usize,
    #[arg(long, value_name = "N", default_value_t = 32,
          help = CONTEXT_SIZE.help("Characters per window (T); windows start every T/2 characters"))]
    pub context_size: usize,
    #[arg(long, value_name = "N", default_value_t = 64, help = EMBEDDING_SIZE.help("Width of every token vector (C)"))]
    pub embedding_size: usize,
    #[arg(long, value_name = "N", default_value_t = 2,
          help = BLOCKS.help("Transformer blocks (attention, then feed-forward)"))]
    pub blocks: usize,
    #[command(flatten)]
    pub architecture: ArchitectureArgs,
    /// Peak learning rate, above 0 (warm-up over 100 steps, cosine down to a tenth)
    #[arg(long, default_value_t = 1e-3, allow_negative_numbers = true)]
    pub lr: f64,
    /// np.random.seed: the initial weights, and the chapter's sampling
    #[arg(long, value_name = "N", default_value_t = 42)]
    pub seed: u32,
}

impl RecipeArgs {
    pub fn recipe(&self) -> Recipe {
        Recipe {
            epochs: self.epochs,
            batch_size: self.batch_size,
            context_size: self.context_size,
            embedding_size: self.embedding_size,
            blocks: self.blocks,
            architecture: self.architecture.architecture(),
            lr: self.lr,
            seed: self.seed,
        }
    }
}

/// What the tutorial's model leaves out; without these flags the model is the tutorial's.
#[derive(Debug, Args)]
#[command(next_help_heading = "What the tutorial's model leaves out")]
pub struct ArchitectureArgs {
    /// Query, key and value projections before the attention (stage 2's Linear)
    #[arg(long)]
    pub qkv: bool,
    #[arg(long, value_name = "N",
          help = HEADS.help("Attention heads (stage 4); implies --qkv and must divide --embedding-size [default: 1]"))]
    pub heads: Option<usize>,
    /// Residual connections: each block adds the attention's and the feed-forward network's outputs
    /// to their inputs
    #[arg(long)]
    pub residual: bool,
    /// LayerNorm before the attention, the feed-forward network and the output layer (pre-LN, as in
    /// GPT-2)
    #[arg(long)]
    pub layer_norm: bool,
    /// Dropout on the attention weights while training (stage 3): the probability P of zeroing
    /// each, 0 <= P < 1
    #[arg(
        long,
        value_name = "P",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    pub dropout: f64,
    /// The score the causal mask writes above the diagonal; 0 lets each character see the ones
    /// after it
    #[arg(long, value_name = "V", default_value_t = MASK_VALUE, allow_negative_numbers = true)]
    pub mask_value: f32,
    /// How the attention is computed: naive (the tutorial's six ops, the T × T weights kept),
    /// tiled (FlashAttention-2, close to naive) or exact (naive's bits, a row at a time); dropout's
    /// mask is the same in all three
    #[arg(long, value_name = "FORM", value_enum, default_value_t = AttentionForm::Naive)]
    pub attention: AttentionForm,
    /// Grouped-query attention (stage 7): K key/value heads, each shared by H/K query heads; K
    /// must divide --heads, and 1 is multi-query attention [default: --heads]
    #[arg(long, value_name = "K")]
    pub kv_heads: Option<usize>,
    /// Sliding-window attention (stage 7): each character sees the W newest characters, itself
    /// included [default: the whole context]
    #[arg(long, value_name = "W")]
    pub window: Option<usize>,
    /// Rotary positions (RoPE, stage 7) on the queries and keys, in place of the position table
    #[arg(long)]
    pub rope: bool,
    /// Multi-head latent attention (stage 7): keys and values unfolded from a latent L wide, all
    /// the KV cache keeps; with --rope, a decoupled rotary part beside it; 1 <= L <= C
    #[arg(long, value_name = "L")]
    pub latent: Option<usize>,
    /// An attention-only model (stage 8): blocks without the feed-forward network
    #[arg(long)]
    pub attention_only: bool,
    /// The one-position key offset (stage 8): half of each head's key coordinates come from the
    /// character before, so that one block can form an induction head
    #[arg(long)]
    pub key_offset: bool,
}

/// `--attention naive|tiled|exact`: clap lists the names and refuses any other in one line.
impl ValueEnum for AttentionForm {
    fn value_variants<'a>() -> &'a [Self] {
        &AttentionForm::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()))
    }
}

impl ArchitectureArgs {
    pub fn architecture(&self) -> Architecture {
        Architecture {
            qkv: self.qkv || self.heads.is_some() || self.latent.is_some(),
            heads: self.heads.unwrap_or(1),
            residual: self.residual,
            layer_norm: self.layer_norm,
            dropout: self.dropout,
            mask_value: self.mask_value,
            attention: self.attention,
            kv_heads: self.kv_heads,
            window: self.window,
            rope: self.rope,
            latent: self.latent,
            attention_only: self.attention_only,
            key_offset: self.key_offset,
        }
    }
}

/// Each recipe flag: clap's id, the flag, and its value in `recipe`. A resumed run compares them.
pub fn recipe_flags(recipe: &Recipe) -> [(&'static str, &'static str, String); 20] {
    let on_off = |on: bool| if on { "on" } else { "off" }.to_string();
    let arch = &recipe.architecture;
    [
        ("epochs", "--epochs", recipe.epochs.to_string()),
        ("batch_size", "--batch-size", recipe.batch_size.to_string()),
        (
            "context_size",
            "--context-size",
            recipe.context_size.to_string(),
        ),
        (
            "embedding_size",
            "--embedding-size",
            recipe.embedding_size.to_string(),
        ),
        ("blocks", "--blocks", recipe.blocks.to_string()),
        ("lr", "--lr", recipe.lr.to_string()),
        ("seed", "--seed", recipe.seed.to_string()),
        ("heads", "--heads", arch.heads.to_string()),
        ("qkv", "--qkv", on_off(arch.qkv)),
        ("residual", "--residual", on_off(arch.residual)),
        ("layer_norm", "--layer-norm", on_off(arch.layer_norm)),
        ("dropout", "--dropout", arch.dropout.to_string()),
        ("mask_value", "--mask-value", arch.mask_value.to_string()),
        (
            "attention",
            "--attention",
            arch.attention.name().to_string(),
        ),
        ("kv_heads", "--kv-heads", arch.kv_heads().to_string()),
        (
            "window",
            "--window",
            arch.window.map_or("off".to_string(), |w| w.to_string()),
        ),
        ("rope", "--rope", on_off(arch.rope)),
        (
            "latent",
            "--latent",
            arch.latent.map_or("off".to_string(), |l| l.to_string()),
        ),
        (
            "attention_only",
            "--attention-only",
            on_off(arch.attention_only),
        ),
        ("key_offset", "--key-offset", on_off(arch.key_offset)),
    ]
}

/// Where the text comes from.
#[derive(Debug, Args)]
pub struct DataArgs {
    /// The corpus [default: data/tinyshakespeare.txt, downloaded on first use]
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Never download the corpus (to mirror it, set TINY_SHAKESPEARE_URL instead)
    #[arg(long)]
    pub no_download: bool,
}

/// How a run goes: its data, when it stops, on how many threads, what it shows and writes.
#[derive(Debug, Args)]
#[command(next_help_heading = "Run")]
pub struct RunArgs {
    #[command(flatten)]
    pub data: DataArgs,
    #[arg(long, value_name = "N",
          help = MAX_STEPS.help("Stop training after step N of the schedule [default: the end of the last epoch]"))]
    pub max_steps: Option<usize>,
    /// Write step,lr,loss of every step to this CSV file (and the estimates, with --eval-every)
    #[arg(long, value_name = "PATH")]
    pub loss_csv: Option<PathBuf>,
    /// Draw the loss curve into this SVG file
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    #[arg(long, value_name = "N", default_value_t = 1000, help = LOG_EVERY.help("Print a line every N steps (0: never)"))]
    pub log_every: usize,
    #[arg(long, value_name = "N", default_value_t = 0, help = EVAL_EVERY.help("Estimate the loss on fixed train and held-out batches every N steps, without dropout, and add it to the log, the CSV and the plot (0: never); the training is the same"))]
    pub eval_every: usize,
    #[arg(long, value_name = "K", default_value_t = 50, help = EVAL_BATCHES.help("Batches of each split that one estimate averages"))]
    pub eval_batches: usize,
    #[command(flatten)]
    pub compute: ComputeArgs,
    /// Show no progress bar (it is shown only when stderr is a terminal anyway)
    #[arg(long)]
    pub quiet: bool,
}

/// How the arithmetic runs; the results are the same bits either way.
#[derive(Clone, Copy, Debug, Args)]
pub struct ComputeArgs {
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true,
          help = THREADS.help("Training threads, 0 for one per core (the default); the results are the same for any number"))]
    pub threads: usize,
    /// Compute with the lesson's plain single-threaded code instead of the fast layer: the same
    /// bits, slower
    #[arg(long)]
    pub reference: bool,
}

impl RunArgs {
    /// The one place a [`Config`] is made from flags: the recipe, then this run's settings.
    pub fn config(&self, recipe: Recipe) -> Config {
        Config {
            recipe,
            data: self.data.data.clone(),
            download: !self.data.no_download,
            max_steps: self.max_steps,
            loss_csv: self.loss_csv.clone(),
            plot: self.plot.clone(),
            log_every: self.log_every,
            eval_every: self.eval_every,
            eval_batches: self.eval_batches,
            threads: self.compute.threads,
            reference: self.compute.reference,
            progress: !self.quiet,
            ..Config::default()
        }
    }
}

impl ChapterArgs {
    /// The settings of the chapter run: the recipe and run flags, and the sample's prompt and
    /// length.
    pub fn config(&self) -> Config {
        Config {
            prompt: self.sample.prompt.clone(),
            sample_len: self.sample.sample_len,
            ..self.run.config(self.recipe.recipe())
        }
    }
}

impl EvalArgs {
    /// The settings of `eval`: the checkpoint's `recipe`, this run's corpus and threads.
    pub fn config(&self, recipe: Recipe) -> Config {
        Config {
            recipe,
            data: self.data.data.clone(),
            download: !self.data.no_download,
            threads: self.compute.threads,
            reference: self.compute.reference,
            progress: !self.quiet,
            ..Config::default()
        }
    }
}

impl GenerateArgs {
    /// The settings of `generate`: only how the arithmetic runs (the checkpoint has the rest).
    pub fn config(&self) -> Config {
        let ComputeArgs { threads, reference } = self.compute;
        Config {
            threads,
            reference,
            ..Config::default()
        }
    }
}

/// The prompt and length of a sample.
#[derive(Debug, Args)]
#[command(next_help_heading = "Sampling")]
pub struct SampleArgs {
    /// Text the sample starts from; every character must be in the vocabulary
    #[arg(long, default_value = "ROMEO:")]
    pub prompt: String,
    #[arg(long, value_name = "N", default_value_t = 512, help = SAMPLE_LEN.help("Characters to generate after the prompt"))]
    pub sample_len: usize,
}

/// The chapter run's own flags.
#[derive(Debug, Args)]
pub struct ChapterArgs {
    #[command(flatten)]
    pub recipe: RecipeArgs,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub sample: SampleArgs,
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "200", help_heading = "Run",
          help = BENCH.help("Instead of the chapter, time N training steps (after 20 untimed) and print the median and a breakdown per op"))]
    pub bench: Option<usize>,
    /// Instead of the chapter, time this core's fused multiply-adds in its widest vectors, on one
    /// thread and on --threads, and print the peak GFLOP/s the benchmarks' products are measured
    /// against; then the product kernel's share of it on one 1024³ product and on each product of
    /// a training step of nanoGPT's CPU configuration, one shape at a time
    #[arg(long, help_heading = "Run", conflicts_with = "bench")]
    pub peak: bool,
}

#[derive(Debug, Args)]
pub struct TrainArgs {
    #[command(flatten)]
    pub recipe: RecipeArgs,
    #[command(flatten)]
    pub run: RunArgs,
    /// Save a checkpoint to DIR at the end, every --save-every steps, and on Ctrl-C
    #[arg(long, value_name = "DIR", help_heading = "Checkpoints")]
    pub save: Option<PathBuf>,
    /// Continue the run saved in DIR (and save back to it unless --save says otherwise); the model
    /// and training flags then come from DIR's config.json
    #[arg(long, value_name = "DIR", help_heading = "Checkpoints")]
    pub resume: Option<PathBuf>,
    /// Replace a checkpoint already in the --save folder (otherwise that is refused, to keep it)
    #[arg(long, help_heading = "Checkpoints")]
    pub overwrite: bool,
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Checkpoints",
          help = SAVE_EVERY.help("Also save every N steps (0: only at the end and on Ctrl-C)"))]
    pub save_every: usize,
    /// The clap ids of the recipe flags given on the command line (a resumed run checks them).
    #[arg(skip)]
    pub given: Vec<&'static str>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The checkpoint folder, as written by `train --save`
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    #[command(flatten)]
    pub sample: SampleArgs,
    /// np.random.seed for the sampling; with the chapter's 42 and temperature 1, a checkpoint of
    /// the full chapter run writes the chapter's sample
    #[arg(
        long,
        value_name = "N",
        default_value_t = 42,
        help_heading = "Sampling"
    )]
    pub seed: u32,
    /// Divide the logits by T before the softmax: below 1 is bolder, above 1 more varied
    #[arg(
        long,
        value_name = "T",
        default_value_t = 1.0,
        allow_negative_numbers = true,
        help_heading = "Sampling"
    )]
    pub temperature: f32,
    #[arg(long, value_name = "K", help_heading = "Sampling",
          help = TOP_K.help("Draw only among the K likeliest characters [default: all]"))]
    pub top_k: Option<usize>,
    /// Print, instead of a sample, the distribution of the character after the prompt with this
    /// temperature and top-k: a line per character that can be drawn, likeliest first, its
    /// probability last
    #[arg(long, help_heading = "Sampling")]
    pub probs: bool,
    /// Compute the whole window again for every character, as the chapter does, instead of keeping
    /// each block's keys and values (stage 7's KV cache); the sample is the same. A model with
    /// --rope and --window rolls past its context: without the cache it computes again the last
    /// blocks·(W − 1) + 1 characters at their positions
    #[arg(long, help_heading = "Sampling")]
    pub no_cache: bool,
    #[command(flatten)]
    pub compute: ComputeArgs,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The checkpoint folder, as written by `train --save`
    #[arg(long, value_name = "DIR")]
    pub checkpoint: PathBuf,
    #[command(flatten)]
    pub data: DataArgs,
    #[command(flatten)]
    pub compute: ComputeArgs,
    /// Show no progress bar
    #[arg(long)]
    pub quiet: bool,
}

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
            train.given = given_recipe_flags(m);
        }
        Ok(cli)
    }
}

/// The ids of the recipe flags typed on the command line (not taken from their defaults). `--heads`
/// counts as `--qkv` too, since it implies it.
fn given_recipe_flags(m: &ArgMatches) -> Vec<&'static str> {
    let typed = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let ids = recipe_flags(&Recipe::default()).map(|(id, _, _)| id);
    ids.into_iter()
        .filter(|&id| typed(id) || (id == "qkv" && typed("heads")))
        .collect()
}
