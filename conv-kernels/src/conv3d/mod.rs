//! The 3D design: correlation of a `depth x height x width x channels` volume with a
//! `mask_d x mask_h x mask_w` mask, and of a batch of images with a mask one slice deep
//! (`separable.rs`: cubic rank-1 masks in one pass).
//!
//! Thread mapping and tiling: a block of 256 threads owns `CONV3D_THREADS.0` = 64 consecutive
//! row elements (pixels times channels) of `4 XS ROWS` rows, through `p.slices` consecutive
//! slices; thread `t` owns the `XS` elements from `XS (t % (64 / XS))` of the `ROWS`
//! consecutive rows from `ROWS (t / (64 / XS))` (`XS`: 2 for the 5 x 5 x 5 kernel of one
//! channel staged by asynchronous copies, else 1). The block streams through the `slices +
//! mask_d - 1` input slices its outputs need, staging each slice's tile and halo (ghost cells
//! folded there; none in tiles inside the volume) in shared memory, one barrier a slice. Two ways to stage: through
//! registers, into one of two buffers, the next slice's loads in flight during this one's
//! multiply-adds; or (`ASYNC`, the sm_90 build) by asynchronous copies (`cp.async`) into one of
//! `CONV3D_ASYNC_SLICES` = 4 buffers, three slices' copies in flight and no registers held. Each thread reads its
//! window of a staged slice once and adds every value into all the sums it reaches: a ring
//! of `mask_d` sums per row, one per output slice in flight (through mask slices `mask_d - 1`
//! down to 0). After each slice the oldest sum is complete and is stored, and the ring
//! shifts. Every input element is read from device memory about once (halos come from L2).
//!
//! Mask shapes compiled in (`SIDE`, `DEPTH` > 0: 3 x 3 x 3, 5 x 5 x 5 (`f32`), and 1 x 3 x 3 and
//! 1 x 5 x 5 for batches and, in `f64`, for 2D images as one slice) unroll every loop, each
//! tap a constant-memory operand of its multiply-add, `conv3d_rows` rows a thread (in `f32` up
//! to 3 slices deep: 4 staged through registers; 8 by asynchronous copies, at 5 x 5 x 5 with one
//! block per SM; 8 and 4 in `f64` one slice deep, 8 by asynchronous copies). A block
//! whose tile and halo lie inside the slice stages them without folding by the boundary mode
//! (by asynchronous copies, without a check for ghost cells; of compiled shapes over rows of
//! whole 16-byte words, by 16-byte copies, a row's elements at their places within a word in
//! shared memory: `conv3d_row_words`). The cubic `f32` kernels staged
//! by asynchronous copies also come with one channel compiled in (`_c1`), which makes every
//! window offset an immediate.
//! The `f64` kernels for 2D images staged by asynchronous copies (`DOWN_ROWS`) walk a block
//! down several tiles of the one slice, one a step as other blocks walk slices, so that three
//! tiles' copies are in flight while it computes one. Other shapes
//! read their extents at run time, one row a thread, the taps from global memory, masks up to
//! `CONV3D_RING` slices deep; the host runs deeper ones as several launches, each adding its
//! slices' share (`p.accumulate`).
//!
//! Latency bounds the register staging: at up to 128 registers two blocks fit an SM, with one
//! slice's loads in flight. The asynchronous copies keep three slices in flight; at 3 x 3 x
//! 3 issue and L2 traffic bound them together (PERFORMANCE.md: N-D operations).

// The one-pass separable kernels stage by asynchronous copies: the sm_90 build.
#[cfg(conv_hopper)]
pub mod separable;

use crate::abi::{
    CONV3D_ASYNC_SLICES, CONV3D_RING, CONV3D_THREADS, Conv3dParams, conv3d_copy_elements,
    conv3d_row_elements, conv3d_row_words, conv3d_rows, conv3d_thread_elements,
};
use crate::boundary::Volume;
use crate::element::Real;
use crate::gpu::{
    ConstantOperands, GlobalMask, Mask, SharedTile, Walk, block_idx_x, commit_async_copies,
    copy_to_shared_async, div_rem, element_at, sync_threads, thread_idx_x, wait_async_copies,
};

