//! 2D correlation kernels for pitched, interleaved images: the four designs of the textbook
//! chapter (section 7.6), the tutorial and the course report.
//!
//! A row holds `width * channels` interleaved elements; every kernel maps threads to elements,
//! thread `(tx, ty)` of block `(bx, by)` along a row and down the rows, so a warp reads
//! consecutive addresses whatever the channel count. A mask tap `j` columns to the right is
//! `j * channels` elements away, in the same channel. Every thread owns at most one output.

use crate::abi::Conv2dParams;
use crate::boundary::Plane;
use crate::gpu::{
    ConstantMask, GlobalMask, Mask, SharedTile, block_dim_x, block_dim_y, block_idx_x, block_idx_y,
    clamp_keeping_nan, fma, sync_threads, thread_idx_x, thread_idx_y,
};
use crate::wide::{Padded, Staging, accumulate_window, store_segment, with_finish};
use core::marker::PhantomData;

/// The output clamp of these parameters.
#[inline(always)]
fn clamp(value: f32, p: &Conv2dParams) -> f32 {
    clamp_keeping_nan(value, p.clamp_lo, p.clamp_hi)
}

/// Elements per row.
#[inline(always)]
fn row_elements(p: &Conv2dParams) -> u64 {
    u64::from(p.width) * u64::from(p.channels)
}

/// Basic design (course report's global-memory kernel): thread `(e, y)` reads its
/// `mask_h * mask_w` inputs from global memory, ghost cells by the boundary mode.
///
/// # Safety
/// `input` and `output` are pitched images as `p` describes; they do not overlap.
#[inline(always)]
unsafe fn direct<M: Mask>(input: *const f32, mask: M, output: *mut f32, p: &Conv2dParams) {
    let e = block_idx_x() * block_dim_x() + thread_idx_x();
    let y = (u64::from(p.block_offset_y) + block_idx_y()) * block_dim_y() + thread_idx_y();
    if e >= row_elements(p) || y >= u64::from(p.height) {
        return;
    }
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    let value = output_at(image, mask, p, e, y);
    // SAFETY: `y < height` and `e < width * channels <= pitch`.
    unsafe { *output.add((y * p.pitch + e) as usize) = value };
}

/// Output element `e` of row `y` (both inside the image), clamped: every tap read through the
/// boundary mode.
#[inline(always)]
fn output_at<M: Mask>(image: Plane, mask: M, p: &Conv2dParams, e: u64, y: u64) -> f32 {
    let channels = u64::from(p.channels);
    let (x, c) = ((e / channels) as i64, e % channels);
    let first_y = y as i64 - i64::from(p.top);
    let first_x = x - i64::from(p.left);
    let mut acc = 0.0f32;
    for i in 0..u64::from(p.mask_h) {
        let row = image.row(first_y + i as i64);
        for j in 0..u64::from(p.mask_w) {
            let tap = mask.tap(i * u64::from(p.mask_w) + j);
            acc = fma(tap, image.in_row(row, first_x + j as i64, c), acc);
        }
    }
    clamp(acc, p)
}

