//! The four 2D designs of the textbook chapter, the tutorial and the course report. Every
//! thread owns at most one output. Each design is generic over the type it reads, adds in and
//! writes ([`Real`]: `f32`, and `f64`, whose entry points end in `_f64`).

use super::{clamp, row_elements};
use crate::abi::Conv2dParams;
use crate::boundary::Plane;
use crate::element::Real;
use crate::gpu::{
    ConstantMask, GlobalMask, Mask, SharedTile, block_dim_x, block_dim_y, block_idx_x, block_idx_y,
    sync_threads, thread_idx_x, thread_idx_y,
};

/// Basic design (course report's global-memory kernel): thread `(e, y)` reads its
/// `mask_h * mask_w` inputs from global memory, ghost cells by the boundary mode.
///
/// # Safety
/// `input` and `output` are pitched images as `p` describes; they do not overlap.
#[inline(always)]
unsafe fn direct<T: Real, M: Mask<T>>(input: *const T, mask: M, output: *mut T, p: &Conv2dParams) {
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
fn output_at<T: Real, M: Mask<T>>(image: Plane<T>, mask: M, p: &Conv2dParams, e: u64, y: u64) -> T {
    let channels = u64::from(p.channels);
    let (x, c) = ((e / channels) as i64, e % channels);
    let first_y = y as i64 - i64::from(p.top);
    let first_x = x - i64::from(p.left);
    let mut acc = T::ZERO;
    for i in 0..u64::from(p.mask_h) {
        let row = image.row(first_y + i as i64);
        for j in 0..u64::from(p.mask_w) {
            let tap = mask.tap(i * u64::from(p.mask_w) + j);
            acc = T::fma(tap, image.in_row(row, first_x + j as i64, c), acc);
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
/// memory (8 for `f64`), `region_w = out_tile_w + (mask_w - 1) * channels` (PERFORMANCE.md).
#[inline(always)]
unsafe fn tiled<T: Real, M: Mask<T>>(input: *const T, mask: M, output: *mut T, p: &Conv2dParams) {
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
            unsafe { SharedTile::store_real(ry * region_w + rx, value) };
            rx += threads_x;
        }
        ry += threads_y;
    }
    sync_threads();
    let (e, y) = (e0 + tx, y0 + ty);
    if tx >= tile_w || ty >= tile_h || e >= row_elements(p) || y >= u64::from(p.height) {
        return;
    }
    let mut acc = T::ZERO;
    for i in 0..u64::from(p.mask_h) {
        let row = (ty + i) * region_w + tx;
        for j in 0..u64::from(p.mask_w) {
            let tap = mask.tap(i * u64::from(p.mask_w) + j);
            // SAFETY: `ty + i < region_h` and `tx + j * channels < region_w`.
            acc = T::fma(
                tap,
                unsafe { SharedTile::load_real(row + j * channels) },
                acc,
            );
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
/// As [`direct`]; the launch reserves `blockDim.x * blockDim.y * size_of::<T>()` bytes of shared
/// memory.
#[inline(always)]
unsafe fn tiled_l2<T: Real, M: Mask<T>>(
    input: *const T,
    mask: M,
    output: *mut T,
    p: &Conv2dParams,
) {
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
    unsafe { SharedTile::store_real(ty * threads_x + tx, *input.add(source as usize)) };
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
    let mut acc = T::ZERO;
    for i in 0..u64::from(p.mask_h) {
        let yy = first_y + i as i64;
        let row_in_tile = yy >= y0 as i64 && yy < y_end as i64;
        let row = image.row(yy);
        for j in 0..u64::from(p.mask_w) {
            let xx = first_x + j as i64;
            let ee = xx * channels as i64 + c as i64;
            let value = if row_in_tile && ee >= e0 as i64 && ee < e_end as i64 {
                // SAFETY: inside this block's tile, stored before the barrier.
                unsafe { SharedTile::load_real((yy as u64 - y0) * threads_x + (ee as u64 - e0)) }
            } else {
                image.in_row(row, xx, c)
            };
            acc = T::fma(mask.tap(i * u64::from(p.mask_w) + j), value, acc);
        }
    }
    // SAFETY: `y < height` and `e < width * channels <= pitch`.
    unsafe { *output.add((y * p.pitch + e) as usize) = clamp(acc, p) };
}

textbook_entry_points!(
    direct,
    f32,
    Conv2dParams,
    conv2d_constant_mask,
    conv2d_basic,
    "Basic 2D kernel."
);
textbook_entry_points!(
    direct,
    f64,
    Conv2dParams,
    conv2d_constant_mask_f64,
    conv2d_basic_f64,
    "Basic 2D kernel, `f64`."
);
textbook_entry_points!(
    tiled,
    f32,
    Conv2dParams,
    conv2d_tiled,
    conv2d_tiled_global_mask,
    "Tiled 2D kernel, halo in shared memory."
);
textbook_entry_points!(
    tiled,
    f64,
    Conv2dParams,
    conv2d_tiled_f64,
    conv2d_tiled_global_mask_f64,
    "Tiled 2D kernel, halo in shared memory, `f64`."
);
textbook_entry_points!(
    tiled_l2,
    f32,
    Conv2dParams,
    conv2d_tiled_l2,
    conv2d_tiled_l2_global_mask,
    "Tiled 2D kernel, halo through L2."
);
textbook_entry_points!(
    tiled_l2,
    f64,
    Conv2dParams,
    conv2d_tiled_l2_f64,
    conv2d_tiled_l2_global_mask_f64,
    "Tiled 2D kernel, halo through L2, `f64`."
);
