//! Fast layer. The product kernel's tile for each kind of core, and the one this CPU runs.
//!
//! A tile keeps R rows × NR columns of a product's outputs in vector registers and adds one term of
//! k to each per step, `acc[r][q] = fma(a[r][p], b[p][q], acc[r][q])`, p in order. Which shape keeps
//! a core's FMA units busy depends on the core: two 512-bit FMA units with a latency of four cycles
//! need at least eight independent sums in flight, and a tile whose every FMA waits on a broadcast
//! of A is bound by loads. So the shape is chosen per kind of core at start-up, as BLIS and
//! OpenBLAS choose theirs; every shape adds the same terms to each output in the same order, one
//! fused multiply-add each, so the choice changes the speed and never a bit. [`lanes`] is the
//! vector width in use, which also bounds the tiles that may run.
//!
//! The x86-64 tiles below are written with `core::arch` intrinsics: a tile of 8 to 12 rows written as
//! plain loops over arrays is too large for the compiler's vectoriser and inliner, which then leave
//! its sums in memory.

/// The vector instructions the product kernel's `vectorised` compiles its loops for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lanes {
    /// AVX-512 (F, VL, BW and DQ), with AVX2 and FMA.
    Avx512,
    /// AVX2 and FMA.
    Avx2,
    /// Neither: plain code, and `mul_add` in software.
    Portable,
}

/// Set this environment variable to run the fast layer without AVX2 and FMA, as on a CPU that has
/// neither: `mul_add` then computes the fused multiply-add in software. The bits stay the same
/// (`tests/s5_layers.rs` checks), only slower.
pub const PORTABLE_VAR: &str = "ATTENTION_PORTABLE";

/// Set this environment variable to run the fast layer with AVX2 and FMA where the CPU also has
/// AVX-512, as on a CPU without it. The bits stay the same (`tests/s5_layers.rs` checks).
pub const AVX2_VAR: &str = "ATTENTION_AVX2";

