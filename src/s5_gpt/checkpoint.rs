//! Checkpoints: a trained model and its training state in a folder that Python can read too.
//!
//! `s5_gpt train --save DIR` writes three files:
//!
//! | file | holds |
//! |---|---|
//! | `model.safetensors` | the weights, float32, named as in [`Gpt::named_parameters`]: `tok_emb.weight` (V, C), `pos_emb.weight` (T, C), `blocks.{i}.attn.out.weight` (C, C), `blocks.{i}.ff.in.weight` (4C, C), `blocks.{i}.ff.out.weight` (C, 4C), `head.weight` (V, C), and a `.bias` for each Linear |
//! | `optimizer.safetensors` | AdamW's moments of every weight (`{name}.exp_avg`, `{name}.exp_avg_sq`), and the loss (`train.loss`) and learning rate (`train.lr`) of every step so far |
//! | `config.json` | the sizes, the training settings, the vocabulary, the step, and the sha256 of the two other files |
//!
//! Both tensor files also record the step in their metadata (`"step": "2000"`). AdamW's own step count
//! is always the training step, since every step updates once.
//!
//! In Python, `safetensors.numpy.load_file("DIR/model.safetensors")["head.weight"]` is a (65, 64) float32
//! array. A weight's rows are its *outputs*, as in the tutorial's `Linear` (and PyTorch's `nn.Linear`).
//!
//! Each file is written beside its place and then renamed into it, so a crash or Ctrl-C never leaves half a
//! file, and `config.json` goes last: its checksums tell a complete checkpoint from a mix of two saves.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::Error;
use super::model::{Gpt, GptConfig};
use super::tape::Tape;
use super::train::{MAX_GRAD_NORM, Trainer, WARMUP_STEPS};
use super::{Config, check};
use crate::rng::numpy::NumpyRandom;

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
    pub context_size: usize,
    pub embedding_size: usize,
    pub blocks: usize,
    pub batch_size: usize,
    pub epochs: usize,
    /// The peak learning rate of the warm-up–cosine schedule.
    pub lr: f64,
    pub warmup_steps: usize,
    pub max_grad_norm: f64,
    /// `np.random.seed`: the initial weights, and the sampling of the chapter run.
    pub seed: u32,
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
            context_size: self.context_size,
            embedding_size: self.embedding_size,
            blocks: self.blocks,
        }
    }

    pub fn vocab(&self) -> Vec<char> {
        self.vocab.chars().collect()
    }

    /// The run settings this checkpoint was trained with; the rest (data, prompt, …) are the defaults.
    pub fn run_config(&self) -> Config {
        Config {
            epochs: self.epochs,
            batch_size: self.batch_size,
            context_size: self.context_size,
            embedding_size: self.embedding_size,
            blocks: self.blocks,
            lr: self.lr,
            seed: self.seed,
            ..Config::default()
        }
    }
}

/// A checkpoint read from disk and checked: its config, and its weights in the model's order.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: SavedConfig,
    /// (name, shape, values) of every parameter, in [`Gpt::named_parameters`] order.
    pub weights: Vec<(String, Vec<usize>, Vec<f32>)>,
}

/// AdamW's state and the run's history, from `optimizer.safetensors`.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainState {
    /// AdamW's step count t (the training step).
    pub adam_t: i32,
    pub m: Vec<Vec<f32>>,
    pub v: Vec<Vec<f32>>,
    pub losses: Vec<f32>,
    pub lrs: Vec<f64>,
}

