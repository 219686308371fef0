//! The general fused two-pass kernel for separable (rank-1) 2D masks of any shape,
//! `mask[i][j] = column[i] * row[j]`: a row pass and a column pass inside one kernel, the
//! row-filtered rows kept in shared memory (never written to device memory). Square masks of the
//! common sizes run the faster [`separable_wide`](crate::conv2d::separable_wide) kernels.
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
use crate::conv2d::wide::with_finish;
use crate::gpu::{
    ConstantMask, Mask, SharedTile, block_idx_x, block_idx_y, fma, prefetch_l2, sync_threads,
    thread_idx_x,
};

const THREADS: usize = SEPARABLE_THREADS as usize;
const CHUNK: usize = SEPARABLE_CHUNK_ROWS as usize;
const OUTPUTS: usize = SEPARABLE_OUTPUTS as usize;

/// The geometry of one block, from the launch parameters. Sizes that shared-memory addresses
/// are made of are 32-bit: 64-bit index arithmetic per element would take most of the passes'
/// instructions.
#[derive(Clone, Copy)]
struct Block {
    mask_h: u32,
    mask_w: u32,
    channels: u32,
    /// Output elements along the strip.
    strip: u32,
    /// Staged elements per input row: strip plus halo.
    input_width: u32,
    /// Shared-memory words per staged input row.
    row_words: u32,
    /// Rows of the ring (a power of two) and its first word.
    ring_rows: u32,
    ring_offset: u32,
    /// Shared-window address of the block's shared memory.
    shared: u32,
    /// First element of the strip and first output row.
    e0: usize,
    y0: usize,
    /// Output rows of this block (fewer in the last block row).
    out_rows: u32,
    /// Image coordinates of staged element (0, 0).
    first_e: i64,
    first_y: i64,
    /// Whether the staged columns lie inside the image (then steps whose rows do too are
    /// staged without boundary checks).
    columns_inside: bool,
    height: usize,
    /// Elements of an image row (pixels x channels).
    row_elements: usize,
}

impl Block {
    /// Shared-window address of staged element `(row, x)` (one padding word after every 8
    /// elements), in 32-bit arithmetic.
    #[inline(always)]
    fn staged_at(self, row: u32, x: u32) -> u32 {
        self.shared + 4 * (row * self.row_words + separable_swizzle(x.into()) as u32)
    }

    /// Ring slot of row-filtered row `h` (rows count from the block's first staged row; earlier,
    /// negative rows wrap to slots not yet stored): `(h + mask_h - 1) mod ring_rows`, so that a
    /// column pass, whose first row is `16 step + 8 part - (mask_h - 1)`, starts at a slot that
    /// is a multiple of 8 and reads its rows in groups of 8 that never straddle the ring's end.
    #[inline(always)]
    fn slot(self, h: i32) -> u32 {
        (h + self.mask_h as i32 - 1) as u32 & (self.ring_rows - 1)
    }

