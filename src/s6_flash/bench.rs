//! Tool layer, not shown in the chapter. What attention costs as the context grows:
//! `cargo run --release --example s6_flash -- --bench`.
//!
//! Each form of causal attention runs on stage 5's tape with the fast backend, on the threads it is
//! given: the naive graph (transpose, matmul, scale, tril, softmax, matmul) and the FlashAttention
//! node in its tiled and exact forms ([`crate::s5_gpt::flash`]). For each T and form it prints one
//! line,
//!
//! ```text
//! T=4096 path=tiled threads=1 forward_ms=… forward_gflops=… forward_peak_pct=… backward_ms=… backward_gflops=… backward_peak_pct=… peak_mib=… rss_mib=…
//! ```
//!
//! after a comment line with the core's FMA peak ([`fast::peak`]), which `forward_peak_pct` and
//! `backward_peak_pct` divide by.
//!
//! `peak_mib` is what the form holds beyond Q, K, V, the output and their gradients, counted from
//! the tape (every other node's value and gradient, the log-sum-exp the tiled node keeps) plus the
//! memory the op allocates while it runs ([`workspace_bytes`]: the fast layer's packed copies of K
//! and V and each thread's rows). `rss_mib` checks it from outside: how far the process's peak
//! resident memory rose during the measurement, on Linux, less the output and the gradients. It is
//! the larger by what the allocator and the fast layer's pool of buffers keep: the allocator keeps
//! what the forward pass freed while the backward pass allocates its own, so at length it comes
//! near the sum of the two passes' workspace where `peak_mib` counts the larger.

use std::fmt;
use std::time::Instant;

use clap::Args;

use crate::rng::numpy::NumpyRandom;
use crate::rng::torch::Generator;
use crate::s5_gpt::Tape;
use crate::s5_gpt::backend::Op;
use crate::s5_gpt::beyond::{Architecture, Attention};
use crate::s5_gpt::fast::{self, Fast, team};
use crate::s5_gpt::flash::{AttentionForm, FlashForm};
use crate::s5_gpt::model::attention_scale;
use crate::s5_gpt::ops::MASK_VALUE;
use crate::s5_gpt::tensor::{NodeId, Tensor};
use crate::s6_flash::Tiles;

/// The contexts `--bench` times unless `--context` picks others.
pub const CONTEXTS: [usize; 4] = [256, 1024, 4096, 16384];

/// How many bytes a float32 takes.
const F32: usize = std::mem::size_of::<f32>();

/// The flags of `s6_flash --bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Instead of the chapter's walk, time causal attention at each --context, forward and backward
    #[arg(long)]
    pub bench: bool,
    /// The context lengths T to time, comma-separated [default: 256,1024,4096,16384]. Without
    /// --bench, the one T of the walk's comparison at length (up to 4096; default 256)
    #[arg(long, value_name = "T,…", value_delimiter = ',')]
    pub context: Vec<usize>,
    /// The forms to time, comma-separated: naive (stage 4's graph), tiled, exact [default: all
    /// three, naive only where its T × T matrices fit in the memory available]
    #[arg(
        long,
        requires = "bench",
        value_name = "FORM,…",
        value_delimiter = ',',
        value_enum
    )]
    pub attention: Vec<AttentionForm>,
    /// Threads for the fast layer's kernels (0: one per core)
    #[arg(long, requires = "bench", value_name = "N", default_value_t = 1)]
    pub threads: usize,
    /// Heads H of the attention
    #[arg(long, requires = "bench", value_name = "H", default_value_t = 12)]
    pub heads: usize,
    /// The width C of all the heads together; each head has C / H columns
    #[arg(long, requires = "bench", value_name = "C", default_value_t = 768)]
    pub width: usize,
    /// The tiled form's blocks of queries and tiles of keys, Br = Bc = N rows [default: 16]. Without
    /// --bench, the tiles of the walk's comparison at length (default 64)
    #[arg(long, value_name = "N")]
    pub tile: Option<usize>,
    /// Time each measurement N times (after one untimed run) and print the median
    #[arg(long, requires = "bench", value_name = "N", default_value_t = 3)]
    pub repeat: usize,
    /// Time the forward pass only
    #[arg(long, requires = "bench")]
    pub forward_only: bool,
    /// Time stage 4's multi-head attention layer instead (projections, heads, output layer) at
    /// rasbt's comparison's shapes, batch 8, context 1,024, width 768, 12 heads, forward only
    #[arg(long, requires = "bench", conflicts_with_all = ["context", "heads", "width"])]
    pub modules: bool,
}

