//! The one-pass separable 3D design: the correlation of a volume (one channel) with a cubic
//! rank-1 mask `M` taps a side, `mask[i][j][k] = depth[i] * column[j] * row[k]`, reading and
//! writing the volume once (two-pass filters move it twice).
//!
//! Thread mapping and tiling: a block of 256 threads owns a tile of `32 x 32` outputs
//! (`SEPARABLE3D_TILE`) of `p.slices` consecutive slices and walks through the `slices + M -
//! 1` input slices they need. Each input slice's tile and halo, `(32 + M - 1)^2` elements, is
//! staged in shared memory by asynchronous copies (16-byte words where the staged columns lie
//! inside the rows and rows start at such words, rows past the slice's edges folded by the
//! mode; else element by element, every ghost cell folded; `SEPARABLE3D_BUFFERS` = 4 buffers,
//! three slices in flight). Then:
//!
//! 1. row pass, a slice ahead of the other passes: each of the `4 (32 + M - 1)` segments of 8
//!    row-filtered values (every staged row, halo rows included) is one thread's, its window
//!    read by 16-byte shared loads, each tap a constant-memory operand; the 8 threads of a
//!    quarter-warp take the same segment of 8 consecutive rows, so that their reads and writes
//!    fall on 8 groups of banks; the rows go to one of two areas, so that one barrier a slice
//!    separates them from their column pass;
//! 2. column pass, a slice behind: thread `t` filters column `t % 32` over the 4 rows from
//!    `4 (t / 32)`, reading the `4 + M - 1` row-filtered values it needs once (the 32 lanes of
//!    a warp read one row's 32 consecutive words);
//! 3. depth pass, in registers: each thread keeps the sums of its 4 rows for the `M` output
//!    slices in flight, adds the slice's 4 values into all of them, and stores the completed
//!    oldest. The ring's slot of an output slice is its index mod `M`, so that every slot stays
//!    in its registers: a slice's step is chosen among `M` compiled ones by its phase
//!    ([`depth_step`]), each with its taps at fixed slots.
//!
//! Per output: `(32 + M - 1) / 32 M + 2 M` multiply-adds. Shared memory: 33 to 39 KiB. What
//! bounds it is latency: each slice is a chain of a wait, a barrier and the passes, so the
//! resident blocks set its speed; the ring takes `4 M` registers, which leaves four blocks
//! per SM at 3 and 5 taps, three at 7, two at 9 (masks of 11 taps and more run as two
//! kernels: PERFORMANCE.md). The host cuts the depth into groups of about `10 (M - 1)`
//! slices: deeper blocks drift apart and lose the halos their neighbours leave in L2.

use crate::abi::{
    Conv3dParams, SEPARABLE3D_BUFFERS, SEPARABLE3D_FILTERED_ROW_WORDS, SEPARABLE3D_MAX_TAPS,
    SEPARABLE3D_TILE, separable3d_row_words,
};
use crate::boundary::Volume;
use crate::conv2d::wide::{OperandTaps, accumulate_window_after};
use crate::element::Real;
use crate::gpu::{
    ConstantOperands, Mask, SharedTile, block_idx_x, commit_async_copies, copy_to_shared_async,
    div_rem, element_at, fma, sync_threads, thread_idx_x, wait_async_copies,
};

const TILE: u64 = SEPARABLE3D_TILE;
const THREADS: u64 = 256;
/// Output rows of a thread in the column and depth passes.
const ROWS: usize = 4;
/// Row-filtered values of a row-pass segment.
const SEGMENT: usize = 8;
/// Staging slots of a thread for the largest mask compiled: a staged slice's elements over
/// the block's threads.
const SLOTS: usize = {
    let taps = SEPARABLE3D_MAX_TAPS as u64;
    ((TILE + taps - 1) * separable3d_row_words(taps)).div_ceil(THREADS) as usize
};
/// The in-slice offset of a constant ghost cell.
const GHOST: u32 = u32::MAX;

/// Calls [`depth_step::<M, P>`] for the phase `P` that `$phase` holds, among the literals
/// given (the phases below `M`).
macro_rules! depth_phases {
    ($phase:expr, $m:ident, ($sums:expr, $values:expr), $($p:literal)+) => {
        match $phase {
            $($p => depth_step::<$m, $p>($sums, $values),)+
            // SAFETY: the phase is below `M <= 9` (asserted by the caller).
            _ => unsafe { core::hint::unreachable_unchecked() },
        }
    };
}

