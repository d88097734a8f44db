//! Fast layer. The matrix product kernel and vector lanes.
//!
//! The tutorial multiplies with `@` (OpenBLAS) and sums with `np.sum`. Neither order of
//! additions is fixed across machines, so this module fixes its own:
//!
//! * [`matmul`] computes every `c[i][j]` as `fma(a[i][k−1], b[k−1][j], … fma(a[i][1], b[1][j],
//!   fma(a[i][0], b[0][j], 0)))`: k in order, each term added by one fused multiply-add, as the
//!   lesson's `dot` does. The innermost loop runs along `j`, so a SIMD lane holds one output
//!   element, and the order of its additions stays the same at any vector width (AVX-512, AVX2
//!   or neither) and in any tile ([`super::tiles`]: the shape each kind of core runs best).
//! * The product is blocked for the caches: k in blocks, taken in order, B packed one panel (16
//!   or 32 columns, the tile's width) of a block at a time. Between two blocks an output's running
//!   sum waits in `c`, as the float32 it is, and the next block goes on from it; so blocking
//!   changes where the sum is kept, never what is added to it or in which order.
//! * Threads split the *outputs* (bands of columns, bands of rows, or matrices of a batch), never a
//!   sum, so every thread count gives the same bits.
//! * Each product gives exactly the bits of the lesson's [`ops::matmul_forward`], which adds the same
//!   terms in the same order; the tests compare the two.

use super::team;
#[cfg(target_arch = "x86_64")]
use super::tiles::TileArgs;
use super::tiles::{self, Tile};
pub use super::tiles::{AVX2_VAR, Lanes, PORTABLE_VAR, lanes};
use crate::s5_gpt::ops;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::Range;
use std::thread::LocalKey;

/// Output columns per tile of the plain tile ([`Tile::Plain`]): two AVX2 registers of f32, or one
/// AVX-512 register.
const NR: usize = 16;
/// Output rows per plain tile: with AVX2, 6×16 accumulators take 12 of the 16 registers, which
/// leaves two for a row of B and one for a value of A; twelve independent sums keep both FMA units
/// busy.
const MR: usize = 6;
/// Below this many multiply-adds a product runs on the calling thread: waking a helper costs more.
const PARALLEL_MIN_WORK: usize = 1 << 17;
/// Pieces per thread in a shared product: a helper the machine runs late leaves fewer to the
/// calling thread at the end.
const PIECES_PER_THREAD: usize = 4;

/// A read-only matrix seen through strides, so that a transpose costs nothing to pass in.
#[derive(Clone, Copy, Debug)]
pub struct Strided<'a> {
    pub data: &'a [f32],
    /// Distance between rows (the step of the first index).
    pub row_stride: usize,
    /// Distance between columns (the step of the second index).
    pub col_stride: usize,
}

