//! Wide fused separable kernels for square rank-1 masks, `mask[i][j] = column[i] * row[j]`,
//! specialised at compile time on the mask size `M` and the channel count `C`: the row pass and
//! the column pass of [`separable`](crate::separable) with the wide register-tiled kernels'
//! ingredients (16 outputs per thread, windows through 16-byte shared reads, every tap a
//! compile-time constant-memory operand), so that nearly every instruction is a multiply-add.
//!
//! Block and tiling: 256 threads own a strip of `SEPARABLE_WIDE_STRIP` = 256 output elements
//! and `out_tile_h` output rows, and walk down them `SEPARABLE_WIDE_CHUNK_ROWS` = 32 input rows
//! per step:
//!
//! 1. staging: the step's 32 input rows, strip plus `(M - 1) C` halo elements, into shared
//!    memory, warp by warp (the boundary mode only in steps that reach past the image);
//! 2. row pass: each thread filters 16 consecutive outputs of a staged row along the row, twice
//!    (512 row segments per step), and writes them to a ring of row-filtered rows, slot
//!    `h mod ring_rows` for the block's filtered row `h`. The 8 threads of a quarter-warp take
//!    the same segment of 8 consecutive rows, and both the staged rows and the ring rows hold
//!    an odd number of 16-byte quads, so their 16-byte reads and writes fall on 8 different
//!    groups of banks;
//! 3. column pass: each thread filters 4 consecutive elements x 8 consecutive output rows down
//!    the columns: it streams the `8 + M - 1` ring rows through 16-byte reads, each feeding
//!    every accumulator it belongs to (32 M multiply-adds for `8 + M - 1` reads), and stores
//!    the rows that lie in the block with 16-byte stores.
//!
//! The ring holds a step's 32 rows and the `M - 1` before them, so two barriers per step
//! suffice: after the staging (the row pass reads it, and the previous column pass is done with
//! the slots it overwrites) and after the row pass. A block of `out_tile_h` rows does
//! `(out_tile_h + M - 1) / out_tile_h * M + M` multiply-adds per output; the host picks
//! `out_tile_h + M - 1` a multiple of 32.

use crate::abi::{
    Conv2dParams, SEPARABLE_WIDE_CHUNK_ROWS, SEPARABLE_WIDE_RING_ROW_WORDS, SEPARABLE_WIDE_STRIP,
    SeparableWideLayout,
};
use crate::boundary::Plane;
use crate::gpu::{
    ConstantMask, Mask, SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x,
};
use crate::wide::{Plain, Staging, accumulate_window, store_segment, with_finish};
use core::marker::PhantomData;

const CHUNK: u64 = SEPARABLE_WIDE_CHUNK_ROWS as u64;
const STRIP: u64 = SEPARABLE_WIDE_STRIP as u64;
const RING_ROW: u64 = SEPARABLE_WIDE_RING_ROW_WORDS;
/// Outputs of a row-pass segment.
const SEGMENT: usize = 16;
/// Output rows of a column-pass thread.
const COLUMN_ROWS: usize = 8;
/// The column table's entry for a constant ghost cell.
const NO_COLUMN: u32 = u32::MAX;

/// The geometry of one block and step, from the launch parameters.
#[derive(Clone, Copy)]
struct Block {
    layout: SeparableWideLayout,
    /// First element of the strip and first output row.
    e0: u64,
    y0: u64,
    /// Output rows of this block (fewer in the last block row).
    out_rows: u64,
    lane: u64,
    warp: u64,
}

impl Block {
    /// First word of the ring.
    #[inline(always)]
    fn ring(self) -> u64 {
        CHUNK * self.layout.staged_row_words
    }

    /// `slot + rows` within the ring, for `slot < ring_rows` and `rows <= ring_rows`.
    #[inline(always)]
    fn advance(self, slot: u64, rows: u64) -> u64 {
        let next = slot + rows;
        if next >= self.layout.ring_rows {
            next - self.layout.ring_rows
        } else {
            next
        }
    }
}

