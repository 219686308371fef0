//! The general fused two-pass kernel for separable (rank-1) 2D masks of any shape,
//! `mask[i][j] = column[i] * row[j]`: a row pass and a column pass inside one kernel, the
//! row-filtered rows kept in shared memory (never written to device memory). Square masks of the
//! common sizes run the faster [`separable_wide`](crate::separable_wide) kernels.
//!
//! Block and tiling: `SEPARABLE_THREADS` = 256 threads own a column strip of
//! `separable_strip(channels)` output elements (128 for one channel) and `out_tile_h` output
//! rows, and walk down those rows in steps of `SEPARABLE_CHUNK_ROWS` = 16 input rows:
//!
//! 1. stage the step's 16 input rows, strip plus `(mask_w - 1) * channels` halo elements, in
//!    shared memory;
//! 2. row pass: each thread filters 8 same-channel outputs of one staged row, sliding a register
//!    window along it, and writes them to a ring of row-filtered rows in shared memory;
//! 3. column pass: each thread filters 8 consecutive output rows of one element column from the
//!    ring and stores them.
//!
//! Every input row is row-filtered once per block, so a block of `out_tile_h` rows does
//! `(out_tile_h + mask_h - 1) / out_tile_h * mask_w + mask_h` multiply-adds per output, against
//! `mask_h * mask_w` for the direct form. Taps: the row factor in `MASK[0..mask_w]`, the column
//! factor in `MASK[mask_w..mask_w + mask_h]`.

use crate::abi::{
    Conv2dParams, SEPARABLE_CHUNK_ROWS, SEPARABLE_OUTPUTS, SEPARABLE_THREADS, SeparableLayout,
    separable_strip, separable_swizzle,
};
use crate::boundary::Plane;
use crate::gpu::{
    ConstantMask, Mask, SharedTile, block_idx_x, block_idx_y, clamp_keeping_nan, fma, sync_threads,
    thread_idx_x,
};

const THREADS: usize = SEPARABLE_THREADS as usize;
const CHUNK: usize = SEPARABLE_CHUNK_ROWS as usize;
const OUTPUTS: usize = SEPARABLE_OUTPUTS as usize;

/// The geometry of one block, from the launch parameters (or the compile-time sizes).
#[derive(Clone, Copy)]
struct Block {
    mask_h: usize,
    mask_w: usize,
    channels: usize,
    /// Output elements along the strip.
    strip: usize,
    /// Staged elements per input row: strip plus halo.
    input_width: usize,
    /// Shared-memory words per staged input row.
    row_words: usize,
    /// Rows of the ring (a power of two).
    ring_rows: usize,
    /// First element of the strip and first output row.
    e0: usize,
    y0: usize,
    /// Output rows of this block (fewer in the last block row).
    out_rows: usize,
    /// Image coordinates of staged element (0, 0).
    first_e: i64,
    first_y: i64,
    /// Whether the staged columns lie inside the image (then steps whose rows do too are
    /// staged without boundary checks).
    columns_inside: bool,
    height: usize,
}

impl Block {
    /// Word of staged input element `(row, x)`.
    #[inline(always)]
    fn staged(self, row: usize, x: usize) -> u64 {
        (row * self.row_words) as u64 + separable_swizzle(x as u64)
    }

    /// The ring slot of row-filtered row `h` (rows count from the block's first staged row;
    /// earlier, negative rows map to slots not yet stored).
    #[inline(always)]
    fn slot(self, h: isize) -> usize {
        h as usize & (self.ring_rows - 1)
    }

    /// Word of element `x` of ring row `slot` (`slot < ring_rows`).
    #[inline(always)]
    fn ring(self, slot: usize, x: usize) -> u64 {
        ((CHUNK * self.row_words) + slot * self.strip + x) as u64
    }

    /// Whether step `step`'s staged region lies inside the image.
    #[inline(always)]
    fn interior(self, step: usize) -> bool {
        let first = self.first_y + (step * CHUNK) as i64;
        self.columns_inside && first >= 0 && first as usize + CHUNK <= self.height
    }
}

/// The image being filtered: where it is, and its boundary rule.
#[derive(Clone, Copy)]
struct Source {
    image: Plane,
    input: *const f32,
    pitch: usize,
}

impl Source {
    /// Staged element `(row, x)` of step `step`. Interior steps read without boundary checks.
    ///
    /// # Safety
    /// `input` is the image `image` describes, with rows `pitch` elements apart.
    #[inline(always)]
    unsafe fn fetch(
        self,
        block: Block,
        step: usize,
        interior: bool,
        (row, x): (usize, usize),
    ) -> f32 {
        let y = block.first_y + (step * CHUNK + row) as i64;
        let e = block.first_e + x as i64;
        if interior {
            // SAFETY: interior step: `0 <= y < height` and `0 <= e < width * channels`.
            unsafe { *self.input.add(y as usize * self.pitch + e as usize) }
        } else {
            self.image.element_in_row(self.image.row(y), e)
        }
    }

