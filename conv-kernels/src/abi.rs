//! Launch parameters shared by the kernels and the host launcher.
//!
//! The host crate includes this very file (`#[path]`), so both sides agree on the layout by
//! construction. Keep it free of device-only code.

/// Number of `f32` taps the constant-memory symbol `MASK` holds (16 KiB of the 64 KiB bank).
/// Longer masks are read from global memory by the `*_global_mask` kernels.
pub const MASK_CAPACITY: usize = 4096;

/// Boundary mode codes, in the order of SciPy's `ndimage` modes.
pub const MODE_CONSTANT: u32 = 0;
/// Replicate the edge element.
pub const MODE_NEAREST: u32 = 1;
/// Half-sample symmetric reflection (the edge element repeats).
pub const MODE_REFLECT: u32 = 2;
/// Whole-sample symmetric reflection (the edge element does not repeat).
pub const MODE_MIRROR: u32 = 3;
/// Periodic extension.
pub const MODE_WRAP: u32 = 4;

/// Scalar parameters of every 1D kernel, passed by value.
///
/// The output has `len` elements; output `i` is `sum_j mask[j] * ext(i + j - left)`, where `ext`
/// extends the input beyond `[0, len)` by `mode` (with `cval` for `MODE_CONSTANT`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv1dParams {
    /// Input and output length.
    pub len: u64,
    /// Number of taps.
    pub mask_len: u64,
    /// Taps to the left of the output position: `mask_len / 2 + origin`, in `[0, mask_len)`.
    pub left: u64,
    /// Index of this launch's first block, for inputs that need more blocks than one grid holds.
    pub block_offset: u64,
    /// One of the `MODE_*` codes.
    pub mode: u32,
    /// Ghost-cell value for `MODE_CONSTANT`.
    pub cval: f32,
    /// Lower clamp of the output (`-inf` for none).
    pub clamp_lo: f32,
    /// Upper clamp of the output (`+inf` for none).
    pub clamp_hi: f32,
}

/// Threads per block of the SM copy kernel (`sm_copy`).
pub const SM_COPY_THREADS: u32 = 256;
/// 16-byte quads each thread of the SM copy kernel copies.
pub const SM_COPY_QUADS_PER_THREAD: u32 = 4;

/// Mask lengths of the register-tiled 1D kernels (`conv1d_register_tiled_m{taps}`).
pub const REGISTER_1D_MASKS: [u32; register_1d_sizes!(size_count!())] =
    register_1d_sizes!(size_array!());

/// Threads per block of the register-tiled 1D kernels.
pub const REGISTER_THREADS_1D: u32 = 256;
/// Consecutive outputs each thread of the register-tiled 1D kernel for `mask_len` taps computes:
/// 8 for 15 taps and more, where 4 left the kernel waiting on shared-memory bandwidth (each
/// output's window is read from shared memory once per thread, so more outputs per thread
/// means fewer reads per multiply-add), else 4.
pub const fn register_outputs_1d(mask_len: u64) -> u64 {
    if mask_len >= 15 { 8 } else { 4 }
}

/// Shared-memory word of element `k` of the span a register-tiled 1D block stages, for a mask
/// of `mask_len` taps. With 8 outputs per thread, threads' windows start 8 elements apart, so 4
/// padding words follow every 8 elements: the 16-byte reads of 8 threads (12 words apart) then
/// fall on 8 different groups of 4 banks, where unpadded every group would serve 2 threads.
/// With 4 outputs per thread, 8 threads already read 8 consecutive groups.
pub const fn register_word_1d(k: u64, mask_len: u64) -> u64 {
    if register_outputs_1d(mask_len) == 8 {
        k + (k >> 3) * 4
    } else {
        k
    }
}

/// Shared memory of a register-tiled 1D block, in `f32` words: the staged span (tile and halo)
/// and the words the last 16-byte reads may reach past it.
pub const fn register_shared_words_1d(mask_len: u64) -> u64 {
    let span = REGISTER_THREADS_1D as u64 * register_outputs_1d(mask_len) + mask_len - 1;
    register_word_1d(span.next_multiple_of(8), mask_len) + 4
}

/// Threads per block of the register-tiled 1D kernel for masks of any length
/// (`conv1d_register_tiled`, `conv1d_register_tiled_f64`).
pub const LONG_THREADS_1D: u32 = 256;
/// Taps a block of that kernel stages in shared memory at once (a multiple of every
/// [`long_outputs_1d`]); longer masks run in several chunks, each restaging its input span.
pub const LONG_CHUNK_1D: u64 = 1024;

/// Consecutive outputs each thread of the any-length register-tiled 1D kernel keeps in
/// registers, for elements of `bytes` bytes: 64 bytes of sums (16 `f32`, 8 `f64`), which with
/// the two windows of as many inputs fit the 128 registers two blocks per SM leave.
pub const fn long_outputs_1d(bytes: u64) -> u64 {
    64 / bytes
}

