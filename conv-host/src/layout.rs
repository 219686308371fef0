//! Moving `ndarray` data of any layout to and from the flat buffers the kernels use.

use crate::cache::copy_streaming;
use crate::element::Element;
use crate::error::{ConvError, Result};
use ndarray::{Array, ArrayBase, ArrayViewMut, Data, Dimension, RawData};
use rayon::prelude::*;
use std::borrow::Cow;
use std::mem::MaybeUninit;

/// The elements in logical (row-major) order: borrowed when the array is already laid out so,
/// copied otherwise (strided, negative-stride, transposed views).
pub(crate) fn row_major<T: Element, S, D>(array: &ArrayBase<S, D>) -> Cow<'_, [T]>
where
    S: Data<Elem = T>,
    D: Dimension,
{
    match array.as_slice() {
        Some(slice) => Cow::Borrowed(slice),
        None => Cow::Owned(array.iter().copied().collect()),
    }
}

/// Copies `source` (any layout) into `destination` (as many elements), in logical order; a
/// contiguous source with non-temporal stores (`destination` is staging the host does not read).
pub(crate) fn copy_from_view<T: Element, S: Data<Elem = T>, D: Dimension>(
    destination: &mut [T],
    source: &ArrayBase<S, D>,
) {
    match source.as_slice() {
        Some(slice) => copy_streaming(destination, slice),
        None => destination
            .iter_mut()
            .zip(source.iter())
            .for_each(|(d, &v)| *d = v),
    }
}

/// Copies `source` (at least as many elements) into `destination` (any layout), in logical
/// order.
pub(crate) fn copy_into_view<T: Element, D: Dimension>(
    destination: &mut ArrayViewMut<'_, T, D>,
    source: &[T],
) {
    match destination.as_slice_mut() {
        Some(slice) => {
            let len = slice.len();
            copy_unpacked(slice, &source[..len]);
        }
        None => destination
            .iter_mut()
            .zip(source)
            .for_each(|(o, &v)| *o = v),
    }
}

/// Copies `source` into `destination` (of equal lengths), as unpacking a band does: plain
/// stores, as non-temporal ones gain nothing here (measured: PERFORMANCE.md, Approaches
/// measured and not kept).
pub(crate) fn copy_unpacked<T: Copy>(destination: &mut [T], source: &[T]) {
    destination.copy_from_slice(source);
}

/// Outputs up to this size are zeroed on the thread pool: the allocator would reuse freed
/// memory and zero it on one thread, which costs a small call more than zeroing on the pool
/// does. Larger ones come zeroed from fresh pages, which the first writes (on the thread pool)
/// fault in.
const POOL_ZEROING_AT_MOST_BYTES: usize = 16 << 20;

/// Bytes of one zeroing task.
const ZEROING_TASK_BYTES: usize = 256 << 10;

/// A zeroed array of `shape`, or [`ConvError::HostOutOfMemory`] where the allocator refuses it
/// (an output of a broadcast input of 2^40 elements, say) instead of aborting the process.
pub(crate) fn try_zeros<T: Element, D: Dimension>(shape: D) -> Result<Array<T, D>> {
    let len = shape.size_checked().ok_or(ConvError::HostOutOfMemory {
        requested: usize::MAX,
    })?;
    if len == 0 {
        return Ok(Array::default(shape));
    }
    let layout = std::alloc::Layout::array::<T>(len).map_err(|_| ConvError::HostOutOfMemory {
        requested: len.saturating_mul(size_of::<T>()),
    })?;
    let small = layout.size() <= POOL_ZEROING_AT_MOST_BYTES;
    // SAFETY: `layout` has a non-zero size (`len >= 1`).
    let pointer = unsafe {
        if small {
            std::alloc::alloc(layout)
        } else {
            std::alloc::alloc_zeroed(layout)
        }
    }
    .cast::<T>();
    if pointer.is_null() {
        return Err(ConvError::HostOutOfMemory {
            requested: layout.size(),
        });
    }
    if small {
        // SAFETY: the allocation holds `layout.size()` writable bytes, seen by nothing else;
        // as `MaybeUninit` they may be uninitialised.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(pointer.cast::<MaybeUninit<u8>>(), layout.size())
        };
        bytes
            .par_chunks_mut(ZEROING_TASK_BYTES)
            .for_each(|task| task.fill(MaybeUninit::new(0)));
    } else {
        advise_huge_pages(pointer.cast(), layout.size());
    }
    // SAFETY: `pointer` was allocated by the global allocator with the layout of `len` `T`,
    // which is the capacity given; zero bytes are `len` initialised zeros of every element
    // type.
    let values = unsafe { Vec::from_raw_parts(pointer, len, len) };
    Array::from_shape_vec(shape, values).map_err(|_| ConvError::HostOutOfMemory {
        requested: layout.size(),
    })
}