// ANCHOR: save
/// Writes `trainer`'s weights, optimiser state and settings to `dir` (created if needed).
pub fn save(dir: &Path, trainer: &Trainer) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let step = trainer.losses.len();
    let names = trainer.model.named_parameters();
    let weights = names.iter().map(|(name, id)| {
        let t = trainer.tape.value(*id);
        (name.clone(), t.shape.clone(), f32_bytes(&t.data))
    });
    let model = serialize(weights.collect(), step)?;

    let (_, m, v) = trainer.optimizer.state();
    let mut tensors = vec![];
    for (i, (name, id)) in names.iter().enumerate() {
        let shape = &trainer.tape.value(*id).shape;
        let len: usize = shape.iter().product();
        let moment = |all: &[Vec<f32>]| f32_bytes(all.get(i).map_or(&vec![0.0; len], |x| x));
        tensors.push((format!("{name}.exp_avg"), shape.clone(), moment(m)));
        tensors.push((format!("{name}.exp_avg_sq"), shape.clone(), moment(v)));
    }
    tensors.push(("train.loss".into(), vec![step], f32_bytes(&trainer.losses)));
    let lrs = trainer.lrs.iter().flat_map(|x| x.to_le_bytes()).collect();
    tensors.push(("train.lr".into(), vec![step], lrs));
    let optimizer = serialize(tensors, step)?;

    let config = saved_config(
        trainer,
        [(MODEL_FILE, &model), (OPTIMIZER_FILE, &optimizer)],
    );
    let config = serde_json::to_string_pretty(&config).expect("a config always serialises") + "\n";
    write_atomic(&dir.join(MODEL_FILE), &model)?;
    write_atomic(&dir.join(OPTIMIZER_FILE), &optimizer)?;
    write_atomic(&dir.join(CONFIG_FILE), config.as_bytes())
}
// ANCHOR_END: save

fn saved_config(trainer: &Trainer, files: [(&str, &Vec<u8>); 2]) -> SavedConfig {
    let cfg = &trainer.config;
    SavedConfig {
        format: FORMAT.into(),
        vocab: trainer.dataset.vocab.iter().collect(),
        vocab_size: trainer.dataset.vocab_size(),
        context_size: cfg.context_size,
        embedding_size: cfg.embedding_size,
        blocks: cfg.blocks,
        batch_size: cfg.batch_size,
        epochs: cfg.epochs,
        lr: cfg.lr,
        warmup_steps: WARMUP_STEPS,
        max_grad_norm: MAX_GRAD_NORM,
        seed: cfg.seed,
        step: trainer.losses.len(),
        total_steps: trainer.schedule.total,
        sha256: files
            .iter()
            .map(|(name, bytes)| (name.to_string(), sha256(bytes)))
            .collect(),
    }
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A safetensors file of float32 tensors (float64 for `train.lr`), with the step in its metadata.
fn serialize(tensors: Vec<(String, Vec<usize>, Vec<u8>)>, step: usize) -> Result<Vec<u8>, Error> {
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
        .map_err(|e| Error::Config(format!("cannot encode a checkpoint: {e}")))
}

/// Writes `path.tmp`, flushes it to disk, and renames it over `path`.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    let written = std::fs::File::create(&tmp)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp); // the old file, if any, is untouched
    }
    written.map_err(err)
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ANCHOR: load
/// Reads and checks the checkpoint in `dir`: the config, the weights' checksum, names, shapes and type.
pub fn load(dir: &Path) -> Result<Checkpoint, Error> {
    if !dir.is_dir() {
        return Err(Error::CheckpointMissing {
            dir: dir.to_path_buf(),
        });
    }
    let config_path = dir.join(CONFIG_FILE);
    let text = read(&config_path)?;
    let config: SavedConfig = serde_json::from_slice(&text).map_err(|e| Error::CheckpointFile {
        path: config_path.clone(),
        why: format!("not a checkpoint config: {e}"),
    })?;
    if config.format != FORMAT {
        return Err(Error::CheckpointFile {
            path: config_path,
            why: format!("its format is {:?}, not {FORMAT:?}", config.format),
        });
    }
    let mismatch = |why: String| Error::CheckpointMismatch {
        dir: dir.to_path_buf(),
        why,
    };
    if config.vocab.chars().count() != config.vocab_size || config.vocab_size == 0 {
        return Err(mismatch("vocab_size is not the length of vocab".into()));
    }
    check(&config.run_config()).map_err(|e| mismatch(e.to_string()))?;
    let bytes = read_checked(dir, &config, MODEL_FILE)?;
    let file = parse(&dir.join(MODEL_FILE), &bytes)?;
    // A scratch model gives the names and shapes the config implies.
    let mut tape = Tape::new();
    let model = Gpt::new(&mut tape, &mut NumpyRandom::seed(0), config.gpt_config());
    let mut weights = vec![];
    for (name, id) in model.named_parameters() {
        let shape = &tape.value(id).shape;
        let values = tensor_f32(&file, &name, shape).map_err(mismatch)?;
        weights.push((name, shape.clone(), values));
    }
    if file.len() != weights.len() {
        let why = format!("{} tensors, the config needs {}", file.len(), weights.len());
        return Err(mismatch(why));
    }
    Ok(Checkpoint {
        dir: dir.to_path_buf(),
        config,
        weights,
    })
}
// ANCHOR_END: load