/// Shared-memory element of element `k` of the span an any-length register-tiled 1D block
/// stages, `per_thread` outputs a thread: one padding element after every `per_thread`, so the
/// windows of the threads of a warp (`per_thread` elements apart unpadded) start an odd number
/// of elements apart, each on its own bank.
pub const fn long_word_1d(k: u64, per_thread: u64) -> u64 {
    k + k / per_thread
}

/// Taps of the first chunk of a mask of `mask_len` taps, rounded up to whole steps of
/// `per_thread` taps.
pub const fn long_chunk_1d(mask_len: u64, per_thread: u64) -> u64 {
    let taps = if mask_len < LONG_CHUNK_1D {
        mask_len
    } else {
        LONG_CHUNK_1D
    };
    taps.next_multiple_of(per_thread)
}

/// Shared memory of an any-length register-tiled 1D block, in elements: the padded span (tile,
/// chunk) and after it the chunk's taps, which start at element
/// `long_word_1d(tile + chunk, per_thread)`.
pub const fn long_shared_elements_1d(mask_len: u64, per_thread: u64) -> u64 {
    let chunk = long_chunk_1d(mask_len, per_thread);
    long_word_1d(LONG_THREADS_1D as u64 * per_thread + chunk, per_thread) + chunk
}

/// Channel counts with a specialised 2D kernel (streaming, wide register-tiled and wide
/// separable designs).
pub const REGISTER_CHANNELS: [u32; 3] = [1, 3, 4];
/// Block of the wide register-tiled 2D kernels: threads along a row (each owning
/// `WIDE_OUTPUTS` consecutive elements) and down the rows (`WIDE_ROWS` rows each); masks whose
/// staged region would leave one block per SM get fewer rows of threads.
pub const WIDE_BLOCK: (u32, u32) = (16, 16);
/// Consecutive elements of a row each thread of a wide register-tiled 2D kernel computes.
pub const WIDE_OUTPUTS: u32 = 16;
/// Output rows each thread of a wide register-tiled 2D kernel computes, `threads_y` rows apart
/// (each mask row's taps, loaded once, serve them all).
pub const WIDE_ROWS: u32 = 2;
/// Mask widths with a wide register-tiled 2D kernel, for each of `REGISTER_CHANNELS`
/// (`conv2d_register_tiled_wide_w{width}_c{channels}`); any mask height. Width 1 covers column filters.
pub const WIDE_MASK_WIDTHS: [u32; wide_widths!(size_count!())] = wide_widths!(size_array!());

/// Shared-memory word of element `x` of a row staged by a wide register-tiled block: 4 padding
/// words after every 16 elements, so that the 16-byte reads of 8 threads whose windows start
/// 16 elements apart fall on 8 different groups of 4 banks.
pub const fn wide_word(x: u64) -> u64 {
    x + (x >> 4) * 4
}

/// Words per staged row of a wide register-tiled block for a mask `mask_w` wide over
/// `channels` channels: the block's output elements and the halo, rounded up to 16 elements
/// (the windows' last 16-byte reads stay inside the row).
pub const fn wide_row_words(mask_w: u64, channels: u64) -> u64 {
    let elements = (WIDE_BLOCK.0 * WIDE_OUTPUTS) as u64 + (mask_w - 1) * channels;
    wide_word(elements.next_multiple_of(16))
}

/// Square mask sizes with a wide separable 2D kernel, for each of `REGISTER_CHANNELS`
/// (`conv2d_separable_wide_m{size}_c{channels}`): every odd size from 3 to 31, which covers
/// SciPy's Gaussians up to sigma 3.75 (`2 int(4 sigma + 0.5) + 1` taps).
pub const SEPARABLE_MASKS: [u32; separable_sizes!(size_count!())] = separable_sizes!(size_array!());

/// Threads per block of the fused separable 2D kernels (one dimension).
pub const SEPARABLE_THREADS: u32 = 256;
/// Input rows a separable block stages and filters along the row per step.
pub const SEPARABLE_CHUNK_ROWS: u32 = 16;
/// Outputs each thread of a separable kernel computes per pass: 8 along a row in the row pass,
/// 8 down a column in the column pass.
pub const SEPARABLE_OUTPUTS: u32 = 8;

/// Elements (pixels x channels) of the column strip one separable block produces: 8 pixels per
/// row-pass thread, 16 threads per row where the channels allow (128 elements for 1 and 4
/// channels, 120 for 3).
pub const fn separable_strip(channels: u64) -> u64 {
    let groups = 16 / channels;
    let groups = if groups == 0 { 1 } else { groups };
    groups * SEPARABLE_OUTPUTS as u64 * channels
}

/// Shared-memory word of element `x` of a staged input row of a separable block: one padding
/// word after every 8 elements, so the threads of a row pass, whose windows start 8 elements
/// apart, read different banks.
pub const fn separable_swizzle(x: u64) -> u64 {
    x + (x >> 3)
}

/// Shared memory of a separable block, in `f32` words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeparableLayout {
    /// Words per staged input row (the staged rows come first).
    pub row_words: u64,
    /// Rows of the ring of row-filtered rows (a power of two).
    pub ring_rows: u64,
    /// First word of the ring: after the staged rows and `9 channels + 4` words that a row
    /// pass's last window chunk may read past the last staged row (up to 8 values, which feed
    /// no sum), so that those reads never meet the ring's rows being written.
    pub ring_offset: u64,
    /// Total words.
    pub words: u64,
}