impl<'a> Strided<'a> {
    /// A row-major matrix with `cols` columns.
    pub fn rows(data: &'a [f32], cols: usize) -> Self {
        Strided {
            data,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose of a row-major matrix with `cols` columns.
    pub fn transposed(data: &'a [f32], cols: usize) -> Self {
        Strided {
            data,
            row_stride: 1,
            col_stride: cols,
        }
    }

    /// The matrix from row `i` and column `p` on.
    fn offset(self, i: usize, p: usize) -> Self {
        Strided {
            data: &self.data[i * self.row_stride + p * self.col_stride..],
            ..self
        }
    }
}

thread_local! {
    /// The calling thread's panel of B, kept from product to product so none allocates.
    static PACKED_B: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    /// The calling thread's rows of A, packed tile by tile for a piece of many panels.
    static PACKED_A: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with this thread's buffer from `slot`. The buffer is taken out for the call, so a call
/// nested inside it would start a buffer of its own rather than share this one.
fn with_buffer<R>(
    slot: &'static LocalKey<Cell<Vec<f32>>>,
    f: impl FnOnce(&mut Vec<f32>) -> R,
) -> R {
    let mut buffer = slot.take();
    let result = f(&mut buffer);
    slot.set(buffer);
    result
}

/// One independent piece of work for the training threads: a band of a product, or any other job
/// that shares no output with the rest. Several products' pieces can go to the threads in one
/// fork ([`run`]), so that one hand-off serves, say, both halves of a gradient.
pub type Piece<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Runs `pieces`, each on whichever training thread takes it first, and returns when all are done.
pub fn run(pieces: Vec<Piece>) {
    team::for_each(pieces, |piece| piece());
}

/// `c (m×n) = a (m×k) · b (k×n)`, plus `bias` (n) on every row if given; `c` is row-major and
/// overwritten.
///
/// The bias is added after the whole sum, as `x @ W.T + b` does. Bands of columns (or of rows,
/// when the columns do not share out evenly) go to the training threads (see [`super::team`]) when
/// the product is large enough; each band packs its own panels of B, so no thread waits for a copy.
pub fn matmul(
    c: &mut [f32],
    a: Strided,
    b: Strided,
    bias: Option<&[f32]>,
    mkn: (usize, usize, usize),
) {
    let mut pieces = Vec::new();
    matmul_pieces(&mut pieces, c, a, b, bias, mkn);
    run(pieces);
}

/// [`matmul`]'s pieces, added to `pieces` to run in a fork with others.
pub fn matmul_pieces<'a>(
    pieces: &mut Vec<Piece<'a>>,
    c: &'a mut [f32],
    a: Strided<'a>,
    b: Strided<'a>,
    bias: Option<&'a [f32]>,
    (m, k, n): (usize, usize, usize),
) {
    assert_eq!(c.len(), m * n, "matmul: c must hold m×n values");
    if let Some(bias) = bias {
        assert_eq!(bias.len(), n, "matmul: one bias per column");
    }
    let product = Product { a, b, bias, k, n };
    let out = Out::new(c, n);
    let tile = tiles::tile();
    let (mr, nr) = tile.shape();
    let (tiles, panels) = (m.div_ceil(mr), n.div_ceil(nr));
    let threads = match m * k * n {
        work if work < PARALLEL_MIN_WORK => 1,
        _ => team::threads(),
    };
    let per_thread = if threads == 1 { 1 } else { PIECES_PER_THREAD };
    let count = threads * per_thread;
    if panels % threads == 0 || tiles < threads {
        // Bands of columns: each piece packs only the panels it multiplies.
        let per_piece = panels.div_ceil(count.min(panels).max(1)).max(1);
        let starts: Vec<usize> = (0..panels).step_by(per_piece).collect();
        for p in far_apart(&starts) {
            let panels = p..panels.min(p + per_piece);
            pieces.push(Box::new(move || product.piece(tile, out, 0..m, panels)));
        }
    } else {
        // Bands of whole tiles of rows, each packing every panel.
        let per_piece = tiles.div_ceil(count.min(tiles)) * mr;
        for i in (0..m).step_by(per_piece) {
            let rows = i..m.min(i + per_piece);
            pieces.push(Box::new(move || product.piece(tile, out, rows, 0..panels)));
        }
    }
}

/// `bands` reordered as first half and second half in turn (0, 4, 1, 5, 2, 6, 3, 7 for eight), so
/// that the threads, which take pieces in order, work on bands far apart. Side by side, two bands
/// would share the cache line at their border in every row of C, and pass it from core to core at
/// each store.
fn far_apart(bands: &[usize]) -> impl Iterator<Item = usize> + '_ {
    let (first, second) = bands.split_at(bands.len().div_ceil(2));
    let pairs = first.iter().zip(second.iter().map(Some).chain([None]));
    pairs.flat_map(|(&a, b)| std::iter::once(a).chain(b.copied()))
}

/// `batch` independent products `c[i] = a[i] · b[i]` (each as in [`matmul`], without bias), a band
/// of items per piece of work. `a` and `b` hold the matrices one after another, each row-major or
/// transposed.
pub fn matmul_batched(
    c: &mut [f32],
    a: (&[f32], bool),
    b: (&[f32], bool),
    batch: usize,
    mkn: (usize, usize, usize),
) {
    let mut pieces = Vec::new();
    matmul_batched_pieces(&mut pieces, c, a, b, batch, mkn);
    run(pieces);
}

/// [`matmul_batched`]'s pieces, added to `pieces` to run in a fork with others.
pub fn matmul_batched_pieces<'a>(
    pieces: &mut Vec<Piece<'a>>,
    c: &'a mut [f32],
    (a, a_transposed): (&'a [f32], bool),
    (b, b_transposed): (&'a [f32], bool),
    batch: usize,
    (m, k, n): (usize, usize, usize),
) {
    assert_eq!(
        c.len(),
        batch * m * n,
        "matmul_batched: c must hold batch×m×n values"
    );
    let view = |data, rows, cols, transposed| {
        if transposed {
            Strided::transposed(data, rows)
        } else {
            Strided::rows(data, cols)
        }
    };
    let tile = tiles::tile();
    let item = move |i: usize, c: &mut [f32]| {
        let product = Product {
            a: view(&a[i * m * k..(i + 1) * m * k], m, k, a_transposed),
            b: view(&b[i * k * n..(i + 1) * k * n], k, n, b_transposed),
            bias: None,
            k,
            n,
        };
        product.piece(tile, Out::new(c, n), 0..m, 0..n.div_ceil(tile.shape().1));
    };
    let threads = team::threads();
    let items_per_piece = match batch * m * k * n {
        work if threads == 1 || work < PARALLEL_MIN_WORK => batch.max(1),
        _ => batch.div_ceil(threads * PIECES_PER_THREAD),
    };
    if m * n == 0 {
        return;
    }
    for (t, c) in c.chunks_mut(items_per_piece * m * n).enumerate() {
        pieces.push(Box::new(move || {
            for (i, c) in c.chunks_mut(m * n).enumerate() {
                item(t * items_per_piece + i, c);
            }
        }));
    }
}

/// The operands of one product, shared by all its pieces.
#[derive(Clone, Copy)]
struct Product<'a> {
    a: Strided<'a>,
    b: Strided<'a>,
    bias: Option<&'a [f32]>,
    k: usize,
    n: usize,
}

/// C as the pieces of one product see it: row-major, `ld` values per row. Pieces side by side
/// share C's rows, so they write through a pointer, each to its own rectangle.
#[derive(Clone, Copy)]
struct Out<'a> {
    ptr: *mut f32,
    rows: usize,
    ld: usize,
    c: PhantomData<&'a mut [f32]>,
}

// SAFETY: `Out` is only handed to pieces that write disjoint rectangles of C (see `Out::row`),
// and C outlives them (`team::for_each` returns only when every piece has finished).
unsafe impl Send for Out<'_> {}
unsafe impl Sync for Out<'_> {}

impl<'a> Out<'a> {
    fn new(c: &'a mut [f32], ld: usize) -> Self {
        let rows = c.len().checked_div(ld).unwrap_or(0);
        Out {
            ptr: c.as_mut_ptr(),
            rows,
            ld,
            c: PhantomData,
        }
    }

    #[cfg(target_arch = "x86_64")]
    /// A pointer to c[rows.start][j0], after checking that the rectangle of `rows` × `width` from
    /// there is inside C. Writing through it has [`Out::row`]'s contract.
    #[inline(always)]
    fn rectangle(&self, rows: Range<usize>, j0: usize, width: usize) -> *mut f32 {
        assert!(
            rows.start < rows.end && rows.end <= self.rows && j0 + width <= self.ld,
            "matmul: outside c"
        );
        self.ptr.wrapping_add(rows.start * self.ld + j0)
    }

    /// c[i][j0..j0 + width].
    ///
    /// # Safety
    /// No other live reference may overlap these elements: the pieces of a product cover disjoint
    /// rows or columns, and a piece holds one row of a tile at a time.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn row(&self, i: usize, j0: usize, width: usize) -> &mut [f32] {
        assert!(i < self.rows && j0 + width <= self.ld, "matmul: outside c");
        // SAFETY: inside C (checked above); no overlap (the caller's promise).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(i * self.ld + j0), width) }
    }
}