/// A new array of `shape` that `fill` writes: [`try_zeros`], then `fill` on a view of it.
pub(crate) fn try_filled<T: Element, D: Dimension>(
    shape: D,
    fill: impl FnOnce(ArrayViewMut<'_, T, D>) -> Result<()>,
) -> Result<Array<T, D>> {
    let mut output = try_zeros(shape)?;
    fill(output.view_mut())?;
    Ok(output)
}

/// Asks the kernel to back the 2 MiB-aligned part of a fresh allocation of `bytes` at
/// `pointer` with huge pages, where transparent huge pages are enabled on request: the first
/// writes to a large output then take one page fault per 2 MiB instead of per 4 KiB.
#[cfg(target_os = "linux")]
fn advise_huge_pages(pointer: *mut u8, bytes: usize) {
    const HUGE_PAGE: usize = 2 << 20;
    let start = (pointer as usize).next_multiple_of(HUGE_PAGE);
    let end = (pointer as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: `start..end` lies inside the allocation; MADV_HUGEPAGE only changes how the
        // kernel backs the range, never its contents. A failure (THP off) changes nothing.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_pointer: *mut u8, _bytes: usize) {}

/// Byte range `[first, last]` an array's elements occupy, or `None` when it is empty.
fn byte_span<S: RawData, D: Dimension>(array: &ArrayBase<S, D>) -> Option<(usize, usize)> {
    if array.is_empty() {
        return None;
    }
    let element = size_of::<S::Elem>() as isize;
    let base = array.as_ptr() as isize;
    let (mut low, mut high) = (base, base);
    for (&len, &stride) in array.shape().iter().zip(array.strides()) {
        let reach = (len as isize - 1) * stride * element;
        if reach < 0 {
            low += reach;
        } else {
            high += reach;
        }
    }
    Some((low as usize, high as usize + element as usize - 1))
}

/// Checks that `output` can receive the result for `input`: same shape, no shared memory.
pub(crate) fn check_output<S, O, D>(
    input: &ArrayBase<S, D>,
    output: &ArrayViewMut<'_, O, D>,
) -> Result<()>
where
    S: Data,
    D: Dimension,
{
    if input.shape() != output.shape() {
        return Err(ConvError::ShapeMismatch {
            expected: input.shape().to_vec(),
            actual: output.shape().to_vec(),
        });
    }
    if let (Some((a0, a1)), Some((b0, b1))) = (byte_span(input), byte_span(output))
        && a0 <= b1
        && b0 <= a1
    {
        return Err(ConvError::OverlappingOutput);
    }
    Ok(())
}

/// Runs `fill` on a row-major buffer for `output` and stores the result there: directly when
/// `output` is contiguous in row-major order, through a temporary otherwise.
#[cfg(feature = "bench")]
pub(crate) fn fill_output<D: Dimension>(
    mut output: ArrayViewMut<'_, f32, D>,
    fill: impl FnOnce(&mut [f32]) -> Result<()>,
) -> Result<()> {
    if let Some(slice) = output.as_slice_mut() {
        return fill(slice);
    }
    let mut buffer = vec![0.0f32; output.len()];
    fill(&mut buffer)?;
    output.iter_mut().zip(buffer).for_each(|(o, v)| *o = v);
    Ok(())
}

/// The image's rows (of `width * channels` elements, in logical order) copied into a buffer
/// whose rows start `pitch` elements apart; the padding is zero and never read.
#[cfg(feature = "bench")]
pub(crate) fn pack_pitched<S, D>(image: &ArrayBase<S, D>, pitch: usize) -> Vec<f32>
where
    S: Data<Elem = f32>,
    D: ndarray::RemoveAxis,
{
    let rows = image.len_of(ndarray::Axis(0));
    let mut packed = vec![0.0f32; rows * pitch];
    for (row, destination) in image.outer_iter().zip(packed.chunks_exact_mut(pitch)) {
        copy_from_view(&mut destination[..row.len()], &row);
    }
    packed
}

/// Copies the rows of a pitched buffer into `output`, row by row in logical order.
#[cfg(feature = "bench")]
pub(crate) fn unpack_pitched<D: ndarray::RemoveAxis>(
    packed: &[f32],
    pitch: usize,
    mut output: ArrayViewMut<'_, f32, D>,
) {
    for (mut row, source) in output.outer_iter_mut().zip(packed.chunks_exact(pitch)) {
        copy_into_view(&mut row, source);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, s};

    /// Rows copy both ways through contiguous and strided views.
    #[test]
    fn row_copies_follow_the_logical_order() {
        let a = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f32);
        let mut flat = [0.0f32; 4];
        copy_from_view(&mut flat, &a.row(1));
        assert_eq!(flat, [10.0, 11.0, 12.0, 13.0]);
        copy_from_view(&mut flat[..3], &a.column(2));
        assert_eq!(flat[..3], [2.0, 12.0, 22.0]);
        let mut b = Array2::<f32>::zeros((4, 3));
        let mut column = b.column_mut(1);
        copy_into_view(&mut column, &[1.0, 2.0, 3.0, 4.0, 99.0]);
        assert_eq!(b.column(1).to_vec(), [1.0, 2.0, 3.0, 4.0]);
        let mut reversed = b.slice_mut(s![.., ..;-1]);
        copy_into_view(&mut reversed.row_mut(0), &[7.0, 8.0, 9.0]);
        assert_eq!(b.row(0).to_vec(), [9.0, 8.0, 7.0]);
    }

    /// An output no allocator can give is an error, not an abort; small ones are zeros.
    #[test]
    fn outputs_are_allocated_fallibly() {
        assert!(matches!(
            try_zeros::<f32, _>(ndarray::Ix1(1 << 45)),
            Err(ConvError::HostOutOfMemory { requested }) if requested == 4 << 45
        ));
        assert!(matches!(
            try_zeros::<f32, _>(ndarray::Ix2(usize::MAX, 3)),
            Err(ConvError::HostOutOfMemory { .. })
        ));
        let zeros = try_zeros::<f32, _>(ndarray::Ix2(3, 5)).unwrap();
        assert!(zeros.iter().all(|&v| v == 0.0));
        assert_eq!(try_zeros::<u8, _>(ndarray::Ix1(0)).unwrap().len(), 0);
    }
}
