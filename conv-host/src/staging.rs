//! Buffers that stay with an engine between host calls: page-locked host memory for the copies
//! and device memory for the kernels, one set per pipeline slot, each slot with its own stream;
//! and the record of where a host call's time went.
//! A host call reuses them instead of allocating, and its copies run at the page-locked rate
//! (pageable copies run several times slower and cannot overlap).

use crate::element::Element;
use crate::error::{ConvError, DriverContext, Result};
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

/// Bytes one thread zeroes at a time in a new page-locked buffer.
const ZEROING_CHUNK_BYTES: usize = 1 << 20;

/// Page-locked host memory of `len` bytes, zeroed at allocation, seen as a slice of any
/// element type.
///
/// The pipeline hands a buffer to one asynchronous copy at a time and touches it on the host
/// only after the copy's stream has been synchronised (see [`Slot`]).
pub(crate) struct PinnedBuffer {
    pointer: NonNull<u8>,
    len: usize,
    context: Arc<CudaContext>,
}

// SAFETY: the buffer is plain memory owned by this value; the driver allocation may be used and
// freed from any thread once the context is bound (`Drop` binds it).
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared references only read the memory (`as_slice`).
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` page-locked bytes.
    ///
    /// # Errors
    /// [`ConvError::HostOutOfMemory`] when the driver cannot page-lock that much memory,
    /// [`ConvError::Driver`] for other driver errors.
    pub(crate) fn new(context: &Arc<CudaContext>, len: usize) -> Result<Self> {
        let bytes = len.max(1);
        context
            .bind_to_thread()
            .context(|| "binding the context for a page-locked allocation".into())?;
        // SAFETY: `bytes` is non-zero; flags 0 ask for plain page-locked memory (not
        // write-combined, since the host reads the download buffers).
        let raw = unsafe { cudarc::driver::result::malloc_host(bytes, 0) }.map_err(|error| {
            if error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                ConvError::HostOutOfMemory { requested: bytes }
            } else {
                ConvError::Driver {
                    context: format!("page-locked allocation of {bytes} bytes"),
                    source: error,
                }
            }
        })?;
        let pointer = NonNull::new(raw.cast::<u8>()).ok_or(ConvError::Driver {
            context: format!("page-locked allocation of {bytes} bytes"),
            source: DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY),
        })?;
        // SAFETY: the allocation holds `bytes` writable bytes, seen by nothing else yet; as
        // `MaybeUninit` they may be uninitialised.
        let memory = unsafe {
            std::slice::from_raw_parts_mut(pointer.as_ptr().cast::<MaybeUninit<u8>>(), bytes)
        };
        // On the thread pool: one thread writes a few GB/s, and staging is hundreds of MiB.
        memory
            .par_chunks_mut(ZEROING_CHUNK_BYTES)
            .for_each(|chunk| chunk.fill(MaybeUninit::new(0)));
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

    /// The buffer as whole elements of `T`.
    pub(crate) fn as_slice<T: Element>(&self) -> &[T] {
        // SAFETY: `len` initialised bytes (zeroed at allocation, then written as elements)
        // owned by this buffer, aligned for every element type (the driver aligns host
        // allocations to pages); every bit pattern is a valid value of every element type.
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
            // SAFETY: the pointer came from `malloc_host` and is freed once; no copy is in
            // flight (a slot's stream is synchronised before its buffers are dropped).
            let _ = unsafe { cudarc::driver::result::free_host(self.pointer.as_ptr().cast()) };
        }
    }
}

/// Sizes of a pipeline slot's buffers, in bytes: `host` for the page-locked buffers and the
/// conversion buffer (a band in the types it crosses the host link in), `device` for the
/// buffers the kernel reads and writes (a band in the kernels' type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotBytes {
    pub(crate) host: usize,
    pub(crate) device: usize,
}

impl SlotBytes {
    /// Buffers of one size.
    pub(crate) fn uniform(bytes: usize) -> Self {
        Self {
            host: bytes,
            device: bytes,
        }
    }

    fn holds(self, other: Self) -> bool {
        self.host >= other.host && self.device >= other.device
    }
}

/// One stage of the host pipeline: a stream, page-locked buffers for the band it uploads and
/// the band it downloads, the device buffers its kernel reads and writes, and, for element
/// types converted on the device, a device buffer the upload lands in and the download leaves
/// from (`scratch`), sized as [`SlotBytes`] says.
///
/// A slot's buffers are in use from the band's upload until its stream is synchronised; the
/// pipeline writes `upload` and reads `download` on the host only between those times.
pub(crate) struct Slot {
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) upload: PinnedBuffer,
    pub(crate) download: PinnedBuffer,
    pub(crate) input: CudaSlice<u8>,
    pub(crate) output: CudaSlice<u8>,
    pub(crate) scratch: Option<CudaSlice<u8>>,
}

impl Slot {
    fn new(context: &Arc<CudaContext>, bytes: SlotBytes, scratch: bool) -> Result<Self> {
        let stream = context
            .new_stream()
            .context(|| "creating a pipeline stream".into())?;
        let device = |bytes: usize, what: &str| -> Result<CudaSlice<u8>> {
            // SAFETY: the buffer is written by an upload or a kernel before any read of it.
            unsafe { stream.alloc::<u8>(bytes.max(1)) }
                .map_err(|error| memory_error(context, error, bytes, what))
        };
        let input = device(bytes.device, "pipeline input")?;
        let output = device(bytes.device, "pipeline output")?;
        let scratch = if scratch {
            Some(device(bytes.host, "pipeline conversion buffer")?)
        } else {
            None
        };
        Ok(Self {
            upload: PinnedBuffer::new(context, bytes.host)?,
            download: PinnedBuffer::new(context, bytes.host)?,
            input,
            output,
            scratch,
            stream,
        })
    }

    /// Bytes the slot's buffers hold.
    pub(crate) fn capacity(&self) -> SlotBytes {
        SlotBytes {
            host: self.upload.len(),
            device: self.input.len(),
        }
    }

    /// Device bytes of the slot's buffers.
    fn device_bytes(&self) -> usize {
        2 * self.input.len() + self.scratch.as_ref().map_or(0, CudaSlice::len)
    }
}

/// The reusable slots of an engine.
#[derive(Default)]
pub(crate) struct Staging {
    slots: Vec<Slot>,
}

impl Staging {
    /// Takes `count` slots of at least `bytes` bytes per buffer, with a conversion buffer if
    /// `scratch`, reusing the ones held where they fit (give them back with
    /// [`Staging::put_back`]).
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::HostOutOfMemory`], [`ConvError::Driver`]; the
    /// staging then holds no slots, and the engine stays usable.
    pub(crate) fn take(
        &mut self,
        context: &Arc<CudaContext>,
        count: usize,
        bytes: SlotBytes,
        scratch: bool,
    ) -> Result<Vec<Slot>> {
        let fits = self.slots.len() >= count
            && self
                .slots
                .iter()
                .all(|s| s.capacity().holds(bytes) && (s.scratch.is_some() || !scratch));
        if !fits {
            // Free the old buffers before asking for the new ones.
            self.release();
            let mut slots = Vec::with_capacity(count);
            for _ in 0..count {
                slots.push(Slot::new(context, bytes, scratch)?);
            }
            self.slots = slots;
        }
        let rest = self.slots.split_off(count);
        Ok(std::mem::replace(&mut self.slots, rest))
    }

    /// Returns slots taken with [`Staging::take`].
    pub(crate) fn put_back(&mut self, mut slots: Vec<Slot>) {
        slots.append(&mut self.slots);
        self.slots = slots;
    }

    /// Device bytes the held slots take.
    pub(crate) fn device_bytes(&self) -> usize {
        self.slots.iter().map(Slot::device_bytes).sum()
    }

    /// Frees every slot (their streams are idle: every call synchronises them before returning).
    pub(crate) fn release(&mut self) {
        self.slots.clear();
    }
}