impl Product<'_> {
    /// Rows `rows` and panels `panels` (of `tile`'s width) of C, with `tile`, compiled for the
    /// CPU's vector instructions: for each block of k in order, each panel is packed once and every
    /// tile of the rows walks it.
    fn piece(&self, tile: Tile, out: Out, rows: Range<usize>, panels: Range<usize>) {
        with_buffer(&PACKED_B, |packed| match tile {
            #[cfg(target_arch = "x86_64")]
            Tile::Avx512Wide => vectorised(
                #[inline(always)]
                || self.blocks::<Avx512Wide>(out, rows, panels, packed),
            ),
            #[cfg(target_arch = "x86_64")]
            Tile::Avx512Halves => vectorised(
                #[inline(always)]
                || self.blocks::<Avx512Halves>(out, rows, panels, packed),
            ),
            #[cfg(target_arch = "x86_64")]
            Tile::Avx2 => vectorised(
                #[inline(always)]
                || self.blocks::<Avx2>(out, rows, panels, packed),
            ),
            _ => vectorised(
                #[inline(always)]
                || self.blocks::<Plain>(out, rows, panels, packed),
            ),
        })
    }

    /// [`Product::piece`]'s loops for the tile `K`, as plain code (the tests run them without AVX2
    /// or AVX-512 too): the piece's rows in bands ([`row_bands`]), each band through every block
    /// of k in order.
    #[inline(always)]
    fn blocks<K: Kernel>(
        &self,
        out: Out,
        rows: Range<usize>,
        panels: Range<usize>,
        packed: &mut Vec<f32>,
    ) {
        with_buffer(&PACKED_A, |packed_a| {
            for band in row_bands(rows, K::MR, K::NR) {
                self.band::<K>(out, band, panels.clone(), packed, packed_a);
            }
        })
    }

    /// One band of rows of [`Product::blocks`]: for each block of k, its rows of A packed once
    /// where that helps ([`packs_a`]), then each panel of B packed and walked by every tile of the
    /// band.
    #[inline(always)]
    fn band<K: Kernel>(
        &self,
        out: Out,
        rows: Range<usize>,
        panels: Range<usize>,
        packed: &mut Vec<f32>,
        packed_a: &mut Vec<f32>,
    ) {
        let (k, n) = (self.k, self.n);
        let kc = k_block(k, rows.len(), K::NR);
        let pack_a = packs_a(self.a, panels.len());
        let mut p0 = 0;
        loop {
            let block = p0..k.min(p0 + kc);
            if pack_a {
                pack_rows(packed_a, self.a, rows.clone(), block.clone(), K::MR);
            }
            for panel in panels.clone() {
                let (j0, width) = (panel * K::NR, K::NR.min(n - panel * K::NR));
                K::pack(packed, self.b, block.clone(), j0, width);
                for (i0, r) in tiles_of(rows.clone(), K::MR) {
                    let a = match pack_a {
                        // Tile by tile: r values a term, from the tile's first row on.
                        true => Strided {
                            data: &packed_a[(i0 - rows.start) * block.len()..],
                            row_stride: 1,
                            col_stride: r,
                        },
                        false => self.a.offset(i0, block.start),
                    };
                    let block = block.clone();
                    let at = At {
                        i0,
                        j0,
                        width,
                        block,
                        k,
                        a,
                    };
                    K::tile(self, out, at, r, packed);
                }
            }
            p0 = block.end;
            if p0 >= k {
                break;
            }
        }
    }

    /// One plain tile over one block of k: the running sums from C (zero at the first block), the
    /// block's terms added by [`multiply_add_terms`], the sums back to C (plus the bias after the
    /// last block).
    #[inline(always)]
    fn tile<const R: usize>(&self, out: Out, at: At, panel: &[f32]) {
        let At {
            i0,
            j0,
            width,
            block,
            k,
            a,
        } = at;
        let mut acc = [[0.0f32; NR]; R];
        if block.start > 0 {
            for (r, acc_r) in acc.iter_mut().enumerate() {
                // SAFETY: this piece's own rectangle, one row at a time.
                let c_r = unsafe { out.row(i0 + r, j0, width) };
                acc_r[..width].copy_from_slice(c_r);
            }
        }
        let a = TileRows::<R>::new(a, block.len());
        let acc = multiply_add_terms(acc, a, panel);
        let bias = self.bias.filter(|_| block.end == k);
        for (r, acc_r) in acc.iter().enumerate() {
            // SAFETY: as above.
            let c_r = unsafe { out.row(i0 + r, j0, width) };
            match (bias, <&mut [f32; NR]>::try_from(&mut *c_r)) {
                (Some(bias), _) => {
                    let bias = &bias[j0..j0 + width];
                    for ((c, &s), &b) in c_r.iter_mut().zip(acc_r).zip(bias) {
                        *c = s + b;
                    }
                }
                // A whole panel: a copy of known size, with no `memcpy` call.
                (None, Ok(c_r)) => *c_r = *acc_r,
                (None, Err(_)) => c_r.copy_from_slice(&acc_r[..width]),
            }
        }
    }
}

/// A tile's shape and code: how [`Product::blocks`] packs B for it and multiplies one tile.
trait Kernel {
    /// The most rows of one tile.
    const MR: usize;
    /// Columns of one tile, and of a panel of packed B.
    const NR: usize;
    /// Packs a panel of B: [`pack_panel`] for NR columns.
    fn pack(packed: &mut Vec<f32>, b: Strided, block: Range<usize>, j0: usize, width: usize);
    /// The tile of `rows` rows (1 to MR) at `at`, over one block of k, from `panel`.
    fn tile(product: &Product, out: Out, at: At, rows: usize, panel: &[f32]);
}

/// Runs `$body` with `$r` as the constant `$R`, for each of the values listed.
macro_rules! with_rows {
    ($r:expr, [$($n:literal)*], $R:ident => $body:expr) => {
        match $r {
            $($n => {
                const $R: usize = $n;
                $body
            })*
            r => unreachable!("a tile of {r} rows"),
        }
    };
}

/// [`Tile::Plain`]: [`multiply_add_terms`], vectorised by the compiler.
struct Plain;

impl Kernel for Plain {
    const MR: usize = MR;
    const NR: usize = NR;

    #[inline(always)]
    fn pack(packed: &mut Vec<f32>, b: Strided, block: Range<usize>, j0: usize, width: usize) {
        pack_panel::<NR>(packed, b, block, j0, width);
    }

    #[inline(always)]
    fn tile(product: &Product, out: Out, at: At, rows: usize, panel: &[f32]) {
        with_rows!(rows, [1 2 3 4 5 6], R => product.tile::<R>(out, at, panel))
    }
}