const THREADS_X: u64 = CONV3D_THREADS.0 as u64;
const THREADS_Y: u64 = CONV3D_THREADS.1 as u64;
const THREADS: u64 = THREADS_X * THREADS_Y;
/// Staged elements per thread whose places a thread keeps (and, staging through registers,
/// loads a slice ahead), for compiled mask shapes: all of a 3 x 3 slice's tile and halo over up
/// to 4 channels at 8 rows a thread (`34 x 72 <= 11 x 256`).
const AHEAD: usize = 11;

/// Elements each thread stages of a slice's tile and halo for a compiled `side x side` mask
/// over `channels` channels (0: up to 4), `rows` rows a thread.
const fn staged_per_thread(side: u32, rows: usize, channels: u32) -> usize {
    let halo = side.saturating_sub(1) as usize;
    let channels = if channels == 0 { 4 } else { channels as usize };
    let staged = (THREADS_Y as usize * rows + halo) * (THREADS_X as usize + channels * halo);
    staged.div_ceil(THREADS as usize)
}
/// 16-byte words of `copy_elements` elements each thread stages of a slice's tile and halo,
/// for a compiled `side x side` mask over `channels` channels (0: up to 4), `rows` rows a thread,
/// the row's first element at any place in its word.
const fn staged_words_per_thread(
    side: u32,
    rows: usize,
    channels: u32,
    copy_elements: u32,
) -> usize {
    let halo = side.saturating_sub(1) as usize;
    let channels = if channels == 0 { 4 } else { channels as usize };
    let copy_elements = copy_elements as usize;
    let words = (THREADS_X as usize + channels * halo + copy_elements - 1).div_ceil(copy_elements);
    ((THREADS_Y as usize * rows + halo) * words).div_ceil(THREADS as usize)
}
/// The most window rows and columns a thread of several elements holds in registers.
const WINDOW_ROWS: usize = 8;
const WINDOW_SIDE: usize = 5;
/// The in-slice offset of a constant ghost cell.
const GHOST: u32 = u32::MAX;

/// The 3D design (see the module's doc).
///
/// # Safety
/// `input` and `output` hold `depth * height >= 1` rows of `width * channels >= 1` elements,
/// `p.pitch` apart, a slice (`height * pitch` elements) under `2^32 - 1` elements, and do not
/// overlap; `mask` holds the launch's `mask_d * mask_h * mask_w` taps; `p.x_tiles` and
/// `p.y_tiles` count tiles of 64 elements and `4 XS ROWS` rows, the grid covers the slices in
/// steps of `p.slices >= 1`; a 256-thread launch with
/// `conv3d_shared_elements(slices, XS ROWS, mask_h, row_words) * size_of::<T>()` bytes of
/// shared memory (`row_words`: `conv3d_row_words(mask_w, channels, conv3d_copy_elements(..,
/// ASYNC))`; `slices`: `CONV3D_ASYNC_SLICES` for `ASYNC`, else 2, or 1 where a block
/// stages one slice, `p.slices + mask_d = 2`); `mask_d <= RING`; for
/// `SIDE > 0`, `mask_h = mask_w = SIDE` and `mask_d = DEPTH = RING`; for `CHANNELS > 0`,
/// `channels = CHANNELS`; `ASYNC` only on sm_80 or later. `DOWN_ROWS` (a block walks down
/// the rows of one slice: `depth = mask_d = 1`): `p.y_tiles` counts groups of `p.slices` tiles
/// of `4 XS ROWS` rows, a block's steps, each staged as a slice is.
#[inline(always)]
unsafe fn tiled<
    T: Real,
    M: Mask<T>,
    const SIDE: u32,
    const DEPTH: u32,
    const RING: usize,
    const ROWS: usize,
    const XS: usize,
    const ASYNC: bool,
    const CHANNELS: u32,
    const DOWN_ROWS: bool,
