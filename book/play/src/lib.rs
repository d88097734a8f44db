//! The book's page: the crate's stages compiled to WebAssembly, for the panels of each chapter.
//!
//! This crate is thin. It computes nothing of its own: every number comes from the lesson that
//! prints it in the book (each stage's own `run`, the heat maps' own [`figures`] functions, stage
//! 5's [`Trainer`](LessonTrainer) and [`generate`]), and every input is read
//! and refused by the command line's own parsers and checks, so that a panel accepts what `cargo
//! run` accepts, prints the same bytes, and answers bad input with the same line.
//!
//! | export | what `cargo run` gives the same |
//! |---|---|
//! | [`page_facts`] | the flags' names and defaults, the chapter's tokens, the heat maps' colours |
//! | [`stage_output`] | `cargo run --example sN [-- --seed K]`, its stdout |
//! | [`s1_query`] | stage 1's §3.3.1, for another query token |
//! | [`stage_weights`] | the numbers behind the heat maps of stages 1, 3 and 4 |
//! | [`s6_output`] | `cargo run --example s6_flash -- --scores X,… --context T --tile N`, its stdout |
//! | [`s7_kv`] | `cargo run --example s7_variants -- --kv --layers N …`, its stdout |
//! | [`s7_weights`] | `cargo run --example s7_variants -- --weights PROMPT [--variant NAME]`, its stdout |
//! | [`Trainer`] | the lines of `s5_gpt --loss-csv F`, a few steps at a time |
//! | [`Heads`] | `s8_heads --phase --model aon2`'s probe lines, a few steps at a time; its heads' maps and ablations |
//! | [`Sampler`] | `s5_gpt generate --checkpoint DIR …` (also `--probs`, `--no-cache`), its stdout |
//! | [`fma_self_check`] | the fast layer's fused multiply-add on WebAssembly, checked |
//! | [`choose_kernel`], [`kernel`] | which product kernel trains: fused lanes or exact float64 |
//! | `serve_as_helper`, [`threads`] | `--threads N`: the helper threads, as Web Workers |
//!
//! What a panel draws comes as JSON beside the text it shows (the rows of the loss CSV, the
//! probabilities of `--probs`, the heat maps' weights and head indices), so that the page never
//! reads numbers back out of the crate's text, and the names and constants it writes into command
//! lines and pictures come from [`page_facts`], so that it keeps no copies of them.
//!
//! An error is thrown as a JavaScript `Error` whose message is the line the command line prints on
//! stderr (`error: …`). Of a flag error the command line prints more lines after it (clap's usage
//! and "For more information, try '--help'."); those speak of the terminal, and the page leaves
//! them out.
//!
//! So it imports the lessons for every number, and the tool layer only for what reads input: the
//! flags as `s5_gpt` declares them ([`RecipeArgs`], [`Cli`]), their limits ([`Config::check`]), the
//! checkpoint reader ([`checkpoint::from_bytes`]), `generate`'s checks ([`sample`]) and the loss
//! CSV's line ([`loss_csv_line`]). Copies of those would drift from the command line; the tool's
//! native-only parts (download, progress bar, Ctrl-C) are not in this build.
//!
//! `bash book/build.sh` builds it with `wasm-bindgen --target web` into `book/src/play/pkg/`, and
//! twice more: with relaxed SIMD (`pkg/relaxed/`), and with relaxed SIMD and shared memory
//! (`pkg/threads/`), where Web Workers that call `serve_as_helper` (WebAssembly only) become the
//! training team's helpers.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::Path;

use attention_from_scratch::cli::SeedArgs;
use attention_from_scratch::figures;
use attention_from_scratch::figures::colours::{BLUES, MASKED};
use attention_from_scratch::rng::numpy::NumpyRandom;
use attention_from_scratch::s1_simple::{self, JOURNEY, TOKENS};
use attention_from_scratch::s5_gpt::app::args::{Cli, Command, GenerateArgs, RecipeArgs};
use attention_from_scratch::s5_gpt::app::checkpoint::{self, Checkpoint};
use attention_from_scratch::s5_gpt::app::config::{Config, SAMPLE_LEN};
use attention_from_scratch::s5_gpt::app::files::{LOSS_CSV_HEADER, loss_csv_line};
use attention_from_scratch::s5_gpt::app::sample::{next_chars, probs_lines, sample};
use attention_from_scratch::s5_gpt::data::{CharDataset, DATA_FILE};
use attention_from_scratch::s5_gpt::fast::{team, wasm_fma};
use attention_from_scratch::s5_gpt::generate::{Sampling, generate};
use attention_from_scratch::s5_gpt::ops::MASK_VALUE;
use attention_from_scratch::s5_gpt::tape::Tape;
use attention_from_scratch::s5_gpt::train::Trainer as LessonTrainer;
use attention_from_scratch::s6_flash::app::{Cli as FlashCli, MAX_CONTEXT};
use attention_from_scratch::s6_flash::{AtLength, Difference};
use attention_from_scratch::s7_variants::app::{Cli as VariantsCli, KvArgs};
use attention_from_scratch::s7_variants::bench::short_name;
use attention_from_scratch::s7_variants::variants;
use attention_from_scratch::s7_variants::weights::{self as first_blocks, visible};
use attention_from_scratch::{BookSeeds, Error, s2_trainable, s3_causal, s4_multihead};
use clap::{Args, CommandFactory, Parser};
use serde::Serialize;
use wasm_bindgen::prelude::*;