/// The wide fused separable design for an `M x M` rank-1 mask over `C` channels.
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the row
/// factor then the column factor; `p.mask_h = p.mask_w = M`, `p.channels = C`; a
/// `(256, 1)` block with `SeparableWideLayout::new(M, C).words * 4` bytes of shared memory;
/// `p.pitch` a multiple of 4 and the output buffer 16-byte aligned.
#[inline(always)]
unsafe fn separable_wide<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    const { assert!(M >= 1 && M <= 31 && C >= 1 && C <= 4) };
    let layout = SeparableWideLayout::new(M as u64, C as u64);
    let rows_per_block = u64::from(p.out_tile_h);
    let height = u64::from(p.height);
    let elements = u64::from(p.width) * C as u64;
    let e0 = block_idx_x() * STRIP;
    let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * rows_per_block;
    let thread = thread_idx_x();
    let block = Block {
        layout,
        e0,
        y0,
        out_rows: rows_per_block.min(height - y0),
        lane: thread % 32,
        warp: thread / 32,
    };
    let staged_w = STRIP + (M as u64 - 1) * C as u64;
    let first_e = e0 as i64 - i64::from(p.left) * C as i64;
    let first_y = y0 as i64 - i64::from(p.top);
    let columns_inside = first_e >= 0 && first_e as u64 + staged_w <= elements;
    let staging = Staging::<Plain> {
        rows: CHUNK,
        row_words: layout.staged_row_words,
        lane: block.lane,
        warp: block.warp,
        warps: 8,
        layout: PhantomData,
    };
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    let steps = (block.out_rows + M as u64 - 1).div_ceil(CHUNK);
    // Ring slots of filtered rows `32 s` (the step's first) and `32 s - (M - 1)` (the first
    // its column pass reads).
    // The folded offset of every staged column, for the border steps (every step of the
    // strips at the image's sides, the first and last of the block rows at its top and bottom).
    let mut x = thread;
    while x < staged_w {
        let column = image
            .column(first_e + x as i64)
            .map_or(NO_COLUMN, |c| c as u32);
        // SAFETY: `x < staged_w`: an entry of the table; read after the barrier below.
        unsafe { SharedTile::store(layout.column_table + x, f32::from_bits(column)) };
        x += 256;
    }
    sync_threads();
    let mut step_slot = 0;
    let mut column_slot = CHUNK % layout.ring_rows;
    for step in 0..steps {
        let step_y = first_y + (step * CHUNK) as i64;
        if columns_inside && step_y >= 0 && step_y as u64 + CHUNK <= height {
            // SAFETY: the step's region lies inside the image.
            staging.interior::<M, C, 4, _>(
                |ry| (step_y as u64 + ry) * p.pitch + first_e as u64 + block.lane,
                // SAFETY: the step's region lies inside the image.
                |row, k| unsafe { *input.add((row + 32 * k as u64) as usize) },
            );
        } else {
            // Border steps fold each staged row once and take each column's folded offset
            // from the table: the strips at the image's sides run every step this way, and a
            // fold per element made them the kernel's slowest blocks.
            staging.interior::<M, C, 2, _>(
                |ry| image.row(step_y + ry as i64),
                |row, k| {
                    let x = block.lane + 32 * k as u64;
                    // SAFETY: `x < staged_w`: an entry of the table, filled before the loop.
                    let column = unsafe { SharedTile::load(layout.column_table + x) }.to_bits();
                    image.at(row, (column != NO_COLUMN).then_some(u64::from(column)))
                },
            );
        }
        sync_threads();
        row_pass::<M, C>(block, step_slot);
        sync_threads();
        // SAFETY: forwarded contract of `output`.
        unsafe { column_pass::<M>(block, step, column_slot, output, p) };
        step_slot = block.advance(step_slot, CHUNK);
        column_slot = block.advance(column_slot, CHUNK);
    }
}

/// Filters the step's 32 staged rows along the row into the ring: each thread two segments of
/// 16 outputs, row `lane % 8 + 8 (warp % 4)`, segments `lane / 8 + 4 (warp / 4)` and 8 more,
/// so a quarter-warp's 8 threads read and write the same elements of 8 consecutive rows.
#[inline(always)]
fn row_pass<const M: usize, const C: usize>(block: Block, step_slot: u64) {
    let row = block.lane % 8 + 8 * (block.warp % 4);
    let taps: [f32; M] = core::array::from_fn(|j| ConstantMask.tap(j as u64));
    let staged = row * block.layout.staged_row_words;
    let ring_row = block.ring() + block.advance(step_slot, row) * RING_ROW;
    for half in 0..2 {
        let x0 = SEGMENT as u64 * (block.lane / 8 + 4 * (block.warp / 4) + 8 * half);
        let mut acc = [0.0f32; SEGMENT];
        accumulate_window::<SEGMENT, M, C>(&mut acc, &taps, |q| {
            // SAFETY: row `row < 32`; `x0 + 4q + 4 <= staged_row_words` (the window's quads
            // lie within the strip and halo rounded up to quads), stored before the barrier
            // or beyond the staged width, whose values feed nothing.
            unsafe { SharedTile::load4(staged + x0 + 4 * q as u64) }
        });
        for (q, quad) in acc.chunks_exact(4).enumerate() {
            let quad = [quad[0], quad[1], quad[2], quad[3]];
            // SAFETY: a ring slot, elements `x0 + 4q .. x0 + 4q + 4 <= 256`: inside the ring.
            unsafe { SharedTile::store4(ring_row + x0 + 4 * q as u64, quad) };
        }
    }
}