/// A setting `--bench` cannot run with, as one line: the problem, then the flag that fixes it.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(
        "--context {0} has no tokens; give context lengths of 1 or more, e.g. --context 256,1024"
    )]
    EmptyContext(usize),
    #[error(
        "--heads {heads} does not divide --width {width}; pick a width that is a multiple of the heads, e.g. --heads 12 --width 768"
    )]
    Heads { heads: usize, width: usize },
    #[error(
        "--tile {tile} does not fit T = {t}; give a tile of 1 to {t} rows, or a longer --context"
    )]
    Tile { tile: usize, t: usize },
    #[error("--repeat 0 times nothing; give --repeat 1 or more")]
    Repeat,
    #[error(
        "naive attention at T = {t} holds {need:.1} GiB of T × T scores and weights, and this machine has {free:.1} GiB available; time it at a shorter --context, or leave it out with --attention tiled,exact"
    )]
    NaiveTooLarge { t: usize, need: f64, free: f64 },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// One line of `--bench`: one form at one T.
#[derive(Clone, Debug)]
pub struct Measure {
    pub t: usize,
    pub form: AttentionForm,
    pub threads: usize,
    pub forward_ms: f64,
    /// `None` with `--forward-only`.
    pub backward_ms: Option<f64>,
    /// What the form holds beyond its inputs and outputs, counted by the code.
    pub peak_mib: f64,
    /// How far the process's peak resident memory rose, less the output and the gradients, where
    /// the system reports it.
    pub rss_mib: Option<f64>,
    /// The forward pass's useful products, 2·H·D·T(T + 1) flops (the scores and the weighted sum
    /// over the causal half), per second, and their share of the core's FMA peak on these threads
    /// where it was measured (`s5_gpt --peak`).
    pub forward_gflops: f64,
    pub forward_peak_share: Option<f64>,
    /// The backward pass's useful products, its four gradients' (dV, dP, dQ, dK: twice the forward
    /// pass's flops; the tiled node's recomputed scores not counted), per second, and their share of
    /// the peak; `None` with `--forward-only`.
    pub backward_gflops: Option<f64>,
    pub backward_peak_share: Option<f64>,
}

impl fmt::Display for Measure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let (t, path, threads) = (self.t, self.form.name(), self.threads);
        write!(f, "T={t} path={path} threads={threads} ")?;
        write!(f, "forward_ms={:.1}", self.forward_ms)?;
        write!(f, " forward_gflops={:.1}", self.forward_gflops)?;
        if let Some(share) = self.forward_peak_share {
            write!(f, " forward_peak_pct={:.1}", 100.0 * share)?;
        }
        if let Some(ms) = self.backward_ms {
            write!(f, " backward_ms={ms:.1}")?;
        }
        if let Some(gflops) = self.backward_gflops {
            write!(f, " backward_gflops={gflops:.1}")?;
        }
        if let Some(share) = self.backward_peak_share {
            write!(f, " backward_peak_pct={:.1}", 100.0 * share)?;
        }
        write!(f, " peak_mib={:.2}", self.peak_mib)?;
        if let Some(rss) = self.rss_mib {
            write!(f, " rss_mib={rss:.1}")?;
        }
        Ok(())
    }
}