/// The one-pass separable 3D design (see the module's doc).
///
/// # Safety
/// `input` and `output` hold `depth * height >= 1` rows of `width >= 1` elements (one
/// channel), `p.pitch` apart, a slice (`height * pitch` elements) under `2^32 - 1` elements,
/// and do not overlap; `MASK` holds the row factor, the column factor and the depth factor, `M`
/// taps each; `p.mask_d = p.mask_h = p.mask_w = M`; `p.x_tiles` and `p.y_tiles` count tiles of
/// 32, the grid covers the slices in steps of `p.slices >= 1`; a 256-thread launch with
/// `separable3d_shared_words(M) * 4` bytes of shared memory; sm_80 or later.
#[inline(always)]
unsafe fn separable3d<const M: usize>(input: *const f32, output: *mut f32, p: &Conv3dParams) {
    const { assert!(M % 2 == 1 && M >= 3 && M <= SEPARABLE3D_MAX_TAPS) };
    let halo = M as u64 - 1;
    let staged_rows = TILE + halo;
    let row_words = separable3d_row_words(M as u64);
    let buffer_words = staged_rows * row_words;
    let filtered = SEPARABLE3D_BUFFERS * buffer_words;
    let (rest, x_tile) = div_rem(p.block_offset + block_idx_x(), p.x_tiles);
    let (z_tile, y_tile) = div_rem(rest, p.y_tiles);
    let (x0, y0, z0) = (x_tile * TILE, y_tile * TILE, z_tile * p.slices);
    let tid = thread_idx_x();
    // SAFETY: 256 threads per block (caller).
    unsafe { core::hint::assert_unchecked(tid < THREADS) };
    // SAFETY: `input` holds the volume (caller).
    let volume = unsafe { Volume::<f32>::new(input, p) };
    // Staged rows start at the 16-byte word that holds the halo's first element, which sits
    // `shift` elements into it; staged row `r` is image row `first_y + r`.
    let first_e = x0 as i64 - p.left as i64;
    let word_start = first_e.div_euclid(4) * 4;
    let shift = (first_e - word_start) as usize;
    let first_y = y0 as i64 - p.top as i64;
    // Rows inside the slice or folded into it (`Volume::in_slice`) hold the staged columns
    // at fixed offsets where those lie inside the row: whole 16-byte words where rows start
    // at such words.
    let by_words = word_start >= 0
        && word_start as u64 + row_words <= p.width
        && p.pitch.is_multiple_of(4)
        && (input as usize).is_multiple_of(16);
    // A staged slice is `staged_rows * row_words` elements; thread `t` stages units `t + 256 k`
    // (16-byte words `by_words`, else elements), unit `i` at word `4 i` (or `i`) of its buffer.
    let unit = if by_words { 4 } else { 1 };
    let units = buffer_words / unit;
    let slots = (staged_rows * row_words).div_ceil(THREADS) as usize;
    let word_slots = (staged_rows * row_words / 4).div_ceil(THREADS) as usize;
    // The thread's units' offsets within a slice (`GHOST`: a constant ghost cell), the same
    // in every slice.
    let mut offsets = [GHOST; SLOTS];
    for (k, offset) in offsets.iter_mut().enumerate().take(slots) {
        let i = tid + THREADS * k as u64;
        if i < units {
            // Compile-time divisors: no division routine.
            let (r, column) = if by_words {
                (i / (row_words / 4), i % (row_words / 4))
            } else {
                (i / row_words, i % row_words)
            };
            let (y, e) = (first_y + r as i64, word_start + (column * unit) as i64);
            // Offsets within a slice fit 32 bits (caller).
            *offset = volume.in_slice(y, e).map_or(GHOST, |o| o as u32);
        }
    }
    let outputs = (p.depth - z0).min(p.slices);
    let slices = outputs + halo;
    let buffer_of = |s: u64| (s % SEPARABLE3D_BUFFERS) * buffer_words;
    // Starts copying slice `s` into its buffer (ghost cells stored at once) and closes the
    // group of those copies; past the block's last slice the group is empty, so that slice
    // `s`'s group is always the oldest of three.
    let begin = #[inline(always)]
    |s: u64| {
        if s < slices {
            let start = volume.address(volume.slice((z0 + s) as i64 - p.front), Some(0));
            let buffer = SharedTile::address32(buffer_of(s));
            // The thread's unit `k`: its index and byte offset in the buffer, if it has one.
            let unit_at = |k: usize| {
                let i = tid + THREADS * k as u64;
                (i < units).then_some((buffer + (4 * unit * i) as u32, offsets[k]))
            };
            match start {
                Some(start) if by_words => {
                    for k in 0..word_slots {
                        let Some((target, offset)) = unit_at(k) else {
                            continue;
                        };
                        if offset == GHOST {
                            for word in 0..4 {
                                // SAFETY: inside the buffer, as below.
                                unsafe { SharedTile::store_at(target + 4 * word, volume.cval()) };
                            }
                            continue;
                        }
                        // SAFETY: a 16-byte word of the slice's rows, 16-byte aligned
                        // (`by_words`); `target` inside the buffer, 16-byte aligned
                        // (`row_words` and the buffers a multiple of 4 words), read only
                        // after its group is waited for and a barrier passed.
                        unsafe {
                            copy_to_shared_async(
                                target,
                                element_at(start, offset).cast::<[u32; 4]>(),
                            )
                        };
                    }
                }
                Some(start) => {
                    for k in 0..slots {
                        let Some((target, offset)) = unit_at(k) else {
                            continue;
                        };
                        if offset == GHOST {
                            // SAFETY: inside the buffer, as above.
                            unsafe { SharedTile::store_at(target, volume.cval()) };
                        } else {
                            // SAFETY: an element of the slice (folded offset); `target` as
                            // above.
                            unsafe { copy_to_shared_async(target, element_at(start, offset)) };
                        }
                    }
                }
                None => {
                    for k in 0..slots {
                        let Some((target, _)) = unit_at(k) else {
                            continue;
                        };
                        for word in 0..unit as u32 {
                            // SAFETY: inside the buffer, as above.
                            unsafe { SharedTile::store_at(target + 4 * word, volume.cval()) };
                        }
                    }
                }
            }
        }
        commit_async_copies();
    };
    let (warp, lane) = (tid / 32, tid % 32);
    // Row pass: segment `lane / 8` of staged row `8 warp + lane % 8`.
    let segment_row = 8 * warp + lane % 8;
    let segment = SEGMENT as u64 * (lane / 8);
    // Slice `s`'s row-filtered rows sit in area `s mod 2`, so that the row pass of the next
    // slice and the column pass of this one run between the same two barriers.
    let filtered_area = staged_rows * SEPARABLE3D_FILTERED_ROW_WORDS;
    let filtered_of = |s: u64| filtered + (s % 2) * filtered_area;
    // Row-filters slice `s`'s staged rows into its area: each thread its segment.
    let row_pass = #[inline(always)]
    |s: u64| {
        if segment_row < staged_rows {
            let staged = buffer_of(s) + segment_row * row_words + segment;
            let mut acc = [0.0f32; SEGMENT];
            // SAFETY: words of the staged row (`shift + segment + SEGMENT + M - 1 <=
            // row_words`), stored before the last barrier.
            let quad = |q: usize| unsafe { SharedTile::load4(staged + 4 * q as u64) };
            // The window's first element sits `shift` into its word: a constant in each arm.
            match shift {
                0 => accumulate_window_after::<SEGMENT, M, 1>(&mut acc, OperandTaps(0), 0, quad),
                1 => accumulate_window_after::<SEGMENT, M, 1>(&mut acc, OperandTaps(0), 1, quad),
                2 => accumulate_window_after::<SEGMENT, M, 1>(&mut acc, OperandTaps(0), 2, quad),
                _ => accumulate_window_after::<SEGMENT, M, 1>(&mut acc, OperandTaps(0), 3, quad),
            }
            let at = filtered_of(s) + segment_row * SEPARABLE3D_FILTERED_ROW_WORDS + segment;
            // SAFETY: row `segment_row < staged_rows` of slice `s`'s row-filtered rows, words
            // `segment .. segment + 8 <= 32`: inside the reserved memory, 16-byte aligned.
            unsafe {
                SharedTile::store4(at, [acc[0], acc[1], acc[2], acc[3]]);
                SharedTile::store4(at + 4, [acc[4], acc[5], acc[6], acc[7]]);
            }
        }
    };
    // Column pass: column `lane`, rows `4 warp ..`.
    let column_offset = ROWS as u64 * warp * SEPARABLE3D_FILTERED_ROW_WORDS + lane;
    let x = x0 + lane;
    let first_row = y0 + ROWS as u64 * warp;
    let rows_inside = p.height.saturating_sub(first_row).min(ROWS as u64);
    let clamped = p.clamp_lo > f32::NEG_INFINITY || p.clamp_hi < f32::INFINITY;
    // `sums[k % M][r]`: row `r`'s sum of the block's output slice `k`.
    let mut sums = [[0.0f32; ROWS]; M];
    let mut phase = 0;
    for s in 0..SEPARABLE3D_BUFFERS - 1 {
        begin(s);
    }
    // Slice 0's copies are the oldest group of the three in flight.
    wait_async_copies::<{ SEPARABLE3D_BUFFERS as u32 - 2 }>();
    sync_threads();
    begin(SEPARABLE3D_BUFFERS - 1);
    row_pass(0);
    for s in 0..slices {
        // Slice `s + 1`'s copies are the oldest group of the three in flight.
        wait_async_copies::<{ SEPARABLE3D_BUFFERS as u32 - 2 }>();
        // One barrier a slice: slice `s + 1`'s buffer is complete, slice `s`'s row-filtered
        // rows are written, and the last step is done with slice `s`'s buffer, which the
        // next copies overwrite, and with the area slice `s + 1`'s rows go to.
        sync_threads();
        begin(s + SEPARABLE3D_BUFFERS);
        if s + 1 < slices {
            row_pass(s + 1);
        }
        let column_first = filtered_of(s) + column_offset;
        let mut values = [0.0f32; ROWS];
        for i in 0..ROWS + M - 1 {
            // SAFETY: row-filtered row `4 warp + i < staged_rows`, word `lane < 32`, stored
            // before the barrier.
            let value = unsafe {
                SharedTile::load(column_first + i as u64 * SEPARABLE3D_FILTERED_ROW_WORDS)
            };
            for (r, sum) in values.iter_mut().enumerate() {
                if i >= r && i - r < M {
                    *sum = fma(ConstantOperands.tap((M + i - r) as u64), value, *sum);
                }
            }
        }
        // SAFETY: `phase = s mod M < M`.
        unsafe { core::hint::assert_unchecked(phase < M) };
        let done = depth_phases!(phase, M, (&mut sums, values), 0 1 2 3 4 5 6 7 8);
        phase = if phase + 1 == M { 0 } else { phase + 1 };
        let Some(k) = s.checked_sub(halo) else {
            continue;
        };
        if k >= outputs || x >= p.width {
            continue;
        }
        let at = ((z0 + k) * p.height + first_row) * p.pitch + x;
        for (r, &sum) in done.iter().enumerate() {
            if (r as u64) < rows_inside {
                let value = if clamped {
                    sum.clamp_to(p.clamp_lo, p.clamp_hi)
                } else {
                    sum
                };
                // SAFETY: row `first_row + r < height` of slice `z0 + k < depth`, element
                // `x < width`: inside the volume; this thread alone writes it.
                unsafe { *output.add((at + r as u64 * p.pitch) as usize) = value };
            }
        }
    }
}

