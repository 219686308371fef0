//! Page-locked host memory: the staging buffers the copy engines read and write at full speed.
//!
//! On Linux the pages are the process's own, mapped with transparent huge pages where the
//! kernel offers them, faulted in on the thread pool and then registered with the driver,
//! which allocates and frees them faster than the driver's own allocator (measured:
//! PERFORMANCE.md, Host -> host). Elsewhere the driver allocates them.

use crate::element::Element;
use crate::error::{ConvError, DriverContext, Result};
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, DriverError};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes one thread zeroes at a time in a new buffer.
const ZEROING_TASK_BYTES: usize = 1 << 20;

/// Page-locked host memory of `len` bytes, zeroed at allocation, seen as a slice of any
/// element type.
///
/// The pipeline hands a buffer to one asynchronous copy at a time and touches it on the host
/// only after the copy's stream has been synchronised (see `staging::Slot`).
pub(crate) struct PinnedBuffer {
    pointer: NonNull<u8>,
    len: usize,
    context: Arc<CudaContext>,
}

// SAFETY: the buffer is plain memory owned by this value; it may be used and freed from any
// thread once the context is bound (`Drop` binds it).
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references only read the memory (`as_slice`).
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` page-locked bytes.
    ///
    /// # Errors
    /// [`ConvError::HostOutOfMemory`] when the host cannot map or the driver cannot page-lock
    /// that much memory, [`ConvError::Driver`] for other driver errors.
    pub(crate) fn new(context: &Arc<CudaContext>, len: usize) -> Result<Self> {
        Self::with_flags(context, len, 0)
    }

    /// Allocates `len` page-locked bytes that every context of the process may copy from and
    /// to (`CU_MEMHOSTREGISTER_PORTABLE`): host arrays that engines of several GPUs read.
    ///
    /// # Errors
    /// As [`PinnedBuffer::new`].
    pub(crate) fn portable(context: &Arc<CudaContext>, len: usize) -> Result<Self> {
        Self::with_flags(
            context,
            len,
            cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE,
        )
    }

    fn with_flags(context: &Arc<CudaContext>, len: usize, flags: u32) -> Result<Self> {
        let bytes = len.max(1);
        context
            .bind_to_thread()
            .context(|| "binding the context for a page-locked allocation".into())?;
        let pointer = allocate(bytes, flags)?;
        Ok(Self {
            pointer,
            len,
            context: context.clone(),
        })
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Address of the first byte.
    pub(crate) fn address(&self) -> usize {
        self.pointer.as_ptr() as usize
    }

    /// The buffer as whole elements of `T`.
    pub(crate) fn as_slice<T: Element>(&self) -> &[T] {
        // SAFETY: `len` initialised bytes (zeroed at allocation, then written as elements)
        // owned by this buffer, aligned for every element type (allocations are whole pages);
        // every bit pattern is a valid value of every element type.
        unsafe {
            std::slice::from_raw_parts(self.pointer.as_ptr().cast(), self.len / size_of::<T>())
        }
    }

    /// The buffer as whole elements of `T`, to write.
    pub(crate) fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        // SAFETY: as `as_slice`, and `&mut self` makes the borrow exclusive.
        unsafe {
            std::slice::from_raw_parts_mut(self.pointer.as_ptr().cast(), self.len / size_of::<T>())
        }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // Errors cannot be reported from here; a failed free leaks the pages, nothing worse.
        if self.context.bind_to_thread().is_ok() {
            // SAFETY: the buffer came from `allocate` with this size and is freed once; no
            // copy is in flight (a slot's stream is synchronised before its buffers drop).
            unsafe { free(self.pointer, self.len.max(1)) };
        }
    }
}

/// Writes zeros over `bytes` fresh bytes at `pointer` on the thread pool (staging is hundreds
/// of MiB, more than one thread writes quickly), faulting the pages in.
///
/// # Safety
/// `pointer` must address `bytes` writable bytes that nothing else uses.
unsafe fn zero(pointer: NonNull<u8>, bytes: usize) {
    // SAFETY: as the caller promises; as `MaybeUninit` the bytes may be uninitialised.
    let memory = unsafe {
        std::slice::from_raw_parts_mut(pointer.as_ptr().cast::<MaybeUninit<u8>>(), bytes)
    };
    memory
        .par_chunks_mut(ZEROING_TASK_BYTES)
        .for_each(|task| task.fill(MaybeUninit::new(0)));
}

/// The error of a failed page-locking of `bytes`.
fn lock_error(error: DriverError, bytes: usize) -> ConvError {
    if error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        ConvError::HostOutOfMemory { requested: bytes }
    } else {
        ConvError::Driver {
            context: format!("page-locked allocation of {bytes} bytes"),
            source: error,
        }
    }
}

/// `bytes` (non-zero) of zeroed memory mapped by the process and registered with the driver
/// (the current context's) with the registration `flags`.
#[cfg(target_os = "linux")]
fn allocate(bytes: usize, flags: u32) -> Result<NonNull<u8>> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    let pointer = NonNull::new(raw.cast::<u8>())
        .filter(|_| raw != libc::MAP_FAILED)
        .ok_or(ConvError::HostOutOfMemory { requested: bytes })?;
    // SAFETY: the range is the mapping just made. The advice only changes how the kernel backs
    // it (2 MiB pages where transparent huge pages are on request); a failure changes nothing.
    unsafe { libc::madvise(raw, bytes, libc::MADV_HUGEPAGE) };
    // SAFETY: the mapping holds `bytes` writable bytes that nothing else knows of.
    unsafe { zero(pointer, bytes) };
    // SAFETY: the range is mapped, writable and not registered yet; flags 0 register it for
    // the current context as plain page-locked memory, `PORTABLE` for every context.
    let registered = unsafe { cudarc::driver::sys::cuMemHostRegister_v2(raw, bytes, flags) };
    if registered != CUresult::CUDA_SUCCESS {
        // SAFETY: the mapping made above, used by nothing else.
        unsafe { libc::munmap(raw, bytes) };
        return Err(lock_error(DriverError(registered), bytes));
    }
    Ok(pointer)
}

/// Unregisters and unmaps a buffer of [`allocate`].
///
/// # Safety
/// `pointer` and `bytes` must be an allocation of [`allocate`], freed once, with no copy in
/// flight.
#[cfg(target_os = "linux")]
unsafe fn free(pointer: NonNull<u8>, bytes: usize) {
    let raw = pointer.as_ptr().cast::<libc::c_void>();
    // SAFETY: as the caller promises; the pages must leave the driver before they are unmapped.
    unsafe {
        cudarc::driver::sys::cuMemHostUnregister(raw);
        libc::munmap(raw, bytes);
    }
}

/// `bytes` (non-zero) of zeroed page-locked memory from the driver (the current context's, or
/// every context's with `PORTABLE` in `flags`).
#[cfg(not(target_os = "linux"))]
fn allocate(bytes: usize, flags: u32) -> Result<NonNull<u8>> {
    // SAFETY: `bytes` is non-zero; the flags ask for plain page-locked memory (not
    // write-combined, since the host reads the download buffers), portable or not.
    let raw = unsafe { cudarc::driver::result::malloc_host(bytes, flags) }
        .map_err(|error| lock_error(error, bytes))?;
    let pointer = NonNull::new(raw.cast::<u8>())
        .ok_or_else(|| lock_error(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY), bytes))?;
    // SAFETY: the allocation holds `bytes` writable bytes that nothing else knows of.
    unsafe { zero(pointer, bytes) };
    Ok(pointer)
}

/// Frees a buffer of [`allocate`].
///
/// # Safety
/// As the Linux `free`.
#[cfg(not(target_os = "linux"))]
unsafe fn free(pointer: NonNull<u8>, _bytes: usize) {
    // SAFETY: as the caller promises.
    let _ = unsafe { cudarc::driver::result::free_host(pointer.as_ptr().cast()) };
}
