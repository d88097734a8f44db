//! Tool layer. How fast a training step is, and where its time goes: `s5_gpt --bench N`.
//!
//! [`run`] times training steps of the chapter's model twice: first plainly, for the median time
//! per step and the achieved GFLOP/s, then through the fast layer's [`Timed`] backend, for the time
//! of each op. Both passes train the same model on from where the previous one stopped.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::ControlFlow;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::config::{BENCH, Config, THREADS};
use crate::s5_gpt::app::error::ToolError;
use crate::s5_gpt::backend::Op;
use crate::s5_gpt::fast::kernels::{self, Strided};
use crate::s5_gpt::fast::peak::{self, Peak};
use crate::s5_gpt::fast::team;
use crate::s5_gpt::fast::timers::{Clock, Timed};
use crate::s5_gpt::tape::Tape;
use crate::s5_gpt::tensor::NodeId;
use crate::s5_gpt::train::Trainer;

/// The product kernel's best speed on one thread, in GFLOP/s: the fastest of ten runs of one
/// n × n × n product. It is the limit a training step's products are measured against.
pub fn product_peak(n: usize) -> f64 {
    let a: Vec<f32> = (0..n * n).map(|i| (i % 7) as f32 * 0.25).collect();
    let mut c = vec![0.0; n * n];
    let once = |c: &mut [f32]| {
        let started = Instant::now();
        let (a, b) = (Strided::rows(&a, n), Strided::transposed(&a, n));
        kernels::matmul(c, a, b, None, (n, n, n));
        started.elapsed()
    };
    let best = (0..10).map(|_| once(&mut c)).min().expect("ten runs");
    2.0 * (n * n * n) as f64 / best.as_secs_f64() / 1e9
}

/// Untimed steps before the timed ones: the buffers and caches settle.
const WARMUP: usize = 20;

/// The parts of a step that the breakdown reports, and the ops (by name) that make each up.
const PARTS: [(&str, &[&str]); 7] = [
    ("matrix products", &["matmul", "linear"]),
    (
        "scale, mask, softmax",
        &["scale", "tril", "softmax", "dropout"],
    ),
    (
        "heads, LayerNorm",
        &["split_heads", "merge_heads", "layer_norm"],
    ),
    ("GELU", &["gelu"]),
    ("loss", &["cross_entropy"]),
    ("clip, AdamW", &["clip_grad_norm", "adamw"]),
    ("the rest", &[]),
];

/// Multiply-adds × 2 of one training step's matrix products, read off the graph `tape` holds
/// (the last step's): each product the forward pass recorded, and twice as many backward (each
/// product's gradient is two products of the same size). Counted from the graph, the figure follows
/// every architecture: no feed-forward products in an attention-only model, narrower keys and
/// values with grouped-query heads, latent attention's own projections. A FlashAttention node
/// counts as the two products it stands for, over the whole T × T, as the naive graph computes
/// them.
pub fn graph_flops(tape: &Tape) -> u64 {
    let multiply_adds: usize = (0..tape.len())
        .map(|id| multiply_adds(tape, NodeId(id)))
        .sum();
    (3 * 2 * multiply_adds) as u64
}

/// The multiply-adds of node `id`'s forward pass, if it is a product.
fn multiply_adds(tape: &Tape, id: NodeId) -> usize {
    let matrices = |id| tape.value(id).matrices(); // (stacked matrices, rows, columns)
    match tape.op(id) {
        Op::MatMul { a, b } => {
            let ((batch, m, k), (_, _, n)) = (matrices(*a), matrices(*b));
            batch * m * k * n
        }
        Op::Linear { x, w, .. } => {
            let (_, n_out, _) = matrices(*w); // (N_out, N_in)
            tape.value(*x).data.len() * n_out // rows × n_in × n_out
        }
        Op::FlashAttention(node) => {
            let [q, k, v] = node.qkv.map(matrices); // (B·H, T, D) each
            q.0 * q.1 * k.1 * (q.2 + v.2) // Q·Kᵀ and weights·V
        }
        _ => 0,
    }
}

