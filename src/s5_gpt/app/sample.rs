//! Tool layer. What `s5_gpt generate` does with a checkpoint: check the sampling flags and the
//! prompt, then sample. The book's page calls the same function, so it samples the same text and
//! refuses the same input with the same line.

use super::args::GenerateArgs;
use super::checkpoint::Checkpoint;
use super::config::{SAMPLE_LEN, THREADS, TOP_K};
use crate::rng::numpy::NumpyRandom;
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::beyond::Gpt;
use crate::s5_gpt::cache::generate_cached;
use crate::s5_gpt::data::CharDataset;
use crate::s5_gpt::error::GptError;
use crate::s5_gpt::generate::{Sampling, generate, next_char_probabilities};
use crate::s5_gpt::rolling::generate_rolling;
use crate::s5_gpt::tape::Tape;

/// Temperatures outside these make no sense to sample with: below, logits divided by it overflow
/// float32; above, every character is as likely as every other.
const MIN_TEMPERATURE: f32 = 1e-3;
const MAX_TEMPERATURE: f32 = 1e3;

/// [`generate`] and [`generate_cached`], which draw the same characters.
type Generate = fn(
    &mut Tape,
    &Gpt,
    &CharDataset,
    &str,
    usize,
    &mut NumpyRandom,
    Sampling,
) -> Result<String, GptError>;

/// The text `s5_gpt generate` prints (without its final line break): `--prompt` and
/// `--sample-len` characters drawn from `saved`'s model with `--temperature` and `--top-k`.
pub fn sample(saved: &Checkpoint, args: &GenerateArgs) -> Result<String, ToolError> {
    let sampling = sampling(saved, args)?;
    let vocabulary = CharDataset::from_vocab(saved.config.vocab());
    let cfg = args.config();
    cfg.with_threads(|| {
        let mut tape = Tape::with_backend(cfg.backend());
        // Seeded as the chapter is, and past the initial weights' draws, as the chapter is when it
        // samples.
        let mut rng = NumpyRandom::seed(args.seed);
        let model = saved.model(&mut tape, &mut rng);
        let (prompt, len) = (&args.sample.prompt, args.sample.sample_len);
        let cached = !args.no_cache;
        if model.rolls() {
            // Stage 7's rolling cache: RoPE and a window, as far past the context as asked.
            let v = &vocabulary;
            return Ok(generate_rolling(
                &mut tape, &model, v, prompt, len, &mut rng, sampling, cached,
            )?);
        }
        let run: Generate = match cached {
            false => generate,
            true => generate_cached, // stage 7: the same characters, sooner
        };
        let sample = run(
            &mut tape,
            &model,
            &vocabulary,
            prompt,
            len,
            &mut rng,
            sampling,
        );
        Ok(sample?)
    })
}

/// What `s5_gpt generate --probs` prints (without its final line break): the distribution of the
/// character after `--prompt`, one line per character whose probability is above 0, the likeliest
/// first: the character quoted as Rust writes a `char` (`'\n'`, `' '`), then its probability as
/// float32 prints it, the shortest text that reads back as the same float.
pub fn probs(saved: &Checkpoint, args: &GenerateArgs) -> Result<String, ToolError> {
    Ok(probs_lines(&next_chars(saved, args)?))
}

/// The distribution that [`probs`] prints, as (character, probability) pairs in its order; the
/// book's page draws them as bars.
pub fn next_chars(saved: &Checkpoint, args: &GenerateArgs) -> Result<Vec<(char, f32)>, ToolError> {
    let sampling = sampling(saved, args)?;
    let vocabulary = CharDataset::from_vocab(saved.config.vocab());
    let cfg = args.config();
    let next = cfg.with_threads(|| {
        let mut tape = Tape::with_backend(cfg.backend());
        let model = saved.model(&mut tape, &mut NumpyRandom::seed(args.seed));
        let prompt = &args.sample.prompt;
        Ok(next_char_probabilities(
            &mut tape,
            &model,
            &vocabulary,
            prompt,
            sampling,
        )?)
    })?;
    Ok(next.iter().map(|&(c, p)| (c, p as f32)).collect())
}

/// [`probs`]' text for the pairs of [`next_chars`].
pub fn probs_lines(next: &[(char, f32)]) -> String {
    let lines: Vec<String> = next
        .iter()
        .map(|&(c, p)| format!("{:<6} {}", format!("{c:?}"), p))
        .collect();
    lines.join("\n")
}

/// `generate`'s checks, before any model is built: `--temperature`, `--top-k`, `--sample-len`,
/// `--threads` and the prompt against `saved`'s vocabulary. The [`Sampling`] they ask for, or the
/// one-line error that [`sample`] returns.
pub fn sampling(saved: &Checkpoint, args: &GenerateArgs) -> Result<Sampling, ToolError> {
    let t = args.temperature;
    if !(t.is_finite() && (MIN_TEMPERATURE..=MAX_TEMPERATURE).contains(&t)) {
        let msg = format!(
            "--temperature must be a number from {MIN_TEMPERATURE} to {MAX_TEMPERATURE}, got {t}; 1 is the chapter's"
        );
        return Err(ToolError::Config(msg));
    }
    args.top_k.map(|k| TOP_K.check(k)).transpose()?;
    SAMPLE_LEN.check(args.sample.sample_len)?;
    THREADS.check(args.compute.threads)?;
    let vocabulary = CharDataset::from_vocab(saved.config.vocab());
    check_prompt(&vocabulary, &args.sample.prompt)?;
    Ok(Sampling {
        temperature: t,
        top_k: args.top_k,
    })
}

/// An empty prompt, or one with a character the model has never seen, cannot start a sample.
pub fn check_prompt(vocabulary: &CharDataset, prompt: &str) -> Result<(), ToolError> {
    if prompt.is_empty() {
        return Err(GptError::EmptyPrompt.into());
    }
    Ok(vocabulary.encode(prompt).map(drop)?)
}