    /// Stages step `step` in shared memory (the boundary rule only in steps that reach past the
    /// image): warp `w` takes rows `w` and `w + 8`, its lanes 32 consecutive elements at a time,
    /// so no thread divides to find its element (a flat index over the step, divided by the
    /// staged width, took a third of the kernel's instructions at 11 x 11). `rolled_width` is
    /// the staged width taken from the launch parameters: the compiler cannot unroll that loop,
    /// whose boundary folding, unrolled, needed 190 registers per thread.
    ///
    /// # Safety
    /// As [`Source::fetch`]; `rolled_width = block.input_width`; no thread reads the staged rows
    /// until the next barrier.
    #[inline(always)]
    unsafe fn stage(self, block: Block, step: usize, thread: usize, rolled_width: usize) {
        const WARPS: usize = THREADS / 32;
        let interior = block.interior(step);
        let (warp, lane) = (thread / 32, thread % 32);
        for row in (warp..CHUNK).step_by(WARPS) {
            let mut x = lane;
            while x < rolled_width {
                // SAFETY: forwarded contract; `row < CHUNK`, `x < input_width`.
                unsafe {
                    let value = self.fetch(block, step, interior, (row, x));
                    SharedTile::store(block.staged(row, x), value);
                }
                x += 32;
            }
        }
    }
}

/// The fused separable design for any mask shape and channel count, sizes from `p`.
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the row
/// factor then the column factor; `p.out_tile_w = separable_strip(channels)`; a
/// `(SEPARABLE_THREADS, 1)` block with `SeparableLayout::new(..).words * 4` bytes of shared
/// memory.
#[inline(always)]
unsafe fn separable(input: *const f32, output: *mut f32, p: &Conv2dParams) {
    let (mask_h, mask_w, channels) = (p.mask_h as usize, p.mask_w as usize, p.channels as usize);
    let layout = SeparableLayout::new(mask_h as u64, mask_w as u64, channels as u64);
    let strip = separable_strip(channels as u64) as usize;
    let rows_per_block = p.out_tile_h as usize;
    let height = p.height as usize;
    let elements = p.width as usize * channels;
    let e0 = block_idx_x() as usize * strip;
    let y0 = (p.block_offset_y as usize + block_idx_y() as usize) * rows_per_block;
    let block = Block {
        mask_h,
        mask_w,
        channels,
        strip,
        input_width: strip + (mask_w - 1) * channels,
        row_words: layout.row_words as usize,
        ring_rows: layout.ring_rows as usize,
        e0,
        y0,
        out_rows: rows_per_block.min(height - y0),
        first_e: e0 as i64 - (p.left as usize * channels) as i64,
        first_y: y0 as i64 - i64::from(p.top),
        columns_inside: false,
        height,
    };
    let block = Block {
        columns_inside: block.first_e >= 0
            && block.first_e as usize + block.input_width <= elements,
        ..block
    };
    let steps = (block.out_rows + mask_h - 1).div_ceil(CHUNK);
    let thread = thread_idx_x() as usize;
    let source = Source {
        // SAFETY: `input` is a pitched image as `p` describes (caller).
        image: unsafe { Plane::new(input, p) },
        input,
        pitch: p.pitch as usize,
    };
    let rolled_width = block.input_width.max(1);
    for step in 0..steps {
        // SAFETY: as above; the previous step's row pass ended at the last barrier.
        unsafe { source.stage(block, step, thread, rolled_width) };
        sync_threads();
        row_pass(block, step, thread);
        sync_threads();
        // SAFETY: forwarded contract of `output`.
        unsafe { column_pass(block, step, thread, output, p) };
    }
}

/// Filters the step's staged rows along the row into the ring. Unit `u` of `CHUNK * strip / 8`
/// is staged row `u / (strip / 8)` and 8 same-channel outputs; a warp covers two rows.
#[inline(always)]
fn row_pass(block: Block, step: usize, thread: usize) {
    let per_row = block.strip / OUTPUTS;
    let mut unit = thread;
    while unit < CHUNK * per_row {
        let (row, group) = (unit / per_row, unit % per_row);
        let (pixels, channel) = (group / block.channels, group % block.channels);
        let first = pixels * OUTPUTS * block.channels + channel;
        let acc = sliding_sums(
            block.mask_w,
            |j| ConstantMask.tap(j as u64),
            // SAFETY: `row < CHUNK` and `first + t * channels < input_width` for every `t` the
            // window reads: staged before the barrier.
            |t| unsafe { SharedTile::load(block.staged(row, first + t * block.channels)) },
        );
        let slot = block.slot((step * CHUNK + row) as isize);
        for (k, &sum) in acc.iter().enumerate() {
            let x = first + k * block.channels;
            // SAFETY: a ring slot and `x < strip`: inside the reserved words.
            unsafe { SharedTile::store(block.ring(slot, x), sum) };
        }
        unit += THREADS;
    }
}

