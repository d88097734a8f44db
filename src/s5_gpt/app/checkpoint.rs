//! Tool layer. Checkpoints: a trained model and its training state in a folder that Python can read
//! too.
//!
//! `s5_gpt train --save DIR` writes three files:
//!
//! | file | holds |
//! |---|---|
//! | `model.safetensors` | the weights, float32, named as in [`crate::s5_gpt::Gpt::named_parameters`]: `tok_emb.weight` (V, C), `pos_emb.weight` (T, C), `blocks.{i}.attn.out.weight` (C, C), `blocks.{i}.ff.in.weight` (4C, C), `blocks.{i}.ff.out.weight` (C, 4C), `head.weight` (V, C), and a `.bias` for each Linear |
//! | `optimizer.safetensors` | AdamW's moments of every weight (`{name}.exp_avg`, `{name}.exp_avg_sq`), and the loss (`train.loss`) and learning rate (`train.lr`) of every step so far |
//! | `config.json` | the sizes, the training settings, the vocabulary, the step, and the sha256 of the two other files |
//!
//! Both tensor files also record the step in their metadata (`"step": "2000"`). AdamW's own step
//! count is always the training step, since every step updates once.
//!
//! In Python, `safetensors.numpy.load_file("DIR/model.safetensors")["head.weight"]` is a (65, 64)
//! float32 array. A weight's rows are its *outputs*, as in the tutorial's `Linear` (and PyTorch's
//! `nn.Linear`).
//!
//! Each file is written beside its place and then renamed into it, so a crash or Ctrl-C never
//! leaves half a file, and `config.json` goes last: its checksums tell a complete checkpoint from a
//! mix of two saves.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde::{Deserialize, Serialize};

use super::config::{MAX_VOCABULARY, check_recipe};
use super::files::{sha256_hex, write_atomic};
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::app::error::ToolError;
#[cfg(test)]
use crate::s5_gpt::beyond::Architecture;
use crate::s5_gpt::beyond::{Gpt, GptConfig};
use crate::s5_gpt::latent::rotary_width;
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::tensor::Tensor;
use crate::s5_gpt::train::{MAX_GRAD_NORM, Recipe, Trainer, WARMUP_STEPS};

pub const MODEL_FILE: &str = "model.safetensors";
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
pub const CONFIG_FILE: &str = "config.json";
/// The `format` of `config.json`; a later layout would get a new one.
pub const FORMAT: &str = "attention-from-scratch s5_gpt checkpoint 1";

/// `config.json`: everything needed to rebuild the model and continue its training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedConfig {
    pub format: String,
    /// The characters of the vocabulary, in token order.
    pub vocab: String,
    pub vocab_size: usize,
    /// The sizes and the training recipe, as fields of this same object.
    #[serde(flatten)]
    pub recipe: Recipe,
    pub warmup_steps: usize,
    pub max_grad_norm: f64,
    /// Steps trained so far, and in the whole run.
    pub step: usize,
    pub total_steps: usize,
    /// The sha256 of each tensor file, by file name.
    pub sha256: BTreeMap<String, String>,
}

impl SavedConfig {
    pub fn gpt_config(&self) -> GptConfig {
        GptConfig {
            vocab_size: self.vocab_size,
            context_size: self.recipe.context_size,
            embedding_size: self.recipe.embedding_size,
            blocks: self.recipe.blocks,
            architecture: self.recipe.architecture,
        }
    }

    pub fn vocab(&self) -> Vec<char> {
        self.vocab.chars().collect()
    }

    /// What cannot hold in a checkpoint this crate wrote: a size out of range, another warm-up or
    /// clipping than the tutorial's, more steps done than the run has.
    fn contradiction(&self) -> Option<String> {
        if let Err(e) = check_recipe(&self.recipe) {
            return Some(e.to_string());
        }
        if self.vocab.chars().count() != self.vocab_size || self.vocab_size == 0 {
            return Some("vocab_size is not the length of vocab".into());
        }
        // A corpus's vocabulary is its distinct characters in code-point order (`CharDataset`),
        // which is how a prompt finds its tokens.
        if !self.vocab.chars().is_sorted_by(|a, b| a < b) {
            return Some("vocab is not in code-point order, or repeats a character".into());
        }
        if self.vocab_size > MAX_VOCABULARY {
            let v = self.vocab_size;
            return Some(format!("vocab_size {v} is more than {MAX_VOCABULARY}"));
        }
        if self.warmup_steps != WARMUP_STEPS || self.max_grad_norm != MAX_GRAD_NORM {
            let (w, g) = (self.warmup_steps, self.max_grad_norm);
            return Some(format!(
                "warmup_steps {w} and max_grad_norm {g} are not the tutorial's {WARMUP_STEPS} and {MAX_GRAD_NORM}"
            ));
        }
        if self.total_steps == 0
            || self.step > self.total_steps
            || i32::try_from(self.step).is_err()
        {
            return Some(format!(
                "step {} does not fit a run of {} steps",
                self.step, self.total_steps
            ));
        }
        None
    }
}

