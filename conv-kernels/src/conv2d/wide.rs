//! Building blocks of the wide designs (the wide register-tiled 2D kernels and the wide
//! separable kernels): a block's threads own 16 consecutive outputs of a row each, 256 elements
//! per block row, and read their windows from a region staged in shared memory.
//!
//! - [`Staging`]: how a block stages its region (256 elements plus a mask's halo, some rows),
//!   warp by warp, every load of a row in flight before its stores;
//! - [`accumulate_window`]: how a thread applies one mask row to its window, each value read
//!   once (16 bytes at a time) feeding every output it belongs to;
//! - [`with_finish`] and [`store_segment`]: how a thread writes its final sums.

use crate::abi::{Conv2dParams, WIDE_BLOCK, WIDE_OUTPUTS, wide_word};
use crate::element::{Element, Real};
use crate::gpu::{ConstantOperands, Mask, SharedTile, fma};

/// Elements along a row that a wide block produces.
pub const TILE_ELEMENTS: usize = (WIDE_BLOCK.0 * WIDE_OUTPUTS) as usize;

/// Where element `x` of a staged row sits, in words from the row's start.
pub trait RowLayout {
    /// Words from element `x` to element `x + 32`, whatever `x` (so a warp's staging offsets
    /// are compile-time constants).
    const COLUMN_WORDS: u64;
    /// The word of element `x`.
    fn word(x: u64) -> u64;
}

/// Rows padded by [`wide_word`]: 4 words after every 16 elements, for threads of a
/// quarter-warp that read 16-byte windows 16 elements apart in the same row.
pub struct Padded;

impl RowLayout for Padded {
    const COLUMN_WORDS: u64 = 40;
    #[inline(always)]
    fn word(x: u64) -> u64 {
        wide_word(x)
    }
}

/// Unpadded rows, for blocks whose quarter-warps read the same elements of different rows
/// (the row stride keeps those apart).
pub struct Plain;

impl RowLayout for Plain {
    const COLUMN_WORDS: u64 = 32;
    #[inline(always)]
    fn word(x: u64) -> u64 {
        x
    }
}

/// How a wide block stages its input region in shared memory: each warp takes rows `warp,
/// warp + warps, ...` of the region and, in each, the elements `lane + 32 k`, all of a row's
/// loads issued before its stores. Row `ry` starts at word `ry * row_words`, its elements laid
/// out by `L`.
pub struct Staging<L: RowLayout> {
    pub rows: u64,
    pub row_words: u64,
    pub lane: u64,
    pub warp: u64,
    pub warps: u64,
    pub layout: core::marker::PhantomData<L>,
}

/// Most 32-element columns of a staged region: 256 elements and the halo of a 31-wide mask over
/// 4 channels.
pub const MAX_STAGED_COLUMNS: usize = (TILE_ELEMENTS + 30 * 4).div_ceil(32);

impl<L: RowLayout> Staging<L> {
    /// Stages the region of a mask `W` wide over `C` channels: `row(ry)` prepares region row
    /// `ry` once (its address, or its boundary fold), `value(prepared, k)` gives its element
    /// `lane + 32 k` (`k` a compile-time constant of the unrolled loop). `ROWS` of the warp's
    /// rows at a time, their loads issued before any of their stores.
    #[inline(always)]
    pub fn interior<const W: usize, const C: usize, const ROWS: usize, T: Copy>(
        &self,
        row: impl Fn(u64) -> T,
        value: impl Fn(T, usize) -> f32,
    ) {
        self.interior_at::<W, C, ROWS, T>(|ry| ry * self.row_words, row, value);
    }

    /// [`Staging::interior`] with region row `ry` starting at word `row_word(ry)` (a ring's
    /// slots, say) instead of `ry * row_words`.
    #[inline(always)]
    pub fn interior_at<const W: usize, const C: usize, const ROWS: usize, T: Copy>(
        &self,
        row_word: impl Fn(u64) -> u64,
        row: impl Fn(u64) -> T,
        value: impl Fn(T, usize) -> f32,
    ) {
        let width = TILE_ELEMENTS + (W - 1) * C;
        let columns = width.div_ceil(32);
        const { assert!(W <= 31 && C <= 4 && ROWS >= 1) };
        let first_word = L::word(self.lane);
        let mut ry = self.warp;
        while ry < self.rows {
            let mut values = [[0.0f32; MAX_STAGED_COLUMNS]; ROWS];
            for (n, staged_row) in values.iter_mut().enumerate() {
                let ry = ry + (n as u64) * self.warps;
                let prepared = row(ry);
                for (k, staged) in staged_row.iter_mut().enumerate().take(columns) {
                    if ry < self.rows && self.lane + 32 * (k as u64) < width as u64 {
                        *staged = value(prepared, k);
                    }
                }
            }
            for (n, staged_row) in values.iter().enumerate() {
                let ry = ry + (n as u64) * self.warps;
                let words = row_word(ry) + first_word;
                for (k, &staged) in staged_row.iter().enumerate().take(columns) {
                    if ry < self.rows && self.lane + 32 * (k as u64) < width as u64 {
                        // SAFETY: row `ry < rows`, element `lane + 32 k < width`: inside the
                        // block's reserved rows.
                        unsafe { SharedTile::store(words + L::COLUMN_WORDS * k as u64, staged) };
                    }
                }
            }
            ry += ROWS as u64 * self.warps;
        }
    }