mod heads;
pub use heads::Heads;

/// Where the page finds the trained model (`book/src/play/data/checkpoint/`); errors name it.
const CHECKPOINT_DIR: &str = "data/checkpoint";

/// The folder of the page's files in the crate (the worker, and what `book/build.sh` puts there),
/// where a command the page shows finds the checkpoint.
const PLAY_DIR: &str = "book/src/play";

/// The one line the command line prints for `e`.
fn fail(e: impl Display) -> JsError {
    JsError::new(&format!("error: {e}"))
}

/// A flag error as the page shows it: the first line that clap prints, `error: …`, without the
/// usage and the `--help` tip that follow it on a terminal.
fn flag_error(e: clap::Error) -> JsError {
    let text = e.render().to_string();
    JsError::new(text.lines().next().unwrap_or("error: bad flags"))
}

/// What the page writes that belongs to the crate, as JSON (the fields of `Facts`): the flags it puts
/// into the command lines it shows, the chapter's tokens and the colours of the book's heat maps.
/// The page asks for it once, before it draws any panel.
#[wasm_bindgen]
pub fn page_facts() -> String {
    let cli = Cli::command();
    let generate = cli
        .find_subcommand("generate")
        .expect("s5_gpt has a generate command");
    let facts = Facts {
        tokens: TOKENS,
        journey: JOURNEY,
        blues: BLUES.map(|(r, g, b)| [r, g, b]),
        masked: MASKED,
        mask_value: format!("{MASK_VALUE:e}"),
        stage_flags: flags_of(&SeedArgs::command()),
        example: cli.get_name().to_string(),
        train_flags: flags_of(&cli),
        generate: generate.get_name().to_string(),
        generate_flags: flags_of(generate),
        checkpoint: format!("{PLAY_DIR}/{CHECKPOINT_DIR}"),
        flash_flags: flags_of(&FlashCli::command()),
        flash_max_context: MAX_CONTEXT,
        kv_example: VariantsCli::command().get_name().to_string(),
        kv_flags: flags_of(&KvArgs::augment_args(clap::Command::new("s7_variants"))),
        variants_flags: flags_of(&VariantsCli::command()),
        variants: (variants().iter())
            .map(|(name, arch)| VariantName {
                name,
                short: short_name(arch),
            })
            .collect(),
        weights_prompt: first_blocks::PROMPT,
    };
    json(&facts)
}