/// A checkpoint read from disk and checked: its config, and its weights in the model's order.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: SavedConfig,
    /// (name, value) of every parameter, in [`Gpt::named_parameters`] order.
    pub weights: Vec<(String, Tensor)>,
}

// ANCHOR: save
/// Everything a run needs to go on later, as plain data: what a checkpoint saves.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainState {
    pub recipe: Recipe,
    /// The characters of the vocabulary, in token order.
    pub vocab: Vec<char>,
    /// Steps in the whole schedule (epochs × train batches).
    pub total_steps: usize,
    /// (name, value) of every parameter, in the tutorial's order.
    pub weights: Vec<(String, Tensor)>,
    /// AdamW's step count and moments.
    pub adam_t: i32,
    pub m: Vec<Vec<f32>>,
    pub v: Vec<Vec<f32>>,
    /// The loss and learning rate of every step so far.
    pub losses: Vec<f32>,
    pub lrs: Vec<f64>,
}

impl TrainState {
    /// `trainer`'s run so far, as plain data.
    pub fn of(trainer: &Trainer) -> Self {
        let names = trainer
            .model
            .named_parameters()
            .into_iter()
            .map(|(name, _)| name);
        TrainState {
            recipe: trainer.recipe,
            vocab: trainer.dataset.vocab.clone(),
            total_steps: trainer.schedule.total,
            weights: names.zip(trainer.parameters().iter().cloned()).collect(),
            adam_t: trainer.optimizer.t,
            m: trainer.optimizer.m.clone(),
            v: trainer.optimizer.v.clone(),
            losses: trainer.losses.clone(),
            lrs: trainer.lrs.clone(),
        }
    }

    /// Continues this saved run in `trainer`, built from the same recipe: its weights, AdamW's
    /// state and the history, so that the next step is the one an uninterrupted run would take.
    pub fn restore(self, trainer: &mut Trainer) {
        let weights = self.weights.iter().map(|(_, w)| &w.data[..]);
        trainer.tape.set_params(weights);
        let optimizer = &mut trainer.optimizer;
        (optimizer.t, optimizer.m, optimizer.v) = (self.adam_t, self.m, self.v);
        (trainer.losses, trainer.lrs) = (self.losses, self.lrs);
    }
}