/// Bytes to MiB.
fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl BenchArgs {
    /// Every setting checked before anything runs: a bad one stops the bench with one line, and
    /// naive attention is refused where its T × T matrices would not fit in the memory the machine
    /// has (it would swap for minutes instead).
    pub fn check(&self) -> Result<(), BenchError> {
        let (heads, width) = (self.heads, self.width);
        if heads == 0 || width == 0 || width % heads != 0 {
            return Err(BenchError::Heads { heads, width });
        }
        if self.repeat == 0 {
            return Err(BenchError::Repeat);
        }
        let contexts: &[usize] = if self.modules { &[] } else { self.contexts() };
        for &t in contexts {
            if t == 0 {
                return Err(BenchError::EmptyContext(t));
            }
            let tile = self.tile();
            if self.forms().contains(&AttentionForm::Tiled) && !(1..=t).contains(&tile) {
                return Err(BenchError::Tile { tile, t });
            }
            if self.attention.contains(&AttentionForm::Naive) {
                self.naive_fits(t)?;
            }
        }
        Ok(())
    }

    /// The forms to time: those `--attention` names, or all three.
    fn forms(&self) -> &[AttentionForm] {
        match &self.attention[..] {
            [] => &AttentionForm::ALL,
            named => named,
        }
    }

    /// Whether the naive graph's T × T matrices at `t` fit in the memory the machine has
    /// available (they are taken to fit where the system does not say).
    fn naive_fits(&self, t: usize) -> Result<(), BenchError> {
        let need = naive_bytes(t, self.heads, !self.forward_only) as f64;
        match available_bytes().filter(|&free| need > free as f64) {
            Some(free) => {
                let gib = |b: f64| b / (1u64 << 30) as f64;
                let (need, free) = (gib(need), gib(free as f64));
                Err(BenchError::NaiveTooLarge { t, need, free })
            }
            None => Ok(()),
        }
    }

    /// The contexts to time: those `--context` names, or [`CONTEXTS`].
    pub fn contexts(&self) -> &[usize] {
        match &self.context[..] {
            [] => &CONTEXTS,
            named => named,
        }
    }

    /// Br = Bc of the tiled form: `--tile`, or the tape's tiles.
    pub fn tile(&self) -> usize {
        self.tile.unwrap_or(crate::s5_gpt::flash::TAPE_TILES.br)
    }

    /// The tiled form's tiles.
    fn tiles(&self) -> Tiles {
        Tiles::new(self.tile(), self.tile())
    }
}

/// What the naive graph holds beyond its inputs and output for `heads` heads of T tokens: the
/// scores, the scaled scores, the masked scores and the weights, T × T each per head, and as much
/// again in their gradients after the backward pass. (Kᵀ, (T, D), is small beside them and is left
/// out here; the measurement counts it.)
pub fn naive_bytes(t: usize, heads: usize, backward: bool) -> usize {
    let forward = 4 * heads * t * t * F32;
    if backward { 2 * forward } else { forward }
}

/// What a FlashAttention node allocates while it runs on the fast backend, beyond what stays on
/// the tape, for `heads` (T, D) matrices on `threads` threads. The tiled form without dropout runs
/// the fast layer's kernels, which count their own ([`fast::flash::workspace_bytes`]); the exact
/// form runs the lesson's `flash.rs`, which holds seven rows of T (`Rows`) per matrix at a time.
pub fn workspace_bytes(
    form: FlashForm,
    (t, d, heads): (usize, usize, usize),
    (threads, backward): (usize, bool),
) -> usize {
    match form {
        FlashForm::Tiled(tiles) => {
            fast::flash::workspace_bytes((t, d), heads, tiles, (threads, backward))
        }
        FlashForm::Exact => 7 * t * F32,
    }
}