/// What [`page_facts`] returns.
#[derive(Serialize)]
struct Facts {
    /// Stage 1's six tokens, the query knob's choices.
    tokens: [&'static str; 6],
    /// The chapter's query token.
    journey: usize,
    /// The stops of the heat maps' colour scale (red, green, blue), from white to deep blue.
    blues: [[u8; 3]; 5],
    /// The fill of a cell the causal mask removed.
    masked: &'static str,
    /// The tutorial's `--mask-value`, as the page writes it.
    mask_value: String,
    /// The flags of stages 1-4 (`--seed`), by clap's id.
    stage_flags: BTreeMap<String, Flag>,
    /// Stage 5's example, and its flags without a subcommand (the chapter's run), by clap's id.
    example: String,
    train_flags: BTreeMap<String, Flag>,
    /// Its subcommand that samples a checkpoint, and that subcommand's flags.
    generate: String,
    generate_flags: BTreeMap<String, Flag>,
    /// The trained model's folder, from the crate's root.
    checkpoint: String,
    /// Stage 6's flags (`--scores`, `--context`, `--tile`, …), by clap's id, and the longest
    /// `--context` its walk takes.
    flash_flags: BTreeMap<String, Flag>,
    flash_max_context: usize,
    /// Stage 7's example, and its KV-memory calculator's flags (`--kv`, `--layers`, `--heads`,
    /// `--kv-heads`, …) by clap's id, with their defaults.
    kv_example: String,
    kv_flags: BTreeMap<String, Flag>,
    /// Stage 7's example's own flags (`--weights`, `--variant`, …) by clap's id, its variants in
    /// the chapter's order, and the prompt of the chapter's panel of their first blocks.
    variants_flags: BTreeMap<String, Flag>,
    variants: Vec<VariantName>,
    weights_prompt: &'static str,
}

/// A variant of stage 7: its name in the chapter, and its `--variant` name.
#[derive(Serialize)]
struct VariantName {
    name: &'static str,
    short: &'static str,
}

/// A flag as the command line spells it, whether it takes a value (else it is a switch), and its
/// default value if it has one.
#[derive(Serialize)]
struct Flag {
    flag: String,
    takes_value: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    default: Option<String>,
}

/// The long flags of `command`, by clap's id (`"layer_norm"`: `--layer-norm`).
fn flags_of(command: &clap::Command) -> BTreeMap<String, Flag> {
    (command.get_arguments())
        .filter_map(|arg| {
            let flag = format!("--{}", arg.get_long()?);
            let takes_values = arg.get_action().takes_values();
            let default = (arg.get_default_values().first())
                .filter(|_| takes_values)
                .map(|value| value.to_string_lossy().into_owned());
            let flag = Flag {
                flag,
                takes_value: takes_values,
                default,
            };
            Some((arg.get_id().to_string(), flag))
        })
        .collect()
}

/// A stage's `run`: its chapter's outputs, in order, for the seeds given.
type Run = fn(&mut Vec<u8>, BookSeeds) -> Result<(), Error>;

/// The stage called `stage` (its module, example and chapter name) and its `run`.
fn stage_run(stage: &str) -> Result<(&'static str, Run), JsError> {
    let found: (&'static str, Run) = match stage {
        "s1_simple" => ("s1_simple", s1_simple::run),
        "s2_trainable" => ("s2_trainable", s2_trainable::run),
        "s3_causal" => ("s3_causal", s3_causal::run),
        "s4_multihead" => ("s4_multihead", s4_multihead::run),
        _ => {
            let known = "s1_simple, s2_trainable, s3_causal or s4_multihead";
            return Err(JsError::new(&format!(
                "error: there is no stage {stage:?}; use {known}"
            )));
        }
    };
    Ok(found)
}

/// The seeds of `--seed <seed>` for example `name`, read by the example's own parser; `""` is the
/// book's seeds (no `--seed`).
fn seeds(name: &'static str, seed: &str) -> Result<BookSeeds, JsError> {
    if seed.is_empty() {
        return Ok(BookSeeds::default());
    }
    // `--seed=…` keeps a reader's text one value, even when it starts with `-`.
    let args = [name.to_string(), format!("--seed={seed}")];
    SeedArgs::try_parse_for(name, "", args).map_err(flag_error)
}

/// Exactly what `cargo run --example <stage> -- --seed <seed>` prints on stdout (without `--seed`
/// when `seed` is `""`). `stage` is `s1_simple`, `s2_trainable`, `s3_causal` or `s4_multihead`.
#[wasm_bindgen]
pub fn stage_output(stage: &str, seed: &str) -> Result<String, JsError> {
    let (name, run) = stage_run(stage)?;
    let seeds = seeds(name, seed)?;
    let mut out = Vec::new();
    run(&mut out, seeds).map_err(fail)?;
    Ok(String::from_utf8(out).expect("the stages print UTF-8"))
}

/// Stage 6 as `cargo run --example s6_flash -- --scores <scores> --context <context> --tile <tile>`
/// runs it, as JSON: `{"flags": […], "output": "…", "steps": [[…], …], "length": {…}}`. Each of
/// `scores`, `context` and `tile` is the text of its field, read by the example's own parser and
/// checks; `""` leaves its flag out (the chapter's "journey", T = 256, tiles of 64). `flags` is
/// the command line's words after `--`, `output` its stdout byte for byte, `steps` the walk's cells
/// as printed, one list of lines per step, and `length` the comparison at length as numbers: T,
/// Br, Bc, the tiled and exact forms' differences from stage 4, and the bytes naive and tiled
/// attention hold there.
#[wasm_bindgen]
pub fn s6_output(scores: &str, context: &str, tile: &str) -> Result<String, JsError> {
    let fields = [
        ("--scores", scores),
        ("--context", context),
        ("--tile", tile),
    ];
    let flags: Vec<String> = (fields.iter())
        .filter(|(_, text)| !text.is_empty())
        .flat_map(|(flag, text)| [flag.to_string(), text.to_string()])
        .collect();
    // `--flag=…` keeps a reader's text one value, even when it starts with `-`.
    let args = (fields.iter())
        .filter(|(_, text)| !text.is_empty())
        .map(|(flag, text)| format!("{flag}={text}"));
    let cli = FlashCli::try_parse_from(std::iter::once("s6_flash".to_string()).chain(args))
        .map_err(flag_error)?;
    let mut out = Vec::new();
    let report = cli.walk(&mut out).map_err(fail)?;
    let value = FlashRun {
        flags,
        output: String::from_utf8(out).expect("the stage prints UTF-8"),
        steps: report.steps,
        length: FlashLength::new(&report.at_length),
    };
    Ok(json(&value))
}

/// What [`s6_output`] returns.
#[derive(Serialize)]
struct FlashRun {
    flags: Vec<String>,
    output: String,
    steps: Vec<Vec<String>>,
    length: FlashLength,
}

/// The comparison at length, as numbers.
#[derive(Serialize)]
struct FlashLength {
    t: usize,
    br: usize,
    bc: usize,
    tiled: FlashDifference,
    exact: FlashDifference,
    naive_bytes: usize,
    tiled_bytes: usize,
}

impl FlashLength {
    fn new(at: &AtLength) -> Self {
        FlashLength {
            t: at.length.t,
            br: at.length.tiles.br,
            bc: at.length.tiles.bc,
            tiled: FlashDifference::new(at.tiled),
            exact: FlashDifference::new(at.exact),
            naive_bytes: at.naive_bytes,
            tiled_bytes: at.tiled_bytes,
        }
    }
}

/// A [`Difference`]: the largest in ULPs, absolutely, and in ULPs of the largest output.
#[derive(Serialize)]
struct FlashDifference {
    ulps: u64,
    absolute: f32,
    scaled_ulps: f32,
}

impl FlashDifference {
    fn new(d: Difference) -> Self {
        FlashDifference {
            ulps: d.ulps,
            absolute: d.absolute,
            scaled_ulps: d.scaled_ulps,
        }
    }
}

/// Stage 7's KV-memory calculator as `cargo run --example s7_variants -- --kv <flags>` runs it, as
/// JSON: `{"flags": […], "output": "…"}`. `flags` is the rest of the command line (`--layers 48
/// --kv-heads 8 …`), split at whitespace and read and checked by the example's own parser; the
/// reply's `flags` are the command line's words after `--` (`--kv` first), `output` its stdout byte
/// for byte.
#[wasm_bindgen]
pub fn s7_kv(flags: &str) -> Result<String, JsError> {
    let kv = KvArgs::augment_args(clap::Command::new("s7_variants"));
    let kv = kv.get_arguments().find(|a| a.get_id() == "kv");
    let kv = format!("--{}", kv.and_then(|a| a.get_long()).unwrap_or("kv"));
    let words: Vec<String> = std::iter::once(kv)
        .chain(flags.split_whitespace().map(str::to_string))
        .collect();
    let name = VariantsCli::command().get_name().to_string();
    let cli =
        VariantsCli::try_parse_from(std::iter::once(&name).chain(&words)).map_err(flag_error)?;
    let mut out = Vec::new();
    cli.run(&mut out).map_err(fail)?;
    let value = KvRun {
        flags: words,
        output: String::from_utf8(out).expect("the calculator prints UTF-8"),
    };
    Ok(json(&value))
}

/// Stage 7's first blocks as `cargo run --example s7_variants -- --weights <prompt> --variant
/// <variant>` prints them, as JSON: `{"flags": […], "output": "…", "labels": [T characters],
/// "variants": [{"name": "GQA, K = 2", "short": "gqa", "mask": [[bool]], "heads": [[[w]]]}, …]}`.
/// Both values are read and checked by the example's own parser; `""` for `variant` leaves
/// `--variant` out (every variant). `flags` is the command line's words after `--`, `output` its
/// stdout byte for byte, and each variant's `mask` (T, T) and `heads` (H, T, T) the numbers it
/// prints.
#[wasm_bindgen]
pub fn s7_weights(prompt: &str, variant: &str) -> Result<String, JsError> {
    let flags = flags_of(&VariantsCli::command());
    let (weights, variant_flag) = (&flags["weights"].flag, &flags["variant"].flag);
    let mut words = vec![weights.clone(), prompt.to_string()];
    // `--flag=…` keeps a reader's text one value, even when it starts with `-`.
    let mut args = vec![format!("{weights}={prompt}")];
    if !variant.is_empty() {
        words.extend([variant_flag.clone(), variant.to_string()]);
        args.push(format!("{variant_flag}={variant}"));
    }
    let name = VariantsCli::command().get_name().to_string();
    let cli = VariantsCli::try_parse_from(std::iter::once(name).chain(args)).map_err(flag_error)?;
    let mut out = Vec::new();
    let blocks = cli.first_blocks(&mut out).map_err(fail)?;
    let value = WeightsRun {
        flags: words,
        output: String::from_utf8(out).expect("the example prints UTF-8"),
        labels: prompt.chars().map(String::from).collect(),
        variants: (blocks.into_iter())
            .map(|(name, short, block)| VariantWeights {
                name,
                short,
                mask: block.mask,
                heads: block.heads,
            })
            .collect(),
    };
    Ok(json(&value))
}

/// What [`s7_weights`] returns.
#[derive(Serialize)]
struct WeightsRun {
    flags: Vec<String>,
    output: String,
    labels: Vec<String>,
    variants: Vec<VariantWeights>,
}

/// One variant's first block, in [`s7_weights`]'s answer.
#[derive(Serialize)]
struct VariantWeights {
    name: &'static str,
    short: &'static str,
    mask: Vec<Vec<bool>>,
    heads: Vec<Vec<Vec<f32>>>,
}

/// What [`s7_kv`] returns.
#[derive(Serialize)]
struct KvRun {
    flags: Vec<String>,
    output: String,
}

/// Stage 1's §3.3.1 (cells #2–#7) for query token `query`, 0 to 5 in "Your journey starts with one
/// step"; 1 ("journey") is the chapter's, and prints the start of `stage_output("s1_simple", "")`.
#[wasm_bindgen]
pub fn s1_query(query: usize) -> Result<String, JsError> {
    let mut out = Vec::new();
    s1_simple::run_query(&mut out, query).map_err(fail)?;
    Ok(String::from_utf8(out).expect("the stage prints UTF-8"))
}

/// `knob` as a number, or `default` if it is `""`.
fn knob_or<T: std::str::FromStr>(knob: &str, default: T, what: &str) -> Result<T, JsError> {
    if knob.is_empty() {
        return Ok(default);
    }
    knob.parse()
        .map_err(|_| JsError::new(&format!("error: {what} {knob:?} is not a number")))
}

/// The numbers behind a stage's heat map, as JSON:
/// `{"labels": [6 tokens], "causal": bool, "maps": [{"head": h, "weights": [[…], …]}, …]}`,
/// each map (T, T), row i holding token i's weights; `head` (from 0) only for stage 4's maps. `knob` (`""` for the chapter's) is stage 1's
/// query token (0–5; the JSON then also holds `"query"`), stage 3's dropout rate (0 to 1; 0 is the
/// chapter's figure, 0.5 its `nn.Dropout(0.5)`) or stage 4's number of heads (the chapter's 2; it
/// must divide d_out = 2). Stage 2 draws no heat map. `seed` is read as `stage_output` reads it.
#[wasm_bindgen]
pub fn stage_weights(stage: &str, seed: &str, knob: &str) -> Result<String, JsError> {
    let (name, _) = stage_run(stage)?;
    let seeds = seeds(name, seed)?;
    let one = |weights: ndarray::Array2<f32>| vec![Map::new(None, weights.view())];
    let (causal, query, maps) = match name {
        "s1_simple" => {
            let query = knob_or(knob, JOURNEY, "the query token")?;
            s1_simple::check_query(query).map_err(fail)?;
            (false, Some(query), one(figures::s1_weights()))
        }
        "s3_causal" => {
            let p: f64 = knob_or(knob, 0.0, "the dropout rate")?;
            (
                true,
                None,
                one(figures::s3_weights(seeds, p).map_err(fail)?),
            )
        }
        "s4_multihead" => {
            let heads = knob_or(knob, 2, "the number of heads")?;
            let weights = figures::s4_weights(seeds, heads).map_err(fail)?; // (H, T, T)
            let maps = (weights.outer_iter().enumerate())
                .map(|(h, w)| Map::new(Some(h), w))
                .collect();
            (true, None, maps)
        }
        _ => return Err(JsError::new("error: stage 2 draws no heat map in the book")),
    };
    let labels = TOKENS;
    let value = HeatMaps {
        labels,
        causal,
        query,
        maps,
    };
    Ok(json(&value))
}

/// What [`stage_weights`] returns. Each float32 is written as the shortest text that reads back as
/// it.
#[derive(Serialize)]
struct HeatMaps {
    /// The tokens along both axes.
    labels: [&'static str; 6],
    /// Whether the future (above the diagonal) is masked.
    causal: bool,
    /// Stage 1's query token.
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<usize>,
    maps: Vec<Map>,
}

/// One heat map: its head, if it is one of several, and its (T, T) weights, row by row.
#[derive(Serialize)]
struct Map {
    /// The head it belongs to, from 0; the page titles it in the edition's language.
    #[serde(skip_serializing_if = "Option::is_none")]
    head: Option<usize>,
    weights: Vec<Vec<f32>>,
}

impl Map {
    fn new(head: Option<usize>, weights: ndarray::ArrayView2<f32>) -> Map {
        let weights = weights.outer_iter().map(|row| row.to_vec()).collect();
        Map { head, weights }
    }
}

/// The page's training flags: `s5_gpt`'s model and training flags, as its command line declares
/// them.
#[derive(Debug, Parser)]
#[command(name = "s5_gpt")]
struct TrainFlags {
    #[command(flatten)]
    recipe: RecipeArgs,
}

/// Stage 5's trainer in the page: the chapter's training run, a few steps per call, on the corpus
/// the page loaded.
#[wasm_bindgen]
pub struct Trainer {
    trainer: LessonTrainer,
    prompt: String,
}

#[wasm_bindgen]
impl Trainer {
    /// The chapter's trainer with `flags`, a fragment of `s5_gpt`'s command line split at
    /// whitespace: its model and training flags (`--seed N --qkv --heads N --residual
    /// --layer-norm --dropout P --mask-value V`, also `--epochs`, `--batch-size`,
    /// `--context-size`, `--embedding-size`, `--blocks`, `--lr`), read and checked as `s5_gpt`
    /// reads and checks them. `corpus` is the text (Tiny Shakespeare).
    #[wasm_bindgen(constructor)]
    pub fn new(flags: &str, corpus: &str) -> Result<Trainer, JsError> {
        let args = std::iter::once("s5_gpt").chain(flags.split_whitespace());
        let flags = TrainFlags::try_parse_from(args).map_err(flag_error)?;
        let cfg = Config {
            recipe: flags.recipe.recipe(),
            ..Config::default()
        };
        cfg.check().map_err(fail)?;
        let (b, t) = (cfg.recipe.batch_size, cfg.recipe.context_size);
        let dataset = CharDataset::from_corpus(corpus, Path::new(DATA_FILE), b, t).map_err(fail)?;
        Ok(Trainer {
            trainer: cfg.trainer_on(dataset),
            prompt: cfg.prompt,
        })
    }