/// Writes a run's state to `dir` (created if needed): weights, optimiser state and settings.
pub fn save(dir: &Path, state: &TrainState) -> Result<(), ToolError> {
    std::fs::create_dir_all(dir).map_err(|source| ToolError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let step = state.losses.len();
    let weights = state
        .weights
        .iter()
        .map(|(name, t)| (name.clone(), t.shape.clone(), f32_bytes(&t.data)));
    let model = serialize(weights.collect(), step)?;

    let mut tensors = vec![];
    for (i, (name, t)) in state.weights.iter().enumerate() {
        let zeros = vec![0.0; t.data.len()]; // AdamW's moments before its first step
        let moment = |all: &[Vec<f32>]| f32_bytes(all.get(i).unwrap_or(&zeros));
        tensors.push((format!("{name}.exp_avg"), t.shape.clone(), moment(&state.m)));
        tensors.push((
            format!("{name}.exp_avg_sq"),
            t.shape.clone(),
            moment(&state.v),
        ));
    }
    tensors.push(("train.loss".into(), vec![step], f32_bytes(&state.losses)));
    let lrs = state.lrs.iter().flat_map(|x| x.to_le_bytes()).collect();
    tensors.push(("train.lr".into(), vec![step], lrs));
    let optimizer = serialize(tensors, step)?;

    let config = SavedConfig {
        format: FORMAT.into(),
        vocab: state.vocab.iter().collect(),
        vocab_size: state.vocab.len(),
        recipe: state.recipe,
        warmup_steps: WARMUP_STEPS,
        max_grad_norm: MAX_GRAD_NORM,
        step,
        total_steps: state.total_steps,
        sha256: [(MODEL_FILE, &model), (OPTIMIZER_FILE, &optimizer)]
            .iter()
            .map(|(name, bytes)| (name.to_string(), sha256_hex(bytes)))
            .collect(),
    };
    let config = serde_json::to_string_pretty(&config).expect("a config always serialises") + "\n";
    write_atomic(&dir.join(MODEL_FILE), &model)?;
    write_atomic(&dir.join(OPTIMIZER_FILE), &optimizer)?;
    write_atomic(&dir.join(CONFIG_FILE), config.as_bytes())
}
// ANCHOR_END: save

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A safetensors file of float32 tensors (float64 for `train.lr`), with the step in its metadata.
fn serialize(
    tensors: Vec<(String, Vec<usize>, Vec<u8>)>,
    step: usize,
) -> Result<Vec<u8>, ToolError> {
    let mut views = Vec::with_capacity(tensors.len());
    for (name, shape, bytes) in &tensors {
        let dtype = if name == "train.lr" {
            Dtype::F64
        } else {
            Dtype::F32
        };
        let view = TensorView::new(dtype, shape.clone(), bytes).expect("shape and bytes agree");
        views.push((name.clone(), view));
    }
    // One key only: a HashMap of more would be written in a different order each time.
    let metadata = HashMap::from([("step".to_string(), step.to_string())]);
    safetensors::serialize(views, Some(metadata))
        .map_err(|e| ToolError::Config(format!("cannot encode a checkpoint: {e}")))
}

// ANCHOR: load
/// Reads and checks the checkpoint in `dir`: the config, the weights' checksum, names, shapes and
/// type.
pub fn load(dir: &Path) -> Result<Checkpoint, ToolError> {
    if !dir.is_dir() {
        return Err(ToolError::CheckpointMissing {
            dir: dir.to_path_buf(),
        });
    }
    let config = parse_config(dir, &read(&dir.join(CONFIG_FILE))?)?;
    let bytes = read_checked(dir, &config, MODEL_FILE)?;
    with_weights(dir, config, &bytes)
}

/// The checkpoint of `dir` from its files' bytes, `config.json` and `model.safetensors`, as a
/// program without folders (the book's page) has them: the checks and errors of [`load`].
pub fn from_bytes(dir: &Path, config: &[u8], model: &[u8]) -> Result<Checkpoint, ToolError> {
    let config = parse_config(dir, config)?;
    check_file(dir, &config, MODEL_FILE, model)?;
    with_weights(dir, config, model)
}

/// `config.json` of `dir`, if it is this crate's format and holds no contradiction.
fn parse_config(dir: &Path, text: &[u8]) -> Result<SavedConfig, ToolError> {
    let config_path = dir.join(CONFIG_FILE);
    let config: SavedConfig =
        serde_json::from_slice(text).map_err(|e| ToolError::CheckpointFile {
            path: config_path.clone(),
            why: format!("not a checkpoint config: {e}"),
        })?;
    if config.format != FORMAT {
        return Err(ToolError::CheckpointFile {
            path: config_path,
            why: format!("its format is {:?}, not {FORMAT:?}", config.format),
        });
    }
    if let Some(why) = config.contradiction() {
        return Err(mismatch(dir, why));
    }
    Ok(config)
}

/// The checkpoint of `config` with the weights in `bytes` (the checked `model.safetensors`).
fn with_weights(dir: &Path, config: SavedConfig, bytes: &[u8]) -> Result<Checkpoint, ToolError> {
    let file = parse(&dir.join(MODEL_FILE), bytes)?;
    // Each tensor the config implies, checked against the file's before its numbers are copied.
    let mut weights = vec![];
    for (name, shape) in parameter_shapes(config.gpt_config()) {
        let values = tensor_f32(&file, &name, &shape).map_err(|why| mismatch(dir, why))?;
        weights.push((name, Tensor::new(&shape, values)));
    }
    if file.len() != weights.len() {
        let why = format!("{} tensors, the config needs {}", file.len(), weights.len());
        return Err(mismatch(dir, why));
    }
    Ok(Checkpoint {
        dir: dir.to_path_buf(),
        config,
        weights,
    })
}

fn mismatch(dir: &Path, why: String) -> ToolError {
    ToolError::CheckpointMismatch {
        dir: dir.to_path_buf(),
        why,
    }
}
// ANCHOR_END: load

/// The name and shape of every parameter of a model of `config`, in [`Gpt::named_parameters`]
/// order. Computed rather than read off a scratch model: a damaged config could ask for gigabytes
/// of weights, and the file's tensors are checked against these shapes before any of them is
/// copied.
fn parameter_shapes(config: GptConfig) -> Vec<(String, Vec<usize>)> {
    let GptConfig {
        vocab_size: v,
        context_size: t,
        embedding_size: c,
        blocks,
        architecture,
    } = config;
    let mut shapes = vec![("tok_emb.weight".to_string(), vec![v, c])];
    if !architecture.rope {
        shapes.push(("pos_emb.weight".to_string(), vec![t, c]));
    }
    let mut pair = |name: String, weight: Vec<usize>, bias: usize| {
        shapes.push((format!("{name}.weight"), weight));
        shapes.push((format!("{name}.bias"), vec![bias]));
    };
    for i in 0..blocks {
        pair(format!("blocks.{i}.attn.out"), vec![c, c], c);
        if !architecture.attention_only {
            pair(format!("blocks.{i}.ff.in"), vec![4 * c, c], 4 * c);
            pair(format!("blocks.{i}.ff.out"), vec![c, 4 * c], c);
        }
    }
    pair("head".to_string(), vec![v, c], v);
    // What the tutorial's model leaves out, after all of its own parameters.
    for i in 0..blocks {
        if architecture.qkv {
            let d = c / architecture.heads;
            let kv = architecture.kv_heads() * d; // K·D
            let source = architecture.key_source_width(c); // C, or the latent's L
            pair(format!("blocks.{i}.attn.query"), vec![c, c], c);
            for name in ["key", "value"] {
                pair(format!("blocks.{i}.attn.{name}"), vec![kv, source], kv);
            }
            if let Some(l) = architecture.latent {
                pair(format!("blocks.{i}.attn.latent"), vec![l, c], l);
                if architecture.rope {
                    let r = rotary_width(d);
                    let h = architecture.heads;
                    pair(format!("blocks.{i}.attn.query_rope"), vec![h * r, c], h * r);
                    pair(format!("blocks.{i}.attn.key_rope"), vec![r, c], r);
                }
            }
        }
        if architecture.layer_norm {
            pair(format!("blocks.{i}.ln1"), vec![c], c);
            if !architecture.attention_only {
                pair(format!("blocks.{i}.ln2"), vec![c], c);
            }
        }
    }
    if architecture.layer_norm {
        pair("ln_f".to_string(), vec![c], c);
    }
    shapes
}

impl Checkpoint {
    /// The model this checkpoint holds, built on `tape`. The initial weights are drawn from `rng`
    /// first, as in the chapter, so that `rng` continues where the chapter's generator would.
    pub fn model(&self, tape: &mut Tape, rng: &mut NumpyRandom) -> Gpt {
        let model = Gpt::new(tape, rng, self.config.gpt_config());
        tape.set_params(self.weights.iter().map(|(_, w)| &w.data[..]));
        model
    }

    /// The whole run as saved: the weights, and AdamW's state and the history from
    /// `optimizer.safetensors`.
    pub fn train_state(&self) -> Result<TrainState, ToolError> {
        self.train_state_from_bytes(&read(&self.dir.join(OPTIMIZER_FILE))?)
    }

    /// [`Checkpoint::train_state`] from the bytes of `optimizer.safetensors`, with its checks and
    /// errors.
    pub fn train_state_from_bytes(&self, bytes: &[u8]) -> Result<TrainState, ToolError> {
        check_file(&self.dir, &self.config, OPTIMIZER_FILE, bytes)?;
        let file = parse(&self.dir.join(OPTIMIZER_FILE), bytes)?;
        let mismatch = |why: String| ToolError::CheckpointMismatch {
            dir: self.dir.clone(),
            why,
        };
        let (mut m, mut v) = (vec![], vec![]);
        for (name, w) in &self.weights {
            m.push(tensor_f32(&file, &format!("{name}.exp_avg"), &w.shape).map_err(mismatch)?);
            v.push(tensor_f32(&file, &format!("{name}.exp_avg_sq"), &w.shape).map_err(mismatch)?);
        }
        let step = self.config.step;
        let losses = tensor_f32(&file, "train.loss", &[step]).map_err(mismatch)?;
        let lrs = tensor(&file, "train.lr", &[step], Dtype::F64).map_err(mismatch)?;
        let lrs = lrs
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (_, header) = SafeTensors::read_metadata(bytes).expect("parsed above");
        let saved_step = header.metadata().as_ref().and_then(|meta| meta.get("step"));
        if saved_step != Some(&step.to_string()) {
            return Err(mismatch(format!(
                "{OPTIMIZER_FILE} is not from step {step}"
            )));
        }
        Ok(TrainState {
            recipe: self.config.recipe,
            vocab: self.config.vocab(),
            total_steps: self.config.total_steps,
            weights: self.weights.clone(),
            adam_t: i32::try_from(step).map_err(|_| mismatch("step is too large".into()))?,
            m,
            v,
            losses,
            lrs,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ToolError> {
    // A folder, a pipe or a device such as /dev/zero: reading it would fail, block or never end.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(ToolError::CheckpointFile {
            path: path.to_path_buf(),
            why: "it is not a regular file".into(),
        });
    }
    std::fs::read(path).map_err(|e| ToolError::CheckpointFile {
        path: path.to_path_buf(),
        why: match e.kind() {
            std::io::ErrorKind::NotFound => "it is missing".into(),
            _ => e.to_string(),
        },
    })
}

/// Reads a tensor file and checks it is the one `config.json` was saved with.
fn read_checked(dir: &Path, config: &SavedConfig, name: &str) -> Result<Vec<u8>, ToolError> {
    let bytes = read(&dir.join(name))?;
    check_file(dir, config, name, &bytes)?;
    Ok(bytes)
}

/// Checks that `bytes`, the tensor file `name` of `dir`, is the one `config.json` was saved with.
fn check_file(dir: &Path, config: &SavedConfig, name: &str, bytes: &[u8]) -> Result<(), ToolError> {
    let path = dir.join(name);
    parse(&path, bytes)?; // a cut-off file is reported as such, before its checksum
    if config.sha256.get(name) != Some(&sha256_hex(bytes)) {
        return Err(ToolError::CheckpointFile {
            path,
            why:
                "its sha256 is not the one config.json records: it is corrupt or from another save"
                    .into(),
        });
    }
    Ok(())
}

fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>, ToolError> {
    let damaged = |why: String| ToolError::CheckpointFile {
        path: path.to_path_buf(),
        // A damaged file's tensor names, which the error may quote, can hold line breaks.
        why: format!("not a complete safetensors file: {why}").replace(char::is_control, " "),
    };
    check_header(bytes).map_err(damaged)?;
    SafeTensors::deserialize(bytes).map_err(|e| damaged(e.to_string()))
}

/// The longest safetensors header this crate reads. Its own are far shorter: the largest model the
/// limits allow (64 blocks, with everything the tutorial leaves out) has 2,062 tensors in
/// `optimizer.safetensors`, about 220 kB of header. The safetensors crate takes up to 100 MB and
/// holds all of it in memory as it parses, many bytes for each byte of header: a header of one
/// long shape costs gigabytes and seconds (`a_header_longer_than_any_checkpoint_is_refused` in
/// `tests/s5_fuzz_regressions.rs` builds such a file; `/usr/bin/time -v s5_gpt generate` on it
/// shows the peak).
pub const MAX_HEADER_BYTES: u64 = 1 << 20;

/// What a safetensors header claims about sizes, checked against [`MAX_HEADER_BYTES`] and the bytes
/// the file really holds, before the safetensors crate reads it. Its version 0.8 adds the last
/// tensor's end to the header's length unchecked, so `data_offsets` that reach 2⁶⁴ overflowed it (a
/// panic where overflow checks are on, as in `cargo test` and `cargo run`). Whatever else is wrong
/// with the header is left for safetensors to report.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    let Some((length, rest)) = bytes.split_first_chunk::<8>() else {
        return Ok(());
    };
    let length = u64::from_le_bytes(*length);
    if length > MAX_HEADER_BYTES {
        return Err(format!(
            "its header is {length} bytes long, more than the {MAX_HEADER_BYTES} of any this crate writes"
        ));
    }
    let Some(header) = rest.get(..length as usize) else {
        return Ok(());
    };
    let data = rest.len() - header.len();
    let Ok(entries) = serde_json::from_slice::<BTreeMap<String, serde_json::Value>>(header) else {
        return Ok(());
    };
    for (name, entry) in entries.iter().filter(|(name, _)| *name != "__metadata__") {
        let Some(end) = entry["data_offsets"][1].as_u64() else {
            continue;
        };
        if end > data as u64 {
            return Err(format!(
                "tensor {name:?} ends at byte {end} of the data, but the file holds {data} bytes of data"
            ));
        }
    }
    Ok(())
}