impl SeparableLayout {
    /// The layout for a `mask_h x mask_w` mask and `channels` interleaved channels.
    pub const fn new(mask_h: u64, mask_w: u64, channels: u64) -> Self {
        let strip = separable_strip(channels);
        let input = (strip + (mask_w - 1) * channels).next_multiple_of(8);
        // Rows of a warp's two halves start 16 banks apart (see `separable_swizzle`).
        let row_words = separable_swizzle(input) + (48 - separable_swizzle(input) % 32) % 32;
        let chunk = SEPARABLE_CHUNK_ROWS as u64;
        let ring_rows = (chunk + mask_h - 1).next_power_of_two();
        let ring_offset = chunk * row_words + (9 * channels + 4).next_multiple_of(4);
        Self {
            row_words,
            ring_rows,
            ring_offset,
            words: ring_offset + ring_rows * strip,
        }
    }
}

/// Output elements along a row of a wide separable block (256 threads): 16 outputs per thread
/// in the row pass, as in the wide register-tiled kernels.
pub const SEPARABLE_WIDE_STRIP: u32 = 256;
/// Input rows a wide separable block stages and filters along the row per step.
pub const SEPARABLE_WIDE_CHUNK_ROWS: u32 = 32;
/// Words per ring row of a wide separable block: the strip and 4 padding words, an odd number
/// of 16-byte quads, so that 8 rows' quads at the same element fall on 8 different groups of
/// 4 banks.
pub const SEPARABLE_WIDE_RING_ROW_WORDS: u64 = SEPARABLE_WIDE_STRIP as u64 + 4;

/// Shared memory of a wide separable block, in `f32` words: the step's staged input rows, the
/// ring of row-filtered rows, and a table of the staged columns' folded offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeparableWideLayout {
    /// Words per staged input row: the strip and the halo, rounded up to an odd number of
    /// 16-byte quads (8 rows' quads at the same element fall on 8 groups of banks).
    pub staged_row_words: u64,
    /// Rows of the ring: a step's rows and the `mask - 1` before them that its column pass
    /// still reads, rounded up as [`strip_ring_rows`] does where two blocks still fit an SM.
    pub ring_rows: u64,
    /// First word of the table of folded staged columns (border strips), after the ring.
    pub column_table: u64,
    /// Total words.
    pub words: u64,
}

impl SeparableWideLayout {
    /// The layout for a square mask of `mask` taps a side over `channels` interleaved channels.
    pub const fn new(mask: u64, channels: u64) -> Self {
        Self::rectangular((mask, mask), channels)
    }

    /// The layout for a mask `rows` tall (the column factor's taps) and `cols` wide (the row
    /// factor's) over `channels` interleaved channels.
    pub const fn rectangular((rows, cols): (u64, u64), channels: u64) -> Self {
        let staged_row_words = strip_row_words(cols, channels);
        let chunk = SEPARABLE_WIDE_CHUNK_ROWS as u64;
        let table_words = strip_staged_width(cols, channels).next_multiple_of(4);
        let others = chunk * staged_row_words + table_words;
        // Two blocks per SM come first: 31 x 31 over 4 channels keeps the ring unrounded.
        let rounded = strip_ring_rows(rows);
        let ring_rows =
            if others + rounded * SEPARABLE_WIDE_RING_ROW_WORDS <= SEPARABLE_WIDE_MAX_WORDS {
                rounded
            } else {
                chunk + rows - 1
            };
        let column_table = chunk * staged_row_words + ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
        Self {
            staged_row_words,
            ring_rows,
            column_table,
            words: column_table + table_words,
        }
    }
}

/// Shared memory of a wide separable column block (the column pass alone), in `f32` words:
/// the ring, into which the staging writes each step's input rows, and the column table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeparableWideColumnLayout {
    /// Rows of the ring: a step's rows and the `mask - 1` before them, rounded up to 8.
    pub ring_rows: u64,
    /// First word of the table of folded staged columns, after the ring.
    pub column_table: u64,
    /// Total words.
    pub words: u64,
}

impl SeparableWideColumnLayout {
    /// The layout for a mask `mask` rows tall and one column wide.
    pub const fn new(mask: u64) -> Self {
        let ring_rows = strip_ring_rows(mask);
        let column_table = ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
        Self {
            ring_rows,
            column_table,
            words: column_table + strip_staged_width(1, 1),
        }
    }
}

/// Elements of a row of a tensor-copy box (`SeparableTmaLayout`): 45 16-byte quads, an odd
/// number, so that 8 rows' quads at the same element fall on 8 groups of banks.
pub const TMA_BOX_WIDTH: u64 = 180;
/// The staged element where a wide separable block's second tensor-copy region starts: the
/// window of the first row-pass segment that needs it (segment 7 of 16, element 112).
pub const TMA_SECOND_REGION: u64 = 112;