    /// The first line of the `--loss-csv` file, `step,lr,loss` and a line break.
    pub fn header() -> String {
        LOSS_CSV_HEADER.to_string()
    }

    /// Trains `n` more steps (fewer if the run's epochs end first) and returns them as JSON,
    /// `{"lines": "…", "rows": [{"step": s, "lr": r, "loss": l}, …]}`: their lines of the
    /// `--loss-csv` file, each ending in a line break, and the same numbers, one row per line.
    pub fn run(&mut self, n: usize) -> Result<String, JsError> {
        let mut steps = Steps::default();
        let stop = self.trainer.losses.len() + n;
        if n == 0 {
            return Ok(json(&steps));
        }
        let trainer = &mut self.trainer;
        on_every_thread(|| {
            trainer.train(|t| {
                let s = t.losses.len() - 1;
                steps.push(s, t.lrs[s], t.losses[s]);
                if s + 1 < stop {
                    std::ops::ControlFlow::Continue(())
                } else {
                    std::ops::ControlFlow::Break(())
                }
            })
        })
        .map_err(fail)?;
        Ok(json(&steps))
    }

    /// The mean loss over the test batches now, as the chapter's run prints it after `loss: `
    /// (the lesson's [`test`](LessonTrainer::test), without dropout).
    pub fn test_loss(&mut self) -> String {
        on_every_thread(|| self.trainer.test(|| ()).mean().to_string())
    }