/// The raw bytes of tensor `name`, if it has the given shape and type.
fn tensor<'a>(
    file: &SafeTensors<'a>,
    name: &str,
    shape: &[usize],
    dtype: Dtype,
) -> Result<&'a [u8], String> {
    let t = file
        .tensor(name)
        .map_err(|_| format!("{name} is missing"))?;
    if t.shape() != shape || t.dtype() != dtype {
        return Err(format!(
            "{name} is {:?} {:?}, the config needs {dtype:?} {shape:?}",
            t.dtype(),
            t.shape()
        ));
    }
    Ok(t.data())
}

fn tensor_f32(file: &SafeTensors, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
    let bytes = tensor(file, name, shape, Dtype::F32)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s5_gpt::backend::Lesson;
    use crate::s5_gpt::data::CharDataset;
    use crate::s5_gpt::train::Trainer;

    /// A checkpoint of two steps of a small model, saved into a fresh folder.
    fn saved(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("checkpoint_{}_{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let text = "to be, or not to be, that is the question: ".repeat(20);
        let recipe = Recipe {
            batch_size: 2,
            context_size: 8,
            embedding_size: 4,
            blocks: 1,
            ..Recipe::default()
        };
        let dataset = CharDataset::from_text(&text, recipe.batch_size, recipe.context_size);
        let mut trainer = Trainer::new(recipe, dataset, Box::new(Lesson), Some(2));
        trainer
            .train(|_| std::ops::ControlFlow::Continue(()))
            .unwrap();
        save(&dir, &TrainState::of(&trainer)).unwrap();
        dir
    }

    #[test]
    fn bytes_give_the_checkpoint_the_folder_gives() {
        let dir = saved("same");
        let from_folder = load(&dir).unwrap();
        let config = std::fs::read(dir.join(CONFIG_FILE)).unwrap();
        let model = std::fs::read(dir.join(MODEL_FILE)).unwrap();
        let from_bytes = from_bytes(&dir, &config, &model).unwrap();
        assert_eq!(from_bytes.config, from_folder.config);
        assert_eq!(from_bytes.weights.len(), from_folder.weights.len());
        for ((name, a), (other, b)) in from_bytes.weights.iter().zip(&from_folder.weights) {
            assert_eq!((name, &a.shape, &a.data), (other, &b.shape, &b.data));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn damaged_bytes_are_refused_as_a_damaged_folder_is() {
        let dir = saved("damaged");
        let config = std::fs::read(dir.join(CONFIG_FILE)).unwrap();
        let mut model = std::fs::read(dir.join(MODEL_FILE)).unwrap();
        let last = model.len() - 1;
        model[last] ^= 1; // one bit of the last weight
        std::fs::write(dir.join(MODEL_FILE), &model).unwrap();
        let folder = load(&dir).unwrap_err().to_string();
        let bytes = from_bytes(&dir, &config, &model).unwrap_err().to_string();
        assert!(folder.contains("its sha256 is not the one"), "{folder}");
        assert_eq!(bytes, folder);
        let bytes = from_bytes(&dir, b"{}", &model).unwrap_err().to_string();
        assert!(bytes.contains("not a checkpoint config"), "{bytes}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parameter_shapes_are_the_models() {
        let full = Architecture::everything(2, 0.0);
        for architecture in [Architecture::default(), full] {
            let config = GptConfig {
                vocab_size: 5,
                context_size: 3,
                embedding_size: 2,
                blocks: 2,
                architecture,
            };
            let mut tape = Tape::new();
            let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(0), config);
            let built: Vec<(String, Vec<usize>)> = model
                .named_parameters()
                .into_iter()
                .map(|(name, id)| (name, tape.value(id).shape.clone()))
                .collect();
            assert_eq!(parameter_shapes(config), built, "{architecture:?}");
        }
    }
}
