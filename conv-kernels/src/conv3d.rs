//! The 3D design: correlation of a `depth x height x width x channels` volume with a
//! `mask_d x mask_h x mask_w` mask, and of a batch of images with a mask one slice deep.
//!
//! Thread mapping and tiling: a block of 256 threads owns `CONV3D_BLOCK` = 32 consecutive row
//! elements (pixels times channels) of 8 rows, through `CONV3D_SLICES` = 8 consecutive
//! slices; thread `t` owns element `t % 32` of row `t / 32` and keeps its 8 slices' sums in
//! registers. The block walks through the `8 + mask_d - 1` input slices those outputs need,
//! staging each slice's tile and halo (ghost cells folded there; none in tiles inside the
//! volume) in one of two shared-memory buffers, the next slice's loads in flight during this
//! one's multiply-adds, and adds each staged slice into the sums of the (up to `mask_d`) output
//! slices it reaches, with the mask slice that lies between them. Every input element is read
//! from device memory about once (halos come from L2). Memory latency bounds it: at 128
//! registers two blocks fit an SM, too few warps to cover the loads (PERFORMANCE.md).

use crate::abi::{CONV3D_BLOCK, CONV3D_SLICES, Conv3dParams, conv3d_row_elements};
use crate::boundary::Volume;
use crate::element::Real;
use crate::gpu::{
    GlobalMask, Mask, SharedTile, Walk, block_idx_x, div_rem, sync_threads, thread_idx_x,
};

const SLICES: usize = CONV3D_SLICES as usize;
const BLOCK_W: u64 = CONV3D_BLOCK.0 as u64;
const BLOCK_H: u64 = CONV3D_BLOCK.1 as u64;
const THREADS: u64 = BLOCK_W * BLOCK_H;
/// Staged elements per thread loaded a slice ahead.
const AHEAD: usize = 2;