/// What the product kernel's `vectorised` uses: on x86-64, the widest of [`Lanes`] that the CPU
/// has and that neither [`PORTABLE_VAR`] nor [`AVX2_VAR`] rules out; elsewhere, plain code.
pub fn lanes() -> Lanes {
    #[cfg(target_arch = "x86_64")]
    {
        static LANES: std::sync::OnceLock<Lanes> = std::sync::OnceLock::new();
        *LANES.get_or_init(|| {
            use std::arch::is_x86_feature_detected as has;
            let set = |var| std::env::var_os(var).is_some();
            if set(PORTABLE_VAR) || !(has!("avx2") && has!("fma")) {
                Lanes::Portable
            } else if set(AVX2_VAR)
                || !(has!("avx512f") && has!("avx512vl") && has!("avx512bw") && has!("avx512dq"))
            {
                Lanes::Avx2
            } else {
                Lanes::Avx512
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    Lanes::Portable
}

/// Which tile the product kernel uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
    /// 12 rows × 32 columns of AVX-512 (24 registers of sums): for cores with two 512-bit FMA units
    /// (Intel's Xeons since Skylake-SP). Each step of k broadcasts 12 values of A and loads two
    /// vectors of B for 24 fused multiply-adds.
    Avx512Wide,
    /// 8 rows × 32 columns of AVX-512 (16 registers of sums): for cores that run a 512-bit
    /// instruction as two 256-bit halves (AMD's Zen 4), where 16 sums already keep their one
    /// 512-bit FMA a cycle busy and a tile reads 8 rows of A at once rather than 12. To compare
    /// the two on a core, run the same `s5_gpt --bench` with `ATTENTION_TILE=avx512-12x32` and with
    /// `ATTENTION_TILE=avx512-8x32` ([`TILE_VAR`]).
    Avx512Halves,
    /// 6 rows × 16 columns of AVX2 (12 registers of sums, of the 16): for cores with AVX2 and FMA
    /// but no AVX-512.
    Avx2,
    /// 6 rows × 16 columns as plain Rust loops, vectorised by the compiler for whatever the CPU
    /// has ([`Lanes`]), and the only tile elsewhere (ARM, WebAssembly).
    Plain,
}

/// Set this environment variable to a tile's [`Tile::name`] to use that tile where the CPU can run
/// it, as on another kind of core. The bits stay the same (`tests/s5_layers.rs` checks each tile).
pub const TILE_VAR: &str = "ATTENTION_TILE";

impl Tile {
    /// Every tile, widest first.
    pub const ALL: [Tile; 4] = [
        Tile::Avx512Wide,
        Tile::Avx512Halves,
        Tile::Avx2,
        Tile::Plain,
    ];

    /// The name [`TILE_VAR`] takes.
    pub fn name(self) -> &'static str {
        match self {
            Tile::Avx512Wide => "avx512-12x32",
            Tile::Avx512Halves => "avx512-8x32",
            Tile::Avx2 => "avx2-6x16",
            Tile::Plain => "plain-6x16",
        }
    }

    /// The most rows of one tile, and its columns (a panel of packed B).
    pub fn shape(self) -> (usize, usize) {
        match self {
            Tile::Avx512Wide => (12, 32),
            Tile::Avx512Halves => (8, 32),
            Tile::Avx2 | Tile::Plain => (6, 16),
        }
    }

    /// Whether this tile's instructions are among those of `lanes`.
    pub fn runs_with(self, lanes: Lanes) -> bool {
        match self {
            Tile::Avx512Wide | Tile::Avx512Halves => lanes == Lanes::Avx512,
            Tile::Avx2 => lanes != Lanes::Portable,
            Tile::Plain => true,
        }
    }
}

/// The tile the product kernel uses: the one [`TILE_VAR`] names, else the one for this kind of
/// core ([`for_this_core`]).
///
/// # Exits
/// If [`TILE_VAR`] names no tile, or one whose instructions the vector width in use ([`lanes`])
/// lacks: running it would be undefined behaviour, and ignoring the request would let a test pass
/// that checked nothing: one line of error and exit code 2, as for a bad argument.
pub fn tile() -> Tile {
    static TILE: std::sync::OnceLock<Tile> = std::sync::OnceLock::new();
    *TILE.get_or_init(|| {
        let Some(name) = std::env::var_os(TILE_VAR) else {
            return for_this_core(lanes());
        };
        let name = name.to_string_lossy();
        let tile = Tile::ALL.into_iter().find(|t| t.name() == name);
        let names = Tile::ALL.map(Tile::name).join(", ");
        let tile = tile.unwrap_or_else(|| bad_setting(TILE_VAR, &format!("the tiles are {names}")));
        let lanes = lanes();
        if !tile.runs_with(lanes) {
            let fix = format!("this tile needs wider vectors than {lanes:?}");
            bad_setting(TILE_VAR, &fix);
        }
        tile
    })
}

/// Ends the process with one line that names the setting `var` of the product kernel
/// ([`TILE_VAR`], [`PANEL_VAR`], [`A_BLOCK_VAR`]) and what it takes, as a bad argument on the
/// command line does: the setting is the user's own, so a panic's backtrace would only hide the
/// fix. Each setting is read once, the first time a product needs it.
fn bad_setting(var: &str, fix: &str) -> ! {
    let value = std::env::var_os(var).unwrap_or_default();
    eprintln!("error: {var}={}: {fix}", value.to_string_lossy());
    std::process::exit(2)
}

/// Set this environment variable to 4096, 8192 or 16384 to pack panels of B of that many values,
/// whatever the core's L1 cache. The bits stay the same (`tests/s5_layers.rs` checks it): each
/// output's sum still takes its blocks of k in order, each from the sums the last one left in C.
pub const PANEL_VAR: &str = "ATTENTION_PANEL";

/// Values of B per packed panel at most, chosen at start-up from the L1 data cache: as many as the
/// cache holds, rounded down to a power of two. That is 8,192 values (32 KB) for the 32 KB of Zen 3
/// and Zen 4 and for the 48 KB of Zen 5 and Intel's recent cores: a block of k of 512 terms for a
/// 16-column tile, 256 for a 32-column one. A tile reads its panel in order, so the panel streams
/// from L2 as fast as the tiles take it even where it fills L1, and a longer block of k means fewer
/// passes over C, each of which loads and stores every output of a band. With 8,192 values instead
/// of 4,096, the 1024³ product ran at 87–91 % of the core's peak instead of 80–82 % (Zen 5) and 4 %
/// faster (Zen 3), and the products of a nanoGPT-size step at the same speed. Where the cache's size
/// cannot be read (WebAssembly, other systems), 4,096.
///
/// # Exits
/// If [`PANEL_VAR`] is set to another value: one line of error and exit code 2.
pub fn panel_values() -> usize {
    static PANEL: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PANEL.get_or_init(|| match std::env::var_os(PANEL_VAR) {
        Some(v) => match v.to_string_lossy().parse() {
            Ok(n @ (4096 | 8192 | 16384)) => n,
            _ => bad_setting(PANEL_VAR, "use 4096, 8192 or 16384"),
        },
        None => cache_bytes(1, "Data").map_or(4096, panel_for_l1),
    })
}

/// [`panel_values`]' rule for an L1 data cache of `bytes`: as many values as it holds, rounded
/// down to a power of two, from 4,096 to 16,384.
fn panel_for_l1(bytes: usize) -> usize {
    (1 << (bytes / 4).max(1).ilog2()).clamp(4096, 16384)
}

/// Set this environment variable to a multiple of 16,384 up to 1,048,576 to take blocks of A of at
/// most that many values, whatever the core's L2 cache. The bits stay the same
/// (`tests/s5_layers.rs` checks it), as with [`PANEL_VAR`].
pub const A_BLOCK_VAR: &str = "ATTENTION_A_BLOCK";

/// Values of A per block at most (a band of rows over one block of k), chosen at start-up: the
/// block stays in the L2 cache while every panel of B walks it, BLIS's MC × KC. Three quarters of
/// the cache, in whole 64 KB, from 192 KB to 1.5 MB: 98,304 values (384 KB) for Zen 3's 512 KB,
/// where half the cache and the whole of it were no faster (within 2 %); 196,608 for Zen 4 and
/// Zen 5's 1 MB and 393,216 for the 2 MB of Intel's recent Xeons, not measured there. Where the
/// cache's size cannot be read (WebAssembly, other systems), 98,304.
///
/// # Exits
/// If [`A_BLOCK_VAR`] is set to another value: one line of error and exit code 2.
pub fn a_block_values() -> usize {
    static A_BLOCK: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *A_BLOCK.get_or_init(|| match std::env::var_os(A_BLOCK_VAR) {
        Some(v) => match v.to_string_lossy().parse::<usize>() {
            Ok(n) if n.is_multiple_of(A_STEP) && (A_STEP..=64 * A_STEP).contains(&n) => n,
            _ => bad_setting(A_BLOCK_VAR, "use a multiple of 16384 up to 1048576"),
        },
        None => cache_bytes(2, "Unified").map_or(6 * A_STEP, a_block_for_l2),
    })
}

/// Blocks of A are whole multiples of this many values (64 KB).
const A_STEP: usize = 16 * 1024;

/// [`a_block_values`]' rule for an L2 cache of `bytes`: three quarters of it in whole 64 KB, from
/// 192 KB to 1.5 MB.
fn a_block_for_l2(bytes: usize) -> usize {
    let values = bytes * 3 / 4 / 4;
    (values / A_STEP * A_STEP).clamp(3 * A_STEP, 24 * A_STEP)
}

/// The first core's cache of this `level` and `kind` ("Data", "Unified"), in bytes, as Linux
/// describes it.
fn cache_bytes(level: u32, kind: &str) -> Option<usize> {
    #[cfg(target_os = "linux")]
    for index in 0..4 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).ok();
        let (found, found_kind, size) = (read("level")?, read("type")?, read("size")?);
        if found.trim() == level.to_string() && found_kind.trim() == kind {
            let size = size.trim();
            let (number, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit())?);
            let scale = match unit {
                "K" => 1024,
                "M" => 1024 * 1024,
                _ => return None,
            };
            return Some(number.parse::<usize>().ok()? * scale);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (level, kind);
    None
}

/// The tile for this kind of core, given the vector instructions in use: with AVX-512, the
/// half-rate tile on AMD's family 25 (Zen 3 and Zen 4; only Zen 4 has AVX-512) and the wide one
/// elsewhere; with AVX2, the AVX2 tile; otherwise the plain one.
pub fn for_this_core(lanes: Lanes) -> Tile {
    match lanes {
        Lanes::Avx512 if amd_family() == Some(0x19) => Tile::Avx512Halves,
        Lanes::Avx512 => Tile::Avx512Wide,
        Lanes::Avx2 => Tile::Avx2,
        Lanes::Portable => Tile::Plain,
    }
}

/// The CPU family (base plus extended, as CPUID leaf 1 gives it) if the vendor is AMD.
fn amd_family() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        #[allow(unused_unsafe)] // `__cpuid` is a safe function in newer Rust
        // SAFETY: CPUID exists on every x86-64 CPU.
        let (vendor, signature) = unsafe { (__cpuid(0), __cpuid(1)) };
        let amd = [vendor.ebx, vendor.edx, vendor.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
        let base = (signature.eax >> 8) & 0xf;
        let extended = (signature.eax >> 20) & 0xff;
        amd.then_some(if base == 0xf { base + extended } else { base })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The operands of one tile over one block of k, as raw pointers: its rows of A from the block's
/// first term (`a[r][p]` at `a + r·a_row + p·a_col`), the packed panel of B (`k` rows of NR
/// values), its rectangle of C (`width` ≤ NR columns of `rows` rows, `ldc` apart), and the bias
/// (`width` values) if the sums are final and get one.
pub struct TileArgs {
    pub a: *const f32,
    pub a_row: usize,
    pub a_col: usize,
    pub k: usize,
    pub b: *const f32,
    pub c: *mut f32,
    pub ldc: usize,
    pub width: usize,
    /// Whether this is the first block of k: the sums start from zero rather than from C.
    pub first: bool,
    pub bias: Option<*const f32>,
}

#[cfg(target_arch = "x86_64")]
pub use x86::{avx2, avx512, transpose_8x8};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::TileArgs;
    use std::arch::x86_64::*;

    /// The lanes of a 16-lane vector that hold columns `16·v..` of a tile `width` wide.
    #[inline(always)]
    fn mask16(width: usize, v: usize) -> __mmask16 {
        match width.saturating_sub(16 * v) {
            w if w >= 16 => 0xffff,
            w => (1 << w) - 1,
        }
    }

    // ANCHOR: avx512_tile
    /// One tile of R rows × NR columns (16 or 32) with AVX-512: per step of k, NR/16 vectors of
    /// B, then for each row one broadcast of `a[r][p]` and one fused multiply-add per vector.
    /// `_mm512_fmadd_ps(x, b, acc)` is `x·b + acc` rounded once in each lane, as `f32::mul_add`,
    /// so each lane computes one output element exactly as the lesson's `dot` does. Columns past
    /// `width` are masked off C and the bias, and never stored.
    ///
    /// # Safety
    /// The CPU has AVX-512F; `t`'s pointers hold what [`TileArgs`] says, for R rows.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn avx512<const R: usize, const NR: usize>(t: &TileArgs) {
        const { assert!(NR == 16 || NR == 32) };
        let vectors = NR / 16;
        let masks = [mask16(t.width, 0), mask16(t.width, 1)];
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        // SAFETY (this block): every access is inside what the caller promised; masked-off lanes
        // are never read or written.
        unsafe {
            let c_at = |r: usize, v: usize| t.c.wrapping_add(r * t.ldc + 16 * v);
            if !t.first {
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    for v in 0..vectors {
                        acc_r[v] = _mm512_maskz_loadu_ps(masks[v], c_at(r, v));
                    }
                }
            }
            // Each row of A from its own start, at one offset that steps by A's column stride:
            // the addresses of a step's broadcasts do not wait on one another.
            let a_rows: [*const f32; R] = std::array::from_fn(|r| t.a.wrapping_add(r * t.a_row));
            let mut b = t.b;
            for p in 0..t.k {
                let b_p = [
                    _mm512_loadu_ps(b),
                    _mm512_loadu_ps(b.add(16 * (vectors - 1))),
                ];
                let at = p * t.a_col;
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let a_rp = _mm512_set1_ps(*a_rows[r].add(at));
                    for v in 0..vectors {
                        acc_r[v] = _mm512_fmadd_ps(a_rp, b_p[v], acc_r[v]);
                    }
                }
                b = b.add(NR);
            }
            for (r, acc_r) in acc.iter().enumerate() {
                for v in 0..vectors {
                    let sum = match t.bias {
                        // The bias after the whole sum, one rounding, as `c + b` in plain code.
                        Some(bias) => _mm512_add_ps(
                            acc_r[v],
                            _mm512_maskz_loadu_ps(masks[v], bias.wrapping_add(16 * v)),
                        ),
                        None => acc_r[v],
                    };
                    _mm512_mask_storeu_ps(c_at(r, v), masks[v], sum);
                }
            }
        }
    }
    // ANCHOR_END: avx512_tile

    /// The lanes of an 8-lane vector that hold columns `8·v..` of a tile `width` wide, as
    /// `maskload` wants them: all ones in a lane to use.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn mask8(width: usize, v: usize) -> __m256i {
        let left = width.saturating_sub(8 * v).min(8) as i32;
        _mm256_cmpgt_epi32(
            _mm256_set1_epi32(left),
            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
        )
    }

    /// [`avx512`] with AVX2 and FMA: R rows × NR columns (8 or 16), NR/8 registers a row.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `t`'s pointers hold what [`TileArgs`] says, for R rows.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn avx2<const R: usize, const NR: usize>(t: &TileArgs) {
        const { assert!(NR == 8 || NR == 16) };
        let vectors = NR / 8;
        let masks = [mask8(t.width, 0), mask8(t.width, 1)];
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        // SAFETY (this block): as in `avx512`.
        unsafe {
            let c_at = |r: usize, v: usize| t.c.wrapping_add(r * t.ldc + 8 * v);
            // A whole tile loads and stores C plainly: a masked store costs many micro-ops on
            // AMD's cores, and a tile's C goes in and out once per block of k.
            let whole = t.width == NR;
            if !t.first {
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    for v in 0..vectors {
                        acc_r[v] = match whole {
                            true => _mm256_loadu_ps(c_at(r, v)),
                            false => _mm256_maskload_ps(c_at(r, v), masks[v]),
                        };
                    }
                }
            }
            // As in `avx512`: each row of A from its own start, at one offset.
            let a_rows: [*const f32; R] = std::array::from_fn(|r| t.a.wrapping_add(r * t.a_row));
            let mut b = t.b;
            for p in 0..t.k {
                let b_p = [
                    _mm256_loadu_ps(b),
                    _mm256_loadu_ps(b.add(8 * (vectors - 1))),
                ];
                let at = p * t.a_col;
                for (r, acc_r) in acc.iter_mut().enumerate() {
                    let a_rp = _mm256_broadcast_ss(&*a_rows[r].add(at));
                    for v in 0..vectors {
                        acc_r[v] = _mm256_fmadd_ps(a_rp, b_p[v], acc_r[v]);
                    }
                }
                b = b.add(NR);
            }
            for (r, acc_r) in acc.iter().enumerate() {
                for v in 0..vectors {
                    let sum = match t.bias {
                        Some(bias) => _mm256_add_ps(
                            acc_r[v],
                            _mm256_maskload_ps(bias.wrapping_add(8 * v), masks[v]),
                        ),
                        None => acc_r[v],
                    };
                    match whole {
                        true => _mm256_storeu_ps(c_at(r, v), sum),
                        false => _mm256_maskstore_ps(c_at(r, v), masks[v], sum),
                    }
                }
            }
        }
    }

    /// Eight runs of eight values, `src + i·src_step` for i in 0..8, written transposed: value j of
    /// run i goes to `dst + j·dst_step + i`. Packing a panel of a transposed B is this, over and
    /// over: eight loads, 24 shuffles and eight stores in place of 64 loads and 64 scattered stores.
    ///
    /// # Safety
    /// The CPU has AVX; the eight runs lie inside one slice and the eight rows of `dst` inside
    /// another.
    #[target_feature(enable = "avx")]
    pub unsafe fn transpose_8x8(src: *const f32, src_step: usize, dst: *mut f32, dst_step: usize) {
        // SAFETY: the caller's promise.
        let run: [__m256; 8] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(src.add(i * src_step)) });
        // Pairs of runs interleaved: [a0 b0 a1 b1 | a4 b4 a5 b5] and [a2 b2 a3 b3 | a6 b6 a7 b7].
        let pair = |i: usize| {
            let (x, y) = (run[2 * i], run[2 * i + 1]);
            (_mm256_unpacklo_ps(x, y), _mm256_unpackhi_ps(x, y))
        };
        let [(lo01, hi01), (lo23, hi23), (lo45, hi45), (lo67, hi67)] = std::array::from_fn(pair);
        // Four runs' values j and j + 4 in each half: [a0 b0 c0 d0 | a4 b4 c4 d4], …
        let quad = [
            _mm256_shuffle_ps::<0x44>(lo01, lo23),
            _mm256_shuffle_ps::<0xEE>(lo01, lo23),
            _mm256_shuffle_ps::<0x44>(hi01, hi23),
            _mm256_shuffle_ps::<0xEE>(hi01, hi23),
        ];
        let quad_hi = [
            _mm256_shuffle_ps::<0x44>(lo45, lo67),
            _mm256_shuffle_ps::<0xEE>(lo45, lo67),
            _mm256_shuffle_ps::<0x44>(hi45, hi67),
            _mm256_shuffle_ps::<0xEE>(hi45, hi67),
        ];
        for j in 0..4 {
            let low = _mm256_permute2f128_ps::<0x20>(quad[j], quad_hi[j]); // value j of each run
            let high = _mm256_permute2f128_ps::<0x31>(quad[j], quad_hi[j]); // value j + 4
            // SAFETY: the caller's promise.
            unsafe {
                _mm256_storeu_ps(dst.add(j * dst_step), low);
                _mm256_storeu_ps(dst.add((j + 4) * dst_step), high);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{a_block_for_l2, panel_for_l1};

    /// The sizes the docs give for the caches of the cores the crate meets.
    #[test]
    fn blocks_follow_the_caches_as_the_docs_say() {
        let kb = 1024;
        // L1 data: 32 KB (Zen 3, Zen 4), 48 KB (Zen 5, Intel's recent cores).
        assert_eq!(panel_for_l1(32 * kb), 8192);
        assert_eq!(panel_for_l1(48 * kb), 8192);
        assert_eq!(panel_for_l1(16 * kb), 4096);
        assert_eq!(panel_for_l1(128 * kb), 16384);
        // L2: 512 KB (Zen 3), 1 MB (Zen 4, Zen 5), 1.25 MB, 2 MB (Intel's Xeons).
        assert_eq!(a_block_for_l2(512 * kb), 98_304);
        assert_eq!(a_block_for_l2(1024 * kb), 196_608);
        assert_eq!(a_block_for_l2(1280 * kb), 245_760);
        assert_eq!(a_block_for_l2(2048 * kb), 393_216);
        assert_eq!(a_block_for_l2(256 * kb), 49_152);
        assert_eq!(a_block_for_l2(32 * 1024 * kb), 393_216);
    }
}
