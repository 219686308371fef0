//! The axis design: one 1D correlation along any axis of a contiguous N-D array, the pass that
//! `correlate1d` along an axis and the separable filters (Gaussian, uniform, Sobel, Prewitt,
//! Laplace and their combinations) are made of.
//!
//! The array is seen as `outer x len x inner` (the axis in the middle), so an axis pass filters
//! `outer * inner` lines of `len` elements, each `inner` elements apart from its neighbours.
//!
//! Thread mapping and tiling of `staged` and `direct`: a block of `AXIS_THREADS` = 256 threads owns a tile of `columns`
//! consecutive lines (`min(inner, 32)`: a row of the tile is contiguous in memory, 128 bytes of
//! `f32` where `inner >= 32`) and `axis_rows(columns)` positions along the axis. Thread `t`
//! owns line `t % columns` and the `AXIS_OUTPUTS` = 8 consecutive positions from
//! `8 (t / columns)`; it slides a window of 8 values down its line, one new value per tap, so
//! each output costs one multiply-add per tap and about one read per 8 taps.
//!
//! - [`ring`]: for lines 32 or more abreast (`inner >= 32`), `f32` and odd masks of 3 to 31
//!   taps compiled in (`AXIS_RING_MASKS`): a block stacks 8 strips of `p.strip` positions, one
//!   per warp, whose 32 threads own 32 adjacent lines, so that every load and store of a warp
//!   is one 128-byte row. A thread reads each value of its strip once from global memory, a
//!   round of `TAPS` loads in flight together, and adds it into the `TAPS` sums in flight, a
//!   ring whose slots the unrolled round fixes at compile time; each tap is a constant-memory
//!   operand. Latency bounds it: 31 taps take 198 registers, one block per SM.
//! - [`staged`]: the other passes. The block stages its tile and halo rows in shared memory
//!   (ghost cells folded there; none in tiles inside the array), computes from there, and
//!   writes its outputs back through shared memory so that every store is a contiguous row.
//!   Along the last axis (`inner = 1`) a tile is one line of 2,048 positions, so shorter lines
//!   leave threads idle.
//!
//! The host runs the passes that store their result on the wide separable design's single
//! passes instead where one is compiled for the mask length (odd, 3 to 31) and the lines fit
//! its 16-byte rows: the last axis as rows of an image, any other whose lines lie 256 or more
//! abreast as columns of `outer` images (`conv2d::separable_wide`).
//! - [`direct`]: for masks whose halo does not fit in shared memory, each thread reads its
//!   window from global memory (L1 and L2 serve the overlap).
//!
//! The staged and direct taps come from global memory: every thread reads the same tap at
//! once, one broadcast per warp.

use crate::abi::{
    AXIS_OUTPUTS, AXIS_RING_STRIPS, AXIS_THREADS, AxisParams, COMBINE_ADD, COMBINE_ADD_SQUARE,
    COMBINE_STORE, axis_rows, axis_slot,
};
use crate::boundary::fold_index;
use crate::element::Real;
use crate::gpu::{
    ConstantOperands, GlobalMask, Mask, SharedTile, Walk, block_idx_x, div_rem, sync_threads,
    thread_idx_x,
};

const THREADS: u64 = AXIS_THREADS as u64;
const OUTPUTS: usize = AXIS_OUTPUTS as usize;
/// Strips of a ring block: one per warp, stacked along the axis.
const RING_STRIPS: u64 = AXIS_RING_STRIPS as u64;

/// The block's tile: where its lines start and which positions along the axis it owns.
#[derive(Clone, Copy)]
struct Tile {
    /// Offset of position 0 of the tile's first line.
    base: u64,
    /// First position along the axis.
    row0: u64,
    /// Index of the tile's first line among the `inner` lines of its outer index.
    column0: u64,
}

impl Tile {
    #[inline(always)]
    /// The tile of this block, for tiles of `rows` positions along the axis.
    fn of_block(p: &AxisParams, rows: u64) -> Self {
        let (rest, row_tile) = div_rem(p.block_offset + block_idx_x(), p.row_tiles);
        let (outer, column_tile) = div_rem(rest, p.column_tiles);
        let column0 = column_tile * p.columns;
        Self {
            base: outer * p.len * p.inner + column0,
            row0: row_tile * rows,
            column0,
        }
    }