>(
    input: *const T,
    mask: M,
    output: *mut T,
    p: &Conv3dParams,
) {
    const { assert!((SIDE == 0 && DEPTH == 0) || (SIDE > 0 && DEPTH as usize == RING)) };
    const { assert!(!DOWN_ROWS || DEPTH == 1) };
    const {
        assert!(XS >= 1 && THREADS_X.is_multiple_of(XS as u64));
        assert!(
            XS == 1
                || (SIDE > 0
                    && !DOWN_ROWS
                    && SIDE as usize <= WINDOW_SIDE
                    && ROWS + SIDE as usize - 1 <= WINDOW_ROWS)
        );
    };
    // Threads along a row: each owns `XS` consecutive elements.
    let lanes = THREADS_X / XS as u64;
    let tile_h = THREADS_Y * (XS * ROWS) as u64;
    let (rest, x_tile) = div_rem(p.block_offset + block_idx_x(), p.x_tiles);
    let (z_tile, y_tile) = div_rem(rest, p.y_tiles);
    let compiled = |size: u32, runtime: u64| if size > 0 { size } else { runtime as u32 };
    // Compiled in, the channel count makes every window offset below an immediate.
    let channels = compiled(CHANNELS, p.channels);
    let row_elements = p.width * u64::from(channels);
    // Walking down the rows, step `s` stages the tile `s` tiles below the block's first (in
    // slice 0); otherwise the block's tile in slice `z0 + s`.
    let (e0, y0, z0) = if DOWN_ROWS {
        (x_tile * THREADS_X, y_tile * p.slices * tile_h, 0)
    } else {
        (x_tile * THREADS_X, y_tile * tile_h, z_tile * p.slices)
    };
    let step_rows = |s: u64| if DOWN_ROWS { s * tile_h } else { 0 };
    let tid = thread_idx_x();
    let (tx, ty) = ((tid % lanes) as u32, (tid / lanes) as u32);
    let staged_w = conv3d_row_elements(u64::from(compiled(SIDE, p.mask_w)), channels.into());
    let staged_h = tile_h + p.mask_h - 1;
    // Staged rows lie `row_words` apart in shared memory, element `e` of a row at `e + shift`:
    // staged by asynchronous copies, every element at its place within a 16-byte word, so
    // that a tile inside the volume stages whole aligned words.
    let copy_elements = conv3d_copy_elements(size_of::<T>() as u64, ASYNC) as u32;
    let shift =
        (copy_elements - (p.left * u64::from(channels)) as u32 % copy_elements) % copy_elements;
    let row_words = conv3d_row_words(
        u64::from(compiled(SIDE, p.mask_w)),
        channels.into(),
        copy_elements.into(),
    ) as u32;
    // SAFETY: `input` holds the volume (caller).
    let volume = unsafe { Volume::new(input, p) };
    let first_e = e0 as i64 - (p.left * u64::from(channels)) as i64;
    // The offset within its slice of staged element `(r, e)` of step `s`, folded by the mode
    // (`None`: a constant ghost cell). The same in the whole block: where the tile and its
    // halo lie inside the slice, elements sit at fixed offsets, without folding.
    let interior = |s: u64| {
        let first_y = (y0 + step_rows(s)) as i64 - p.top as i64;
        let inside = first_y >= 0
            && first_y as u64 + staged_h <= p.height
            && first_e >= 0
            && first_e as u64 + staged_w <= row_elements;
        (first_y, inside)
    };
    let placer = |s: u64| {
        let (first_y, interior) = interior(s);
        move |r: u32, e: u32| {
            if interior {
                Some((first_y as u64 + u64::from(r)) * p.pitch + first_e as u64 + u64::from(e))
            } else {
                volume.in_slice(first_y + i64::from(r), first_e + i64::from(e))
            }
        }
    };
    let (mask_d, mask_h, mask_w) = (
        compiled(DEPTH, p.mask_d),
        compiled(SIDE, p.mask_h),
        compiled(SIDE, p.mask_w),
    );
    let outputs = if DOWN_ROWS {
        (p.height - y0).div_ceil(tile_h).min(p.slices)
    } else {
        (p.depth - z0).min(p.slices)
    };
    let slices = outputs + u64::from(mask_d) - 1;
    let buffer = u64::from(row_words) * staged_h;
    // Staged slice `s` sits in buffer `s mod buffers`.
    let buffers = if ASYNC { CONV3D_ASYNC_SLICES } else { 2 };
    let buffer_of = |s: u64| (s % buffers) * buffer;
    // The volume's offset of the slice of step `s`, folded by the mode (`None`: constant
    // ghosts).
    let slice = |s: u64| {
        let z = if DOWN_ROWS { z0 } else { z0 + s };
        volume.slice(z as i64 - p.front)
    };
    let storer = |s: u64| {
        let base = buffer_of(s);
        // SAFETY: row `r < staged_h`, element `e < staged_w`, buffer below `buffers`: inside
        // the reserved `buffers * staged_h * staged_w` elements.
        move |r: u32, e: u32, value: T| unsafe {
            SharedTile::store_real(base + u64::from(r * row_words + e + shift), value)
        }
    };
    // Compiled mask shapes keep the places of their whole slice's elements (up to 4
    // channels) in `f32` and of two in `f64`, shapes read at run time two in `f32` and none
    // in `f64`: more spilled registers. Walking down the rows, the places move with each step.
    let ahead_count = match (SIDE, size_of::<T>()) {
        _ if DOWN_ROWS => 0,
        (0, 8) => 0,
        (0, _) | (_, 8) => 2,
        _ => AHEAD.min(staged_per_thread(SIDE, XS * ROWS, CHANNELS)),
    };
    // A thread's first `ahead_count` staged elements sit at the same place in every slice:
    // their offsets within a slice, folded once (`GHOST`: constant ghosts), and their byte
    // offsets in a buffer (`u32::MAX`: past the tile's end, never staged). Staging through
    // registers loads them a slice ahead, so that their loads overlap the multiply-adds of
    // the slice before. Both kept in 32 bits: 64-bit addresses would take the registers the
    // sums need.
    let first = Walk::new(tid as u32, THREADS as u32, staged_w as u32);
    let mut offsets = [GHOST; AHEAD];
    let mut targets = [u32::MAX; AHEAD];
    let mut rest = first;
    // A block whose tile and halo lie inside the slice stages whole 16-byte words where the
    // volume's rows start at such words and the thread's words fit its places (`by_words`):
    // the `words_per_row` words that hold a row's staged elements, ending inside the row.
    let words_per_row = (shift + staged_w as u32).div_ceil(copy_elements);
    let word_slots = if ASYNC && SIDE > 0 && copy_elements > 1 {
        staged_words_per_thread(SIDE, XS * ROWS, CHANNELS, copy_elements).min(ahead_count)
    } else {
        0
    };
    let (first_y, inside) = interior(0);
    let by_words = word_slots > 0
        && !DOWN_ROWS
        && inside
        && (input as usize).is_multiple_of(16)
        && p.pitch.is_multiple_of(u64::from(copy_elements))
        && (first_e as u64 + staged_w).next_multiple_of(copy_elements.into()) <= row_elements
        && staged_h * u64::from(words_per_row) <= word_slots as u64 * THREADS;
    if by_words {
        // The thread's words: their offsets within a slice and byte offsets in a buffer.
        let first_word = first_y as u64 * p.pitch + first_e as u64 - u64::from(shift);
        let mut word = Walk::new(tid as u32, THREADS as u32, words_per_row);
        for (offset, target) in offsets.iter_mut().zip(&mut targets).take(word_slots) {
            if u64::from(word.row) < staged_h {
                // Offsets within a slice fit 32 bits (caller).
                *offset = (first_word
                    + u64::from(word.row) * p.pitch
                    + u64::from(word.column * copy_elements)) as u32;
                *target =
                    (word.row * row_words + word.column * copy_elements) * size_of::<T>() as u32;
            }
            word.advance();
        }
    } else {
        for (offset, target) in offsets.iter_mut().zip(&mut targets).take(ahead_count) {
            if u64::from(rest.row) < staged_h {
                // Offsets within a slice fit 32 bits (caller).
                *offset = placer(0)(rest.row, rest.column).map_or(GHOST, |o| o as u32);
                // A buffer is at most the shared memory of a block.
                *target = (rest.row * row_words + rest.column + shift) * size_of::<T>() as u32;
            }
            rest.advance();
        }
    }
    let load_ahead = |s: u64| {
        let base = slice(s);
        let mut values = [T::ZERO; AHEAD];
        for (value, &offset) in values.iter_mut().zip(&offsets).take(ahead_count) {
            *value = volume.at(base, (offset != GHOST).then_some(u64::from(offset)));
        }
        values
    };
    // Stores slice `s`'s elements: the thread's first ones from `ahead`, the others (large
    // masks or many channels) loaded now.
    let stage = |s: u64, ahead: &[T; AHEAD]| {
        let store = storer(s);
        let mut walk = first;
        for &value in ahead.iter().take(ahead_count) {
            if u64::from(walk.row) < staged_h {
                store(walk.row, walk.column, value);
            }
            walk.advance();
        }
        let (base, in_slice) = (slice(s), placer(s));
        let load = |r: u32, e: u32| volume.at(base, in_slice(r, e));
        rest.stage(staged_h as u32, load, store);
    };
    // Starts copying slice `s` into its buffer without passing through registers (ghost
    // cells stored at once) and closes the group of those copies. Past the block's last slice
    // the group is empty, so that slice `s`'s group is always the oldest of `buffers - 1`.
    let begin_async = #[inline(always)]
    |s: u64| {
        if s < slices {
            let (base, in_slice) = (slice(s), placer(s));
            let buffer_start =
                SharedTile::address32(0) + (buffer_of(s) * size_of::<T>() as u64) as u32;
            // SAFETY: `source` lies in the volume (`Volume::address`); `target` inside the
            // reserved buffers (as `storer`), read only after this group is waited for and a
            // barrier passed.
            let copy = |target: u32, source: Option<*const T>| unsafe {
                match source {
                    Some(source) => copy_to_shared_async(target, source),
                    None => T::store_shared(u64::from(target), volume.cval()),
                }
            };
            // The thread's first elements, from `start` (`None`: a slice of constant ghosts),
            // skipping the ghost cells among them where `ghosts`.
            let copy_ahead = #[inline(always)]
            |start: Option<*const T>, ghosts: bool| {
                for (&offset, &target) in offsets.iter().zip(&targets).take(ahead_count) {
                    if target != u32::MAX {
                        let source = start
                            .filter(|_| !ghosts || offset != GHOST)
                            .map(|start| element_at(start, offset));
                        copy(buffer_start + target, source);
                    }
                }
            };
            // Where the tile and its halo lie inside a slice of the volume, every offset is
            // one (no ghost cells): each copy is an address and a `cp.async`, where the checks
            // of the general case take most of a slice's staging instructions.
            match volume.address(base, Some(0)) {
                Some(start) if by_words => {
                    for (&offset, &target) in offsets.iter().zip(&targets).take(word_slots) {
                        if target != u32::MAX {
                            // SAFETY: a word of the slice's rows, 16-byte aligned (`by_words`);
                            // `target` as in `copy`, 16-byte aligned (`shift`, `row_words`).
                            unsafe {
                                copy_to_shared_async(
                                    buffer_start + target,
                                    element_at(start, offset).cast::<[u32; 4]>(),
                                )
                            };
                        }
                    }
                }
                None if by_words => {
                    for &target in targets.iter().take(word_slots) {
                        if target != u32::MAX {
                            for k in 0..copy_elements {
                                copy(buffer_start + target + k * size_of::<T>() as u32, None);
                            }
                        }
                    }
                }
                Some(start) if !DOWN_ROWS && inside => copy_ahead(Some(start), false),
                start => copy_ahead(start, true),
            }
            let mut walk = rest;
            while !by_words && u64::from(walk.row) < staged_h {
                let target = (walk.row * row_words + walk.column + shift) * size_of::<T>() as u32;
                copy(
                    buffer_start + target,
                    volume.address(base, in_slice(walk.row, walk.column)),
                );
                walk.advance();
            }
        }
        commit_async_copies();
    };
    // `sums[j][r][x]`: the sum of element `x` of row `r` of the output slice that staged
    // slice `s` meets through mask slice `mask_d - 1 - j`.
    let mut sums = [[[T::ZERO; XS]; ROWS]; RING];
    // Walking down the rows, a compiled mask (one slice deep) adds a row's odd columns of taps
    // into a second sum (`odd`): each row has two chains of dependent multiply-adds, each half
    // as long.
    let split = DOWN_ROWS && SIDE > 0;
    let e = e0 + XS as u64 * u64::from(tx);
    let first_row = y0 + u64::from(ty) * ROWS as u64;
    let window_rows = ROWS as u32 + mask_h - 1;
    let mut ahead = if ASYNC {
        for s in 0..buffers - 1 {
            begin_async(s);
        }
        [T::ZERO; AHEAD]
    } else {
        load_ahead(0)
    };
    for s in 0..slices {
        if ASYNC {
            // Slice `s`'s copies are the oldest group of the `buffers - 1` in flight.
            wait_async_copies::<{ CONV3D_ASYNC_SLICES as u32 - 2 }>();
        } else {
            stage(s, &ahead);
        }
        // One barrier a slice: slice `s`'s buffer is complete, and slice `s - 1`'s, which
        // the next staging overwrites, has been read.
        sync_threads();
        if ASYNC {
            begin_async(s + buffers - 1);
        } else if s + 1 < slices {
            ahead = load_ahead(s + 1);
        }
        let base = buffer_of(s);
        let mut odd = [[T::ZERO; XS]; ROWS];
        let first = XS as u32 * tx;
        if XS > 1 {
            // Several elements a thread: the whole window in registers, `values[i][dx][x]`
            // element `XS tx + x + dx * channels` of row `ty ROWS + i`, then each tap once
            // for all the sums it feeds, so that the window and the sums fit the registers of
            // two blocks per SM (the 5 x 5 x 5 kernels: 48 values and 40 sums in 128). The
            // offsets within a row are added in 64 bits: with the channels compiled in, each
            // load takes its row's address plus an immediate.
            let values: [[[T; XS]; WINDOW_SIDE]; WINDOW_ROWS] = core::array::from_fn(|i| {
                let row =
                    base + u64::from((ty * ROWS as u32 + i as u32) * row_words + shift + first);
                core::array::from_fn(|dx| {
                    core::array::from_fn(|x| {
                        if i < window_rows as usize && dx < mask_w as usize {
                            // SAFETY: row `ty ROWS + i < staged_h`, element `XS tx + x + dx
                            // channels < staged_w` of this slice's buffer, stored before the
                            // last barrier.
                            unsafe {
                                SharedTile::load_real(
                                    row + x as u64 + dx as u64 * u64::from(channels),
                                )
                            }
                        } else {
                            T::ZERO
                        }
                    })
                })
            });
            for (j, ring) in sums.iter_mut().enumerate().take(mask_d as usize) {
                let dz = mask_d - 1 - j as u32;
                for dy in 0..mask_h {
                    for dx in 0..mask_w {
                        let tap = mask.tap(u64::from((dz * mask_h + dy) * mask_w + dx));
                        for (r, sums) in ring.iter_mut().enumerate() {
                            let values = &values[r + dy as usize][dx as usize];
                            for (sum, &value) in sums.iter_mut().zip(values) {
                                *sum = T::fma(tap, value, *sum);
                            }
                        }
                    }
                }
            }
        } else {
            // One element a thread: the window row by row, each value into every sum it
            // reaches (shapes read at run time have no compile-time window).
            for i in 0..window_rows {
                let row = base + u64::from((ty * ROWS as u32 + i) * row_words + first + shift);
                for dx in 0..mask_w {
                    // SAFETY: row `ty ROWS + i < staged_h`, element `tx + dx * channels <
                    // staged_w` of this slice's buffer, stored before the last barrier.
                    let value = unsafe { SharedTile::load_real(row + u64::from(dx * channels)) };
                    for r in 0..ROWS {
                        let dy = i.wrapping_sub(r as u32);
                        if dy >= mask_h {
                            continue;
                        }
                        for (j, ring) in sums.iter_mut().enumerate().take(mask_d as usize) {
                            let dz = mask_d - 1 - j as u32;
                            let tap = mask.tap(u64::from((dz * mask_h + dy) * mask_w + dx));
                            let sum = if split && dx % 2 == 1 {
                                &mut odd[r][0]
                            } else {
                                &mut ring[r][0]
                            };
                            *sum = T::fma(tap, value, *sum);
                        }
                    }
                }
            }
        }
        // The oldest sum in flight is complete: output slice `s - (mask_d - 1)`. Settled
        // here, so that its multiply-adds interleave with the other rows' (`Real::settled`).
        if split {
            // Indexed, not through flattening iterators: those keep both arrays in local
            // memory (a 128-byte stack frame in the `f64` kernels for 2D images).
            for r in 0..ROWS {
                for x in 0..XS {
                    sums[0][r][x] = T::fma(T::from_f32(1.0), odd[r][x], sums[0][r][x]);
                }
            }
        }
        sums[0] = sums[0].map(|row| row.map(T::settled));
        let k = s as i64 - i64::from(mask_d - 1);
        if k >= 0 && e < row_elements {
            let (z, first_row) = if DOWN_ROWS {
                (z0, first_row + step_rows(k as u64))
            } else {
                (z0 + k as u64, first_row)
            };
            let first = output.wrapping_add(((z * p.height + first_row) * p.pitch + e) as usize);
            // Rows and elements of the thread inside the volume: one 32-bit compare each,
            // none where all are (`all_inside`).
            let rows_inside = p.height.saturating_sub(first_row).min(ROWS as u64) as u32;
            let elements_inside = (row_elements - e).min(XS as u64) as u32;
            // Stores the rows inside the volume, adding what the output holds where
            // `accumulate`, clamped where `clamp`: all decided once per slice, not per row.
            let store_rows = #[inline(always)]
            |accumulate: bool, clamp: bool, all_inside: bool| {
                let mut at = first;
                for (r, row) in sums[0].iter().enumerate() {
                    for (x, &sum) in row.iter().enumerate() {
                        if all_inside || ((r as u32) < rows_inside && (x as u32) < elements_inside)
                        {
                            let at = at.wrapping_add(x);
                            let total = if accumulate {
                                // SAFETY: element `e + x` of row `first_row + r` of slice
                                // `z`: inside the volume; this thread alone writes it.
                                T::fma(T::from_f32(1.0), unsafe { *at }, sum)
                            } else {
                                sum
                            };
                            let total = if clamp {
                                total.clamp_to(p.clamp_lo, p.clamp_hi)
                            } else {
                                total
                            };
                            // SAFETY: as above.
                            unsafe { *at = total };
                        }
                    }
                    at = at.wrapping_add(p.pitch as usize);
                }
            };
            match (
                p.accumulate != 0,
                p.clamp_lo > f32::NEG_INFINITY || p.clamp_hi < f32::INFINITY,
                rows_inside == ROWS as u32 && elements_inside == XS as u32,
            ) {
                (false, false, true) => store_rows(false, false, true),
                (false, false, false) => store_rows(false, false, false),
                (false, true, _) => store_rows(false, true, false),
                (true, ..) => store_rows(true, true, false),
            }
        }
        for j in 0..RING - 1 {
            sums[j] = if ((j + 1) as u32) < mask_d {
                sums[j + 1]
            } else {
                [[T::ZERO; XS]; ROWS]
            };
        }
        sums[RING - 1] = [[T::ZERO; XS]; ROWS];
    }
}

