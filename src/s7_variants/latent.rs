//! Multi-head latent attention, weighed and checked: what its cache keeps, and how far the absorbed
//! weights ([`crate::s5_gpt::latent::absorb`]) move the scores and the logits from the unfolded
//! keys and values. The chapter `s7_variants` shows it.

use std::io::Write;

use super::kv::KvShape;
use super::{LINE, chapter_model, variants};
use crate::print::{cell, heading, thousands};
use crate::s5_gpt::beyond::{Architecture, Gpt, LayerNorm};
use crate::s5_gpt::cache::GptCache;
use crate::s5_gpt::generate::last_row;
use crate::s5_gpt::latent::{
    Cached, absorb, absorb_magnitudes, absorbed_scores, rotary_width, score_bound,
};
use crate::s5_gpt::tape::Tape;

/// The chapter's model with `arch` ([`chapter_model`]) and the tokens of [`LINE`]'s first window.
pub fn model_on_the_line(tape: &mut Tape, arch: Architecture) -> (Gpt, Vec<usize>) {
    let (model, data) = chapter_model(tape, arch);
    let ids = data.encode(LINE).expect("the line's own characters");
    (model, ids[..32].to_vec())
}

// ANCHOR: score_gaps
/// The first block's scores q·k (before the scale) of every token over the tokens up to it, every
/// head: unfolded on the tape, and absorbed. Returns the largest difference and the largest share
/// of its own [`score_bound`] a difference takes (at most 1 if the bound holds).
pub fn score_gaps(tape: &mut Tape, model: &Gpt, ids: &[usize]) -> (f32, f64) {
    let block = &model.blocks[0];
    let attn = &block.attn;
    let [query, key, value] = attn.qkv.expect("latent attention projects");
    let layers = [query, key, value, attn.out];
    let (absorbed, magnitudes) = (
        absorb(tape, layers, attn.num_heads),
        absorb_magnitudes(tape, layers, attn.num_heads),
    );
    tape.reset();
    let x = model.embed(tape, ids, 1, 0); // (1, T, C)
    let x = LayerNorm::forward(block.ln1.as_ref(), tape, x); // (1, T, C)
    let (q, kept) = attn.project_kept(tape, x, 0); // (1, H, T, D + R), the latent and rotary key
    let [k, _] = attn.unfold(tape, &kept); // (1, H, T, D + R)
    let kt = tape.transpose(k);
    let unfolded = tape.matmul(q, kt); // (1, H, T, T)
    let (t, c) = (ids.len(), tape.value(x).last_dim());
    let d = c / attn.num_heads;
    let (l, r) = (
        tape.value(kept[0]).last_dim(),
        kept.get(1).map_or(0, |_| rotary_width(d)),
    );
    let value = |id| tape.value(id).data.clone();
    let (xs, latents, q_all) = (value(x), value(kept[0]), value(q));
    let rotary_keys = kept.get(1).map(|&k| value(k));
    let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<f32>>();
    let (mut gap, mut share) = (0.0f32, 0.0f64);
    for i in 0..t {
        // Token i's rotary query parts, (H, R): the last R of each head's D + R.
        let q_r: Vec<f32> = (0..attn.num_heads)
            .flat_map(|h| q_all[(h * t + i) * (d + r)..][d..d + r].to_vec())
            .collect();
        let seen = |v: &[f32], w: usize| v[..(i + 1) * w].to_vec();
        let (lat, k_r) = (
            seen(&latents, l),
            rotary_keys.as_deref().map(|k| seen(k, r)),
        );
        let cached = Cached {
            latents: &lat,
            rotary: k_r.as_deref().map(|k| (&q_r[..], k)),
        };
        let (abs_lat, abs_q_r, abs_k_r) = (abs(&lat), abs(&q_r), k_r.as_deref().map(abs));
        let bounds = Cached {
            latents: &abs_lat,
            rotary: abs_k_r.as_deref().map(|k| (&abs_q_r[..], k)),
        };
        let x_i = &xs[i * c..(i + 1) * c];
        for h in 0..attn.num_heads {
            let absorbed_row = absorbed_scores(&absorbed, h, x_i, cached);
            let sums = absorbed_scores(&magnitudes, h, &abs(x_i), bounds);
            let row = &tape.value(unfolded).data[(h * t + i) * t..][..=i];
            for ((a, u), s) in absorbed_row.iter().zip(row).zip(sums) {
                gap = gap.max((a - u).abs());
                let bound = score_bound(f64::from(s), (c, d, r, l));
                share = share.max(f64::from((a - u).abs()) / bound);
            }
        }
    }
    (gap, share)
}
// ANCHOR_END: score_gaps

// ANCHOR: logit_gaps
/// The whole model's logits for each token of `ids` after the first, one cached step at a time
/// through the absorbed weights, against recomputing the window: the largest difference, and how
/// many steps pick the same likeliest character, of how many.
pub fn logit_gaps(tape: &mut Tape, model: &Gpt, ids: &[usize]) -> (f32, usize, usize) {
    let absorbed = model.absorb(tape).expect("a model with latent attention");
    let mut cache = GptCache::default();
    tape.reset();
    model.forward_cached(tape, &ids[..1], &mut cache); // the prefill: the first token
    let (mut gap, mut same) = (0.0f32, 0);
    for n in 2..=ids.len() {
        tape.reset();
        let stepped = model.forward_absorbed(tape, ids[n - 1], &mut cache, &absorbed); // (1, 1, V)
        let stepped = last_row(tape.value(stepped)).to_vec();
        let whole = model.forward(tape, &ids[..n], 1, None); // (1, n, V)
        let whole = last_row(tape.value(whole));
        gap = stepped
            .iter()
            .zip(whole)
            .fold(gap, |g, (a, b)| g.max((a - b).abs()));
        same += usize::from(likeliest(&stepped) == likeliest(whole));
    }
    (gap, same, ids.len() - 1)
}

/// The index of the largest value.
fn likeliest(logits: &[f32]) -> usize {
    let best = logits.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1));
    best.map_or(0, |(i, _)| i)
}
// ANCHOR_END: logit_gaps

/// The chapter's latent variants: what a token caches, and the absorbed weights' gaps.
pub fn print<W: Write>(out: &mut W) -> std::io::Result<()> {
    heading(
        out,
        "Multi-head latent attention: width 64, 4 heads, L = 32",
    )?;
    let mut lines = vec![];
    let full = KvShape::of(&Architecture::everything(4, 0.0), 2, 64, 4).bytes_per_token();
    for (name, arch) in variants().into_iter().filter(|(_, a)| a.latent.is_some()) {
        let mut tape = Tape::new();
        let (model, ids) = model_on_the_line(&mut tape, arch);
        let bytes = KvShape::of(&arch, 2, 64, 4).bytes_per_token();
        let (score_gap, share) = score_gaps(&mut tape, &model, &ids);
        let (logit_gap, same, steps) = logit_gaps(&mut tape, &model, &ids);
        lines.push(format!(
            "{name}: a token caches {} bytes (the full model: {})",
            thousands(bytes as usize),
            thousands(full as usize)
        ));
        lines.push(format!(
            "  scores: largest gap {score_gap:.1e}, at most {:.1}% of its bound",
            share * 100.0
        ));
        lines.push(format!(
            "  logits: largest gap {logit_gap:.1e}; the likeliest character the same in {same} of {steps} steps"
        ));
    }
    cell(out, "latent", "absorb, float32", &lines)
}