    /// Whether the tile's line `column` exists (the last tile across the lines may be partial).
    #[inline(always)]
    fn has_line(self, column: u64, p: &AxisParams) -> bool {
        self.column0 + column < p.inner
    }

    /// Element at position `row` (anywhere: folded by the mode) of the tile's line `column`.
    ///
    /// # Safety
    /// `input` holds the array; the line exists.
    #[inline(always)]
    unsafe fn read<T: Real>(self, input: *const T, row: i64, column: u64, p: &AxisParams) -> T {
        let source = if (row as u64) < p.len {
            Some(row)
        } else {
            fold_index(row, p.len as i64, p.mode)
        };
        match source {
            // SAFETY: `source` lies in `[0, len)` and the line exists.
            Some(row) => unsafe {
                *input.add((self.base + row as u64 * p.inner + column) as usize)
            },
            None => T::from_f32(p.cval),
        }
    }

    /// Combines `value` with output position `row` of line `column` by `p.combine`, clamps it
    /// and stores it.
    ///
    /// # Safety
    /// `output` holds the array; `row < len`, the line exists.
    #[inline(always)]
    unsafe fn write<T: Real>(
        self,
        output: *mut T,
        row: u64,
        column: u64,
        value: T,
        p: &AxisParams,
    ) {
        let at = (self.base + row * p.inner + column) as usize;
        let combined = if p.combine == COMBINE_STORE {
            value
        } else {
            // SAFETY: `at` lies in the output (caller); this thread alone writes it.
            let old = unsafe { *output.add(at) };
            match p.combine {
                COMBINE_ADD => T::fma(value, T::from_f32(1.0), old),
                COMBINE_ADD_SQUARE => T::fma(value, value, old),
                _ => T::fma(value, value, old).sqrt(),
            }
        };
        // SAFETY: as above.
        unsafe { *output.add(at) = combined.clamp_to(p.clamp_lo, p.clamp_hi) };
    }
}

/// The outputs of positions `0..OUTPUTS` of a window whose values are `value(0)`,
/// `value(1)`, ...: `sum_j mask[j] * value(r + j)` for output `r`. Reads `value` up to
/// `mask_len + OUTPUTS - 1` (one past the last value a sum uses).
#[inline(always)]
fn slide<T: Real>(value: impl Fn(u64) -> T, mask: GlobalMask<T>, mask_len: u64) -> [T; OUTPUTS] {
    let mut window = [T::ZERO; OUTPUTS];
    for (r, slot) in window.iter_mut().enumerate() {
        *slot = value(r as u64);
    }
    let mut acc = [T::ZERO; OUTPUTS];
    // Each tap is read one step ahead of its multiply-adds, so that they do not wait on it.
    let mut next_tap = mask.tap(0);
    for j in 0..mask_len {
        let tap = next_tap;
        if j + 1 < mask_len {
            next_tap = mask.tap(j + 1);
        }
        for r in 0..OUTPUTS {
            acc[r] = T::fma(tap, window[r], acc[r]);
        }
        for r in 0..OUTPUTS - 1 {
            window[r] = window[r + 1];
        }
        window[OUTPUTS - 1] = value(j + OUTPUTS as u64);
    }
    acc
}