/// Shared memory of a wide separable block staged by tensor copies (one channel), in `f32`
/// words: two regions of 32 rows x `TMA_BOX_WIDTH` (staged elements from 0 and from
/// `TMA_SECOND_REGION`), the ring of row-filtered rows, and the step's `mbarrier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeparableTmaLayout {
    /// Words of one region (`32 x TMA_BOX_WIDTH`).
    pub region_words: u64,
    /// First word and rows of the ring.
    pub ring: u64,
    pub ring_rows: u64,
    /// Word of the 8-byte `mbarrier`.
    pub barrier: u64,
    /// Total words.
    pub words: u64,
}

impl SeparableTmaLayout {
    /// The layout for a square mask of `mask` taps a side over one channel.
    pub const fn new(mask: u64) -> Self {
        let region_words = SEPARABLE_WIDE_CHUNK_ROWS as u64 * TMA_BOX_WIDTH;
        let ring = 2 * region_words;
        let ring_rows = strip_ring_rows(mask);
        let barrier = ring + ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
        Self {
            region_words,
            ring,
            ring_rows,
            barrier,
            words: barrier + 2,
        }
    }
}

/// Rows of the ring of a streaming block staged by tensor copies (`StreamTmaLayout`): the `32 +
/// mask - 1` rows a step's pass reads (at most 40) and the next step's 32, which land while it
/// runs.
pub const STREAM_TMA_RING_ROWS: u64 = 72;

/// Shared memory of a streaming block staged by tensor copies, in `f32` words: two regions of
/// [`STREAM_TMA_RING_ROWS`] rows x `box_width` elements (staged elements from 0 and from 128,
/// so that the window of each pass thread, `4c .. 4c + 4 window_quads`, lies in one: threads
/// `c < 32` read the first, the others the second), then the step's `mbarrier`. Row `h` of the
/// block sits in slot `(h + mask - 1) mod 72` of both regions, as in the thread-staged ring
/// (`strip_ring_rows`), so every pass starts at a slot that is a multiple of 8; a step's rows
/// land in boxes of `box_rows` rows, the largest power of two up to 8 dividing `mask - 1`, so
/// that no box crosses the ring's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamTmaLayout {
    /// Elements before the first input element of the strip that the regions start with: tensor
    /// copies start at 16-byte aligned elements.
    pub skip: u64,
    /// 16-byte quads of a pass thread's window, `skip` included.
    pub window_quads: u64,
    /// Elements of a region's row, and rows of a box.
    pub box_width: u64,
    pub box_rows: u64,
    /// Words of one region.
    pub region_words: u64,
    /// Word of the 8-byte `mbarrier`.
    pub barrier: u64,
    /// Total words.
    pub words: u64,
}

/// The staged element where a streaming block's second tensor-copy region starts: the window
/// of pass thread 32.
pub const STREAM_TMA_SECOND_REGION: u64 = 128;

impl StreamTmaLayout {
    /// The layout for a square mask of `mask` taps a side (odd, centred) over `channels`.
    pub const fn new(mask: u64, channels: u64) -> Self {
        let skip = (4 - (mask / 2 * channels) % 4) % 4;
        let window_quads = (skip + 4 + (mask - 1) * channels).div_ceil(4);
        let box_rows = if (mask - 1).is_multiple_of(8) {
            8
        } else {
            1 << (mask - 1).trailing_zeros()
        };
        // Boxes land 128-byte aligned: `box_rows x box_width` words a multiple of 32.
        let box_width =
            (STREAM_TMA_SECOND_REGION + 4 * (window_quads - 1)).next_multiple_of(32 / box_rows);
        let region_words = STREAM_TMA_RING_ROWS * box_width;
        let barrier = 2 * region_words;
        Self {
            skip,
            window_quads,
            box_width,
            box_rows,
            region_words,
            barrier,
            words: barrier + 2,
        }
    }
}

/// Most shared-memory words of a wide separable block for two blocks per SM on Hopper (228
/// KiB, 1 KiB of it reserved per block).
pub const SEPARABLE_WIDE_MAX_WORDS: u64 = (228 * 1024 / 2 - 1024) / 4;

/// Rows of a strip block's ring for a mask `mask` rows tall: a step's 32 rows and the `mask -
/// 1` before them, rounded up to a multiple of 8. The kernels start every pass at a slot that
/// is a multiple of 8, so a band of `R` rows (`R` dividing 8) can cross the ring's end only
/// between two of its groups of `R` rows, and its reads decide where once per group (see
/// `strip::Strip::pass`).
pub const fn strip_ring_rows(mask: u64) -> u64 {
    strip_ring_rows_in_steps_of(SEPARABLE_WIDE_CHUNK_ROWS as u64, mask)
}

/// [`strip_ring_rows`] for steps of `chunk` rows (16 or 32).
pub const fn strip_ring_rows_in_steps_of(chunk: u64, mask: u64) -> u64 {
    (chunk + mask - 1).next_multiple_of(8)
}

/// Elements of a staged row of a strip block (wide separable and streaming kernels): the
/// 256-element strip and the halo of a mask `mask` wide over `channels` channels.
pub const fn strip_staged_width(mask: u64, channels: u64) -> u64 {
    SEPARABLE_WIDE_STRIP as u64 + (mask - 1) * channels
}