    /// Steps trained so far.
    pub fn steps(&self) -> usize {
        self.trainer.losses.len()
    }

    /// Steps in the whole run (the epochs' batches).
    pub fn total_steps(&self) -> usize {
        self.trainer.steps
    }

    /// "ROMEO:" and `length` characters sampled from the current weights as the chapter samples:
    /// from the generator as it stands after the initial weights. So after N steps it is the
    /// sample that `s5_gpt --max-steps N --sample-len <length>` prints, and the generator itself
    /// is left as it was.
    pub fn sample(&mut self, length: usize) -> Result<String, JsError> {
        SAMPLE_LEN.check(length).map_err(fail)?;
        let t = &mut self.trainer;
        let mut rng = t.rng.clone();
        let (tape, model, dataset) = (&mut t.tape, &t.model, &t.dataset);
        let sampling = Sampling::default();
        generate(
            tape,
            model,
            dataset,
            &self.prompt,
            length,
            &mut rng,
            sampling,
        )
        .map_err(fail)
    }
}

/// Steps trained by one [`Trainer::run`]: the loss CSV's lines as the page shows them, and their
/// numbers, which it draws. Each float is written as the shortest text that reads back as it, as
/// the CSV writes it.
#[derive(Default, Serialize)]
struct Steps {
    lines: String,
    rows: Vec<LossRow>,
}

/// One line of the loss CSV, `step,lr,loss`.
#[derive(Serialize)]
struct LossRow {
    step: usize,
    lr: f64,
    loss: f32,
}

impl Steps {
    fn push(&mut self, step: usize, lr: f64, loss: f32) {
        self.lines.push_str(&loss_csv_line(step, lr, loss));
        self.rows.push(LossRow { step, lr, loss });
    }
}

/// `value` as JSON, the form of every structured answer.
fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("numbers serialise")
}

/// `s5_gpt generate --checkpoint DIR --prompt=<prompt>` with each `flag=value` whose value is not
/// `""`, and each switch of `switches` (`--probs`, `--no-cache`), read by the command line's own
/// parser.
fn generate_args(
    prompt: &str,
    flags: &[(&str, &str)],
    switches: &[&str],
) -> Result<GenerateArgs, JsError> {
    let mut args = vec!["s5_gpt".to_string(), "generate".to_string()];
    args.extend(["--checkpoint".to_string(), CHECKPOINT_DIR.to_string()]);
    // `--prompt=…` keeps a reader's text one value, even when it starts with `-`.
    args.push(format!("--prompt={prompt}"));
    for &(flag, value) in flags {
        if !value.is_empty() {
            args.push(format!("{flag}={value}"));
        }
    }
    args.extend(switches.iter().map(|s| s.to_string()));
    let cli = Cli::try_parse_args(args).map_err(flag_error)?;
    let Some(Command::Generate(args)) = cli.command else {
        unreachable!("the arguments start with generate")
    };
    Ok(args)
}

/// The trained model of the chapter, read from its checkpoint's files.
#[wasm_bindgen]
pub struct Sampler {
    saved: Checkpoint,
}

#[wasm_bindgen]
impl Sampler {
    /// The checkpoint whose `config.json` is `config_json` and `model.safetensors` is `weights`,
    /// checked as `s5_gpt generate --checkpoint` checks a folder (format, checksums, names and
    /// shapes).
    #[wasm_bindgen(constructor)]
    pub fn new(config_json: &str, weights: &[u8]) -> Result<Sampler, JsError> {
        let dir = Path::new(CHECKPOINT_DIR);
        let saved = checkpoint::from_bytes(dir, config_json.as_bytes(), weights).map_err(fail)?;
        Ok(Sampler { saved })
    }