    /// Shared-window address of element `x` of the ring's slot `slot`.
    #[inline(always)]
    fn ring_at(self, slot: u32, x: u32) -> u32 {
        self.shared + 4 * (self.ring_offset + slot * self.strip + x)
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
    /// Stages step `step` in shared memory (the boundary rule only in steps that reach past the
    /// image): warp `w` takes rows `w` and `w + 8`, its lanes 32 consecutive elements at a time,
    /// so no thread divides to find its element (a flat index over the step, divided by the
    /// staged width, would take a large share of the kernel's instructions). An interior step
    /// loads `STAGE_BATCH` elements of both rows before storing any, so that a lane waits on
    /// memory once per batch rather than once per element (one load at a time, the staging
    /// would take most of the kernel's time), each row's address computed once; a border step
    /// folds each element through the boundary rule in a loop over `rolled_width`, the staged
    /// width taken from the launch parameters, which the compiler cannot unroll (unrolled,
    /// that folding would need 190 registers per thread).
    ///
    /// # Safety
    /// `input` is the image `image` describes, with rows `pitch` elements apart;
    /// `rolled_width = block.input_width`; no thread reads the staged rows until the next
    /// barrier.
    #[inline(always)]
    unsafe fn stage(self, block: Block, step: usize, thread: usize, rolled_width: u32) {
        const WARPS: usize = THREADS / 32;
        const { assert!(CHUNK == 2 * WARPS) };
        let (warp, lane) = (thread / 32, (thread % 32) as u32);
        let rows = [warp, warp + WARPS];
        let image_row = |row: usize| block.first_y + (step * CHUNK + row) as i64;
        if block.interior(step) {
            // SAFETY: interior step: rows `0 <= y < height`, elements `first_e .. first_e +
            // input_width` within `0 .. width * channels`.
            let sources = rows.map(|row| unsafe {
                self.input
                    .add(image_row(row) as usize * self.pitch + block.first_e as usize)
            });
            // Element `x0 + 32 k` of a row sits `36 k` words after element `x0`'s (`x0 % 32`
            // is the lane, and the swizzle adds a word per 8 elements).
            let targets = rows.map(|row| block.staged_at(row as u32, lane));
            let mut x0 = lane;
            while x0 < rolled_width {
                let values: [f32; 2 * STAGE_BATCH] = core::array::from_fn(|k| {
                    let x = x0 + 32 * (k % STAGE_BATCH) as u32;
                    if x < rolled_width {
                        // SAFETY: `x < input_width`: inside the interior row (above).
                        unsafe { *sources[k / STAGE_BATCH].add(x as usize) }
                    } else {
                        0.0
                    }
                });
                let batch = (x0 - lane) / (32 * STAGE_BATCH as u32) * (36 * STAGE_BATCH as u32);
                for (k, &value) in values.iter().enumerate() {
                    let x = x0 + 32 * (k % STAGE_BATCH) as u32;
                    if x < rolled_width {
                        let at =
                            targets[k / STAGE_BATCH] + 4 * (batch + 36 * (k % STAGE_BATCH) as u32);
                        // SAFETY: `row < CHUNK`, `x < input_width`: a staged element.
                        unsafe { SharedTile::store_at(at, value) };
                    }
                }
                x0 += 32 * STAGE_BATCH as u32;
            }
            return;
        }
        for row in rows {
            let folded = self.image.row(image_row(row));
            let mut x = lane;
            while x < rolled_width {
                let value = self
                    .image
                    .element_in_row(folded, block.first_e + i64::from(x));
                // SAFETY: `row < CHUNK`, `x < input_width`: a staged element.
                unsafe { SharedTile::store_at(block.staged_at(row as u32, x), value) };
                x += 32;
            }
        }
    }

    /// Asks L2 for the rows of step `step` that lie inside the image, so that its staging,
    /// issued after the passes of the step before, finds them there: thread `t` takes row `t /
    /// 16` of the step and the 128-byte line `t % 16` of its span (up to 2 KB, 512 elements,
    /// of a row; beyond that the staging reads device memory).
    ///
    /// # Safety
    /// `input` is the image `image` describes, with rows `pitch` elements apart.
    #[inline(always)]
    unsafe fn prefetch(self, block: Block, step: usize, thread: usize) {
        let y = block.first_y + (step * CHUNK + thread / 16) as i64;
        let elements = block.row_elements as i64;
        let first = block.first_e.max(0);
        let end = (block.first_e + i64::from(block.input_width)).min(elements);
        if y < 0 || y >= block.height as i64 || first >= end {
            return;
        }
        let row = self.input.wrapping_add(y as usize * self.pitch);
        let (start, last) = (
            row.wrapping_add(first as usize),
            row.wrapping_add(end as usize - 1),
        );
        let at = ((start as u64 & !127) + 128 * (thread % 16) as u64) as *const f32;
        if at <= last {
            // SAFETY: between the first and the last element of the row's span, inside the
            // image (caller).
            unsafe { prefetch_l2(at.max(start)) };
        }
    }
}

/// Elements of each of its two rows a lane of an interior step loads before storing them.
const STAGE_BATCH: usize = 4;

/// The fused separable design for any mask shape and channel count, sizes from `p`.
///
/// # Safety
/// `input`/`output` are pitched images as `p` describes, not overlapping; `MASK` holds the row
/// factor then the column factor; `p.out_tile_w = separable_strip(channels)`; a
/// `(SEPARABLE_THREADS, 1)` block with `SeparableLayout::new(..).words * 4` bytes of shared
/// memory.
#[inline(always)]
unsafe fn separable(input: *const f32, output: *mut f32, p: &Conv2dParams) {
    let (mask_h, mask_w, channels) = (p.mask_h, p.mask_w, p.channels);
    let layout = SeparableLayout::new(mask_h.into(), mask_w.into(), channels.into());
    let strip = separable_strip(channels.into()) as u32;
    let rows_per_block = p.out_tile_h as usize;
    let height = p.height as usize;
    let elements = p.width as usize * channels as usize;
    let e0 = block_idx_x() as usize * strip as usize;
    let y0 = (p.block_offset_y as usize + block_idx_y() as usize) * rows_per_block;
    let input_width = strip + (mask_w - 1) * channels;
    let first_e = e0 as i64 - (p.left as usize * channels as usize) as i64;
    let block = Block {
        mask_h,
        mask_w,
        channels,
        strip,
        input_width,
        row_words: layout.row_words as u32,
        ring_rows: layout.ring_rows as u32,
        ring_offset: layout.ring_offset as u32,
        shared: SharedTile::address32(0),
        e0,
        y0,
        out_rows: rows_per_block.min(height - y0) as u32,
        first_e,
        first_y: y0 as i64 - i64::from(p.top),
        columns_inside: first_e >= 0 && first_e as usize + input_width as usize <= elements,
        height,
        row_elements: elements,
    };
    let steps = (block.out_rows + mask_h - 1).div_ceil(CHUNK as u32) as usize;
    let thread = thread_idx_x() as usize;
    let source = Source {
        // SAFETY: `input` is a pitched image as `p` describes (caller).
        image: unsafe { Plane::new(input, p) },
        input,
        pitch: p.pitch as usize,
    };
    let rolled_width = block.input_width.max(1);
    let (row_unit, column_unit) = (RowUnit::new(block, thread), ColumnUnit::new(block, thread));
    for step in 0..steps {
        // SAFETY: as above; the previous step's row pass ended at the last barrier.
        unsafe { source.stage(block, step, thread, rolled_width) };
        if step + 1 < steps {
            // SAFETY: as above.
            unsafe { source.prefetch(block, step + 1, thread) };
        }
        sync_threads();
        if let Some(unit) = row_unit {
            if block.channels == 1 {
                unit.filter::<true>(block, step);
            } else {
                unit.filter::<false>(block, step);
            }
        }
        sync_threads();
        if let Some(unit) = column_unit {
            // SAFETY: forwarded contract of `output`.
            unsafe {
                if block.strip == 128 {
                    unit.filter::<true>(block, step, output, p)
                } else {
                    unit.filter::<false>(block, step, output, p)
                }
            };
        }
    }
}

/// A thread's share of the row pass: staged row `row`, 8 same-channel outputs from element
/// `first` on. Unit `u` of the `CHUNK * strip / 8 <= 256` units is row `u / (strip / 8)`, so
/// a thread has at most one and a warp covers two rows.
#[derive(Clone, Copy)]
struct RowUnit {
    row: u32,
    first: u32,
}

impl RowUnit {
    #[inline(always)]
    fn new(block: Block, thread: usize) -> Option<Self> {
        let per_row = block.strip / OUTPUTS as u32;
        let unit = thread as u32;
        let (row, group) = (unit / per_row, unit % per_row);
        let (pixels, channel) = (group / block.channels, group % block.channels);
        (row < CHUNK as u32).then_some(Self {
            row,
            first: pixels * OUTPUTS as u32 * block.channels + channel,
        })
    }