/// Words per staged row of a strip block: [`strip_staged_width`] rounded up to an odd number
/// of 16-byte quads, so that 8 rows' quads at the same element fall on 8 groups of banks.
pub const fn strip_row_words(mask: u64, channels: u64) -> u64 {
    4 * (strip_staged_width(mask, channels).div_ceil(4) | 1)
}

/// Square mask sizes with a streaming 2D kernel, for each of `REGISTER_CHANNELS`
/// (`conv2d_register_tiled_stream_m{size}_c{channels}`).
pub const STREAM_MASKS: [u32; stream_sizes!(size_count!())] = stream_sizes!(size_array!());

/// The smallest streaming mask size whose kernels are bound by their multiply-adds rather than
/// by memory (measured: PERFORMANCE.md, Designs: what bounds each, and its limits). The
/// kernels change their bands and prefetch from it on, the host its blocks' heights.
pub const STREAM_COMPUTE_BOUND_FROM: usize = 7;

/// Square mask sizes with a streaming 2D kernel in steps of [`STREAM_SHORT_STEP_ROWS`] rows
/// too, for each of `REGISTER_CHANNELS` (`conv2d_register_tiled_stream16_m{size}_c{channels}`):
/// the memory-bound sizes, whose pass threads then hold the sums of 4 output rows instead of
/// 8, so that four blocks fit an SM in 64 registers (a ring of 24 rows, 25 to 29 KB) and cover
/// each other's staging and passes (fewer blocks hide less, more spill registers). The host
/// picks them on GPUs whose memory is fast for their SMs, counted in the bytes of 16-bit images
/// for theirs. The compute-bound sizes have none: their longer steps cost fewer instructions
/// per output (measured: PERFORMANCE.md, How Auto decides, 2D rule 6).
pub const STREAM_SHORT_STEP_MASKS: [u32; stream_short_step_sizes!(size_count!())] =
    stream_short_step_sizes!(size_array!());

/// Input rows per step of the streaming kernels of [`STREAM_SHORT_STEP_MASKS`]
/// (`conv2d_register_tiled_stream16_...`); the others walk steps of `SEPARABLE_WIDE_CHUNK_ROWS` = 32.
pub const STREAM_SHORT_STEP_ROWS: u64 = 16;

/// Shared memory of a streaming block, in `f32` words: a ring of staged input rows (a step's
/// rows and the `mask - 1` before them, which its outputs still need) and a table of the
/// staged columns' folded offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamLayout {
    /// Words per staged row ([`strip_row_words`]).
    pub row_words: u64,
    /// Rows of the ring.
    pub ring_rows: u64,
    /// First word of the column table, after the ring.
    pub column_table: u64,
    /// Total words.
    pub words: u64,
}

impl StreamLayout {
    /// The layout for a square mask of `mask` taps a side over `channels` interleaved channels,
    /// in steps of `step_rows` rows (16 or 32).
    pub const fn new(mask: u64, channels: u64, step_rows: u64) -> Self {
        let row_words = strip_row_words(mask, channels);
        let ring_rows = strip_ring_rows_in_steps_of(step_rows, mask);
        let column_table = ring_rows * row_words;
        Self {
            row_words,
            ring_rows,
            column_table,
            words: column_table + strip_staged_width(mask, channels).next_multiple_of(4),
        }
    }
}

/// Scalar parameters of every 2D kernel, passed by value.
///
/// Images are `height` rows of `width * channels` interleaved `f32` elements, rows `pitch`
/// elements apart in both buffers. Output `(y, x, c)` is
/// `sum_{i,j} mask[i * mask_w + j] * ext(y + i - top, x + j - left, c)`, where `ext` extends
/// each axis by `mode` (any coordinate outside under `MODE_CONSTANT` gives `cval`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv2dParams {
    /// Elements from one row to the next, `>= width * channels`.
    pub pitch: u64,
    /// Rows.
    pub height: u32,
    /// Pixels per row.
    pub width: u32,
    /// Interleaved channels per pixel, `>= 1`.
    pub channels: u32,
    /// Mask rows.
    pub mask_h: u32,
    /// Mask columns.
    pub mask_w: u32,
    /// Mask rows above the output pixel: `mask_h / 2 + origin_y`.
    pub top: u32,
    /// Mask columns left of the output pixel: `mask_w / 2 + origin_x`.
    pub left: u32,
    /// Output elements (pixels x channels) per block along a row (tiled kernels).
    pub out_tile_w: u32,
    /// Output rows per block (tiled kernels).
    pub out_tile_h: u32,
    /// Index of this launch's first block row, for images taller than one grid holds.
    pub block_offset_y: u32,
    /// One of the `MODE_*` codes.
    pub mode: u32,
    /// Ghost-cell value for `MODE_CONSTANT`.
    pub cval: f32,
    /// Lower clamp of the output (`-inf` for none).
    pub clamp_lo: f32,
    /// Upper clamp of the output (`+inf` for none).
    pub clamp_hi: f32,
}