/// `MemAvailable` of /proc/meminfo in bytes, where the system has it.
fn available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The process's resident memory, now and at its peak, in bytes, where the system has them
/// (`VmRSS` and `VmHWM` of /proc/self/status).
fn resident_bytes() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the peak of resident memory to what is resident now (Linux's `clear_refs`, value 5).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Runs the bench: checks the settings, then prints one [`Measure`] per T and form to `out`, and
/// what it is timing to `progress`.
pub fn run(
    args: &BenchArgs,
    out: &mut impl std::io::Write,
    progress: &mut impl std::io::Write,
) -> Result<(), BenchError> {
    args.check()?;
    if args.modules {
        return run_modules(args, out, progress);
    }
    // Before the team starts, so that its helpers take no core from the chains.
    let threads = team::with_team(args.threads, team::threads)?;
    let peak = fast::peak::measure(threads);
    if let Some(p) = &peak {
        writeln!(out, "# {}", p.line())?;
    }
    team::with_team(args.threads, || -> Result<(), BenchError> {
        let threads = team::threads();
        for &t in args.contexts() {
            for &form in args.forms() {
                if let (AttentionForm::Naive, Err(too_large)) = (form, args.naive_fits(t)) {
                    writeln!(out, "T={t} path=naive not run: {too_large}")?;
                    continue;
                }
                writeln!(progress, "timing T={t} path={} …", form.name())?;
                let mut measure = measure(args, t, form, threads);
                measure.forward_peak_share = peak.map(|p| p.share(measure.forward_gflops, threads));
                measure.backward_peak_share = peak
                    .zip(measure.backward_gflops)
                    .map(|(p, gflops)| p.share(gflops, threads));
                writeln!(out, "{measure}")?;
            }
        }
        Ok(())
    })?
}

/// Times `form` at T = `t`: `repeat` forward passes (and backward passes) after one untimed, each
/// on a fresh tape with the fast backend, Q, K and V uniform in [−2, 2).
fn measure(args: &BenchArgs, t: usize, form: AttentionForm, threads: usize) -> Measure {
    let d = args.width / args.heads;
    let shape = [1, args.heads, t, d]; // (B, H, T, D)
    let mut rng = Generator::manual_seed(123);
    let mut draw = || {
        rng.uniform((args.heads * t, d), -2.0, 2.0)
            .into_raw_vec_and_offset()
            .0
    };
    let (qkv, d_out) = ([draw(), draw(), draw()], draw());
    let mut tape = Tape::with_backend(Box::new(Fast::new()));
    let ids = qkv.map(|x| tape.param(Tensor::new(&shape, x)));
    let flash = form.flash().map(|f| match f {
        FlashForm::Tiled(_) => FlashForm::Tiled(args.tiles()),
        exact => exact,
    });
    let before = resident_bytes().filter(|_| reset_peak());
    let (mut forward, mut backward, mut peak) = (vec![], vec![], 0);
    for run in 0..=args.repeat {
        tape.reset();
        let start = Instant::now();
        let output = attention(&mut tape, ids, d, flash);
        let forward_ms = start.elapsed().as_secs_f64() * 1e3;
        let start = Instant::now();
        if !args.forward_only {
            tape.backward_from(output, d_out.clone());
        }
        let backward_ms = start.elapsed().as_secs_f64() * 1e3;
        let sizes = (t, d, args.heads);
        let workspace = flash.map_or(0, |f| {
            workspace_bytes(f, sizes, (threads, !args.forward_only))
        });
        peak = peak.max(held_bytes(&tape, output) + workspace);
        if run > 0 {
            forward.push(forward_ms);
            backward.push(backward_ms);
        }
    }
    // The output, and after a backward pass its gradient (the copy handed in and the tape's) and
    // those of Q, K and V.
    let outputs = if args.forward_only { 1 } else { 6 } * args.heads * t * d * F32;
    let rss_mib = before.and_then(|(rss, _)| {
        let (_, peak_now) = resident_bytes()?;
        Some(mib(
            (peak_now.saturating_sub(rss) as usize).saturating_sub(outputs)
        ))
    });
    let forward_ms = median(&mut forward);
    let backward_ms = (!args.forward_only).then(|| median(&mut backward));
    let flops = 2.0 * (args.heads * d) as f64 * (t * (t + 1)) as f64;
    Measure {
        t,
        form,
        threads,
        forward_ms,
        forward_gflops: gflops(flops, forward_ms),
        forward_peak_share: None,
        backward_ms,
        backward_gflops: backward_ms.map(|ms| gflops(2.0 * flops, ms)),
        backward_peak_share: None,
        peak_mib: mib(peak),
        rss_mib,
    }
}

/// Causal attention of `q`, `k`, `v` (B, H, T, D) on the tape: the naive graph, or the
/// FlashAttention node in `flash`'s form. The same lines as stage 5's `Attention::forward`.
fn attention(
    tape: &mut Tape,
    [q, k, v]: [NodeId; 3],
    d: usize,
    flash: Option<FlashForm>,
) -> NodeId {
    let scale = attention_scale(d);
    if let Some(form) = flash {
        return tape.flash_attention(q, k, v, scale, MASK_VALUE, form); // (B, H, T, D)
    }
    let kt = tape.transpose(k); // (B, H, D, T)
    let scores = tape.matmul(q, kt); // (B, H, T, T)
    let scores = tape.scale(scores, scale); // (B, H, T, T)
    let masked = tape.tril(scores, MASK_VALUE); // (B, H, T, T)
    let weights = tape.softmax(masked); // (B, H, T, T)
    tape.matmul(weights, v) // (B, H, T, D)
}

/// The bytes the tape holds beyond Q, K, V (its parameters), the output and their gradients: every
/// other node's value and gradient, and the log-sum-exp a tiled node keeps.
fn held_bytes(tape: &Tape, output: NodeId) -> usize {
    let nodes = (tape.params().len()..tape.len()).map(NodeId);
    let floats: usize = nodes
        .map(|id| {
            let kept = match tape.op(id) {
                Op::FlashAttention(node) => node.lse.len(),
                _ => 0,
            };
            let value = tape.value(id).data.len() + tape.grad(id).map_or(0, <[f32]>::len);
            kept + if id == output { 0 } else { value }
        })
        .sum();
    floats * F32
}

/// The shapes of rasbt's comparison of multi-head attention implementations
/// (`ch03/02_bonus_efficient-multihead-attention`): batch, context, width, heads.
pub const MODULE_SHAPES: (usize, usize, usize, usize) = (8, 1024, 768, 12);

/// `--modules`: stage 4's layer on the tape, forward only, at [`MODULE_SHAPES`], one line per form:
/// `module=multihead path=naive threads=1 forward_ms=… forward_gflops=… forward_peak_pct=…`, after
/// the core's FMA peak.
fn run_modules(
    args: &BenchArgs,
    out: &mut impl std::io::Write,
    progress: &mut impl std::io::Write,
) -> Result<(), BenchError> {
    let (b, t, c, heads) = MODULE_SHAPES;
    let threads = team::with_team(args.threads, team::threads)?;
    let peak = fast::peak::measure(threads);
    if let Some(p) = &peak {
        writeln!(out, "# {}", p.line())?;
    }
    team::with_team(args.threads, || -> Result<(), BenchError> {
        let threads = team::threads();
        for &form in args.forms() {
            writeln!(progress, "timing module=multihead path={} …", form.name())?;
            let mut tape = Tape::with_backend(Box::new(Fast::new()));
            let mut rng = NumpyRandom::seed(123);
            let arch = Architecture {
                attention: form,
                ..Architecture::everything(heads, 0.0)
            };
            let layer = Attention::multi_head(&mut tape, &mut rng, c, arch);
            let x: Vec<f32> = rng.randn(b * t * c).into_iter().map(|z| z as f32).collect();
            let mut times = Vec::new();
            for run in 0..=args.repeat {
                tape.reset();
                let input = Tensor::new(&[b, t, c], x.clone());
                let start = Instant::now();
                let x = tape.input(input);
                layer.forward(&mut tape, x, None); // (B, T, C)
                if run > 0 {
                    times.push(start.elapsed().as_secs_f64() * 1e3);
                }
            }
            let ms = median(&mut times);
            let name = form.name();
            let gflops = gflops(module_flops(), ms);
            write!(
                out,
                "module=multihead path={name} threads={threads} forward_ms={ms:.1} forward_gflops={gflops:.1}"
            )?;
            if let Some(p) = &peak {
                write!(
                    out,
                    " forward_peak_pct={:.1}",
                    100.0 * p.share(gflops, threads)
                )?;
            }
            writeln!(out)?;
        }
        Ok(())
    })?
}

/// The useful products of stage 4's layer at [`MODULE_SHAPES`], as the lines of lengths count
/// them: its four projections, (B·T, C) × (C, C) each, and the attention's two over the causal
/// half, 2·C·T(T + 1) flops per sequence, whichever form computes them.
fn module_flops() -> f64 {
    let (b, t, c, _) = MODULE_SHAPES;
    let projections = 4 * b * t * c * c;
    let attention = b * c * t * (t + 1);
    2.0 * (projections + attention) as f64
}

/// `flops` done in `ms` milliseconds, in GFLOP/s.
fn gflops(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e-3) / 1e9
}