/// Defines a kernel of `$mr` × `$nr` that calls `tiles::$tile`, the CPU's features checked by
/// whoever chose the tile ([`tiles::tile`]).
macro_rules! intrinsics_kernel {
    ($(#[$doc:meta])* $name:ident, $tile:ident, $mr:literal x $nr:literal, $rows:tt) => {
        $(#[$doc])*
        #[cfg(target_arch = "x86_64")]
        struct $name;

        #[cfg(target_arch = "x86_64")]
        impl Kernel for $name {
            const MR: usize = $mr;
            const NR: usize = $nr;

            #[inline(always)]
            fn pack(packed: &mut Vec<f32>, b: Strided, block: Range<usize>, j0: usize, width: usize) {
                pack_panel::<$nr>(packed, b, block, j0, width);
            }

            #[inline(always)]
            fn tile(product: &Product, out: Out, at: At, rows: usize, panel: &[f32]) {
                let args = product.tile_args(out, at, rows, panel, $nr);
                // SAFETY: `tile_args` checked the operands for `rows` rows; the tile was chosen
                // among those the CPU can run.
                with_rows!(rows, $rows, R => unsafe { tiles::$tile::<R, $nr>(&args) })
            }
        }
    };
}

intrinsics_kernel!(
    /// [`Tile::Avx512Wide`].
    Avx512Wide, avx512, 12 x 32, [1 2 3 4 5 6 7 8 9 10 11 12]
);
intrinsics_kernel!(
    /// [`Tile::Avx512Halves`].
    Avx512Halves, avx512, 8 x 32, [1 2 3 4 5 6 7 8]
);
intrinsics_kernel!(
    /// [`Tile::Avx2`].
    Avx2, avx2, 6 x 16, [1 2 3 4 5 6]
);

#[cfg(target_arch = "x86_64")]
impl Product<'_> {
    /// The raw operands of the tile of `rows` rows at `at`, each checked to lie inside its slice:
    /// A's farthest element `a[rows − 1][last p]` (both strides step forwards, so every other
    /// element lies before it), C's rectangle, the panel's `nr` values per term and the bias.
    #[inline(always)]
    fn tile_args(&self, out: Out, at: At, rows: usize, panel: &[f32], nr: usize) -> TileArgs {
        let a = at.a;
        let k = at.block.len();
        if k > 0 {
            let last = (rows - 1) * a.row_stride + (k - 1) * a.col_stride;
            assert!(
                last < a.data.len(),
                "matmul: A is too short for its strides"
            );
        }
        assert!(
            panel.len() >= k * nr && at.width <= nr,
            "matmul: a short panel"
        );
        let bias = self.bias.filter(|_| at.block.end == at.k);
        TileArgs {
            a: a.data.as_ptr(),
            a_row: a.row_stride,
            a_col: a.col_stride,
            k,
            b: panel.as_ptr(),
            c: out.rectangle(at.i0..at.i0 + rows, at.j0, at.width),
            ldc: out.ld,
            width: at.width,
            first: at.block.start == 0,
            bias: bias.map(|bias| bias[at.j0..at.j0 + at.width].as_ptr()),
        }
    }
}

/// Where a tile lies: rows from `i0`, columns `j0..j0 + width`, and the block of k it adds, out of
/// `k`; and where its rows of A are read, from a[i0][block.start] on.
struct At<'a> {
    i0: usize,
    j0: usize,
    width: usize,
    block: Range<usize>,
    k: usize,
    /// A itself, or the band's packed rows ([`pack_rows`]).
    a: Strided<'a>,
}

/// Panels from which a piece may pack its rows of A ([`packs_a`]): the copy is paid once per
/// block of k for this many panels or more.
const PACK_A_PANELS: usize = 8;

/// Whether a piece of `panels` panels packs its rows of A ([`pack_rows`]) rather than reading them
/// in place: when A is read transposed (a weight's gradient gᵀ·x), where each term of a tile lies a
/// whole column of A from the last, or when A's rows lie a multiple of 4 KB apart, so that a
/// tile's rows fall into the same set of the L1 cache. Packed, a tile reads one run. Elsewhere the
/// copy only adds work (nanoGPT's row-major products were no faster with it, Zen 3).
fn packs_a(a: Strided, panels: usize) -> bool {
    panels >= PACK_A_PANELS && (a.row_stride == 1 || a.row_stride.is_multiple_of(1024))
}

/// Rows `rows` × terms `block` of A, tile by tile as [`tiles_of`] cuts them: the tile of r rows
/// from i0 holds `a[i0..i0 + r][p]` for each p in order, from `(i0 − rows.start) · block.len()`.
/// A copy: no value changes.
#[inline(always)]
fn pack_rows(
    packed: &mut Vec<f32>,
    a: Strided,
    rows: Range<usize>,
    block: Range<usize>,
    mr: usize,
) {
    let len = block.len();
    // Every value is written below, so the buffer is only resized, never cleared first.
    packed.resize(rows.len() * len, 0.0);
    for (i0, r) in tiles_of(rows.clone(), mr) {
        let tile = &mut packed[(i0 - rows.start) * len..][..r * len];
        let a = a.offset(i0, block.start);
        with_rows!(r, [1 2 3 4 5 6 7 8 9 10 11 12], R => pack_tile::<R>(tile, a, len));
    }
}

/// One tile's R rows of A over `len` terms into `tile`, R values a term.
#[inline(always)]
fn pack_tile<const R: usize>(tile: &mut [f32], a: Strided, len: usize) {
    let terms = tile.chunks_exact_mut(R);
    if a.row_stride == 1 {
        // A transpose: a term's R values lie side by side.
        for (p, out) in terms.enumerate() {
            out.copy_from_slice(&a.data[p * a.col_stride..][..R]);
        }
    } else {
        // Row-major: the R rows are runs of `len` values, written across.
        transposed_copy(tile, R, a.data, a.row_stride, (R, len));
    }
}

/// The tiles of `rows`, as (first row, rows) in order, each cut by [`tile_rows`]: the one cut that
/// both the tiles and the packing of A ([`pack_rows`]) follow.
fn tiles_of(rows: Range<usize>, mr: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut i0 = rows.start;
    std::iter::from_fn(move || {
        if i0 >= rows.end {
            return None;
        }
        let r = tile_rows(rows.end - i0, mr);
        i0 += r;
        Some((i0 - r, r))
    })
}

/// Rows of the next tile when `left` rows remain, for tiles of at most `mr` rows: the rows are
/// shared as evenly as the fewest tiles allow (so 8 rows of 6-row tiles go as 4 + 4, not 6 + 2),
/// since a tile of one or two rows keeps too few sums going to fill the FMA units.
#[inline(always)]
fn tile_rows(left: usize, mr: usize) -> usize {
    left.div_ceil(left.div_ceil(mr))
}

/// `rows` cut into bands of at most A's block ([`tiles::a_block_values`]) / (panel / `nr`) rows
/// (the panel of [`tiles::panel_values`]), a multiple of `mr`: as
/// many rows as keep a block of k as long as a panel allows ([`k_block`]). Without them a piece of
/// many rows (one thread's whole product, 8,192 rows at stage 6's module shapes) would take blocks
/// of 16 terms, and read and write all of its C, far larger than the cache, once per block. Each
/// element of C still takes the blocks of k in order, each block's terms in order.
fn row_bands(rows: Range<usize>, mr: usize, nr: usize) -> impl Iterator<Item = Range<usize>> {
    let most = (tiles::a_block_values() / (tiles::panel_values() / nr) / mr).max(1) * mr;
    let end = rows.end;
    rows.step_by(most)
        .map(move |start| start..end.min(start + most))
}