/// How an axis pass combines its result `v` with what the output holds: `out = v`.
pub const COMBINE_STORE: u32 = 0;
/// `out = out + v` (the terms of a Laplacian).
pub const COMBINE_ADD: u32 = 1;
/// `out = out + v * v` (the terms of a gradient magnitude).
pub const COMBINE_ADD_SQUARE: u32 = 2;
/// `out = sqrt(out + v * v)` (a gradient magnitude's last term).
pub const COMBINE_ADD_SQUARE_ROOT: u32 = 3;

/// A wide separable pair kernel adds its two terms.
pub const TERMS_SUM: u32 = 0;
/// A wide separable pair kernel takes the square root of the sum of its terms' squares.
pub const TERMS_MAGNITUDE: u32 = 1;

/// Scalar parameters of the axis kernels, passed by value.
///
/// The array is contiguous, seen as `outer x len x inner`: output `(o, i, k)` is
/// `sum_j mask[j] * ext(o, i + j - left, k)`, `ext` extending each line along the axis by
/// `mode` (with `cval` for `MODE_CONSTANT`), then combined with the output by `combine` and
/// clamped. A block owns a tile of `axis_rows(columns)` positions along the axis by `columns`
/// lines; blocks run through the tiles along the axis first, then across the lines, then
/// over `outer`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisParams {
    /// Elements before the axis (the product of the earlier dimensions).
    pub outer: u64,
    /// Length of the axis.
    pub len: u64,
    /// Elements after the axis: the axis's stride.
    pub inner: u64,
    /// Number of taps.
    pub mask_len: u64,
    /// Taps before the output position: `mask_len / 2 + origin`, in `[0, mask_len)`.
    pub left: u64,
    /// Lines (consecutive elements after the axis) per tile: [`axis_columns`]`(inner)`.
    pub columns: u64,
    /// Tiles across the lines: `inner / columns`, rounded up.
    pub column_tiles: u64,
    /// Tiles along the axis: `len / axis_rows(columns)`, rounded up.
    pub row_tiles: u64,
    /// Index of this launch's first block, for arrays that need more blocks than one grid holds.
    pub block_offset: u64,
    /// One of the `MODE_*` codes.
    pub mode: u32,
    /// Ghost-cell value for `MODE_CONSTANT`.
    pub cval: f32,
    /// Lower clamp of the output (`-inf` for none).
    pub clamp_lo: f32,
    /// Upper clamp of the output (`+inf` for none).
    pub clamp_hi: f32,
    /// One of the `COMBINE_*` codes.
    pub combine: u32,
    /// Positions along the axis each thread of the ring design computes (its tiles are
    /// `AXIS_RING_STRIPS * strip` long); unused by the others.
    pub strip: u64,
}

/// Threads per block of the axis kernels.
pub const AXIS_THREADS: u32 = 256;
/// Consecutive outputs along the axis each thread of an axis kernel computes.
pub const AXIS_OUTPUTS: u32 = 8;

/// Strips of `strip` positions a block of the ring axis design stacks along the axis, one per
/// warp of `AXIS_THREADS`: a warp's 32 threads own 32 consecutive lines.
pub const AXIS_RING_STRIPS: u32 = AXIS_THREADS / 32;
/// Mask lengths the ring axis design is compiled for.
pub const AXIS_RING_MASKS: [u32; ring_sizes!(size_count!())] = ring_sizes!(size_array!());

/// Lines per axis tile: the elements after the axis, at most 32 (a warp reads 32 consecutive
/// elements, one per line, at each position along the axis).
pub const fn axis_columns(inner: u64) -> u64 {
    if inner < 32 { inner } else { 32 }
}

/// Positions along the axis per tile of `columns` lines: `AXIS_OUTPUTS` for each of the
/// `AXIS_THREADS / columns` threads of a line.
pub const fn axis_rows(columns: u64) -> u64 {
    (AXIS_THREADS as u64 / columns) * AXIS_OUTPUTS as u64
}

/// Shared-memory element of staged position `row`, line `column` of an axis tile: rows in
/// groups of `AXIS_OUTPUTS`, one padding element after each group, so that the threads of a
/// warp, whose windows start `AXIS_OUTPUTS` rows apart, read different banks.
pub const fn axis_slot(row: u64, column: u64, columns: u64) -> u64 {
    let group = AXIS_OUTPUTS as u64;
    (row / group) * (group * columns + 1) + (row % group) * columns + column
}

/// Shared-memory elements of a staged axis block for a mask of `mask_len` taps: the tile's
/// rows, the `mask_len - 1` halo rows, and one row its windows' last shift reads.
pub const fn axis_shared_elements(columns: u64, mask_len: u64) -> u64 {
    axis_slot(axis_rows(columns) + mask_len, 0, columns)
}