/// `sums[k] = sum over j < taps of tap(j) * value(j + k)` for the `OUTPUTS` sums, `j` in
/// increasing order: every value is read once and feeds each sum it belongs to. The taps go in
/// chunks of 8 through a window of 16 values at compile-time register indices (the second half
/// loaded per chunk, then moved down); the last chunk skips its missing taps rather than
/// multiplying by zero, which would turn an infinite value past the mask into NaN. Reads past
/// the window's last value, `value(taps + OUTPUTS - 2)`, read that value instead and feed no sum.
#[inline(always)]
fn sliding_sums(
    taps: usize,
    tap: impl Fn(usize) -> f32,
    value: impl Fn(usize) -> f32,
) -> [f32; OUTPUTS] {
    let last = taps + OUTPUTS - 2;
    let load = |t: usize| value(t.min(last));
    let mut sums = [0.0f32; OUTPUTS];
    let mut window = [0.0f32; 2 * OUTPUTS];
    for (t, slot) in window[..OUTPUTS].iter_mut().enumerate() {
        *slot = load(t);
    }
    let mut chunk = 0;
    while chunk < taps {
        for (c, slot) in window[OUTPUTS..].iter_mut().enumerate() {
            *slot = load(chunk + OUTPUTS + c);
        }
        let left = taps - chunk;
        for jj in 0..OUTPUTS {
            if left >= OUTPUTS || jj < left {
                let w = tap(chunk + jj);
                for (k, sum) in sums.iter_mut().enumerate() {
                    *sum = fma(w, window[jj + k], *sum);
                }
            }
        }
        for c in 0..OUTPUTS {
            window[c] = window[OUTPUTS + c];
        }
        chunk += OUTPUTS;
    }
    sums
}

/// Filters the ring down the columns and stores the outputs whose rows are complete after this
/// step. Unit `u` of `2 * strip` is element `u % strip` and 8 consecutive output rows.
///
/// # Safety
/// `output` is a pitched image as `p` describes.
#[inline(always)]
unsafe fn column_pass(
    block: Block,
    step: usize,
    thread: usize,
    output: *mut f32,
    p: &Conv2dParams,
) {
    let elements = p.width as usize * block.channels;
    let mut unit = thread;
    while unit < CHUNK / OUTPUTS * block.strip {
        let (x, part) = (unit % block.strip, unit / block.strip);
        // Output row `o` (block-relative) needs row-filtered rows `o .. o + mask_h`.
        let first_out = (step * CHUNK + part * OUTPUTS) as isize - (block.mask_h as isize - 1);
        let stored = first_out + OUTPUTS as isize > 0
            && first_out < block.out_rows as isize
            && block.e0 + x < elements;
        if stored {
            let acc = sliding_sums(
                block.mask_h,
                |i| ConstantMask.tap((block.mask_w + i) as u64),
                // SAFETY: a ring slot and `x < strip`: row-filtered before the barrier.
                |t| unsafe { SharedTile::load(block.ring(block.slot(first_out + t as isize), x)) },
            );
            for (k, &sum) in acc.iter().enumerate() {
                let o = first_out + k as isize;
                if o >= 0 && (o as usize) < block.out_rows {
                    let y = block.y0 + o as usize;
                    let value = clamp_keeping_nan(sum, p.clamp_lo, p.clamp_hi);
                    // SAFETY: `y < height`, `e0 + x < width * channels <= pitch` (caller).
                    unsafe { *output.add(y * p.pitch as usize + block.e0 + x) = value };
                }
            }
        }
        unit += THREADS;
    }
}

/// Fused separable 2D kernel for any mask shape and channel count (see the module
/// documentation); square masks of `SEPARABLE_MASKS` over 1, 3 or 4 channels run the wide
/// design instead.
///
/// # Safety
/// As `separable`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn conv2d_separable(
    input: *const f32,
    output: *mut f32,
    p: Conv2dParams,
) {
    // SAFETY: forwarded contract.
    unsafe { separable(input, output, &p) }
}