    /// Exactly what `s5_gpt generate --checkpoint DIR --prompt <prompt> --temperature <t> --top-k
    /// <k> --seed <s> --sample-len <length>` prints on stdout, with `--no-cache` if `no_cache`
    /// (the same text, each window computed again). Each value is the text of a field, read by
    /// the command line's own parser; `""` leaves that flag out (its default: temperature 1, all
    /// characters, seed 42, 512 characters), except the prompt, which is always given.
    pub fn generate(
        &self,
        prompt: &str,
        temperature: &str,
        top_k: &str,
        seed: &str,
        length: &str,
        no_cache: bool,
    ) -> Result<String, JsError> {
        let flags = [
            ("--temperature", temperature),
            ("--top-k", top_k),
            ("--seed", seed),
            ("--sample-len", length),
        ];
        let switches: &[&str] = if no_cache { &["--no-cache"] } else { &[] };
        let args = generate_args(prompt, &flags, switches)?;
        let text = sample(&self.saved, &args).map_err(fail)?;
        Ok(format!("{text}\n"))
    }

    /// The steps the checkpoint was trained for.
    pub fn steps(&self) -> usize {
        self.saved.config.step
    }

    /// The distribution of the character after the prompt, a line per character that can be
    /// drawn, likeliest first, as JSON: `{"text": "…", "rows": [{"label": "'e'", "p": 0.12,
    /// "printed": "0.12"}, …]}`. `text` is exactly what `s5_gpt generate --checkpoint DIR --prompt
    /// <prompt> --temperature <t> --top-k <k> --probs` prints on stdout; each row is one of its
    /// lines: the character as it is quoted there, its probability, and that probability as
    /// printed. The values are read as [`generate`](Sampler::generate) reads them.
    pub fn probs(&self, prompt: &str, temperature: &str, top_k: &str) -> Result<String, JsError> {
        let flags = [("--temperature", temperature), ("--top-k", top_k)];
        let args = generate_args(prompt, &flags, &["--probs"])?;
        let next = next_chars(&self.saved, &args).map_err(fail)?;
        let rows = (next.iter())
            .map(|&(c, p)| NextChar {
                label: format!("{c:?}"),
                p,
                printed: p.to_string(),
            })
            .collect();
        let text = format!("{}\n", probs_lines(&next));
        Ok(json(&Probs { text, rows }))
    }