/// Scalar parameters of the 3D kernels, passed by value.
///
/// The volume is contiguous, `depth x height x width x channels`: output `(z, y, x, c)` is
/// `sum mask[i][j][k] * ext(z + i - front, y + j - top, x + k - left, c)`, `ext` extending the
/// volume along each axis by `mode` (with `cval` for `MODE_CONSTANT`), added to what the
/// output holds where `accumulate` is set, then clamped. A batch of images is a volume
/// filtered by a mask one slice deep. A block owns `CONV3D_THREADS.0` elements of
/// `CONV3D_THREADS.1 * conv3d_rows(..)` rows of `slices` slices; blocks run along the row
/// first, then down the rows, then through the slices.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv3dParams {
    /// Slices.
    pub depth: u64,
    /// Rows per slice.
    pub height: u64,
    /// Pixels per row.
    pub width: u64,
    /// Interleaved channels per pixel.
    pub channels: u64,
    /// Elements from one row's start to the next, at least `width * channels` (a slice is
    /// `height * pitch` elements).
    pub pitch: u64,
    /// Mask slices, rows and columns.
    pub mask_d: u64,
    pub mask_h: u64,
    pub mask_w: u64,
    /// Mask slices before the output position (negative for the later slices of a mask
    /// deeper than `CONV3D_RING`, run as a launch of their own).
    pub front: i64,
    /// Mask rows and columns before the output position.
    pub top: u64,
    pub left: u64,
    /// Tiles along a row and down the rows.
    pub x_tiles: u64,
    pub y_tiles: u64,
    /// Output slices per block.
    pub slices: u64,
    /// Index of this launch's first block, for volumes that need more blocks than one grid holds.
    pub block_offset: u64,
    /// One of the `MODE_*` codes.
    pub mode: u32,
    /// Ghost-cell value for `MODE_CONSTANT`.
    pub cval: f32,
    /// Lower clamp of the output (`-inf` for none).
    pub clamp_lo: f32,
    /// Upper clamp of the output (`+inf` for none).
    pub clamp_hi: f32,
    /// Nonzero: add the sums to what the output holds.
    pub accumulate: u32,
}

/// Threads of a 3D block: along a row (one element each) and down the rows. Tiles 64 elements
/// wide read fewer 32-byte sectors per output for their halo than 32 wide (measured:
/// PERFORMANCE.md, Approaches measured and not kept).
pub const CONV3D_THREADS: (u32, u32) = (64, 4);
/// Mask slices a 3D kernel for shapes read at run time takes in one launch.
pub const CONV3D_RING: usize = 8;
/// Rows of a 3D block's tile per row of its threads (`CONV3D_THREADS.1`), for a compiled
/// `depth x side x side` mask (`side = 0`: shapes read at run time) over elements of `bytes`
/// bytes, staged by asynchronous copies or through registers: each thread computes
/// `conv3d_thread_elements` consecutive elements of `conv3d_rows / conv3d_thread_elements`
/// rows. Staged through registers: 4 for `f32` masks up to 3 slices deep (each value read
/// from shared memory feeds up to 4 rows' sums), for `f64` masks one slice deep (one sum a
/// row) 8 at 1 x 3 x 3 and 4 at 1 x 5 x 5, else 1, where the sums of more rows would spill
/// registers. By asynchronous copies, which hold no staged values in registers: 8.
pub const fn conv3d_rows(depth: u64, side: u64, bytes: u64, asynchronous: bool) -> u64 {
    if side == 0 {
        return 1;
    }
    match (bytes, depth, asynchronous) {
        (4, _, true) => 8,
        (4, ..=3, false) => 4,
        (8, 1, true) => 8,
        (8, 1, false) if side <= 3 => 8,
        (8, 1, false) => 4,
        _ => 1,
    }
}

/// Consecutive row elements each thread of a 3D kernel computes (see [`conv3d_rows`]), for
/// `channels` compiled in (0: read at run time): 2 for the `f32` 5 x 5 x 5 kernel of one
/// channel staged by asynchronous copies, whose 40 sums (4 rows of 2 elements through 5 mask
/// slices) and 48-value window then fit two blocks per SM, each tap still feeding 8 sums; else
/// 1 (with the channel count read at run time, its window of 80 values would spill).
pub const fn conv3d_thread_elements(
    depth: u64,
    side: u64,
    channels: u64,
    bytes: u64,
    asynchronous: bool,
) -> u64 {
    if depth == 5 && side == 5 && channels == 1 && bytes == 4 && asynchronous {
        2
    } else {
        1
    }
}

/// Elements per staged row of a 3D block for a mask `mask_w` wide over `channels` channels.
pub const fn conv3d_row_elements(mask_w: u64, channels: u64) -> u64 {
    CONV3D_THREADS.0 as u64 + (mask_w - 1) * channels
}

/// Slices of the tile and its halo that a 3D kernel staged by asynchronous copies holds: the
/// one its threads read and the next three, in flight.
pub const CONV3D_ASYNC_SLICES: u64 = 4;

/// Elements of one 16-byte copy of `bytes`-byte elements where a 3D kernel stages by
/// asynchronous copies, else 1.
pub const fn conv3d_copy_elements(bytes: u64, asynchronous: bool) -> u64 {
    if asynchronous { 16 / bytes } else { 1 }
}