/// A kernel's mask, from the entry point's taps pointer.
trait MaskAt<T: Real>: Mask<T> {
    fn at(taps: *const T) -> Self;
}

impl<T: Real> MaskAt<T> for ConstantOperands {
    /// The taps are in `MASK`; the pointer is unused.
    #[inline(always)]
    fn at(_: *const T) -> Self {
        ConstantOperands
    }
}

impl<T: Real> MaskAt<T> for GlobalMask<T> {
    #[inline(always)]
    fn at(taps: *const T) -> Self {
        GlobalMask(taps)
    }
}

/// Declares the 3D entry point `$name(input, mask, output, p)` over `$t` with the taps in
/// `$mask` (`ConstantOperands`: in `MASK`, the pointer unused) for `[SIDE, DEPTH, RING,
/// TILE_ROWS, ASYNC, CHANNELS, DOWN_ROWS]` (`TILE_ROWS`: `conv3d_rows`, each thread's
/// `conv3d_thread_elements` elements taking `TILE_ROWS` over them rows; `ASYNC`: staged by
/// asynchronous copies, not through
/// registers; `CHANNELS`: 0, read at run time, or compiled in; `DOWN_ROWS`: a block walks down
/// the rows of one slice).
macro_rules! conv3d_entry_points {
    ($($name:ident: $t:ty, $mask:ty, [$side:literal, $depth:literal, $ring:expr, $rows:expr, $async:literal, $channels:literal, $down_rows:literal]);+ $(;)?) => {$(
        #[doc = concat!("The 3D design over `", stringify!($t), "` for masks ", $depth, " x ", $side, " x ", $side, " (0: shapes read at run time), asynchronous copies: ", $async, ", channels: ", $channels, " (0: read at run time), walking down the rows: ", $down_rows, ".")]
        ///
        /// # Safety
        /// As `tiled`, the taps in `MASK` for `ConstantOperands`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: Conv3dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe {
                tiled::<
                    $t,
                    $mask,
                    $side,
                    $depth,
                    { $ring },
                    { ($rows / conv3d_thread_elements($depth, $side, $channels, size_of::<$t>() as u64, $async)) as usize },
                    { conv3d_thread_elements($depth, $side, $channels, size_of::<$t>() as u64, $async) as usize },
                    $async,
                    $channels,
                    $down_rows,
                >(
                    input,
                    <$mask as MaskAt<$t>>::at(mask),
                    output,
                    &p,
                )
            }
        }
    )+};
}