impl Checkpoint {
    /// The model this checkpoint holds, built on `tape`. The initial weights are drawn from `rng` first,
    /// as in the chapter, so that `rng` continues where the chapter's generator would.
    pub fn model(&self, tape: &mut Tape, rng: &mut NumpyRandom) -> Gpt {
        let model = Gpt::new(tape, rng, self.config.gpt_config());
        let (params, _) = tape.params_mut();
        for (p, (_, _, values)) in params.iter_mut().zip(&self.weights) {
            p.data.clone_from(values);
        }
        model
    }

    /// AdamW's state and the loss history, from `optimizer.safetensors`.
    pub fn train_state(&self) -> Result<TrainState, Error> {
        let bytes = read_checked(&self.dir, &self.config, OPTIMIZER_FILE)?;
        let file = parse(&self.dir.join(OPTIMIZER_FILE), &bytes)?;
        let mismatch = |why: String| Error::CheckpointMismatch {
            dir: self.dir.clone(),
            why,
        };
        let (mut m, mut v) = (vec![], vec![]);
        for (name, shape, _) in &self.weights {
            m.push(tensor_f32(&file, &format!("{name}.exp_avg"), shape).map_err(mismatch)?);
            v.push(tensor_f32(&file, &format!("{name}.exp_avg_sq"), shape).map_err(mismatch)?);
        }
        let step = self.config.step;
        let losses = tensor_f32(&file, "train.loss", &[step]).map_err(mismatch)?;
        let lrs = tensor(&file, "train.lr", &[step], Dtype::F64).map_err(mismatch)?;
        let lrs = lrs
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let (_, header) = SafeTensors::read_metadata(&bytes).expect("parsed above");
        let saved_step = header.metadata().as_ref().and_then(|meta| meta.get("step"));
        if saved_step != Some(&step.to_string()) {
            let why = format!("{OPTIMIZER_FILE} is not from step {step}");
            return Err(mismatch(why));
        }
        let adam_t = i32::try_from(step).map_err(|_| mismatch("step is too large".into()))?;
        Ok(TrainState {
            adam_t,
            m,
            v,
            losses,
            lrs,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::CheckpointFile {
        path: path.to_path_buf(),
        why: match e.kind() {
            std::io::ErrorKind::NotFound => "it is missing".into(),
            _ => e.to_string(),
        },
    })
}

/// Reads a tensor file and checks it is the one `config.json` was saved with.
fn read_checked(dir: &Path, config: &SavedConfig, name: &str) -> Result<Vec<u8>, Error> {
    let path = dir.join(name);
    let bytes = read(&path)?;
    parse(&path, &bytes)?; // a cut-off file is reported as such, before its checksum
    if config.sha256.get(name) != Some(&sha256(&bytes)) {
        return Err(Error::CheckpointFile {
            path,
            why:
                "its sha256 is not the one config.json records: it is corrupt or from another save"
                    .into(),
        });
    }
    Ok(bytes)
}

fn parse<'a>(path: &Path, bytes: &'a [u8]) -> Result<SafeTensors<'a>, Error> {
    SafeTensors::deserialize(bytes).map_err(|e| Error::CheckpointFile {
        path: path.to_path_buf(),
        why: format!("not a complete safetensors file: {e}"),
    })
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