/// Staged axis design (see the module's doc).
///
/// # Safety
/// `input` and `output` hold `outer * len * inner >= 1` elements and do not overlap; `mask`
/// holds `mask_len` taps; `p.columns = axis_columns(inner)` and the tile counts match it; a
/// 256-thread launch with `axis_shared_elements(columns, mask_len) * size_of::<T>()` bytes of
/// shared memory.
#[inline(always)]
unsafe fn staged<T: Real>(input: *const T, mask: *const T, output: *mut T, p: &AxisParams) {
    let columns = p.columns;
    let rows = axis_rows(columns);
    let tile = Tile::of_block(p, rows);
    let tid = thread_idx_x();
    let first = tile.row0 as i64 - p.left as i64;
    let staged_rows = rows + p.mask_len;
    let inside = first >= 0 && first as u64 + staged_rows <= p.len;
    let load = |row: u32, column: u32| {
        let (row, column) = (u64::from(row), u64::from(column));
        if !tile.has_line(column, p) {
            T::ZERO
        } else if inside {
            let at = tile.base + (first as u64 + row) * p.inner + column;
            // SAFETY: the staged rows lie inside the axis and the line exists.
            unsafe { *input.add(at as usize) }
        } else {
            // SAFETY: the line exists.
            unsafe { tile.read(input, first + row as i64, column, p) }
        }
    };
    // SAFETY: `row < staged_rows`: inside `axis_shared_elements`.
    let store = |row: u32, column: u32, value: T| unsafe {
        SharedTile::store_real(axis_slot(row.into(), column.into(), columns), value)
    };
    Walk::new(tid as u32, THREADS as u32, columns as u32).stage(staged_rows as u32, load, store);
    sync_threads();
    let (group, column) = (
        u64::from(tid as u32 / columns as u32),
        u64::from(tid as u32 % columns as u32),
    );
    let first_row: u64 = group * OUTPUTS as u64;
    let computes = first_row < rows && tile.has_line(column, p);
    let mut acc = [T::ZERO; OUTPUTS];
    if computes {
        // SAFETY: rows up to `first_row + mask_len + OUTPUTS - 1 < staged_rows`, stored above.
        let value =
            |r: u64| unsafe { SharedTile::load_real(axis_slot(first_row + r, column, columns)) };
        acc = slide(value, GlobalMask(mask), p.mask_len);
    }
    sync_threads();
    if computes {
        for (r, &sum) in acc.iter().enumerate() {
            // SAFETY: `first_row + r < rows`: inside the staged rows.
            unsafe {
                SharedTile::store_real(axis_slot(first_row + r as u64, column, columns), sum)
            };
        }
    }
    sync_threads();
    let mut walk = Walk::new(tid as u32, THREADS as u32, columns as u32);
    while u64::from(walk.row) < rows {
        let (row, column) = (u64::from(walk.row), u64::from(walk.column));
        if tile.row0 + row < p.len && tile.has_line(column, p) {
            // SAFETY: written above, after the barrier.
            let sum = unsafe { SharedTile::load_real(axis_slot(row, column, columns)) };
            // SAFETY: the position and the line exist.
            unsafe { tile.write(output, tile.row0 + row, column, sum, p) };
        }
        walk.advance();
    }
}

/// Direct axis design, for masks too long for [`staged`]: each thread reads its window from
/// global memory.
///
/// # Safety
/// As [`staged`], with no shared memory.
#[inline(always)]
unsafe fn direct<T: Real>(input: *const T, mask: *const T, output: *mut T, p: &AxisParams) {
    let tile = Tile::of_block(p, axis_rows(p.columns));
    let tid = thread_idx_x();
    let (group, column): (u64, u64) = (
        (tid as u32 / p.columns as u32).into(),
        (tid as u32 % p.columns as u32).into(),
    );
    let first_row = tile.row0 + group * OUTPUTS as u64;
    if first_row >= tile.row0 + axis_rows(p.columns) || !tile.has_line(column, p) {
        return;
    }
    let first = first_row as i64 - p.left as i64;
    // SAFETY: the line exists; `read` folds every position.
    let value = |r: u64| unsafe { tile.read(input, first + r as i64, column, p) };
    let acc = slide(value, GlobalMask(mask), p.mask_len);
    for (r, &sum) in acc.iter().enumerate() {
        let row = first_row + r as u64;
        if row < p.len {
            // SAFETY: the position and the line exist.
            unsafe { tile.write(output, row, column, sum, p) };
        }
    }
}