/// Filters the ring down the columns and stores the outputs this step completes: thread `(c,
/// g)`, `c = lane + 32 (warp % 2)`, `g = warp / 2`, owns elements `4c .. 4c + 4` of output rows
/// `32 step - (M - 1) + 8 g ..` (8 rows), whose filtered rows start at ring slot
/// `column_slot + 8 g`. A warp whose rows all lie outside the block skips the pass.
///
/// # Safety
/// `output` is a pitched image as `p` describes, `p.pitch` a multiple of 4 and the buffer
/// 16-byte aligned.
#[inline(always)]
unsafe fn column_pass<const M: usize>(
    block: Block,
    step: u64,
    column_slot: u64,
    output: *mut f32,
    p: &Conv2dParams,
) {
    let c = block.lane + 32 * (block.warp % 2);
    let group = block.warp / 2;
    let first_out = (step * CHUNK + COLUMN_ROWS as u64 * group) as i64 - (M as i64 - 1);
    if first_out + COLUMN_ROWS as i64 <= 0 || first_out >= block.out_rows as i64 {
        return;
    }
    let taps: [f32; M] = core::array::from_fn(|i| ConstantMask.tap((M + i) as u64));
    let slot = block.advance(column_slot, COLUMN_ROWS as u64 * group);
    // Filtered row `first_out + i` sits in slot `slot + i`, or `slot + i - ring_rows` from
    // `i = ring_rows - slot` on (at most one wrap: `8 + M - 1 <= ring_rows`).
    // 32-bit arithmetic: one compare and one select per read.
    let wrap = (block.layout.ring_rows - slot) as u32;
    let first = SharedTile::address32(block.ring() + slot * RING_ROW + 4 * c);
    let wrapped = first.wrapping_sub((block.layout.ring_rows * RING_ROW * 4) as u32);
    let mut acc = [[0.0f32; 4]; COLUMN_ROWS];
    for i in 0..COLUMN_ROWS + M - 1 {
        let base = if (i as u32) < wrap { first } else { wrapped };
        // SAFETY: a ring slot (see above), elements `4c .. 4c + 4 <= 256`, row-filtered
        // before the barrier (rows before the block's first feed only rows it does not store).
        let quad =
            unsafe { SharedTile::load4_at(base.wrapping_add(i as u32 * RING_ROW as u32 * 4)) };
        for (k, sums) in acc.iter_mut().enumerate() {
            if i >= k && i - k < M {
                for (sum, &value) in sums.iter_mut().zip(&quad) {
                    *sum = fma(taps[i - k], value, *sum);
                }
            }
        }
    }
    let e = block.e0 + 4 * c;
    let elements = u64::from(p.width) * p.channels as u64;
    with_finish(p, |finish| {
        for (k, sums) in acc.iter().enumerate() {
            let o = first_out + k as i64;
            if o >= 0 && (o as u64) < block.out_rows && e < elements {
                let at = output.wrapping_add(((block.y0 + o as u64) * p.pitch + e) as usize);
                // SAFETY: row `y0 + o < height`, element `e < width * channels <= pitch`;
                // 16-byte aligned (`e`, the pitch and the buffer are).
                unsafe { store_segment(at, sums, (e, elements), |sum| finish(sum, p)) };
            }
        }
    });
}

specialised_entry_points!(
    separable_wide, "Wide fused separable 2D kernel, mask size and channels:":
    (conv2d_separable_wide_m3_c1, 3, 1),
    (conv2d_separable_wide_m3_c3, 3, 3),
    (conv2d_separable_wide_m3_c4, 3, 4),
    (conv2d_separable_wide_m5_c1, 5, 1),
    (conv2d_separable_wide_m5_c3, 5, 3),
    (conv2d_separable_wide_m5_c4, 5, 4),
    (conv2d_separable_wide_m7_c1, 7, 1),
    (conv2d_separable_wide_m7_c3, 7, 3),
    (conv2d_separable_wide_m7_c4, 7, 4),
    (conv2d_separable_wide_m9_c1, 9, 1),
    (conv2d_separable_wide_m9_c3, 9, 3),
    (conv2d_separable_wide_m9_c4, 9, 4),
    (conv2d_separable_wide_m15_c1, 15, 1),
    (conv2d_separable_wide_m15_c3, 15, 3),
    (conv2d_separable_wide_m15_c4, 15, 4),
    (conv2d_separable_wide_m31_c1, 31, 1),
    (conv2d_separable_wide_m31_c3, 31, 3),
    (conv2d_separable_wide_m31_c4, 31, 4),
);