/// Tiled design with halo cells in shared memory (textbook Fig. 7.19 to 7.21). A block produces
/// an output tile of `out_tile_w` elements x `out_tile_h` rows and stages the input region it
/// needs, the tile plus `mask - 1` halo cells per axis (ghost cells take their boundary value),
/// in shared memory, in steps of the block's size. With the textbook's choice, output tile =
/// block - halo, every thread loads exactly one element and some threads compute nothing; when
/// the halo is as large as the block the host chooses output tile = block, and the loop loads
/// the halo in several steps. One barrier, then every tap comes from shared memory.
///
/// # Safety
/// As [`direct`]; the launch reserves `(out_tile_h + mask_h - 1) * region_w * 4` bytes of shared
/// memory, `region_w = out_tile_w + (mask_w - 1) * channels`.
#[inline(always)]
unsafe fn tiled<M: Mask>(input: *const f32, mask: M, output: *mut f32, p: &Conv2dParams) {
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let (threads_x, threads_y) = (block_dim_x(), block_dim_y());
    let channels = u64::from(p.channels);
    let (tile_w, tile_h) = (u64::from(p.out_tile_w), u64::from(p.out_tile_h));
    let e0 = block_idx_x() * tile_w;
    let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * tile_h;
    let region_w = tile_w + (u64::from(p.mask_w) - 1) * channels;
    let region_h = tile_h + u64::from(p.mask_h) - 1;
    let first_e = e0 as i64 - i64::from(p.left) * channels as i64;
    let first_y = y0 as i64 - i64::from(p.top);
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    let mut ry = ty;
    while ry < region_h {
        let row = image.row(first_y + ry as i64);
        let mut rx = tx;
        while rx < region_w {
            let value = image.element_in_row(row, first_e + rx as i64);
            // SAFETY: `ry < region_h`, `rx < region_w`: inside the reserved region.
            unsafe { SharedTile::store(ry * region_w + rx, value) };
            rx += threads_x;
        }
        ry += threads_y;
    }
    sync_threads();
    let (e, y) = (e0 + tx, y0 + ty);
    if tx >= tile_w || ty >= tile_h || e >= row_elements(p) || y >= u64::from(p.height) {
        return;
    }
    let mut acc = 0.0f32;
    for i in 0..u64::from(p.mask_h) {
        let row = (ty + i) * region_w + tx;
        for j in 0..u64::from(p.mask_w) {
            let tap = mask.tap(i * u64::from(p.mask_w) + j);
            // SAFETY: `ty + i < region_h` and `tx + j * channels < region_w`.
            acc = fma(tap, unsafe { SharedTile::load(row + j * channels) }, acc);
        }
    }
    // SAFETY: `y < height` and `e < width * channels <= pitch`.
    unsafe { *output.add((y * p.pitch + e) as usize) = clamp(acc, p) };
}

/// Tiled design with general caching (the course report's shared + constant kernel): shared
/// memory holds only the block's own elements, one per thread; taps outside the block's tile
/// (halo and ghost cells) are read from global memory, where neighbouring blocks' loads have
/// most likely left them in L2.
///
/// # Safety
/// As [`direct`]; the launch reserves `blockDim.x * blockDim.y * 4` bytes of shared memory.
#[inline(always)]
unsafe fn tiled_l2<M: Mask>(input: *const f32, mask: M, output: *mut f32, p: &Conv2dParams) {
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let (threads_x, threads_y) = (block_dim_x(), block_dim_y());
    let e0 = block_idx_x() * threads_x;
    let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * threads_y;
    let (e, y) = (e0 + tx, y0 + ty);
    let (elements, height) = (row_elements(p), u64::from(p.height));
    let inside = e < elements && y < height;
    // Every thread stores (threads outside the image a copy of element 0, never read): with no
    // branch before it, the compiler cannot duplicate the barrier into divergent paths.
    let source = if inside { y * p.pitch + e } else { 0 };
    // SAFETY: `source` is inside the image; `ty * threads_x + tx` is below the reserved count.
    unsafe { SharedTile::store(ty * threads_x + tx, *input.add(source as usize)) };
    sync_threads();
    if !inside {
        return;
    }
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    let channels = u64::from(p.channels);
    let (e_end, y_end) = ((e0 + threads_x).min(elements), (y0 + threads_y).min(height));
    let (x, c) = ((e / channels) as i64, e % channels);
    let first_y = y as i64 - i64::from(p.top);
    let first_x = x - i64::from(p.left);
    let mut acc = 0.0f32;
    for i in 0..u64::from(p.mask_h) {
        let yy = first_y + i as i64;
        let row_in_tile = yy >= y0 as i64 && yy < y_end as i64;
        let row = image.row(yy);
        for j in 0..u64::from(p.mask_w) {
            let xx = first_x + j as i64;
            let ee = xx * channels as i64 + c as i64;
            let value = if row_in_tile && ee >= e0 as i64 && ee < e_end as i64 {
                // SAFETY: inside this block's tile, stored before the barrier.
                unsafe { SharedTile::load((yy as u64 - y0) * threads_x + (ee as u64 - e0)) }
            } else {
                image.in_row(row, xx, c)
            };
            acc = fma(mask.tap(i * u64::from(p.mask_w) + j), value, acc);
        }
    }
    // SAFETY: `y < height` and `e < width * channels <= pitch`.
    unsafe { *output.add((y * p.pitch + e) as usize) = clamp(acc, p) };
}