/// Ring axis design (see the module's doc) for a mask of `TAPS` taps in `MASK`.
///
/// # Safety
/// `input` and `output` hold `outer * len * inner >= 1` elements and do not overlap; `MASK`
/// holds the `TAPS = mask_len` taps; `inner >= 32`, `p.columns = 32`, `p.strip >= 1` and the
/// tile counts match tiles of `RING_STRIPS * p.strip` positions; a 256-thread launch.
#[inline(always)]
unsafe fn ring<T: Real, const TAPS: usize>(input: *const T, output: *mut T, p: &AxisParams) {
    let tile = Tile::of_block(p, RING_STRIPS * p.strip);
    let tid = thread_idx_x();
    let (strip, column) = (tid / 32, tid % 32);
    let first_row = tile.row0 + strip * p.strip;
    if !tile.has_line(column, p) || first_row >= p.len {
        return;
    }
    let outputs = (p.len - first_row).min(p.strip);
    // Step `t` reads position `first + t`; output `k` of the strip takes steps `k` to
    // `k + TAPS - 1`, tap `j` at step `k + j`.
    let steps = outputs + TAPS as u64 - 1;
    let first = first_row as i64 - p.left as i64;
    let inside = first >= 0 && first as u64 + steps <= p.len;
    let line = tile.base + column;
    // `sums[k % TAPS]`: the sum of output `k`, for the `TAPS` outputs in flight.
    let mut sums = [T::ZERO; TAPS];
    let mut t0 = 0;
    let load = |t: u64| {
        if inside {
            let at = line + (first as u64 + t) * p.inner;
            // SAFETY: the strip's positions lie inside the axis; the line exists.
            unsafe { *input.add(at as usize) }
        } else {
            // SAFETY: the line exists; `read` folds the position.
            unsafe { tile.read(input, first + t as i64, column, p) }
        }
    };
    while t0 < steps {
        // A round of `TAPS` steps: every load first, so that they are in flight together.
        let mut values = [T::ZERO; TAPS];
        for (u, value) in values.iter_mut().enumerate() {
            if t0 + (u as u64) < steps {
                *value = load(t0 + u as u64);
            }
        }
        for (u, &value) in values.iter().enumerate() {
            let t = t0 + u as u64;
            if t >= steps {
                break;
            }
            for j in 0..TAPS {
                // Output `t - j`, whose slot is fixed by `u` and `j` since `t0 % TAPS = 0`.
                let slot = (u + TAPS - j) % TAPS;
                sums[slot] = T::fma(ConstantOperands.tap(j as u64), value, sums[slot]);
            }
            // Output `t - (TAPS - 1)` took its last tap: store it and free its slot for
            // output `t + 1`.
            let done = (u + 1) % TAPS;
            if t + 1 >= TAPS as u64 {
                let row = first_row + t + 1 - TAPS as u64;
                // SAFETY: `row < first_row + outputs <= len`; the line exists.
                unsafe { tile.write(output, row, column, sums[done], p) };
            }
            sums[done] = T::ZERO;
        }
        t0 += TAPS as u64;
    }
}

/// Declares the axis entry points `axis_staged{suffix}` and `axis_direct{suffix}` for `$t`.
macro_rules! axis_entry_points {
    ($($t:ty => $staged:ident, $direct:ident);+ $(;)?) => {$(
        #[doc = concat!("[`staged`] axis pass over `", stringify!($t), "`.")]
        ///
        /// # Safety
        /// As `staged`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $staged(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: AxisParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { staged(input, mask, output, &p) }
        }

        #[doc = concat!("[`direct`] axis pass over `", stringify!($t), "`.")]
        ///
        /// # Safety
        /// As `direct`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $direct(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: AxisParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { direct(input, mask, output, &p) }
        }
    )+};
}

axis_entry_points!(
    f32 => axis_staged, axis_direct;
    f64 => axis_staged_f64, axis_direct_f64;
);

/// Declares the ring axis entry points `axis_ring_m{taps}` over `f32`, one per mask length.
macro_rules! ring_entry_points {
    ($($taps:literal),+) => {$(
        #[doc = concat!("[`ring`] axis pass over `f32` for ", $taps, "-tap masks.")]
        ///
        /// # Safety
        /// As `ring`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn ${concat(axis_ring_m, $taps)}(
            input: *const f32,
            output: *mut f32,
            p: AxisParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { ring::<f32, $taps>(input, output, &p) }
        }
    )+};
}

ring_sizes!(ring_entry_points!());
