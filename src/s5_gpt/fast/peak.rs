//! Fast layer. The core's own limit, measured: fused multiply-adds per second in the widest vectors
//! it has, with enough independent chains in flight that none waits for another (`s5_gpt --peak`).
//!
//! A core issues an FMA on each of its FMA ports every cycle, and each takes a few cycles (its
//! latency) before its result can be used again. So the peak needs at least latency × ports
//! independent accumulators: 4 × 2 = 8 on the cores this crate meets. [`measure`] runs 12 chains of
//! 256-bit vectors (AVX2, 16 registers) or 24 of 512-bit ones (AVX-512, 32 registers), and counts
//! 2 flops per lane per FMA, the same count the benchmarks give the products.

/// The core's measured peak.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// "AVX-512" or "AVX2", the vectors timed.
    pub vectors: &'static str,
    /// GFLOP/s on one thread, and on `threads` at once (their sum).
    pub one: f64,
    pub all: f64,
    pub threads: usize,
}

impl Peak {
    /// The peak as the benchmarks name it: its GFLOP/s, its vectors and threads (on one thread
    /// only once).
    pub fn line(&self) -> String {
        let all = match self.threads {
            1 => String::new(),
            n => format!(", {:.1} on {n}", self.all),
        };
        format!(
            "this core's FMA peak ({} vectors): {:.1} GFLOP/s on 1 thread{all} (`s5_gpt --peak`)",
            self.vectors, self.one
        )
    }

    /// The higher of two measures of the same core (each thread count's own): a shared machine's
    /// clock moves between measures, and a kernel timed between them reached at most what the core
    /// reached then.
    pub fn higher(self, other: Peak) -> Peak {
        Peak {
            one: self.one.max(other.one),
            all: self.all.max(other.all),
            ..self
        }
    }

    /// `gflops` as a share of the peak on `threads` threads (one thread's peak times their number,
    /// at most the all-thread peak).
    pub fn share(&self, gflops: f64, threads: usize) -> f64 {
        let limit = if threads <= 1 {
            self.one
        } else {
            (self.one * threads as f64).min(self.all.max(self.one))
        };
        gflops / limit
    }
}

/// FMA rounds per timed run: about 2 GFLOP with AVX2, a few tens of milliseconds.
const ROUNDS: usize = 10_000_000;

/// The peak of this core, on one thread and on `threads` at once; `None` where the core has no
/// FMA vectors the crate uses (other architectures, x86-64 without AVX2 and FMA).
pub fn measure(threads: usize) -> Option<Peak> {
    let (vectors, run) = widest()?;
    let best = || (0..5).map(|_| run(ROUNDS)).fold(0.0, f64::max);
    let one = best();
    let all = std::thread::scope(|s| {
        let runs: Vec<_> = (0..threads).map(|_| s.spawn(best)).collect();
        runs.into_iter()
            .map(|r| r.join().expect("a timing thread"))
            .sum()
    });
    Some(Peak {
        vectors,
        one,
        all,
        threads,
    })
}

/// A timed run of n rounds of the chains, in GFLOP/s.
type Chains = fn(usize) -> f64;

/// The widest vectors this core runs, and the timed chains in them.
fn widest() -> Option<(&'static str, Chains)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(("AVX-512", |n| {
                timed(n, 24 * 16, || unsafe { x86::chains512(n) })
            }));
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(("AVX2", |n| {
                timed(n, 12 * 8, || unsafe { x86::chains256(n) })
            }));
        }
    }
    None
}

/// GFLOP/s of `run`, `rounds` rounds of `lanes` FMAs.
#[cfg(target_arch = "x86_64")]
fn timed(rounds: usize, lanes: usize, run: impl FnOnce() -> f32) -> f64 {
    let started = std::time::Instant::now();
    std::hint::black_box(run());
    2.0 * (rounds * lanes) as f64 / started.elapsed().as_secs_f64() / 1e9
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// 12 chains of 8 lanes: `acc = acc·a + b`, `rounds` times each.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn chains256(rounds: usize) -> f32 {
        let (a, b) = (_mm256_set1_ps(0.999_999), _mm256_set1_ps(1e-7));
        let mut acc = [_mm256_set1_ps(1.0); 12];
        for _ in 0..rounds {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, a, b);
            }
        }
        let mut lanes = [0.0f32; 8];
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }

    /// 24 chains of 16 lanes.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn chains512(rounds: usize) -> f32 {
        let (a, b) = (_mm512_set1_ps(0.999_999), _mm512_set1_ps(1e-7));
        let mut acc = [_mm512_set1_ps(1.0); 24];
        for _ in 0..rounds {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, a, b);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
        _mm512_reduce_add_ps(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the core has FMA vectors, the chains run and the shares divide by the right limit.
    #[test]
    fn the_peak_is_measured_and_shared() {
        let Some(p) = measure(2) else { return };
        assert!(p.one > 0.0 && p.all > 0.0 && p.threads == 2);
        assert_eq!(p.share(p.one, 1), 1.0);
        assert!(p.share(p.one, 2) <= 1.0 && p.share(p.one, 2) >= 0.5);
    }

    #[test]
    fn the_line_names_one_thread_once() {
        let p = |threads| Peak {
            vectors: "AVX2",
            one: 90.0,
            all: 170.0,
            threads,
        };
        assert_eq!(
            p(2).line(),
            "this core's FMA peak (AVX2 vectors): 90.0 GFLOP/s on 1 thread, 170.0 on 2 (`s5_gpt --peak`)"
        );
        assert_eq!(
            p(1).line(),
            "this core's FMA peak (AVX2 vectors): 90.0 GFLOP/s on 1 thread (`s5_gpt --peak`)"
        );
    }

    #[test]
    fn the_higher_peak_is_taken_for_each_thread_count() {
        let measure = |one, all| Peak {
            vectors: "AVX2",
            one,
            all,
            threads: 2,
        };
        let higher = measure(90.0, 170.0).higher(measure(80.0, 175.0));
        assert_eq!((higher.one, higher.all), (90.0, 175.0));
    }
}