/// Declares the constant-memory and global-memory entry points of one design.
macro_rules! entry_points {
    ($design:ident, $constant:ident, $global:ident, $doc:literal) => {
        #[doc = concat!($doc, " Mask in constant memory (`mask_h * mask_w <= MASK_CAPACITY`).")]
        ///
        /// # Safety
        /// `input`/`output` are pitched images as `p` describes, not overlapping; the mask was
        /// uploaded to `MASK`; shared memory as the design requires.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $constant(
            input: *const f32,
            output: *mut f32,
            p: Conv2dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { $design(input, ConstantMask, output, &p) }
        }

        #[doc = concat!($doc, " Mask in global memory.")]
        ///
        /// # Safety
        /// As the constant-memory variant; `mask` holds `mask_h * mask_w` taps.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $global(
            input: *const f32,
            mask: *const f32,
            output: *mut f32,
            p: Conv2dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { $design(input, GlobalMask(mask), output, &p) }
        }
    };
}

entry_points!(direct, conv2d_constant, conv2d_basic, "Basic 2D kernel.");
entry_points!(
    tiled,
    conv2d_tiled,
    conv2d_tiled_global_mask,
    "Tiled 2D kernel, halo in shared memory."
);
entry_points!(
    tiled_l2,
    conv2d_tiled_l2,
    conv2d_tiled_l2_global_mask,
    "Tiled 2D kernel, halo through L2."
);

