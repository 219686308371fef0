//! Buffers that stay with an engine between host calls: page-locked host memory for the copies
//! and device memory for the kernels, one set per pipeline slot, each slot with its own stream;
//! and the record of where a host call's time went.
//! A host call reuses them instead of allocating, and its copies run at the page-locked rate
//! (pageable copies run several times slower and cannot overlap).

use crate::error::{ConvError, DriverContext, Result};
use crate::pinned::PinnedBuffer;
use cudarc::driver::sys::{CUevent_flags, CUresult};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, DriverError};
use std::sync::Arc;

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
    /// Recorded on `stream` once the band's `input` holds its rows (uploaded and converted):
    /// the next band, which copies the rows the two share from there, waits for it.
    pub(crate) input_ready: Option<CudaEvent>,
    /// Recorded on the next band's stream once it has copied those rows: this slot's next
    /// upload waits for it before overwriting them.
    pub(crate) input_read: Option<CudaEvent>,
    /// Recorded around the band's kernels (timing events), read once the stream is idle.
    pub(crate) timing: (CudaEvent, CudaEvent),
    /// Recorded on the lane's stream after the call's mask upload; the slots' streams wait
    /// for it before their first band.
    pub(crate) after_lane: CudaEvent,
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
        // A slot's events are made once and recorded again by every band: making and
        // destroying events takes a driver lock that calls from many threads contend for.
        let event = |flags| {
            context
                .new_event(flags)
                .context(|| "creating a pipeline event".into())
        };
        let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let timing = (event(timed)?, event(timed)?);
        let after_lane = event(None)?;
        Ok(Self {
            upload: PinnedBuffer::new(context, bytes.host)?,
            download: PinnedBuffer::new(context, bytes.host)?,
            input,
            output,
            scratch,
            stream,
            input_ready: None,
            input_read: None,
            timing,
            after_lane,
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
    /// Whether the staging holds `count` slots of at least `bytes` bytes per buffer, with a
    /// conversion buffer if `scratch`.
    pub(crate) fn holds(&self, count: usize, bytes: SlotBytes, scratch: bool) -> bool {
        self.slots.len() >= count
            && self
                .slots
                .iter()
                .all(|s| s.capacity().holds(bytes) && (s.scratch.is_some() || !scratch))
    }

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
        if !self.holds(count, bytes, scratch) {
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
    /// Whether the input and the output were copied in place ([`crate::PinnedArray`] views),
    /// not packed and unpacked.
    pub in_place: (bool, bool),
}

/// One line, the times to two decimals: `B band(s): setup S, first pack F, pack and unpack P,
/// waiting for the GPU W, last unpack L ms`.
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
        )?;
        match self.in_place {
            (false, false) => Ok(()),
            (input, output) => write!(f, "; copied in place: input {input}, output {output}"),
        }
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