/// The length of a block of k for a piece of `rows` rows and panels `nr` wide: a panel at most
/// [`tiles::panel_values`] values, and a block of A's rows at most [`tiles::a_block_values`]
/// values; the blocks of one product are as even as can be.
fn k_block(k: usize, rows: usize, nr: usize) -> usize {
    let longest = (tiles::a_block_values() / rows.max(1)).clamp(16, tiles::panel_values() / nr);
    let blocks = k.div_ceil(longest).max(1);
    k.div_ceil(blocks).max(1)
}

/// Copies rows `block` of B's columns `j0..j0 + width` into one panel, `block.len()` × NR and
/// contiguous, padded with zeros to NR columns. The padding only fills SIMD lanes whose results
/// are never stored.
#[inline(always)]
fn pack_panel<const NR: usize>(
    packed: &mut Vec<f32>,
    b: Strided,
    block: Range<usize>,
    j0: usize,
    width: usize,
) {
    // Every value is written below, so the buffer is only resized, never cleared first.
    packed.resize(block.len() * NR, 0.0);
    if width < NR {
        packed.fill(0.0);
    }
    if b.col_stride == 1 {
        // Row-major: row p of the panel is a run of `width` values.
        for (p, out) in block.zip(packed.chunks_exact_mut(NR)) {
            let row = &b.data[p * b.row_stride + j0..];
            let out: &mut [f32; NR] = out.try_into().unwrap();
            match row.first_chunk::<NR>() {
                Some(row) if width == NR => *out = *row, // known size: no `memcpy` call
                _ => out[..width].copy_from_slice(&row[..width]),
            }
        }
    } else {
        // A transpose (row stride 1): column j is a run of values from j·col_stride.
        assert_eq!(
            b.row_stride, 1,
            "matmul: B must be row-major or a transpose"
        );
        let (len, runs) = (block.len(), width);
        let src = &b.data[j0 * b.col_stride + block.start..];
        transposed_copy(packed, NR, src, b.col_stride, (runs, len));
    }
}

/// `runs` runs of `len` values, run i from `src[i·src_step..]`, written transposed: value j of run
/// i to `dst[j·dst_step + i]`. Whole 8 × 8 squares are transposed in AVX registers where the CPU
/// has AVX2 ([`tiles::transpose_8x8`]: 8 loads and 8 stores where one value at a time takes 64
/// of each), the edges one value at a time. A copy: no value changes.
pub fn transposed_copy(
    dst: &mut [f32],
    dst_step: usize,
    src: &[f32],
    src_step: usize,
    (runs, len): (usize, usize),
) {
    if runs == 0 || len == 0 {
        return;
    }
    assert!(
        (runs - 1) * src_step + len <= src.len() && (len - 1) * dst_step + runs <= dst.len(),
        "transposed_copy: a run or a row of dst is out of bounds"
    );
    let (whole_runs, whole_len) = squares(runs, len);
    #[cfg(target_arch = "x86_64")]
    for i in (0..whole_runs).step_by(8) {
        for j in (0..whole_len).step_by(8) {
            // SAFETY: `squares` gives whole squares only where the CPU has AVX2; runs i..i + 8,
            // values j..j + 8, and rows j..j + 8 of dst, columns i..i + 8, lie inside `src` and
            // `dst` (checked above).
            unsafe {
                tiles::transpose_8x8(
                    src[i * src_step + j..].as_ptr(),
                    src_step,
                    dst[j * dst_step + i..].as_mut_ptr(),
                    dst_step,
                )
            };
        }
    }
    for i in 0..runs {
        let done = if i < whole_runs { whole_len } else { 0 };
        for (j, &v) in src[i * src_step..][..len].iter().enumerate().skip(done) {
            dst[j * dst_step + i] = v;
        }
    }
}

/// How many runs, and how many values of each, whole 8 × 8 squares cover: none without AVX2.
#[inline(always)]
fn squares(runs: usize, len: usize) -> (usize, usize) {
    match tiles::lanes() {
        tiles::Lanes::Portable => (0, 0),
        _ => (runs / 8 * 8, len / 8 * 8),
    }
}

/// The R rows of A that one tile multiplies, read through strides: A's own, or its packed rows'
/// ([`pack_rows`], where [`packs_a`]; in the GPT's narrow products the copy cost as much as the
/// arithmetic).
#[derive(Clone, Copy)]
struct TileRows<'a, const R: usize> {
    a: Strided<'a>,
    k: usize,
}

impl<'a, const R: usize> TileRows<'a, R> {
    /// Checks once that the farthest element, a[R−1][k−1], is inside `a.data`; every other element
    /// of the tile lies before it, because both strides step forwards.
    #[inline(always)]
    fn new(a: Strided<'a>, k: usize) -> Self {
        if k > 0 {
            let last = (R - 1) * a.row_stride + (k - 1) * a.col_stride;
            assert!(
                last < a.data.len(),
                "matmul: A is too short for its strides"
            );
        }
        TileRows { a, k }
    }

    /// a[r][p], for r < R and p < k.
    #[inline(always)]
    fn at(self, r: usize, p: usize) -> f32 {
        assert!(r < R && p < self.k);
        let index = r * self.a.row_stride + p * self.a.col_stride;
        // SAFETY: r ≤ R−1 and p ≤ k−1, so `index` is at most the index `new` checked.
        unsafe { *self.a.data.get_unchecked(index) }
    }
}

// ANCHOR: matmul
/// The innermost loop of every product: R rows of A times one panel of packed B (a row of NR
/// values per step of k), `acc[r][q] = fma(a[r][p], b[p][q], acc[r][q])` for each p in order. A
/// lane of `acc` is one output element, and it does exactly what the lesson's `dot` does, term for
/// term.
#[inline(always)]
fn multiply_add_terms<const R: usize>(
    mut acc: [[f32; NR]; R],
    a: TileRows<R>,
    b_panel: &[f32],
) -> [[f32; NR]; R] {
    // WebAssembly has no fused multiply-add instruction: the same sums, from float64 lanes.
    #[cfg(target_arch = "wasm32")]
    super::wasm_fma::accumulate(&mut acc, |r, p| a.at(r, p), &b_panel[..a.k * NR]);
    #[cfg(not(target_arch = "wasm32"))]
    for (p, b_p) in (0..a.k).zip(b_panel.chunks_exact(NR)) {
        let b_p: &[f32; NR] = b_p.try_into().unwrap();
        let a_p: [f32; R] = std::array::from_fn(|r| a.at(r, p));
        for (acc_r, &a_rp) in acc.iter_mut().zip(&a_p) {
            for q in 0..NR {
                acc_r[q] = a_rp.mul_add(b_p[q], acc_r[q]);
            }
        }
    }
    acc
}
// ANCHOR_END: matmul