/// The 3D design (see the module's doc).
///
/// # Safety
/// `input` and `output` hold `depth * height * width * channels >= 1` elements and do not
/// overlap; `mask` holds `mask_d * mask_h * mask_w` taps; the tile counts cover the volume; a
/// 256-thread launch with `conv3d_shared_elements(mask_h, mask_w, channels) * size_of::<T>()`
/// bytes of shared memory; for `SIDE > 0`, `mask_h = mask_w = SIDE`.
///
/// `SIDE` fixes the mask slice's side at compile time (0: read from `p`): the tap loops then
/// unroll, and every shared-memory and mask load of a slice is issued before the multiply-adds
/// wait on them (with the sides read at run time, a 3 x 3 slice ran one dependent load pair per
/// tap, 4.2 ms for 512^3 on an H100).
#[inline(always)]
unsafe fn tiled<T: Real, const SIDE: u32>(
    input: *const T,
    mask: *const T,
    output: *mut T,
    p: &Conv3dParams,
) {
    let (rest, x_tile) = div_rem(p.block_offset + block_idx_x(), p.x_tiles);
    let (z_tile, y_tile) = div_rem(rest, p.y_tiles);
    let row_elements = p.width * p.channels;
    let (e0, y0, z0) = (x_tile * BLOCK_W, y_tile * BLOCK_H, z_tile * SLICES as u64);
    let tid = thread_idx_x();
    let (tx, ty) = ((tid % BLOCK_W) as u32, (tid / BLOCK_W) as u32);
    let staged_w = conv3d_row_elements(p.mask_w, p.channels);
    let staged_h = BLOCK_H + p.mask_h - 1;
    // SAFETY: `input` holds the volume (caller).
    let volume = unsafe { Volume::new(input, p) };
    let first_e = e0 as i64 - (p.left * p.channels) as i64;
    let first_y = y0 as i64 - p.top as i64;
    let plane_inside = first_e >= 0
        && first_e as u64 + staged_w <= row_elements
        && first_y >= 0
        && first_y as u64 + staged_h <= p.height;
    let mask = GlobalMask(mask);
    let side = |runtime: u64| if SIDE > 0 { SIDE } else { runtime as u32 };
    let (mask_h, mask_w, channels, row_words) = (
        side(p.mask_h),
        side(p.mask_w),
        p.channels as u32,
        staged_w as u32,
    );
    let mut acc = [T::ZERO; SLICES];
    // The last tile through the slices stages only the slices its outputs need.
    let outputs = (p.depth - z0).min(SLICES as u64);
    let slices = outputs + p.mask_d - 1;
    let buffer = staged_w * staged_h;
    // The loads of staged slice `s`, element `e` of row `r` of the tile and its halo.
    let loader = |s: u64| {
        let z = (z0 + s) as i64 - p.front as i64;
        let slice_inside = z >= 0 && (z as u64) < p.depth;
        move |r: u32, e: u32| {
            let (r, e) = (u64::from(r), u64::from(e));
            if plane_inside && slice_inside {
                let at = (z as u64 * p.height + (first_y as u64 + r)) * row_elements
                    + first_e as u64
                    + e;
                // SAFETY: the slice, rows and elements staged lie inside the volume.
                unsafe { *input.add(at as usize) }
            } else {
                volume.at(volume.row(z, first_y + r as i64), first_e + e as i64)
            }
        }
    };
    let storer = |s: u64| {
        let base = (s % 2) * buffer;
        // SAFETY: row `r < staged_h`, element `e < staged_w`, buffer 0 or 1: inside the
        // reserved `2 * staged_h * staged_w` elements.
        move |r: u32, e: u32, value: T| unsafe {
            SharedTile::store_real(base + u64::from(r * row_words + e), value)
        }
    };
    // A thread's first `AHEAD` staged elements are loaded a slice ahead, into registers, so
    // that their loads overlap the multiply-adds of the slice before; any further ones (large
    // masks) are staged after.
    // None ahead in f64 with the sides read at run time, where one or two spilled registers.
    let ahead_count = if SIDE == 0 && size_of::<T>() == 8 {
        0
    } else {
        AHEAD
    };
    let first = Walk::new(tid as u32, THREADS as u32, row_words);
    let rest = Walk::new(
        tid as u32 + (ahead_count as u64 * THREADS) as u32,
        THREADS as u32,
        row_words,
    );
    first.stage(staged_h as u32, loader(0), storer(0));
    sync_threads();
    for s in 0..slices {
        let mut ahead = [(u32::MAX, 0u32, T::ZERO); AHEAD];
        if s + 1 < slices {
            let load = loader(s + 1);
            let mut walk = first;
            for slot in ahead.iter_mut().take(ahead_count) {
                if u64::from(walk.row) < staged_h {
                    *slot = (walk.row, walk.column, load(walk.row, walk.column));
                    walk.advance();
                }
            }
        }
        let base = (s % 2) * buffer;
        for (k, sum) in acc.iter_mut().enumerate() {
            // Staged slice `s` meets output slice `k` through mask slice `s - k`.
            let dz = s as i64 - k as i64;
            if dz < 0 || dz as u64 >= p.mask_d {
                continue;
            }
            let taps = dz as u64 * u64::from(mask_h * mask_w);
            let mut total = *sum;
            for dy in 0..mask_h {
                let row = base + u64::from((ty + dy) * row_words + tx);
                let tap_row = taps + u64::from(dy * mask_w);
                for dx in 0..mask_w {
                    // SAFETY: row `ty + dy < staged_h`, element `tx + dx * channels <
                    // staged_w` of this slice's buffer, stored before the last barrier.
                    let value = unsafe { SharedTile::load_real(row + u64::from(dx * channels)) };
                    total = T::fma(mask.tap(tap_row + u64::from(dx)), value, total);
                }
            }
            *sum = total;
        }
        if s + 1 < slices {
            let store = storer(s + 1);
            for &(r, e, value) in ahead.iter() {
                if r != u32::MAX {
                    store(r, e, value);
                }
            }
            rest.stage(staged_h as u32, loader(s + 1), store);
        }
        // One barrier a slice: the next slice's buffer is complete, and this one, which the
        // slice after next overwrites, has been read.
        sync_threads();
    }
    let e = e0 + u64::from(tx);
    let y = y0 + u64::from(ty);
    if e < row_elements && y < p.height {
        for (k, &sum) in acc.iter().enumerate() {
            let z = z0 + k as u64;
            if z < p.depth {
                let at = (z * p.height + y) * row_elements + e;
                // SAFETY: `z`, `y` and `e` lie inside the volume.
                unsafe { *output.add(at as usize) = sum.clamp_to(p.clamp_lo, p.clamp_hi) };
            }
        }
    }
}

/// Declares the 3D entry point `$name(input, mask, output, p)` for `$t` and mask slices of side
/// `$side` (0: any shape).
macro_rules! conv3d_entry_points {
    ($($t:ty, $side:literal => $name:ident);+ $(;)?) => {$(
        #[doc = concat!("The 3D design over `", stringify!($t), "`, mask slices of side ", $side, " (0: any).")]
        ///
        /// # Safety
        /// As `tiled`.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(
            input: *const $t,
            mask: *const $t,
            output: *mut $t,
            p: Conv3dParams,
        ) {
            // SAFETY: forwarded contract.
            unsafe { tiled::<$t, $side>(input, mask, output, &p) }
        }
    )+};
}

conv3d_entry_points!(
    f32, 0 => conv3d_tiled;
    f32, 3 => conv3d_tiled_m3;
    f32, 5 => conv3d_tiled_m5;
    f64, 0 => conv3d_tiled_f64;
    f64, 3 => conv3d_tiled_m3_f64;
    f64, 5 => conv3d_tiled_m5_f64;
);