/// Wide register-tiled design for wide masks, specialised at compile time on the mask width `W`
/// and the channel count `C` (any mask height). A block of 16 x `threads_y` threads
/// (`WIDE_BLOCK`; fewer rows only where the staged region would not leave two blocks per SM)
/// owns 256 elements x `2 threads_y` rows of outputs and stages their input region (plus the
/// halo, ghost cells by the boundary mode) in shared memory warp by warp, each staged row
/// padded by [`wide_word`] against bank conflicts; one barrier. Thread `(tx, ty)` then owns
/// the `WIDE_OUTPUTS` = 16 consecutive elements `16 tx ..` of the `WIDE_ROWS` = 2 output rows
/// `ty` and `ty + threads_y`: for each mask row it holds the row's `W` taps in registers and
/// streams both windows (16 elements plus the `(W - 1) * C` halo) through 16-byte shared-memory
/// reads, each value feeding every accumulator it belongs to, so a mask row costs `32 W`
/// multiply-adds for `W` tap loads and `2 (16 + (W - 1) C) / 4` shared reads.
///
/// # Safety
/// As [`direct`]; `p.mask_w = W`, `p.channels = C`, the mask in `MASK`, blocks of 16 x
/// `threads_y` threads (`threads_y` even: staging goes by whole warps) with `p.out_tile_h =
/// 2 threads_y`, and the launch reserves
/// `(2 threads_y + mask_h - 1) * wide_row_words(W, C) * 4` bytes of shared memory; `p.pitch` a
/// multiple of 4 and the output buffer 16-byte aligned.
///
/// [`wide_word`]: crate::abi::wide_word
#[inline(always)]
unsafe fn register_wide<const W: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    use crate::abi::{WIDE_BLOCK, WIDE_OUTPUTS, WIDE_ROWS, wide_row_words, wide_word};
    const N: usize = WIDE_OUTPUTS as usize;
    const R: usize = WIDE_ROWS as usize;
    const { assert!(N % 16 == 0) };
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let threads = u64::from(WIDE_BLOCK.0) * block_dim_y();
    let tile_w = u64::from(WIDE_BLOCK.0) * N as u64;
    let tile_h = block_dim_y() * R as u64;
    let e0 = block_idx_x() * tile_w;
    let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * tile_h;
    let mask_h = u64::from(p.mask_h);
    let region_w = tile_w + (W as u64 - 1) * C as u64;
    let region_h = tile_h + mask_h - 1;
    let row_words = wide_row_words(W as u64, C as u64);
    let first_e = e0 as i64 - i64::from(p.left) * C as i64;
    let first_y = y0 as i64 - i64::from(p.top);
    let elements = row_elements(p);
    let height = u64::from(p.height);
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    // The same in the whole block: the region lies inside the image, so no element needs the
    // boundary mode.
    let interior = first_e >= 0
        && first_e as u64 + region_w <= elements
        && first_y >= 0
        && first_y as u64 + region_h <= height;
    let thread = ty * u64::from(WIDE_BLOCK.0) + tx;
    let staging = Staging::<Padded> {
        rows: region_h,
        row_words,
        lane: thread % 32,
        warp: thread / 32,
        warps: threads / 32,
        layout: PhantomData,
    };
    if interior {
        // SAFETY: inside the image (`interior`).
        staging.interior::<W, C, 1, _>(
            |ry| (first_y as u64 + ry) * p.pitch + first_e as u64 + staging.lane,
            |row, k| unsafe { *input.add((row + 32 * k as u64) as usize) },
        );
    } else {
        staging.border(region_w, |ry, rx| {
            let e = first_e + rx as i64;
            let x = e.div_euclid(C as i64);
            image.in_row(image.row(first_y + ry as i64), x, (e - x * C as i64) as u64)
        });
    }
    sync_threads();
    // Every thread computes (the region covers all of them); stores are predicated on the image.
    let x0 = tx * N as u64;
    let mut acc = [[0.0f32; N]; R];
    let mut row = ty * row_words + wide_word(x0);
    let row_step = block_dim_y() * row_words;
    for i in 0..mask_h {
        let taps: [f32; W] = core::array::from_fn(|j| ConstantMask.tap(i * W as u64 + j as u64));
        for (r, acc) in acc.iter_mut().enumerate() {
            let window = row + r as u64 * row_step;
            accumulate_window::<N, W, C>(acc, &taps, |q| {
                // `x0` is a multiple of 16, so element `x0 + 4q` sits `4q + 4 (q / 4)` words on.
                // SAFETY: row `ty + r * threads_y + i < region_h`; the quad lies inside the
                // row's words (rounded up to 16 elements), stored before the barrier or in the
                // padding, whose values feed nothing.
                unsafe { SharedTile::load4(window + (4 * q + 4 * (q / 4)) as u64) }
            });
        }
        row += row_words;
    }
    // 16-byte stores where the thread's 16 elements lie inside the row.
    with_finish(p, |finish| {
        let e = e0 + x0;
        for (r, sums) in acc.iter().enumerate() {
            let y = y0 + ty + r as u64 * block_dim_y();
            if y < height && e < elements {
                let at = output.wrapping_add((y * p.pitch + e) as usize);
                // SAFETY: row `y < height`, element `e < width * channels <= pitch`; 16-byte
                // aligned (`e`, the pitch and the buffer are).
                unsafe { store_segment(at, sums, (e, elements), |sum| finish(sum, p)) };
            }
        }
    });
}

specialised_entry_points!(
    register_wide, conv2d_wide_w, "Wide register-tiled 2D kernel, mask width and channels:":
    1, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
);