/// Runs a loop compiled for the widest vector instructions the CPU has ([`lanes`]): AVX-512
/// (sixteen f32 per register, and 32 registers), or AVX2 and FMA (eight f32, 16 registers), or
/// plain x86-64 code. Elementwise work gives the same bits at any vector width (each lane does one
/// element's operations in order), and `mul_add` is the same exactly rounded fused multiply-add with
/// or without the FMA instruction, so this only changes the speed.
///
/// Only code inlined into the functions below is compiled for those instructions, so callers mark
/// the closure `#[inline(always)]` and keep its loops inside it: a large closure left to the
/// inliner's judgement, or a helper it calls that is not inlined, runs as plain SSE2 code.
#[inline(always)]
pub fn vectorised<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match lanes() {
        Lanes::Avx512 => {
            #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
            fn avx512<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU supports all of these, checked by `lanes`.
            return unsafe { avx512(f) };
        }
        Lanes::Avx2 => {
            #[target_feature(enable = "avx2,fma")]
            fn avx2_fma<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            // SAFETY: the CPU supports AVX2 and FMA, checked by `lanes`.
            return unsafe { avx2_fma(f) };
        }
        Lanes::Portable => {}
    }
    f()
}

/// [`ops::pairwise_sum_by`], each block compiled for the CPU's vectors. The lesson's halving is
/// recursive, so it is not inlined into a vectorised loop, and its blocks would run as SSE2
/// code: here a block of up to 128 values inlines into the caller, and each block of a longer
/// array runs in [`vectorised`]. The same blocks in the same tree, so the same bits.
#[inline(always)]
pub fn pairwise_sum_by(a: &[f32], f: impl Fn(f32) -> f32 + Copy) -> f32 {
    if a.len() <= ops::PAIRWISE_BLOCK {
        return ops::pairwise_block(a, f);
    }
    let block_sum = |block: &[f32]| {
        vectorised(
            #[inline(always)]
            || ops::pairwise_block(block, f),
        )
    };
    ops::pairwise_tree(a, block_sum)
}

/// Below this |x| (2⁻¹⁴), `libm::expf(x)` is `1 + x`.
const EXPF_TINY: u32 = 0x3900_0000;
/// From this |x| (about 87.34) on, `libm::expf` takes its overflow and subnormal paths.
pub(super) const EXPF_LARGE: u32 = 0x42ae_ac50;

/// Whether [`expf`] gives `libm::expf(x)` for this `x`: |x| below about 87.34, and not NaN.
#[inline(always)]
pub fn expf_covers(x: f32) -> bool {
    x.to_bits() & 0x7fff_ffff < EXPF_LARGE
}

/// `libm::expf` (FreeBSD's `e_expf.c`) with its branches turned into selects, so that a loop of
/// them runs eight lanes per AVX2 instruction (sixteen per AVX-512 one). Every lane does the
/// operations the library does for its `x`, so the bits are the library's wherever [`expf_covers`]
/// holds; the tests check every such float32. The caller takes the library's own call for the rest.
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    expf_signed(x, (x.to_bits() >> 31) as i32)
}

/// [`expf`] of an `x` at most 0, as softmax takes it (a score less the row's maximum): the same
/// bits with fewer instructions. The sign bit is 1 wherever [`expf`] reads it (|x| > 0.5 ln 2),
/// so it is a constant here; for ±0 it is not read. A NaN, whatever its sign, is not covered, and
/// the caller takes the library's own call for it as for [`expf`].
#[inline(always)]
pub fn expf_non_positive(x: f32) -> f32 {
    expf_signed(x, 1)
}

/// [`expf_non_positive`] of eight lanes in AVX2 registers, for loops the compiler would not keep
/// in registers (softmax's tiles in [`super::flash`]): the same operations, each rounded once as
/// there (a multiply and an add, never fused), so the same bits wherever [`expf_covers`] holds and
/// x ≤ 0; the tests check every such float32. Fewer selects than the library's branches: where
/// |x| ≤ 0.5 ln 2, k is 0, and the reduction (x − 0·ln2_hi, 0·ln2_lo, hi − lo) gives back x and +0
/// exactly, as the library's unreduced path takes them; k is not clamped, since a lane it does not
/// cover is not read.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn expf_non_positive_avx2(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    let f = _mm256_set1_ps;
    let hx = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fff_ffff));
    let above = |bits: u32| _mm256_cmpgt_epi32(hx, _mm256_set1_epi32(bits as i32));
    let (large, reduced) = (above(0x3f85_1592), above(0x3eb1_7218));
    let t = _mm256_add_ps(_mm256_mul_ps(f(std::f32::consts::LOG2_E), x), f(-0.5));
    // k: the rounded t where |x| > 1.5 ln 2, −1 (the all-ones of `reduced`) above 0.5 ln 2, else 0.
    let k = _mm256_blendv_epi8(reduced, _mm256_cvttps_epi32(t), large);
    let kf = _mm256_cvtepi32_ps(k);
    let hi = _mm256_sub_ps(x, _mm256_mul_ps(kf, f(6.931_457_5e-1)));
    let lo = _mm256_mul_ps(kf, f(1.428_606_8e-6));
    let r = _mm256_sub_ps(hi, lo);
    let rr = _mm256_mul_ps(r, r);
    let poly = _mm256_add_ps(f(1.666_662_5e-1), _mm256_mul_ps(rr, f(-2.766_733_3e-3)));
    let c = _mm256_sub_ps(r, _mm256_mul_ps(rr, poly));
    let q = _mm256_div_ps(_mm256_mul_ps(r, c), _mm256_sub_ps(f(2.0), c));
    let y = _mm256_add_ps(f(1.0), _mm256_add_ps(_mm256_sub_ps(q, lo), hi));
    let two_k = _mm256_slli_epi32::<23>(_mm256_add_epi32(k, _mm256_set1_epi32(0x7f)));
    let scaled = _mm256_mul_ps(y, _mm256_castsi256_ps(two_k));
    let tiny = _mm256_castsi256_ps(above(EXPF_TINY));
    _mm256_blendv_ps(_mm256_add_ps(f(1.0), x), scaled, tiny)
}