/// Adds the column-filtered values of input slice `s` (`P = s mod M`) into the sums of the
/// `M` output slices they reach: output slice `s - d` through depth tap `d`, its sums in slot
/// `(P - d) mod M`, and output slice `s`, which starts here, in slot `P`. Returns the sums of
/// output slice `s - (M - 1)`, which this slice completes (slot `P + 1 mod M`).
#[inline(always)]
fn depth_step<const M: usize, const P: usize>(
    sums: &mut [[f32; ROWS]; M],
    values: [f32; ROWS],
) -> [f32; ROWS] {
    for d in 0..M {
        let tap = ConstantOperands.tap((2 * M + d) as u64);
        let slot = &mut sums[(P + M - d) % M];
        for (sum, &value) in slot.iter_mut().zip(&values) {
            *sum = if d == 0 {
                value * tap
            } else {
                fma(tap, value, *sum)
            };
        }
    }
    sums[(P + 1) % M]
}

/// Declares the one-pass separable 3D entry points `conv3d_separable_async_m{M}(input, taps,
/// output, p)`, the 3D kernels' parameters (the taps in `MASK`, the pointer unused).
macro_rules! separable3d_entry_points {
    ($($m:literal),+) => {$(
        #[doc = concat!("The one-pass separable 3D design for ", $m, " taps a side.")]
        ///
        /// # Safety
        /// As `separable3d`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn ${concat(conv3d_separable_async_m, $m)}(
            input: *const f32,
            _taps: *const f32,
            output: *mut f32,
            p: Conv3dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { separable3d::<$m>(input, output, &p) }
        }
    )+};
}

separable3d_sizes!(separable3d_entry_points!());