/// Where a host call's time went, in milliseconds of wall time on the calling thread.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTimes {
    /// From the call's start to its first band: planning, the mask's upload, the staging.
    pub setup_ms: f32,
    /// Packing the first band, alone (later bands pack while earlier ones unpack).
    pub first_pack_ms: f32,
    /// Packing and unpacking bands, the two side by side on the thread pool.
    pub pack_unpack_ms: f32,
    /// Waiting for the GPU: copies and kernels not yet done when the host needed their band.
    pub wait_ms: f32,
    /// Unpacking the last band, alone.
    pub last_unpack_ms: f32,
    /// Bands the input was split into.
    pub bands: usize,
}

/// `9 band(s): setup 0.12, first pack 2.33, pack and unpack 15.14, waiting for the GPU 0.07,
/// last unpack 3.92 ms`.
impl std::fmt::Display for HostTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} band(s): setup {:.2}, first pack {:.2}, pack and unpack {:.2}, waiting for the \
             GPU {:.2}, last unpack {:.2} ms",
            self.bands,
            self.setup_ms,
            self.first_pack_ms,
            self.pack_unpack_ms,
            self.wait_ms,
            self.last_unpack_ms
        )
    }
}

/// A device allocation error as the library reports it.
pub(crate) fn memory_error(
    context: &Arc<CudaContext>,
    error: DriverError,
    requested: usize,
    what: &str,
) -> ConvError {
    if error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        let (free, total) = context.mem_get_info().unwrap_or((0, 0));
        ConvError::OutOfMemory {
            requested,
            free,
            total,
        }
    } else {
        ConvError::Driver {
            context: format!("device {what} of {requested} bytes"),
            source: error,
        }
    }
}