/// [`expf`] with the sign bit of `x` given: 1 if negative, else 0.
#[inline(always)]
fn expf_signed(x: f32, sign: i32) -> f32 {
    const LN2_HI: f32 = 6.931_457_5e-1;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const P1: f32 = 1.666_662_5e-1;
    const P2: f32 = -2.766_733_3e-3;
    let hx = x.to_bits() & 0x7fff_ffff;
    let half = if sign == 0 { 0.5 } else { -0.5 };
    let k = if hx > 0x3f85_1592 {
        // |x| > 1.5 ln 2.
        lanes_to_int(std::f32::consts::LOG2_E * x + half)
    } else if hx > 0x3eb1_7218 {
        1 - sign - sign // 0.5 ln 2 < |x| ≤ 1.5 ln 2
    } else {
        0
    };
    let reduced = hx > 0x3eb1_7218;
    let kf = k as f32;
    let hi = if reduced { x - kf * LN2_HI } else { x };
    let lo = if reduced { kf * LN2_LO } else { 0.0 };
    let r = if reduced { hi - lo } else { x };
    let rr = r * r;
    let c = r - rr * (P1 + rr * P2);
    let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
    let two_k = f32::from_bits((0x7f_i32.wrapping_add(k) as u32) << 23); // 2ᵏ where covered
    if hx > EXPF_TINY { y * two_k } else { 1.0 + x }
}

