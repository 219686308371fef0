//! Host arrays in page-locked memory. The host calls of [`Ndimage`](crate::ndimage::Ndimage)
//! (the `_into` forms, on the pipeline) copy arrays of this kind straight
//! between their memory and the GPU: no packing into staging buffers before the upload and no
//! unpacking after the download, the host work that bounds calls on ordinary (pageable)
//! arrays.

use crate::element::Element;
use crate::engine::Engine;
use crate::error::Result;
use crate::pinned::PinnedBuffer;
use ndarray::{ArrayView, ArrayViewMut, Dimension, IntoDimension};
use std::marker::PhantomData;
use std::sync::Mutex;

/// An owned, row-major, zero-initialised host array in page-locked memory that every GPU of
/// the process can copy from and to ([`Engine::alloc_pinned`]). Work with it through
/// [`PinnedArray::view`] and [`PinnedArray::view_mut`]: any host call given such a view
/// (row-major) copies it in place; an `f64` input under a `Constant` mode other than zero is
/// packed (`cuMemset` cannot write its rows past the edges).
///
/// Page-locked memory is a limited resource of the host: allocate these for the arrays that
/// cross the host link often, and reuse them.
///
/// ```no_run
/// use conv_host::{masks, Engine, ndimage::NdOptions};
/// let engine = Engine::new()?;
/// let mut image = engine.alloc_pinned::<f32, _>((4096, 4096))?;
/// let mut blurred = engine.alloc_pinned::<f32, _>((4096, 4096))?;
/// image.view_mut().fill(1.0); // or read into it
/// let mask = masks::box2d(5, 5)?;
/// let options = NdOptions::default();
/// engine.ndimage().correlate_into(&image.view(), &mask, &options, blurred.view_mut())?;
/// # Ok::<(), conv_host::ConvError>(())
/// ```
pub struct PinnedArray<T: Element, D: Dimension> {
    buffer: PinnedBuffer,
    dim: D,
    elements: PhantomData<T>,
}

/// Byte ranges `[start, end)` of the live [`PinnedArray`]s.
static PINNED_RANGES: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// The registry of live arrays, whatever a panicking holder left (its ranges are whole).
fn ranges() -> std::sync::MutexGuard<'static, Vec<(usize, usize)>> {
    PINNED_RANGES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether the bytes `[first, last]` lie in one live [`PinnedArray`]: page-locked memory that
/// copies may read and write in place.
pub(crate) fn is_pinned(first: usize, last: usize) -> bool {
    ranges()
        .iter()
        .any(|&(start, end)| start <= first && last < end)
}

impl Engine {
    /// A zeroed host array of `shape` in page-locked memory, which host calls copy in place
    /// (see [`PinnedArray`]).
    ///
    /// # Errors
    /// [`crate::ConvError::HostOutOfMemory`] when the host cannot map or lock that much memory
    /// (or the size overflows), [`crate::ConvError::Driver`] for other driver errors.
    pub fn alloc_pinned<T: Element, Sh: IntoDimension>(
        &self,
        shape: Sh,
    ) -> Result<PinnedArray<T, Sh::Dim>> {
        let dim = shape.into_dimension();
        let bytes = dim
            .size_checked()
            .and_then(|len| len.checked_mul(size_of::<T>()))
            .ok_or(crate::ConvError::HostOutOfMemory {
                requested: usize::MAX,
            })?;
        let buffer = PinnedBuffer::portable(&self.context, bytes)?;
        let start = buffer.address();
        ranges().push((start, start + bytes.max(1)));
        Ok(PinnedArray {
            buffer,
            dim,
            elements: PhantomData,
        })
    }
}

impl<T: Element, D: Dimension> PinnedArray<T, D> {
    /// The array's shape.
    pub fn shape(&self) -> &[usize] {
        self.dim.slice()
    }

    /// A view of the array.
    pub fn view(&self) -> ArrayView<'_, T, D> {
        let values = self.buffer.as_slice::<T>();
        // SAFETY: the buffer holds the shape's elements of `T` (its length is their bytes, or 1
        // for none), initialised and page-aligned, in row-major order; the view borrows `self`.
        unsafe { ArrayView::from_shape_ptr(self.dim.clone(), values.as_ptr()) }
    }

    /// A view of the array, to write.
    pub fn view_mut(&mut self) -> ArrayViewMut<'_, T, D> {
        let values = self.buffer.as_mut_slice::<T>();
        // SAFETY: as `view`, and `&mut self` makes the borrow exclusive.
        unsafe { ArrayViewMut::from_shape_ptr(self.dim.clone(), values.as_mut_ptr()) }
    }
}

impl<T: Element, D: Dimension> Drop for PinnedArray<T, D> {
    fn drop(&mut self) {
        let start = self.buffer.address();
        ranges().retain(|&(s, _)| s != start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A span is page-locked only where it lies wholly in one live array.
    #[test]
    fn spans_are_pinned_inside_one_live_array() {
        // Addresses no allocation of this process can take (the first page is never mapped).
        let (start, end) = (16, 48);
        ranges().push((start, end));
        assert!(is_pinned(16, 47));
        assert!(is_pinned(20, 30));
        assert!(!is_pinned(15, 20));
        assert!(!is_pinned(40, 48));
        ranges().retain(|&(s, _)| s != start);
        assert!(!is_pinned(20, 30));
    }
}
