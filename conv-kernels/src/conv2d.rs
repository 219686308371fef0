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
    // SAFETY: `y < height` and `e < width * channels <= pitch`.
    unsafe { *output.add((y * p.pitch + e) as usize) = clamp(acc, p) };
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

/// Register-tiled design, specialised at compile time on the mask size `M x M` and the channel
/// count `C`. A block of `REGISTER_BLOCK` = 32 x 8 threads produces 32 elements x 64 rows: the
/// block stages its input region (output tile plus halo) in shared memory, without boundary
/// checks when the region lies inside the image, then each thread computes `REGISTER_ROWS` = 8
/// outputs of one column, sliding down the rows: every input value it reads from shared memory
/// feeds up to 8 accumulators in registers, and every tap is a compile-time constant-memory
/// operand of a fused multiply-add. Warps read consecutive shared-memory words (no bank
/// conflicts) and write consecutive output elements.
///
/// # Safety
/// As [`direct`]; `p.mask_h = p.mask_w = M`, `p.channels = C`, the mask in `MASK`, a
/// `REGISTER_BLOCK` launch with `(64 + M - 1) * (32 + (M - 1) * C) * 4` bytes of shared memory.
#[inline(always)]
unsafe fn register_tiled<const M: usize, const C: usize>(
    input: *const f32,
    output: *mut f32,
    p: &Conv2dParams,
) {
    use crate::abi::{REGISTER_BLOCK, REGISTER_ROWS};
    const THREADS_X: usize = REGISTER_BLOCK.0 as usize;
    const THREADS: usize = (REGISTER_BLOCK.0 * REGISTER_BLOCK.1) as usize;
    const R: usize = REGISTER_ROWS as usize;
    let cols = THREADS_X + (M - 1) * C;
    let rows = REGISTER_BLOCK.1 as usize * R + M - 1;
    let (tx, ty) = (thread_idx_x() as usize, thread_idx_y() as usize);
    let e0 = block_idx_x() as usize * THREADS_X;
    let y0 = (p.block_offset_y as usize + block_idx_y() as usize) * REGISTER_BLOCK.1 as usize * R;
    let first_e = e0 as i64 - (p.left as usize * C) as i64;
    let first_y = y0 as i64 - i64::from(p.top);
    let elements = p.width as usize * C;
    let height = p.height as usize;
    let interior = first_e >= 0
        && first_y >= 0
        && first_e as usize + cols <= elements
        && first_y as usize + rows <= height;
    // SAFETY: `input` is a pitched image as `p` describes (caller).
    let image = unsafe { Plane::new(input, p) };
    let total = rows * cols;
    if interior {
        // No boundary checks, and every load of this thread is issued before any store: each
        // thread keeps up to `MAX_LOADS` requests in flight, which the memory system needs to
        // reach full bandwidth. Thread (tx, ty) loads columns tx, tx + 32, ... of rows
        // ty, ty + 8, ...: row-contiguous warps, and addresses that need no division.
        const MAX_LOADS: usize = 64;
        let threads_y = REGISTER_BLOCK.1 as usize;
        let (col_steps, row_steps) = (cols.div_ceil(THREADS_X), rows.div_ceil(threads_y));
        const { assert!((32 + 30 * 4usize).div_ceil(32) * (64 + 30usize).div_ceil(8) <= MAX_LOADS) };
        let pitch = p.pitch as usize;
        // SAFETY: the whole staged region lies inside the image (`interior`), so this pointer
        // and every offset from it below stay inside `input`.
        let corner = unsafe { input.add((first_y as usize + ty) * pitch + first_e as usize + tx) };
        let mut values = [0.0f32; MAX_LOADS];
        for rs in 0..row_steps {
            for cs in 0..col_steps {
                if ty + rs * threads_y < rows && tx + cs * THREADS_X < cols {
                    // SAFETY: row and column inside the staged region (see `corner`).
                    values[rs * col_steps + cs] =
                        unsafe { *corner.add(rs * threads_y * pitch + cs * THREADS_X) };
                }
            }
        }
        for rs in 0..row_steps {
            for cs in 0..col_steps {
                let (r, c) = (ty + rs * threads_y, tx + cs * THREADS_X);
                if r < rows && c < cols {
                    // SAFETY: `r * cols + c < rows * cols`, the reserved count.
                    unsafe {
                        SharedTile::store((r * cols + c) as u64, values[rs * col_steps + cs])
                    };
                }
            }
        }
    } else {
        let mut index = ty * THREADS_X + tx;
        while index < total {
            let (r, c) = (index / cols, index % cols);
            let value = image.element_in_row(image.row(first_y + r as i64), first_e + c as i64);
            // SAFETY: `index < rows * cols`, the reserved count.
            unsafe { SharedTile::store(index as u64, value) };
            index += THREADS;
        }
    }
    sync_threads();
    let mut acc = [0.0f32; R];
    let base = ty * R * cols + tx;
    // Up to 9 x 9 the row loop has a compile-time trip count and unrolls fully: every tap is a
    // constant-memory operand at a fixed offset. Larger masks take the trip count from the
    // launch (equal, but unknown to the compiler), so the loop stays rolled and the taps are not
    // all kept live in registers; each row's values still feed all R accumulators.
    let input_rows = if M <= 9 {
        R + M - 1
    } else {
        R + p.mask_h as usize - 1
    };
    for r in 0..input_rows {
        for j in 0..M {
            // SAFETY: `ty * R + r < rows` and `tx + j * C < cols`: inside the staged region.
            let value = unsafe { SharedTile::load((base + r * cols + j * C) as u64) };
            for (k, sum) in acc.iter_mut().enumerate() {
                if r >= k && r - k < M {
                    *sum = fma(ConstantMask.tap(((r - k) * M + j) as u64), value, *sum);
                }
            }
        }
    }
    let e = e0 + tx;
    if e >= elements {
        return;
    }
    let first_row = y0 + ty * R;
    // SAFETY: only offset further below for rows inside the image.
    let column = unsafe { output.add(e) };
    // Rows past the image only in the last block row. The common case stores all R rows with
    // no per-row branch: otherwise the compiler sinks each accumulator's chain of multiply-adds
    // into its own store branch, which serialises the chains instead of interleaving them.
    if first_row + R <= height {
        for (k, &sum) in acc.iter().enumerate() {
            // SAFETY: row `first_row + k < height`, element `e < width * channels <= pitch`.
            unsafe { *column.add((first_row + k) * p.pitch as usize) = clamp(sum, p) };
        }
    } else {
        for (k, &sum) in acc
            .iter()
            .enumerate()
            .take(height.saturating_sub(first_row))
        {
            // SAFETY: as above; `take` keeps `first_row + k < height`.
            unsafe { *column.add((first_row + k) * p.pitch as usize) = clamp(sum, p) };
        }
    }
}

