//! A band's copies straight between a page-locked host array ([`crate::PinnedArray`]) and its
//! device buffers: what the pipeline does instead of packing and unpacking where a host call's
//! input or output is such an array.

use crate::conv1d::reference::fold;
use crate::element::Element;
use crate::error::{DriverContext, Result};
use crate::options::BoundaryMode;
use crate::pinned_array::is_pinned;
use crate::pipeline::Band;
use cudarc::driver::sys::{self, CUdeviceptr, CUmemorytype};
use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut, DevicePtr, DevicePtrMut};
use ndarray::{ArrayBase, Dimension, RawData};
use std::ffi::c_void;

/// Rows of a page-locked, row-major host array that copies read or write in place: row `y`
/// (counted in the call's input) at address `base + (y - first_row) * row_bytes`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PinnedRows {
    base: usize,
    first_row: usize,
    row_bytes: usize,
}

impl PinnedRows {
    /// The rows of `array` (along axis 0, each the rest of the array; row 0 is the call's row
    /// `first_row`) where it is a row-major, non-empty view of a [`crate::PinnedArray`].
    pub(crate) fn of<S, D>(array: &ArrayBase<S, D>, first_row: usize) -> Option<Self>
    where
        S: RawData<Elem: Element>,
        D: Dimension,
    {
        let bytes = array.len() * size_of::<S::Elem>();
        let base = array.as_ptr() as usize;
        let pinned = bytes > 0 && array.is_standard_layout() && is_pinned(base, base + bytes - 1);
        pinned.then(|| Self {
            base,
            first_row,
            row_bytes: bytes / array.shape()[0],
        })
    }

    /// Address of row `y`.
    fn at(self, y: usize) -> usize {
        self.base + (y - self.first_row) * self.row_bytes
    }
}

/// A value of an element type as the `cuMemset` functions write it: its bytes, 1, 2 or 4 of
/// them (or 8 whose halves agree, as zero's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fill {
    word: u32,
    bytes: usize,
}

impl Fill {
    /// Zero bytes.
    pub(crate) const ZERO: Self = Self { word: 0, bytes: 4 };

    /// `value`'s bytes, where a `cuMemset` function can write them.
    pub(crate) fn of<T: Element>(value: T) -> Option<Self> {
        let mut bytes = [0u8; 8];
        // SAFETY: `value` is a plain number of `size_of::<T>() <= 8` bytes (every element
        // type), all of them initialised; copied out as bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&raw const value).cast::<u8>(),
                bytes.as_mut_ptr(),
                size_of::<T>().min(8),
            )
        };
        let [a, b, c, d, e, f, g, h] = bytes;
        let (low, high) = (
            u32::from_ne_bytes([a, b, c, d]),
            u32::from_ne_bytes([e, f, g, h]),
        );
        match size_of::<T>() {
            1 | 2 | 4 => Some(Self {
                word: low,
                bytes: size_of::<T>(),
            }),
            8 if low == high => Some(Self {
                word: low,
                bytes: 4,
            }),
            _ => None,
        }
    }
}

/// Enqueues on `stream` the upload of `band`'s buffer rows from `host` (the rows of an input
/// of `rows` rows) into `landing`, rows `pitch` bytes apart: the rows inside the input in one
/// copy, the rows past its ends folded by `mode` (runs of consecutive rows one copy each) or
/// set to `constant` (the mode's constant in the input's type).
///
/// # Safety
/// `host` describes rows of a live page-locked array that no one writes until `stream` is
/// synchronised; `landing` holds `band.buffer_rows() * pitch` bytes, `pitch >= row_bytes` and
/// a multiple of the constant's bytes.
pub(crate) unsafe fn upload(
    stream: &CudaStream,
    host: PinnedRows,
    (band, rows, mode, constant): (&Band, usize, BoundaryMode, Fill),
    landing: &mut CudaViewMut<'_, u8>,
    pitch: usize,
) -> Result<()> {
    let buffer_rows = band.buffer_rows();
    let first = band.first_buffer_row();
    let (device, _record) = landing.device_ptr_mut(stream);
    let row_at = |r: usize| device + (r * pitch) as CUdeviceptr;
    // Buffer rows `r` with `0 <= first + r < rows` are the input's own: one copy.
    let inside_start = (-first).clamp(0, buffer_rows as i64) as usize;
    let inside_end = (rows as i64 - first).clamp(inside_start as i64, buffer_rows as i64) as usize;
    if inside_end > inside_start {
        let y = (first + inside_start as i64) as usize;
        // SAFETY: input rows `y .. y + n` lie in `host`, buffer rows `inside_start ..
        // inside_end` in `landing` (caller).
        unsafe {
            copy_rows(
                stream,
                (host.at(y), host.row_bytes),
                (row_at(inside_start), pitch),
                (host.row_bytes, inside_end - inside_start),
                Direction::Upload,
            )?;
        }
    }
    // The rows past the input's ends (at most the mask's reach on either side).
    let ghost = |r: usize| fold(first + r as i64, rows, mode);
    for part in [0..inside_start, inside_end..buffer_rows] {
        let mut r = part.start;
        while r < part.end {
            let source = ghost(r);
            let mut run = 1;
            while r + run < part.end && ghost(r + run) == source.map(|y| y + run) {
                run += 1;
            }
            match source {
                // SAFETY: rows `y .. y + run` of the input lie in `host` (fold returns rows of
                // the input), buffer rows `r .. r + run` in `landing` (caller).
                Some(y) => unsafe {
                    copy_rows(
                        stream,
                        (host.at(y), host.row_bytes),
                        (row_at(r), pitch),
                        (host.row_bytes, run),
                        Direction::Upload,
                    )?
                },
                None => {
                    let (at, values) = (row_at(r), run * pitch / constant.bytes);
                    let (word, cu_stream) = (constant.word, stream.cu_stream());
                    // SAFETY: buffer rows `r .. r + run` lie in `landing`, `pitch` a multiple
                    // of the value's bytes (caller); used in `stream`'s order.
                    unsafe {
                        match constant.bytes {
                            1 => sys::cuMemsetD8Async(at, word as u8, values, cu_stream),
                            2 => sys::cuMemsetD16Async(at, word as u16, values, cu_stream),
                            _ => sys::cuMemsetD32Async(at, word, values, cu_stream),
                        }
                    }
                    .result()
                    .context(|| "setting the constant's rows".into())?;
                }
            }
            r += run;
        }
    }
    Ok(())
}

