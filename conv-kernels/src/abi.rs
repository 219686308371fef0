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

/// Threads per block of the register-tiled 1D kernels.
pub const REGISTER_THREADS_1D: u32 = 256;
/// Consecutive outputs each thread of a register-tiled 1D kernel computes.
pub const REGISTER_OUTPUTS_1D: u32 = 4;

/// Block of the register-tiled 2D kernels: threads along a row (elements) and down the rows.
pub const REGISTER_BLOCK: (u32, u32) = (32, 8);
/// Output rows each thread of a register-tiled 2D kernel computes (its accumulators).
pub const REGISTER_ROWS: u32 = 8;
/// Square mask sizes and channel counts with a register-tiled 2D kernel
/// (`conv2d_register_m{size}_c{channels}`).
pub const REGISTER_MASKS: [u32; 6] = [3, 5, 7, 9, 15, 31];
/// See [`REGISTER_MASKS`].
pub const REGISTER_CHANNELS: [u32; 3] = [1, 3, 4];

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