conv3d_entry_points!(
    conv3d_tiled: f32, GlobalMask<f32>, [0, 0, CONV3D_RING, conv3d_rows(0, 0, 4, false), false, 0, false];
    conv3d_tiled_m3: f32, ConstantOperands, [3, 3, 3, conv3d_rows(3, 3, 4, false), false, 0, false];
    conv3d_tiled_m5: f32, ConstantOperands, [5, 5, 5, conv3d_rows(5, 5, 4, false), false, 0, false];
    conv3d_tiled_m1x3: f32, ConstantOperands, [3, 1, 1, conv3d_rows(1, 3, 4, false), false, 0, false];
    conv3d_tiled_m1x5: f32, ConstantOperands, [5, 1, 1, conv3d_rows(1, 5, 4, false), false, 0, false];
    conv3d_tiled_f64: f64, GlobalMask<f64>, [0, 0, CONV3D_RING, conv3d_rows(0, 0, 8, false), false, 0, false];
    conv3d_tiled_m3_f64: f64, ConstantOperands, [3, 3, 3, conv3d_rows(3, 3, 8, false), false, 0, false];
    conv3d_tiled_m1x3_f64: f64, ConstantOperands, [3, 1, 1, conv3d_rows(1, 3, 8, false), false, 0, false];
    conv3d_tiled_m1x5_f64: f64, ConstantOperands, [5, 1, 1, conv3d_rows(1, 5, 8, false), false, 0, false];
);