/// Shared-memory elements from one staged row of a 3D block to the next, for a mask `mask_w`
/// wide over `channels` channels and copies of `copy_elements` elements
/// ([`conv3d_copy_elements`]): the row's elements, and room to start them at their place in a
/// 16-byte word, so that a tile inside the volume stages whole aligned words.
pub const fn conv3d_row_words(mask_w: u64, channels: u64, copy_elements: u64) -> u64 {
    (conv3d_row_elements(mask_w, channels) + copy_elements - 1).next_multiple_of(copy_elements)
}

/// Shared-memory elements of a 3D block of threads computing `rows` rows each: `slices`
/// staged slices of the tile and its halo (2, or `CONV3D_ASYNC_SLICES` for the kernels staged
/// by asynchronous copies), rows of [`conv3d_row_words`].
pub const fn conv3d_shared_elements(slices: u64, rows: u64, mask_h: u64, row_words: u64) -> u64 {
    slices * (CONV3D_THREADS.1 as u64 * rows + mask_h - 1) * row_words
}

/// Taps a side of the one-pass separable 3D kernels (`conv3d_separable_async_m{taps}`).
pub const SEPARABLE3D_MASKS: [u32; separable3d_sizes!(size_count!())] =
    separable3d_sizes!(size_array!());

/// Side of the square tile of a one-pass separable 3D block (`conv3d_separable_async_m{M}`): 256
/// threads own `32 x 32` outputs of every slice they walk through.
pub const SEPARABLE3D_TILE: u64 = 32;
/// The most taps a side of the one-pass separable 3D kernels: their ring of `4 M` sums a
/// thread fits four blocks per SM at 3 and 5 taps, three at 7, two at 9 (three spill)
/// (PERFORMANCE.md).
pub const SEPARABLE3D_MAX_TAPS: usize = 9;
/// Staged slices of a one-pass separable 3D block: the one its threads filter and the next
/// three, in flight.
pub const SEPARABLE3D_BUFFERS: u64 = 4;
/// Words from one row-filtered row of a one-pass separable 3D block to the next: the tile's 32
/// and 4 more, so that the 16-byte stores of 8 consecutive rows fall on 8 groups of banks.
pub const SEPARABLE3D_FILTERED_ROW_WORDS: u64 = 36;

/// Words from one staged row of a one-pass separable 3D block to the next for `m` taps: the
/// tile, its `m - 1` halo elements and up to 3 before them (rows start at 16-byte words of the
/// input), rounded up to an odd number of 16-byte words, so that the 16-byte reads of 8
/// consecutive rows fall on 8 groups of banks.
pub const fn separable3d_row_words(m: u64) -> u64 {
    ((3 + SEPARABLE3D_TILE + m - 1).div_ceil(4) | 1) * 4
}

/// Shared memory of a one-pass separable 3D block for `m` taps, in words: the staged slices
/// (tile and halo), then the row-filtered rows of two slices.
pub const fn separable3d_shared_words(m: u64) -> u64 {
    let rows = SEPARABLE3D_TILE + m - 1;
    SEPARABLE3D_BUFFERS * rows * separable3d_row_words(m)
        + 2 * rows * SEPARABLE3D_FILTERED_ROW_WORDS
}

/// Input rows per step of the wide separable pair kernels (`conv2d_separable_wide_pair_m{M}`):
/// steps half as long as the single kernels', so that their two rings and staged rows fit two
/// blocks per SM up to 25 taps (one block per SM in steps of 32: PERFORMANCE.md).
pub const SEPARABLE_WIDE_PAIR_STEP_ROWS: u32 = 16;

/// Shared memory of a wide separable pair block (two rank-1 terms of one mask size, one
/// channel), in `f32` words: the step's [`SEPARABLE_WIDE_PAIR_STEP_ROWS`] staged input rows, a
/// ring of row-filtered rows per term, one after the other, and the table of folded staged
/// columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeparableWidePairLayout {
    /// Words per staged input row (as [`SeparableWideLayout`]'s).
    pub staged_row_words: u64,
    /// First word of the first term's ring; the second's follows it.
    pub ring: u64,
    /// Rows of each ring: a step's rows and the `mask - 1` before them, rounded up to 8.
    pub ring_rows: u64,
    /// First word of the column table, after the rings.
    pub column_table: u64,
    /// Total words.
    pub words: u64,
}

impl SeparableWidePairLayout {
    /// The layout for a square mask `mask` taps a side.
    pub const fn new(mask: u64) -> Self {
        let staged_row_words = strip_row_words(mask, 1);
        let step_rows = SEPARABLE_WIDE_PAIR_STEP_ROWS as u64;
        let ring = step_rows * staged_row_words;
        let ring_rows = strip_ring_rows_in_steps_of(step_rows, mask);
        let column_table = ring + 2 * ring_rows * SEPARABLE_WIDE_RING_ROW_WORDS;
        Self {
            staged_row_words,
            ring,
            ring_rows,
            column_table,
            words: column_table + strip_staged_width(mask, 1).next_multiple_of(4),
        }
    }
}

/// Where a wide separable pair kernel reads how it combines its two terms: MASK's tap after
/// the four factors (`4 M`), [`TERMS_SUM`] or [`TERMS_MAGNITUDE`] as an `f32`.
pub const fn pair_combine_tap(mask: u64) -> u64 {
    4 * mask
}