    /// Filters the unit's outputs of step `step` along the row into the ring; `ONE_CHANNEL`
    /// when `block.channels == 1`, whose windows start at multiples of 8 elements, so that a
    /// read's address is the window's plus a compile-time offset.
    #[inline(always)]
    fn filter<const ONE_CHANNEL: bool>(self, block: Block, step: usize) {
        let channels = if ONE_CHANNEL { 1 } else { block.channels };
        let window = block.staged_at(self.row, self.first);
        let acc = sliding_sums(
            block.mask_w,
            |j| ConstantMask.tap(j.into()),
            // SAFETY: `row < CHUNK`; elements past the window's last one, read by its last
            // chunk, lie in the next staged row or the words reserved after the last one
            // (`SeparableLayout::ring_offset`), and feed no sum.
            |t| unsafe {
                SharedTile::load_at(if ONE_CHANNEL {
                    // `first % 8 == 0`: the swizzle of `first + t` is `first`'s plus `t`'s.
                    window + 4 * separable_swizzle(t.into()) as u32
                } else {
                    block.staged_at(self.row, self.first + t * channels)
                })
            },
        );
        let h = (step * CHUNK) as i32 + self.row as i32;
        for (k, &sum) in acc.iter().enumerate() {
            let x = self.first + k as u32 * channels;
            // SAFETY: a ring slot and `x < strip`: inside the reserved words.
            unsafe { SharedTile::store_at(block.ring_at(block.slot(h), x), sum) };
        }
    }
}

/// `sums[k] = sum over j < taps of tap(j) * value(j + k)` for the `OUTPUTS` sums, `j` in
/// increasing order: every value is read once and feeds each sum it belongs to. The taps go in
/// chunks of 8 through a window of 16 values at compile-time register indices (the second half
/// loaded per chunk, then moved down); the last chunk skips its missing taps rather than
/// multiplying by zero, which would turn an infinite value past the mask into NaN. The last
/// chunk reads up to 8 values past the window's last one, `value(taps + OUTPUTS - 2)`; they
/// feed no sum, so `value` needs only to read them from memory the block owns.
#[inline(always)]
fn sliding_sums(taps: u32, tap: impl Fn(u32) -> f32, value: impl Fn(u32) -> f32) -> [f32; OUTPUTS] {
    const N: u32 = OUTPUTS as u32;
    let mut sums = [0.0f32; OUTPUTS];
    let mut window: [f32; 2 * OUTPUTS] =
        core::array::from_fn(|t| if t < OUTPUTS { value(t as u32) } else { 0.0 });
    // Whole chunks first, with no test per tap, then the last, partial one.
    let mut chunk = 0;
    let mut apply = |chunk: u32, whole: bool| {
        for (c, slot) in window[OUTPUTS..].iter_mut().enumerate() {
            *slot = value(chunk + N + c as u32);
        }
        let left = taps - chunk;
        for jj in 0..OUTPUTS {
            if whole || (jj as u32) < left {
                let w = tap(chunk + jj as u32);
                for (k, sum) in sums.iter_mut().enumerate() {
                    *sum = fma(w, window[jj + k], *sum);
                }
            }
        }
        for c in 0..OUTPUTS {
            window[c] = window[OUTPUTS + c];
        }
    };
    while chunk + N <= taps {
        apply(chunk, true);
        chunk += N;
    }
    if chunk < taps {
        apply(chunk, false);
    }
    sums
}

/// A thread's share of the column pass: element `x` of the strip and 8 consecutive output rows,
/// the `part`-th 8 of a step. Unit `u` of the `2 * strip <= 256` units is element `u % strip`,
/// so a thread has at most one; none if its element lies past the image.
#[derive(Clone, Copy)]
struct ColumnUnit {
    x: u32,
    part: u32,
}

impl ColumnUnit {
    #[inline(always)]
    fn new(block: Block, thread: usize) -> Option<Self> {
        let unit = thread as u32;
        let (x, part) = (unit % block.strip, unit / block.strip);
        (part < (CHUNK / OUTPUTS) as u32 && block.e0 + (x as usize) < block.row_elements)
            .then_some(Self { x, part })
    }