/// What [`run`] measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    pub threads: usize,
    /// Timed steps (after the untimed warm-up).
    pub steps: usize,
    /// The median time of a training step, timers off.
    pub median: Duration,
    pub flops_per_step: u64,
    /// Each part's median time per step, timers on, in the order of the breakdown (products,
    /// softmax, heads and LayerNorm, GELU, loss, optimiser, the rest).
    pub parts: Vec<(&'static str, Duration)>,
    /// The core's FMA peak, the higher of a measure before the steps and one after them (none where
    /// it cannot be measured).
    pub peak: Option<Peak>,
}

impl BenchReport {
    /// Floating-point operations of the matrix products per second, at the median step time.
    pub fn gflops(&self) -> f64 {
        self.flops_per_step as f64 / self.median.as_secs_f64() / 1e9
    }

    /// The same operations per second of the products' own time (the breakdown's matrix
    /// products, timers on): how fast the kernel ran inside the step, where
    /// [`BenchReport::gflops`] also counts the time of every other op against it.
    pub fn products_gflops(&self) -> Option<f64> {
        let (_, time) = self.parts.iter().find(|(part, _)| *part == PARTS[0].0)?;
        (!time.is_zero()).then(|| self.flops_per_step as f64 / time.as_secs_f64() / 1e9)
    }
}

impl fmt::Display for BenchReport {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (median, steps, threads) = (ms(self.median), self.steps, self.threads);
        writeln!(
            f,
            "median {median:.3} ms per training step over {steps} steps, {threads} thread(s)"
        )?;
        let mflop = self.flops_per_step as f64 / 1e6;
        writeln!(
            f,
            "matrix products: {mflop:.1} MFLOP per step, {:.1} GFLOP/s",
            self.gflops()
        )?;
        if let Some(p) = &self.peak {
            let share = 100.0 * p.share(self.gflops(), threads);
            writeln!(f, "  {share:.0} % of {}", p.line())?;
        }
        writeln!(f, "per part, median ms per step (timers on):")?;
        for (part, time) in &self.parts {
            writeln!(f, "  {:<22}{:>7.3}", part, ms(*time))?;
        }
        if let (Some(gflops), Some(p)) = (self.products_gflops(), &self.peak) {
            let share = 100.0 * p.share(gflops, threads);
            writeln!(
                f,
                "the products over their own time (timers on): {gflops:.1} GFLOP/s, {share:.0} % of the peak"
            )?;
        }
        Ok(())
    }
}