/// Enqueues on `stream` the download of `band`'s kept rows (buffer rows from `band.halo.0` on,
/// `pitch` bytes apart in `leaving`) into their rows of `host`.
///
/// # Safety
/// `host` describes rows of a live page-locked array, rows `band.output` among them, that no
/// one reads or writes until `stream` is synchronised; `leaving` holds the band's buffer rows.
pub(crate) unsafe fn download(
    stream: &CudaStream,
    host: PinnedRows,
    band: &Band,
    leaving: &CudaSlice<u8>,
    pitch: usize,
) -> Result<()> {
    let (device, _record) = leaving.device_ptr(stream);
    let first = device + (band.halo.0 * pitch) as CUdeviceptr;
    // SAFETY: as the caller promises.
    unsafe {
        copy_rows(
            stream,
            (host.at(band.output.start), host.row_bytes),
            (first, pitch),
            (host.row_bytes, band.output.len()),
            Direction::Download,
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Upload,
    Download,
}

/// Enqueues one copy of `height` rows of `width` bytes between host rows `host_pitch` bytes
/// apart and device rows `device_pitch` apart: a plain copy where both are contiguous.
///
/// # Safety
/// Both row sets are valid for the copy until `stream` is synchronised; the host rows are
/// page-locked.
unsafe fn copy_rows(
    stream: &CudaStream,
    (host, host_pitch): (usize, usize),
    (device, device_pitch): (CUdeviceptr, usize),
    (width, height): (usize, usize),
    direction: Direction,
) -> Result<()> {
    let cu_stream = stream.cu_stream();
    let upload = direction == Direction::Upload;
    let result = if host_pitch == width && device_pitch == width {
        let bytes = width * height;
        // SAFETY: as the caller promises: `bytes` contiguous bytes on each side.
        unsafe {
            if upload {
                sys::cuMemcpyHtoDAsync_v2(device, host as *const c_void, bytes, cu_stream)
            } else {
                sys::cuMemcpyDtoHAsync_v2(host as *mut c_void, device, bytes, cu_stream)
            }
        }
    } else {
        let (host_type, device_type) = (
            CUmemorytype::CU_MEMORYTYPE_HOST,
            CUmemorytype::CU_MEMORYTYPE_DEVICE,
        );
        let copy = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: if upload { host_type } else { device_type },
            srcHost: host as *const c_void,
            srcDevice: device,
            srcArray: std::ptr::null_mut(),
            srcPitch: if upload { host_pitch } else { device_pitch },
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: if upload { device_type } else { host_type },
            dstHost: host as *mut c_void,
            dstDevice: device,
            dstArray: std::ptr::null_mut(),
            dstPitch: if upload { device_pitch } else { host_pitch },
            WidthInBytes: width,
            Height: height,
        };
        // SAFETY: as the caller promises; the driver reads the side its memory type names.
        unsafe { sys::cuMemcpy2DAsync_v2(&copy, cu_stream) }
    };
    result.result().context(|| {
        let what = if upload { "uploading" } else { "downloading" };
        format!("{what} {height} rows of {width} bytes in place")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// Each element type's constant as `cuMemset` writes it: its own bytes, or the halves of an
    /// `f64` where they agree (zero); other `f64` values cannot be written.
    #[test]
    fn fills_hold_each_types_bytes() {
        let fill = |f: Option<Fill>| f.map(|f| (f.word, f.bytes));
        assert_eq!(fill(Fill::of(200u8)), Some((200, 1)));
        assert_eq!(fill(Fill::of(40_000u16)), Some((40_000, 2)));
        assert_eq!(fill(Fill::of(f16::from_f32(-0.75))), Some((0xba00, 2)));
        assert_eq!(fill(Fill::of(bf16::from_f32(-0.75))), Some((0xbf40, 2)));
        assert_eq!(fill(Fill::of(-0.75f32)), Some(((-0.75f32).to_bits(), 4)));
        assert_eq!(fill(Fill::of(0.0f64)), Some((0, 4)));
        assert_eq!(fill(Fill::of(-0.75f64)), None);
    }
}