/// `t` rounded toward zero to an `i32`, in vector lanes, for [`expf_signed`]: the same integer
/// wherever `expf` covers x (there |t| < 127), and some integer elsewhere (never read).
#[inline(always)]
fn lanes_to_int(t: f32) -> i32 {
    // WebAssembly converts four lanes with saturation in one instruction (`as`). There the clamp
    // below is a call to `fmaxf` per lane (no instruction has `f32::max`'s rule for NaN), and even
    // with comparisons in its place the unchecked conversion kept softmax's loop one lane at a time.
    #[cfg(target_arch = "wasm32")]
    return t as i32;
    // x86 has no saturating conversion: `as i32` would check each lane for NaN and overflow. The
    // clamp makes every value safe to convert in lanes (`f32::clamp` would keep a NaN; `max` turns
    // it into −256).
    #[cfg(not(target_arch = "wasm32"))]
    {
        #[allow(clippy::manual_clamp)]
        let t = t.max(-256.0).min(256.0);
        // SAFETY: `t` is finite and within i32's range: the clamp turns NaN into −256.
        unsafe { t.to_int_unchecked::<i32>() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(len: usize, seed: u32) -> Vec<f32> {
        let mut rng = crate::rng::numpy::NumpyRandom::seed(seed);
        (0..len).map(|_| rng.standard_normal() as f32).collect()
    }

    fn transposed(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        let mut out = vec![0.0; x.len()];
        ops::transpose_forward(&mut out, x, (rows, cols));
        out
    }

    /// [`transposed_copy`] is the lesson's transpose, whole squares, edges and all.
    #[test]
    fn transposed_copy_is_the_lessons_transpose() {
        for (rows, cols) in [
            (1, 1),
            (3, 5),
            (8, 8),
            (16, 24),
            (17, 9),
            (64, 32),
            (33, 65),
        ] {
            let x = values(rows * cols, 4);
            let mut got = vec![f32::NAN; rows * cols];
            transposed_copy(&mut got, rows, &x, cols, (rows, cols));
            assert_eq!(got, transposed(&x, rows, cols), "{rows}×{cols}");
        }
    }

    /// Every product the kernel can be asked for equals the lesson's, bit for bit, on 1 and 2
    /// threads.
    #[test]
    fn matmul_is_the_lessons_product_bit_for_bit() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (5, 7, 3),
            (4, 64, 16),
            (9, 33, 65),
            (130, 64, 256),
            (128, 256, 64),
            (13, 300, 17),
            (128, 768, 48),
            (770, 520, 33),
            (25, 129, 47),
            (12, 257, 32),
            (768, 128, 512),
            (1700, 300, 40), // several bands of rows (`row_bands`), the last one short
            (770, 1024, 260), // packed rows of A (`pack_rows`), in bands and blocks of k
        ] {
            let (a, b, bias) = (values(m * k, 1), values(k * n, 2), values(n, 3));
            let mut want = vec![0.0; m * n];
            ops::matmul_forward(&mut want, &a, &b, (m, k, n));
            let with_bias: Vec<f32> = want
                .iter()
                .enumerate()
                .map(|(i, c)| c + bias[i % n])
                .collect();
            let (at, bt) = (transposed(&a, m, k), transposed(&b, k, n));
            for threads in [1, 2] {
                team::with_team(threads, || {
                    let product = |a: Strided, b: Strided, bias| {
                        let mut c = vec![f32::NAN; m * n];
                        matmul(&mut c, a, b, bias, (m, k, n));
                        c
                    };
                    let (a_rows, b_rows) = (Strided::rows(&a, k), Strided::rows(&b, n));
                    let (a_t, b_t) = (Strided::transposed(&at, m), Strided::transposed(&bt, k));
                    assert_eq!(product(a_rows, b_rows, None), want, "{m}×{k}·{k}×{n}");
                    assert_eq!(product(a_t, b_rows, None), want, "strided a");
                    assert_eq!(product(a_rows, b_t, None), want, "strided b");
                    assert_eq!(product(a_rows, b_rows, Some(&bias)), with_bias, "bias");
                    let mut batched = vec![f32::NAN; 2 * m * n];
                    let (a2, b2) = ([&a[..], &a].concat(), [&bt[..], &bt].concat());
                    matmul_batched(&mut batched, (&a2, false), (&b2, true), 2, (m, k, n));
                    assert_eq!(batched, [&want[..], &want].concat(), "batched");
                })
                .unwrap();
            }
            let mut portable = vec![f32::NAN; m * n];
            let product = Product {
                a: Strided::rows(&a, k),
                b: Strided::transposed(&bt, k),
                bias: None,
                k,
                n,
            };
            let out = Out::new(&mut portable, n);
            product.blocks::<Plain>(out, 0..m, 0..n.div_ceil(NR), &mut vec![]);
            assert_eq!(portable, want, "portable path {m}×{k}·{k}×{n}");
            every_tile_gives(&want, &with_bias, [&a, &at, &b, &bt, &bias], (m, k, n));
        }
    }

    /// Each tile this CPU can run, whichever [`tiles::tile`] chose, gives `want` (and `with_bias`
    /// with the bias), with A and B row-major or transposed (A, Aᵀ, B, Bᵀ and the bias given).
    fn every_tile_gives(
        want: &[f32],
        with_bias: &[f32],
        [a, at, b, bt, bias]: [&[f32]; 5],
        (m, k, n): (usize, usize, usize),
    ) {
        let (a_rows, b_rows) = (Strided::rows(a, k), Strided::rows(b, n));
        let (a_t, b_t) = (Strided::transposed(at, m), Strided::transposed(bt, k));
        for tile in Tile::ALL.into_iter().filter(|t| t.runs_with(lanes())) {
            for (a, b, bias, want) in [
                (a_rows, b_rows, None, want),
                (a_t, b_rows, None, want),
                (a_rows, b_t, Some(bias), with_bias),
            ] {
                let mut c = vec![f32::NAN; m * n];
                let product = Product { a, b, bias, k, n };
                let panels = 0..n.div_ceil(tile.shape().1);
                product.piece(tile, Out::new(&mut c, n), 0..m, panels);
                assert_eq!(c, want, "{tile:?}, {m}×{k}·{k}×{n}");
            }
        }
    }

    /// The shapes [`Tile::shape`] gives, by which products are cut into pieces, are the kernels'.
    #[test]
    fn each_tile_has_its_kernels_shape() {
        assert_eq!(Tile::Plain.shape(), (Plain::MR, Plain::NR));
        #[cfg(target_arch = "x86_64")]
        {
            assert_eq!(Tile::Avx512Wide.shape(), (Avx512Wide::MR, Avx512Wide::NR));
            assert_eq!(
                Tile::Avx512Halves.shape(),
                (Avx512Halves::MR, Avx512Halves::NR)
            );
            assert_eq!(Tile::Avx2.shape(), (Avx2::MR, Avx2::NR));
        }
    }

    /// `mul_add` is the exact a·b + c rounded once, whoever computes it: the CPU's FMA instruction
    /// here, and `libm::fmaf`, a software fused multiply-add, agree on a million products of the
    /// sizes training meets and on the rounding ties between two floats.
    #[test]
    fn mul_add_is_the_software_fused_multiply_add() {
        let (a, b, c) = (values(1 << 20, 4), values(1 << 20, 5), values(1 << 20, 6));
        for ((&a, &b), &c) in a.iter().zip(&b).zip(&c) {
            for (a, b, c) in [(a, b, c), (a * 1e-3, b, c), (a, b * 1e3, -c * 1e-4)] {
                assert_eq!(a.mul_add(b, c).to_bits(), libm::fmaf(a, b, c).to_bits());
            }
        }
        let tie = 1.0 + f32::EPSILON; // (1 + ε)² − 1 = 2ε + ε², exact only when fused
        assert_eq!(
            tie.mul_add(tie, -1.0),
            2.0 * f32::EPSILON + f32::EPSILON * f32::EPSILON
        );
        assert_eq!(libm::fmaf(tie, tie, -1.0), tie.mul_add(tie, -1.0));
    }

    /// [`expf`] is `libm::expf` to the bit on every float32 it covers: from −87.34 to 87.34, both
    /// signs, each of the 2.2 billion inputs, on two threads.
    #[test]
    fn expf_is_libms_on_every_float32_it_covers() {
        let check = |bits: std::ops::Range<u32>| {
            let mut x = vec![0.0; 1 << 16];
            let mut out = vec![0.0; 1 << 16];
            for start in bits.step_by(1 << 16) {
                for (i, x) in x.iter_mut().enumerate() {
                    *x = f32::from_bits(start + i as u32);
                }
                vectorised(
                    #[inline(always)]
                    || out.iter_mut().zip(&x).for_each(|(o, &x)| *o = expf(x)),
                );
                for (&x, &e) in x.iter().zip(&out) {
                    if expf_covers(x) {
                        assert_eq!(e.to_bits(), libm::expf(x).to_bits(), "expf({x:e})");
                    }
                }
            }
        };
        let (positive, negative) = (0..EXPF_LARGE + (1 << 16), 1 << 31..(1 << 31) + EXPF_LARGE);
        std::thread::scope(|s| {
            let other = s.spawn(|| check(negative));
            check(positive);
            other.join().unwrap();
        });
        assert!(!expf_covers(f32::NAN) && !expf_covers(-88.0) && expf_covers(-87.0));
    }

    /// [`expf_non_positive`] is [`expf`] to the bit on every float32 from −87.34 to 0 and on +0,
    /// each of the 1.1 billion inputs, on two threads, and so is [`expf_non_positive_avx2`] where
    /// the CPU has AVX2.
    #[test]
    fn expf_non_positive_is_expf_on_every_float32_at_most_0() {
        let check = |bits: std::ops::Range<u32>| {
            let mut x = vec![0.0; 1 << 16];
            let mut out = vec![[0.0; 2]; 1 << 16];
            for start in bits.step_by(1 << 16) {
                for (i, x) in x.iter_mut().enumerate() {
                    *x = f32::from_bits(start.wrapping_add(i as u32));
                }
                vectorised(
                    #[inline(always)]
                    || {
                        let pairs = out.iter_mut().zip(&x);
                        pairs.for_each(|(o, &x)| *o = [expf(x), expf_non_positive(x)]);
                    },
                );
                for (&x, &[e, n]) in x.iter().zip(&out) {
                    if expf_covers(x) && x <= 0.0 {
                        assert_eq!(n.to_bits(), e.to_bits(), "expf_non_positive({x:e})");
                    }
                }
                #[cfg(target_arch = "x86_64")]
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    for (x, out) in x.chunks_exact(8).zip(out.chunks_exact(8)) {
                        let mut lanes = [0.0f32; 8];
                        // SAFETY: AVX2 and FMA are checked above; both arrays are eight floats.
                        unsafe {
                            use std::arch::x86_64::{_mm256_loadu_ps, _mm256_storeu_ps};
                            let e = expf_non_positive_avx2(_mm256_loadu_ps(x.as_ptr()));
                            _mm256_storeu_ps(lanes.as_mut_ptr(), e);
                        }
                        for ((&x, &[e, _]), a) in x.iter().zip(out).zip(lanes) {
                            if expf_covers(x) && x <= 0.0 {
                                assert_eq!(
                                    a.to_bits(),
                                    e.to_bits(),
                                    "expf_non_positive_avx2({x:e})"
                                );
                            }
                        }
                    }
                }
            }
        };
        let half = EXPF_LARGE.div_ceil(2 << 16) * (1 << 16);
        let low = 1 << 31..(1 << 31) + half;
        let high = (1 << 31) + half..(1 << 31) + EXPF_LARGE + (1 << 16);
        std::thread::scope(|s| {
            let other = s.spawn(|| check(high));
            check(low);
            other.join().unwrap();
        });
        assert_eq!(expf_non_positive(0.0).to_bits(), expf(0.0).to_bits());
    }
}