// Asynchronous copies need sm_80: these go to the sm_90 build. The cubic `f32` kernels come
// with the channel count read at run time and compiled in for one channel (`_c1`: every
// window offset an immediate); the `f64` kernels one slice deep run 2D images, walking down
// the rows with the channel count compiled in.
#[cfg(conv_hopper)]
conv3d_entry_points!(
    conv3d_tiled_async_m3: f32, ConstantOperands, [3, 3, 3, conv3d_rows(3, 3, 4, true), true, 0, false];
    conv3d_tiled_async_m5: f32, ConstantOperands, [5, 5, 5, conv3d_rows(5, 5, 4, true), true, 0, false];
    conv3d_tiled_async_m3_c1: f32, ConstantOperands, [3, 3, 3, conv3d_rows(3, 3, 4, true), true, 1, false];
    conv3d_tiled_async_m5_c1: f32, ConstantOperands, [5, 5, 5, conv3d_rows(5, 5, 4, true), true, 1, false];
    conv3d_tiled_async_m1x3_c1_f64: f64, ConstantOperands, [3, 1, 1, conv3d_rows(1, 3, 8, true), true, 1, true];
    conv3d_tiled_async_m1x3_c3_f64: f64, ConstantOperands, [3, 1, 1, conv3d_rows(1, 3, 8, true), true, 3, true];
    conv3d_tiled_async_m1x3_c4_f64: f64, ConstantOperands, [3, 1, 1, conv3d_rows(1, 3, 8, true), true, 4, true];
    conv3d_tiled_async_m1x5_c1_f64: f64, ConstantOperands, [5, 1, 1, conv3d_rows(1, 5, 8, true), true, 1, true];
    conv3d_tiled_async_m1x5_c3_f64: f64, ConstantOperands, [5, 1, 1, conv3d_rows(1, 5, 8, true), true, 3, true];
    conv3d_tiled_async_m1x5_c4_f64: f64, ConstantOperands, [5, 1, 1, conv3d_rows(1, 5, 8, true), true, 4, true];
);