    /// The attention weights of `prompt` (its last T characters if it is longer) as JSON,
    /// `{"labels": [T characters], "mask": [row][column], "maps": [block][head][row][column]}`,
    /// row i holding character i's weights over the characters 0..=i (only the W newest of them
    /// with a `--window W`, as `mask` says): the model's softmax nodes, as the chapter "What the
    /// tutorial's model leaves out" draws them.
    pub fn attention(&self, prompt: &str) -> Result<String, JsError> {
        let vocabulary = CharDataset::from_vocab(self.saved.config.vocab());
        let ids = vocabulary.encode(prompt).map_err(fail)?;
        if ids.is_empty() {
            return Err(fail(attention_from_scratch::s5_gpt::GptError::EmptyPrompt));
        }
        let mut tape = Tape::with_backend(Config::default().backend());
        let model = self.saved.model(&mut tape, &mut NumpyRandom::seed(0));
        let window = &ids[ids.len().saturating_sub(model.config.context_size)..];
        let maps =
            attention_from_scratch::s5_gpt::beyond::attention_maps(&model, &mut tape, window); // [block][head][T·T]
        let t = window.len();
        let maps: Vec<Vec<Vec<&[f32]>>> = maps
            .iter()
            .map(|heads| heads.iter().map(|w| w.chunks(t).collect()).collect())
            .collect();
        let labels = (vocabulary.decode(window).chars())
            .map(String::from)
            .collect();
        let mask = visible(t, model.config.architecture.window);
        Ok(json(&Attention { labels, mask, maps }))
    }
}

/// What [`Sampler::probs`] returns.
#[derive(Serialize)]
struct Probs {
    text: String,
    rows: Vec<NextChar>,
}

/// One line of `--probs`, in parts.
#[derive(Serialize)]
struct NextChar {
    label: String,
    p: f32,
    printed: String,
}

/// What [`Sampler::attention`] returns: the window's characters, and its maps.
#[derive(Serialize)]
struct Attention<'a> {
    labels: Vec<String>,
    mask: Vec<Vec<bool>>,
    maps: Vec<Vec<Vec<&'a [f32]>>>,
}

/// Mismatches between the fast layer's fused multiply-add on WebAssembly (the kernel in use, see
/// [`kernel`]) and a correctly rounded `fmaf`, on `n` random triples (from `seed`) after the edge
/// cases: 0 when the page computes the lesson's bits. See [`wasm_fma::self_check`].
#[wasm_bindgen]
pub fn fma_self_check(n: u32, seed: u32) -> u32 {
    wasm_fma::self_check(n, seed)
}

/// Chooses the product kernel once, at start-up: the fused lanes if `fused` is true, this build
/// has them (relaxed SIMD) and the engine rounds them once, else the exact float64 lanes. Returns
/// [`kernel`]'s name. Either gives the lesson's bits; the choice only changes the speed.
#[wasm_bindgen]
pub fn choose_kernel(fused: bool) -> String {
    wasm_fma::choose_kernel(fused).name().to_string()
}

/// The product kernel in use: `"fused"` (`f32x4.relaxed_madd`, rounded once) or `"f64"` (the
/// float64 lanes, exact on every engine).
#[wasm_bindgen]
pub fn kernel() -> String {
    wasm_fma::kernel().name().to_string()
}

/// Runs `f` with the calling thread and every helper the page started (none outside the shared
/// memory build): `s5_gpt --threads N`, whose bits are the same for every N.
fn on_every_thread<R>(f: impl FnOnce() -> R) -> R {
    team::with_team(0, f).expect("the page's team starts no thread of its own")
}

/// Makes the calling Web Worker one of the training team's helpers (the shared memory build, where
/// the worker instantiated this module with the trainer's memory). It never returns: the worker
/// takes pieces of each step until the page closes it.
#[cfg(target_arch = "wasm32")]
#[wasm_bindgen]
pub fn serve_as_helper() {
    team::serve()
}