/// The median of `times`.
fn median(times: &mut [f64]) -> f64 {
    times.sort_by(f64::total_cmp);
    let n = times.len();
    if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(line: &str) -> Result<BenchArgs, clap::Error> {
        let words = std::iter::once("s6_flash").chain(line.split_whitespace());
        Cli::try_parse_from(words).map(|cli| cli.bench)
    }

    #[test]
    fn bad_settings_stop_with_one_line() {
        let refused = |line: &str| args(line).unwrap().check().unwrap_err().to_string();
        assert!(refused("--bench --context 0").starts_with("--context 0 has no tokens"));
        assert!(refused("--bench --heads 5").starts_with("--heads 5 does not divide --width 768"));
        assert!(refused("--bench --context 8 --tile 0").starts_with("--tile 0 does not fit T = 8"));
        assert!(refused("--bench --context 8 --tile 9").starts_with("--tile 9 does not fit T = 8"));
        assert!(refused("--bench --repeat 0").starts_with("--repeat 0"));
        let too_long = refused("--bench --context 1000000 --attention naive");
        assert!(too_long.starts_with("naive attention at T = 1000000 holds 357627.9 GiB"));
        for message in [too_long, refused("--bench --heads 0")] {
            assert!(!message.contains('\n'), "{message}");
        }
        assert!(args("--bench --attention fast").is_err());
        // --context and --tile also set the walk's comparison at length; the others are --bench's.
        assert!(args("--context 8 --tile 4").is_ok());
        for bench_only in [
            "--attention tiled",
            "--threads 2",
            "--heads 2",
            "--width 8",
            "--repeat 2",
            "--forward-only",
            "--modules",
        ] {
            assert!(args(bench_only).is_err(), "{bench_only} without --bench");
        }
        assert!(
            args("--bench --context 256 --attention naive")
                .unwrap()
                .check()
                .is_ok()
        );
    }

    /// A small bench: one line per form, in the documented format, and naive's count of what it
    /// holds is its formula plus Kᵀ and its gradient.
    #[test]
    fn prints_a_line_per_form() {
        let line = "--bench --context 8 --heads 2 --width 8 --tile 3 --repeat 1";
        let (mut out, mut progress) = (vec![], vec![]);
        run(&args(line).unwrap(), &mut out, &mut progress).unwrap();
        let out = String::from_utf8(out).unwrap();
        // The peak's comment first, where it is measured, then the lines.
        let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with("# ")).collect();
        assert_eq!(lines.len(), 3, "{out}");
        let peak = fast::peak::measure(1).is_some();
        assert_eq!(out.starts_with("# this core's FMA peak"), peak, "{out}");
        for (line, form) in lines.iter().zip(["naive", "tiled", "exact"]) {
            assert!(line.starts_with(&format!("T=8 path={form} threads=1 forward_ms=")));
            assert!(line.contains(" forward_gflops="), "{line}");
            assert!(line.contains(" backward_gflops="), "{line}");
            assert!(line.contains(" backward_ms=") && line.contains(" peak_mib="));
        }
        let kt = 2 * 2 * 8 * 4 * F32; // Kᵀ (1, 2, 4, 8) and its gradient
        let naive = mib(naive_bytes(8, 2, true) + kt);
        assert!(
            lines[0].contains(&format!(" peak_mib={naive:.2}")),
            "{}",
            lines[0]
        );
    }
}