    /// Stages a region `width` elements wide one element at a time: the border blocks, whose
    /// every read goes through the boundary mode (unrolled, those reads would take more
    /// registers than the kernels have).
    #[inline(always)]
    pub fn border(&self, width: u64, value: impl Fn(u64, u64) -> f32) {
        let mut ry = self.warp;
        while ry < self.rows {
            let mut rx = self.lane;
            while rx < width {
                // SAFETY: row `ry < rows`, element `rx < width`: inside the reserved rows.
                unsafe { SharedTile::store(ry * self.row_words + L::word(rx), value(ry, rx)) };
                rx += 32;
            }
            ry += self.warps;
        }
    }
}

/// Applies one mask row, `taps` (`W` taps over `C` interleaved channels), to a window of
/// `N + (W - 1) C` consecutive elements that `quad(q)` returns 4 at a time (elements
/// `4q .. 4q + 4`), adding output `n`'s products (elements `n + j C`) to `acc[n]`. Fully
/// unrolled: each value, read once, feeds every accumulator it belongs to.
#[inline(always)]
pub fn accumulate_window<const N: usize, const W: usize, const C: usize>(
    acc: &mut [f32; N],
    taps: &[f32; W],
    quad: impl Fn(usize) -> [f32; 4],
) {
    accumulate_window_after::<N, W, C>(acc, taps, 0, quad);
}

/// The taps of one mask row or column, by index.
pub trait Taps: Copy {
    /// Tap `j`.
    fn tap(self, j: usize) -> f32;
}

/// Taps held in registers (loaded once, before a kernel's loop).
impl<const W: usize> Taps for &[f32; W] {
    #[inline(always)]
    fn tap(self, j: usize) -> f32 {
        self[j]
    }
}

/// Taps of `MASK` from tap `.0` on, each loaded at its use ([`ConstantOperands`]): for kernels
/// whose taps outnumber the registers left beside their sums (ptxas makes each load an operand
/// of its multiply-add).
#[derive(Clone, Copy)]
pub struct OperandTaps(pub u64);

impl Taps for OperandTaps {
    #[inline(always)]
    fn tap(self, j: usize) -> f32 {
        ConstantOperands.tap(self.0 + j as u64)
    }
}

/// [`accumulate_window`] over a window that starts `skip` elements into the first quad (`skip`
/// a constant once inlined, below 4): for windows whose first element is not 16-byte aligned.
#[inline(always)]
pub fn accumulate_window_after<const N: usize, const W: usize, const C: usize>(
    acc: &mut [f32; N],
    taps: impl Taps,
    skip: usize,
    quad: impl Fn(usize) -> [f32; 4],
) {
    for q in 0..(skip + N + (W - 1) * C).div_ceil(4) {
        for (d, &value) in quad(q).iter().enumerate() {
            if 4 * q + d < skip {
                continue;
            }
            let k = 4 * q + d - skip;
            for (n, sum) in acc.iter_mut().enumerate() {
                if k >= n && (k - n).is_multiple_of(C) && (k - n) / C < W {
                    *sum = fma(taps.tap((k - n) / C), value, *sum);
                }
            }
        }
    }
}

/// How the final sums become outputs: clamped by `p`, or as they are.
pub type Finish = fn(f32, &Conv2dParams) -> f32;

/// Runs `store` with the clamp only where one was asked for: the accumulators are final when
/// the stores run, so the branch costs no sinking of their arithmetic.
#[inline(always)]
pub fn with_finish(p: &Conv2dParams, store: impl Fn(Finish)) {
    if p.clamp_lo > f32::NEG_INFINITY || p.clamp_hi < f32::INFINITY {
        store(|sum, p| sum.clamp_to(p.clamp_lo, p.clamp_hi));
    } else {
        store(|sum, _| sum);
    }
}

/// Writes `sums` (`N` a multiple of 4) through `finish` to the output elements `e .. e + N` of
/// a row, `at` pointing to element `e`: with 16-byte stores where all of them lie inside the
/// row's `elements`, else one by one up to its end.
///
/// # Safety
/// `at` points to element `e < elements` of an output row of `pitch >= elements` writable
/// elements, 16-byte aligned.
#[inline(always)]
pub unsafe fn store_segment<const N: usize, S: Element<Real = f32>>(
    at: *mut S,
    sums: &[f32; N],
    (e, elements): (u64, u64),
    finish: impl Fn(f32) -> f32,
) {
    if e + N as u64 <= elements {
        for (q, quad) in sums.chunks_exact(4).enumerate() {
            let quad = [quad[0], quad[1], quad[2], quad[3]].map(&finish);
            // SAFETY: elements `e + 4q .. e + 4q + 4 <= elements`, 16-byte aligned (caller).
            unsafe { S::store4_streaming(at.wrapping_add(4 * q), quad) };
        }
    } else {
        for (d, &sum) in sums.iter().enumerate() {
            if e + (d as u64) < elements {
                // SAFETY: element `e + d < elements` of the row (caller).
                unsafe { *at.add(d) = S::narrow(finish(sum)) };
            }
        }
    }
}