/// The threads a training step is shared among: the calling thread and the helpers serving so far.
#[wasm_bindgen]
pub fn threads() -> usize {
    on_every_thread(team::threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `cargo run --example s7_variants` prints for the command line `argv`.
    fn native_s7<S: AsRef<std::ffi::OsStr> + Clone + Into<std::ffi::OsString>>(
        argv: &[S],
    ) -> String {
        let mut out = Vec::new();
        VariantsCli::try_parse_from(argv)
            .unwrap()
            .run(&mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The flags the panels look up by clap's id (book/theme/play-train.js, play-sample.js,
    /// play-stage.js) are there, so that renaming a field of the command line fails here rather
    /// than in the browser.
    #[test]
    fn page_facts_name_every_flag_the_panels_write() {
        let facts: serde_json::Value = serde_json::from_str(&page_facts()).unwrap();
        let flag = |group: &str, id: &str| facts[group][id]["flag"].as_str().map(str::to_string);
        assert_eq!(flag("stage_flags", "seed").as_deref(), Some("--seed"));
        for id in [
            "seed",
            "qkv",
            "heads",
            "residual",
            "layer_norm",
            "dropout",
            "mask_value",
            "max_steps",
            "loss_csv",
        ] {
            assert!(flag("train_flags", id).is_some(), "no training flag {id}");
        }
        for id in [
            "checkpoint",
            "prompt",
            "seed",
            "temperature",
            "top_k",
            "sample_len",
            "probs",
        ] {
            assert!(
                flag("generate_flags", id).is_some(),
                "no generate flag {id}"
            );
        }
        assert_eq!(facts["train_flags"]["seed"]["default"], "42");
        assert_eq!(facts["generate_flags"]["prompt"]["default"], "ROMEO:");
        assert_eq!(facts["generate_flags"]["temperature"]["default"], "1");
        assert_eq!(facts["mask_value"], "-1e9");
        assert_eq!(facts["tokens"][JOURNEY], "journey");
        for id in ["scores", "context", "tile"] {
            assert!(flag("flash_flags", id).is_some(), "no stage 6 flag {id}");
        }
        assert_eq!(facts["flash_max_context"], 4096);
        assert_eq!(facts["kv_example"], "s7_variants");
        for id in [
            "kv", "layers", "heads", "kv_heads", "head_dim", "tokens", "window", "latent", "bytes",
        ] {
            assert!(flag("kv_flags", id).is_some(), "no stage 7 flag {id}");
        }
        assert_eq!(facts["kv_flags"]["kv_heads"]["default"], "8");
        assert!(facts["kv_flags"]["window"].get("default").is_none());
        for (id, takes_value) in [("kv_heads", true), ("window", true), ("rope", false)] {
            assert_eq!(facts["train_flags"][id]["takes_value"], takes_value, "{id}");
        }
        assert!(flag("generate_flags", "no_cache").is_some());
        for id in ["weights", "variant"] {
            assert!(flag("variants_flags", id).is_some(), "no stage 7 flag {id}");
        }
        assert_eq!(facts["variants"][0]["short"], "full");
        assert_eq!(
            facts["variants"].as_array().unwrap().len(),
            variants().len()
        );
    }

    /// Stage 7's first blocks print what the example prints for the same prompt and variant, and
    /// give the numbers it prints (its errors, a `JsError`, exist only in WebAssembly: the browser
    /// test compares them with the command line's).
    #[test]
    fn s7_weights_is_the_examples_first_blocks() {
        for (prompt, variant) in [(first_blocks::PROMPT, ""), ("Deny thy father", "swa")] {
            let run: serde_json::Value =
                serde_json::from_str(&s7_weights(prompt, variant).unwrap()).unwrap();
            let mut argv = vec!["s7_variants".to_string(), format!("--weights={prompt}")];
            if !variant.is_empty() {
                argv.push(format!("--variant={variant}"));
            }
            assert_eq!(run["output"], native_s7(&argv));
            assert_eq!(run["flags"][1], prompt);
            let t = prompt.chars().count();
            let shown = run["variants"].as_array().unwrap();
            assert_eq!(
                shown.len(),
                if variant.is_empty() {
                    variants().len()
                } else {
                    1
                }
            );
            for v in shown {
                assert_eq!(v["mask"].as_array().unwrap().len(), t);
                assert_eq!(v["heads"][0][t - 1].as_array().unwrap().len(), t);
            }
        }
    }

    /// Stage 6's panel prints what the example prints for the same flags, and refuses what it
    /// refuses with its line.
    #[test]
    fn s6_output_is_the_examples_walk() {
        let run: serde_json::Value =
            serde_json::from_str(&s6_output("1,-2,0.5", "100", "48").unwrap()).unwrap();
        let argv = [
            "s6_flash",
            "--scores",
            "1,-2,0.5",
            "--context",
            "100",
            "--tile",
            "48",
        ];
        let mut native = Vec::new();
        FlashCli::try_parse_from(argv)
            .unwrap()
            .walk(&mut native)
            .unwrap();
        assert_eq!(run["output"], String::from_utf8(native).unwrap());
        assert_eq!(run["flags"], serde_json::json!(argv[1..]));
        assert_eq!(run["steps"].as_array().unwrap().len(), 2);
        assert_eq!(run["steps"][1][0], "[step 2] key 2");
        assert_eq!(run["length"]["naive_bytes"], 80000);
        assert_eq!(run["length"]["tiled_bytes"], 9600);
        let chapter: serde_json::Value =
            serde_json::from_str(&s6_output("", "", "").unwrap()).unwrap();
        let mut book = Vec::new();
        attention_from_scratch::s6_flash::run(&mut book, BookSeeds::default()).unwrap();
        assert_eq!(chapter["output"], String::from_utf8(book).unwrap());
        assert_eq!(chapter["flags"], serde_json::json!([]));
    }

    /// Stage 7's calculator prints what the example prints for the same flags, and refuses what it
    /// refuses with its line.
    #[test]
    fn s7_kv_is_the_examples_calculator() {
        for flags in [
            "",
            "--kv-heads 32",
            "--layers 48 --heads 24 --kv-heads 24 --latent 1024 --tokens 8192",
            "  --window   4096 ",
        ] {
            let run: serde_json::Value = serde_json::from_str(&s7_kv(flags).unwrap()).unwrap();
            let argv: Vec<&str> = ["s7_variants", "--kv"]
                .into_iter()
                .chain(flags.split_whitespace())
                .collect();
            assert_eq!(run["output"], native_s7(&argv));
            assert_eq!(run["flags"], serde_json::json!(argv[1..]));
        }
        let chapter: serde_json::Value = serde_json::from_str(&s7_kv("").unwrap()).unwrap();
        assert_eq!(
            chapter["output"],
            "per token: 131,072 bytes (2 × 8 K/V heads × 128 values × 32 layers × 2 bytes)\n\
             tokens kept: 32,768 of 32,768\n\
             the cache: 4,294,967,296 bytes, 4.29 GB\n"
        );
    }
}