/// Declares the register-tiled entry points, one per (mask size, channels).
macro_rules! register_entry_points {
    ($(($name:ident, $m:literal, $c:literal)),* $(,)?) => {$(
        #[doc = concat!("Register-tiled 2D kernel for ", $m, " x ", $m, " masks and ", $c, " channel(s).")]
        ///
        /// # Safety
        /// As `register_tiled`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(input: *const f32, output: *mut f32, p: Conv2dParams) {
            // SAFETY: forwarded contract.
            unsafe { register_tiled::<$m, $c>(input, output, &p) }
        }
    )*};
}

register_entry_points!(
    (conv2d_register_m3_c1, 3, 1),
    (conv2d_register_m3_c3, 3, 3),
    (conv2d_register_m3_c4, 3, 4),
    (conv2d_register_m5_c1, 5, 1),
    (conv2d_register_m5_c3, 5, 3),
    (conv2d_register_m5_c4, 5, 4),
    (conv2d_register_m7_c1, 7, 1),
    (conv2d_register_m7_c3, 7, 3),
    (conv2d_register_m7_c4, 7, 4),
    (conv2d_register_m9_c1, 9, 1),
    (conv2d_register_m9_c3, 9, 3),
    (conv2d_register_m9_c4, 9, 4),
    (conv2d_register_m15_c1, 15, 1),
    (conv2d_register_m15_c3, 15, 3),
    (conv2d_register_m15_c4, 15, 4),
    (conv2d_register_m31_c1, 31, 1),
    (conv2d_register_m31_c3, 31, 3),
    (conv2d_register_m31_c4, 31, 4),
);