/// `--peak`: the core's FMA peak, and what the product kernel reaches of it on one 1024³ product
/// and on each product of a training step of nanoGPT's CPU configuration ([`NANOGPT_PRODUCTS`]).
/// The peak is measured before the products and after them, and the shares divide by the higher
/// ([`Peak::higher`]), so that a clock that dropped for one measure does not lift them.
pub fn print_peak(out: &mut impl std::io::Write, cfg: &Config) -> Result<(), ToolError> {
    let threads = match THREADS.check(cfg.threads)? {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let Some(before) = peak::measure(threads) else {
        writeln!(
            out,
            "this core has no FMA vectors the crate times (AVX2 with FMA, or AVX-512)"
        )?;
        return Ok(());
    };
    let own = product_peak(1024);
    let timed: Vec<(StepProduct, f64)> =
        NANOGPT_PRODUCTS.iter().map(|&p| (p, p.gflops())).collect();
    let after = peak::measure(threads).unwrap_or(before);
    let p = before.higher(after);
    writeln!(out, "{}", p.line())?;
    writeln!(
        out,
        "  (the higher of two measures, before the products and after them: {:.1} and {:.1} on 1 thread)",
        before.one, after.one
    )?;
    let share = 100.0 * p.share(own, 1);
    writeln!(
        out,
        "the product kernel, 1024 x 1024 x 1024 on 1 thread: {own:.1} GFLOP/s, {share:.0} % of it"
    )?;
    writeln!(
        out,
        "nanoGPT's CPU configuration's products on 1 thread (m x k x n, per step, GFLOP/s, share):"
    )?;
    for (product, gflops) in &timed {
        let (m, k, n) = product.mkn;
        let shape = format!("{m} x {k} x {n}");
        let share = 100.0 * p.share(*gflops, 1);
        writeln!(
            out,
            "  {:<28}{shape:>16}{:>5}{gflops:>8.1}{share:>6.0} %",
            product.name, product.per_step
        )?;
    }
    let (flop, time) = step_flops_and_time(&timed);
    let gflops = flop / time / 1e9;
    let share = 100.0 * p.share(gflops, 1);
    writeln!(
        out,
        "  all of a step's products at these speeds: {:.1} MFLOP, {gflops:.1} GFLOP/s, {share:.0} %",
        flop / 1e6
    )?;
    Ok(())
}

/// One product of a training step, as the fast layer runs it: `a (m×k) · b (k×n)`, A read
/// transposed for a weight's gradient (gᵀ·x) and B read transposed for a layer's x·Wᵀ, and how
/// many times a step runs it.
#[derive(Clone, Copy, Debug)]
pub struct StepProduct {
    pub name: &'static str,
    pub mkn: (usize, usize, usize),
    pub a_transposed: bool,
    pub b_transposed: bool,
    pub per_step: usize,
}

/// A product `name` of shape `mkn` that a step runs `per_step` times; `t` says which of A and B
/// are read transposed.
const fn product(
    name: &'static str,
    mkn: (usize, usize, usize),
    t: [bool; 2],
    per_step: usize,
) -> StepProduct {
    StepProduct {
        name,
        mkn,
        a_transposed: t[0],
        b_transposed: t[1],
        per_step,
    }
}

/// Neither factor read transposed.
const PLAIN: [bool; 2] = [false, false];
/// A read transposed: a weight's gradient gᵀ·x.
const A_T: [bool; 2] = [true, false];
/// B read transposed: a layer's x·Wᵀ.
const B_T: [bool; 2] = [false, true];

/// Every product of a training step of nanoGPT's CPU configuration (B 12, T 64, C 128, 4 blocks of
/// 4 heads of 32, 65 characters): each layer's three on B·T = 768 rows (its x·Wᵀ, then g·W and
/// gᵀ·x backwards), and each head's six, 48 heads a block.
pub const NANOGPT_PRODUCTS: [StepProduct; 18] = [
    product("Q, K, V, out: x·Wᵀ", (768, 128, 128), B_T, 16),
    product("Q, K, V, out: dx = g·W", (768, 128, 128), PLAIN, 16),
    product("Q, K, V, out: dW = gᵀ·x", (128, 768, 128), A_T, 16),
    product("MLP up: x·Wᵀ", (768, 128, 512), B_T, 4),
    product("MLP up: dx = g·W", (768, 512, 128), PLAIN, 4),
    product("MLP up: dW = gᵀ·x", (512, 768, 128), A_T, 4),
    product("MLP down: x·Wᵀ", (768, 512, 128), B_T, 4),
    product("MLP down: dx = g·W", (768, 128, 512), PLAIN, 4),
    product("MLP down: dW = gᵀ·x", (128, 768, 512), A_T, 4),
    product("head: x·Wᵀ", (768, 128, 65), B_T, 1),
    product("head: dx = g·W", (768, 65, 128), PLAIN, 1),
    product("head: dW = gᵀ·x", (65, 768, 128), A_T, 1),
    product("a head's scores: q·kᵀ", (64, 32, 64), B_T, 192),
    product("a head's weights·v", (64, 64, 32), PLAIN, 192),
    product("a head's dweights = dO·vᵀ", (64, 32, 64), B_T, 192),
    product("a head's dv = weightsᵀ·dO", (64, 64, 32), A_T, 192),
    product("a head's dq = dscores·k", (64, 64, 32), PLAIN, 192),
    product("a head's dk = dscoresᵀ·q", (64, 64, 32), A_T, 192),
];

/// Each product's flops in a step, and the time its speed gives them: for the share of the whole.
pub fn step_flops_and_time(products: &[(StepProduct, f64)]) -> (f64, f64) {
    products
        .iter()
        .fold((0.0, 0.0), |(flop, time), (p, gflops)| {
            let f = p.flop() * p.per_step as f64;
            (flop + f, time + f / (gflops * 1e9))
        })
}

impl StepProduct {
    /// 2·m·k·n: a multiply and an add per term.
    pub fn flop(&self) -> f64 {
        let (m, k, n) = self.mkn;
        2.0 * (m * k * n) as f64
    }

    /// The kernel's best speed on this product on the calling thread, in GFLOP/s: the fastest of
    /// five runs, each repeating the product for at least 20 ms.
    pub fn gflops(&self) -> f64 {
        let (m, k, n) = self.mkn;
        let values = |len: usize| -> Vec<f32> { (0..len).map(|i| (i % 7) as f32 * 0.25).collect() };
        let (a, b, mut c) = (values(m * k), values(k * n), vec![0.0; m * n]);
        let a = match self.a_transposed {
            true => Strided::transposed(&a, m),
            false => Strided::rows(&a, k),
        };
        let b = match self.b_transposed {
            true => Strided::transposed(&b, k),
            false => Strided::rows(&b, n),
        };
        let flop = self.flop();
        let repeats = (4e8 / flop).ceil() as usize; // about 20 ms at 20 GFLOP/s
        let mut once = || {
            let started = Instant::now();
            for _ in 0..repeats {
                kernels::matmul(&mut c, a, b, None, self.mkn);
            }
            started.elapsed()
        };
        let best = (0..5).map(|_| once()).min().expect("five runs");
        flop * repeats as f64 / best.as_secs_f64() / 1e9
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The time of each step `trainer` trains from here, `steps` of them; `each` is called after every
/// step.
fn time_steps(
    trainer: &mut Trainer,
    steps: usize,
    mut each: impl FnMut(Duration),
) -> Result<Vec<Duration>, ToolError> {
    trainer.steps = trainer.losses.len() + steps;
    let mut times = Vec::with_capacity(steps);
    let mut started = Instant::now();
    trainer.train(|_| {
        let time = started.elapsed();
        each(time);
        times.push(time);
        started = Instant::now();
        ControlFlow::Continue(())
    })?;
    Ok(times)
}

/// Times `steps` training steps after 20 untimed ones, then as many again with a clock per op.
pub fn run(cfg: &Config, steps: usize) -> Result<BenchReport, ToolError> {
    let steps = BENCH.check(steps)?;
    let cfg = Config {
        max_steps: None,
        ..cfg.clone()
    };
    // Before the team starts and after it is gone, so that its helpers take no core from the
    // chains; the shares divide by the higher of the two measures (`Peak::higher`).
    let before = peak::measure(cfg.with_threads(|| Ok(team::threads()))?);
    let mut report = cfg.with_threads(|| {
        let mut trainer = cfg.trainer()?;
        time_steps(&mut trainer, WARMUP, drop)?;
        let mut times = time_steps(&mut trainer, steps, drop)?;

        // The same trainer, its tape now computing through a clock.
        let clock = Clock::default();
        let tape = std::mem::replace(&mut trainer.tape, Tape::new());
        trainer.tape = retimed(tape, &cfg, &clock);
        let mut per_part: Vec<Vec<Duration>> = vec![Vec::with_capacity(steps); PARTS.len()];
        time_steps(&mut trainer, steps, |total| {
            let spent = std::mem::take(&mut *clock.borrow_mut());
            split(&spent, total)
                .iter()
                .zip(&mut per_part)
                .for_each(|(t, part)| part.push(*t));
        })?;
        Ok(BenchReport {
            threads: team::threads(),
            steps,
            median: median(&mut times),
            flops_per_step: graph_flops(&trainer.tape),
            parts: PARTS
                .iter()
                .zip(&mut per_part)
                .map(|((name, _), t)| (*name, median(t)))
                .collect(),
            peak: None,
        })
    })?;
    let after = peak::measure(report.threads);
    report.peak = match (before, after) {
        (Some(before), Some(after)) => Some(before.higher(after)),
        (one, other) => one.or(other),
    };
    Ok(report)
}

/// `tape` with its parameters, computing through `cfg`'s backend timed into `clock`.
fn retimed(tape: Tape, cfg: &Config, clock: &Clock) -> Tape {
    let timed = Timed {
        inner: cfg.backend(),
        clock: Rc::clone(clock),
    };
    let mut new = Tape::with_backend(Box::new(timed));
    for p in tape.params() {
        new.param(p.clone());
    }
    new
}

/// A step's time per part: each part's ops, and the rest of `total`.
fn split(spent: &BTreeMap<&'static str, Duration>, total: Duration) -> Vec<Duration> {
    let mut parts: Vec<Duration> = PARTS
        .iter()
        .map(|(_, ops)| ops.iter().filter_map(|op| spent.get(op)).sum())
        .collect();
    let timed: Duration = parts.iter().sum();
    *parts.last_mut().expect("PARTS ends with the rest") = total.saturating_sub(timed);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::numpy::NumpyRandom;
    use crate::s5_gpt::beyond::{Architecture, Gpt, GptConfig};

    /// The graph `model` records for one batch of `batch` rows and its loss.
    fn graph_of(model: GptConfig, batch: usize) -> Tape {
        let mut tape = Tape::new();
        let gpt = Gpt::new(&mut tape, &mut NumpyRandom::seed(42), model);
        let ids: Vec<usize> = (0..batch * model.context_size)
            .map(|i| i % model.vocab_size)
            .collect();
        let logits = gpt.forward(&mut tape, &ids, batch, None);
        tape.cross_entropy(logits, &ids);
        tape
    }

    #[test]
    fn the_listed_products_are_every_flop_of_nanogpts_step() {
        let model = GptConfig {
            vocab_size: 65,
            context_size: 64,
            embedding_size: 128,
            blocks: 4,
            architecture: Architecture {
                qkv: true,
                heads: 4,
                residual: true,
                layer_norm: true,
                ..Architecture::default()
            },
        };
        let listed: f64 = NANOGPT_PRODUCTS
            .iter()
            .map(|p| p.flop() * p.per_step as f64)
            .sum();
        assert_eq!(listed, graph_flops(&graph_of(model, 12)) as f64);
        let timed: Vec<_> = NANOGPT_PRODUCTS.iter().map(|&p| (p, 50.0)).collect();
        let (flop, time) = step_flops_and_time(&timed);
        assert!(
            (flop / time / 1e9 - 50.0).abs() < 1e-9,
            "every product at 50 GFLOP/s"
        );
    }

    #[test]
    fn an_attention_only_step_counts_no_feed_forward_products() {
        let (b, t, c, v, h) = (32, 64, 64, 65, 4);
        let model = GptConfig {
            vocab_size: v,
            context_size: t,
            embedding_size: c,
            blocks: 2,
            architecture: Architecture {
                attention_only: true,
                kv_heads: Some(2),
                ..Architecture::everything(h, 0.0)
            },
        };
        let n = b * t;
        let projections = n * c * (c + c / 2 + c / 2 + c); // W_query, W_key, W_value (2 of 4 heads), out
        let attention = b * h * t * t * (c / h) * 2; // Q·Kᵀ, weights·V
        let forward = 2 * (projections + attention) + n * c * v;
        assert_eq!(graph_flops(&graph_of(model, b)), (3 * 2 * forward) as u64);
    }

    #[test]
    fn the_products_own_share_divides_by_their_own_time() {
        let report = BenchReport {
            threads: 1,
            steps: 1,
            median: Duration::from_millis(4),
            flops_per_step: 300_000_000,
            parts: PARTS
                .iter()
                .map(|(name, _)| (*name, Duration::from_millis(1)))
                .collect(),
            peak: None,
        };
        assert!((report.gflops() - 75.0).abs() < 1e-9, "over the whole step");
        let own = report.products_gflops().expect("a time for the products");
        assert!((own - 300.0).abs() < 1e-9, "over the products' millisecond");
    }
}