    /// Filters the ring down the unit's column and stores the outputs whose rows are complete
    /// after step `step`; `STRIP_128` when `block.strip == 128` (1, 2, 4, 8 or 16 channels),
    /// whose ring rows lie a compile-time distance apart.
    ///
    /// # Safety
    /// `output` is a pitched image as `p` describes.
    #[inline(always)]
    unsafe fn filter<const STRIP_128: bool>(
        self,
        block: Block,
        step: usize,
        output: *mut f32,
        p: &Conv2dParams,
    ) {
        // Output row `o` (block-relative) needs row-filtered rows `o .. o + mask_h`.
        let first_out =
            (step * CHUNK) as i32 + (self.part * OUTPUTS as u32) as i32 - (block.mask_h as i32 - 1);
        if first_out + OUTPUTS as i32 <= 0 || first_out >= block.out_rows as i32 {
            return;
        }
        // The window's rows come in groups of 8 (its first 8, then each chunk's), each starting
        // at a multiple of 8 slots (`Block::slot`): one slot computation per group, then rows a
        // constant `row_bytes` apart.
        let first_slot = block.slot(first_out);
        let row_bytes = if STRIP_128 { 4 * 128 } else { 4 * block.strip };
        let column = block.ring_at(0, self.x);
        let acc = sliding_sums(
            block.mask_h,
            |i| ConstantMask.tap(u64::from(block.mask_w + i)),
            // SAFETY: a ring slot and `x < strip`: row-filtered before the barrier (rows past
            // the window's, read by its last chunk, are other ring rows and feed no sum).
            |t| unsafe {
                let group = (first_slot + (t & !7)) & (block.ring_rows - 1);
                SharedTile::load_at(column + group * row_bytes + (t & 7) * row_bytes)
            },
        );
        let first_y = block.y0 as isize + first_out as isize;
        let at = output
            .wrapping_offset(first_y * p.pitch as isize + (block.e0 + self.x as usize) as isize);
        let pitch = p.pitch as usize;
        with_finish(p, |finish| {
            if first_out >= 0 && first_out as u32 + OUTPUTS as u32 <= block.out_rows {
                // The common case, all 8 rows inside the block: no check per row.
                let mut row = at;
                for &sum in &acc {
                    // SAFETY: rows `y0 + first_out .. + 8 <= y0 + out_rows <= height`, element
                    // `e0 + x < width * channels <= pitch` (caller).
                    unsafe { *row = finish(sum, p) };
                    row = row.wrapping_add(pitch);
                }
                return;
            }
            for (k, &sum) in acc.iter().enumerate() {
                let o = first_out + k as i32;
                if o >= 0 && (o as u32) < block.out_rows {
                    // SAFETY: row `y0 + o < height`, element `e0 + x < width * channels <=
                    // pitch` (caller).
                    unsafe { *at.wrapping_add(k * pitch) = finish(sum, p) };
                }
            }
        });
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
