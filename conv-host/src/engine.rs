//! The CUDA engine: context, lanes (a stream, the kernels' modules and the staging each) and
//! the sticky-fault record of each device.

use crate::device::{DeviceInfo, device_info};
use crate::error::{ConvError, DriverContext, Result};
use crate::registry::KernelId;
use crate::staging::{HostTimes, Staging};
use cudarc::driver::sys::{CUfunction_attribute, CUresult};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, DriverError};
use cudarc::nvrtc::Ptx;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// A CUDA context on one device, its convolution kernels, and the lanes its calls run on.
///
/// Create it once and reuse it: creation loads the driver and creates the context; each kernel
/// is JIT-compiled from its PTX the first time an operation launches it (a fraction of a second
/// per kernel; the driver caches the result on disk, so later runs of the program load it in
/// milliseconds). Every operation takes `&self`.
///
/// # Thread safety
/// `Engine` is `Send + Sync`. Host calls from several threads run at the same time, each on a
/// lane of its own (up to one lane per core, at most [`MAX_LANES`]; a call waits for a lane
/// only when that many run): a lane is a stream, its own load of the kernels' modules, whose
/// constant-memory masks no other lane rewrites, and its own page-locked and device staging.
/// Calls on [`DeviceArray`](crate::DeviceArray)s run on the first lane, in the order they are
/// made, so that chains of them need no synchronisation.
pub struct Engine {
    pub(crate) info: DeviceInfo,
    /// The first lane's stream: device arrays are allocated, filled and read on it.
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) context: Arc<CudaContext>,
    lanes: Box<[OnceLock<Lane>]>,
    /// The lane a host call that finds every lane busy waits for next.
    next_lane: AtomicUsize,
    /// Sessions open now (calls holding a lane).
    pub(crate) sessions: AtomicUsize,
    memory_limit: AtomicUsize,
    pub(crate) last_kernel_ms: Mutex<Option<f32>>,
    last_host_times: Mutex<Option<HostTimes>>,
    /// The events that order the first lane with callers' streams
    /// ([`Engine::wait_for_stream`], [`Engine::signal_stream`]), made on first use and reused.
    pub(crate) handoff: Mutex<Option<Handoff>>,
}

/// Two reusable events: one recorded on a caller's stream for the engine to wait for, one
/// recorded on the engine's stream for a caller's to wait for. A wait takes the event's state
/// when it is enqueued, so recording either again afterwards does not disturb it.
pub(crate) struct Handoff {
    pub(crate) caller_done: cudarc::driver::CudaEvent,
    pub(crate) engine_done: cudarc::driver::CudaEvent,
}

/// Most lanes an engine opens: more calls submitting at once contend in the driver and lose
/// more than they overlap (measured: PERFORMANCE.md, N-D host calls and threads).
pub const MAX_LANES: usize = 8;

/// One lane of an engine: a stream, the kernels' modules loaded for it (each module's
/// constant memory is the lane's own), and the staging of the host calls it runs.
pub(crate) struct Lane {
    pub(crate) stream: Arc<CudaStream>,
    kernels: HashMap<KernelId, OnceLock<LoadedKernel>>,
    staging: Mutex<Staging>,
    /// A thread of the lane's own for its host copies, started on first use (`None` where
    /// the system refused it).
    copier: OnceLock<Option<rayon::ThreadPool>>,
}

impl Lane {
    fn new(stream: Arc<CudaStream>) -> Self {
        let kernels = crate::kernels::entries()
            .iter()
            .map(|entry| (entry.id, OnceLock::new()))
            .collect();
        Self {
            stream,
            kernels,
            staging: Mutex::new(Staging::default()),
            copier: OnceLock::new(),
        }
    }

    /// The lane's copy thread: while every lane runs a call, a call packs and unpacks its
    /// bands on it, each call on one thread, instead of splitting every call's copies over the
    /// shared thread pool, whose tasks the calls would then contend for (measured:
    /// PERFORMANCE.md, N-D host calls and threads).
    pub(crate) fn copier(&self) -> Option<&rayon::ThreadPool> {
        self.copier
            .get_or_init(|| rayon::ThreadPoolBuilder::new().num_threads(1).build().ok())
            .as_ref()
    }

    /// The kernel `kernel` of this lane, its module loaded (and JIT-compiled by the driver, or
    /// taken from its cache) on first use.
    pub(crate) fn kernel(&self, engine: &Engine, kernel: KernelId) -> Result<&LoadedKernel> {
        let missing = || ConvError::InvalidLaunch {
            kernel: kernel.entry_point(),
            reason: format!("the kernels' PTX has no kernel {kernel:?}"),
        };
        let slot = self.kernels.get(&kernel).ok_or_else(missing)?;
        if let Some(loaded) = slot.get() {
            return Ok(loaded);
        }
        let source = crate::kernels::module_source(kernel).ok_or_else(missing)?;
        let module = engine
            .context
            .load_module(Ptx::from_src(source))
            .context(|| format!("loading the PTX module of kernel `{kernel}`"))?;
        let function = module
            .load_function(kernel.entry_point())
            .context(|| format!("loading kernel `{kernel}`"))?;
        // Tiled kernels size their shared memory at launch; allow up to the device's opt-in
        // limit instead of the default 48 KiB.
        function
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                engine.info.max_shared_memory_per_block as i32,
            )
            .context(|| format!("raising the shared-memory limit of `{kernel}`"))?;
        // A lane runs one call at a time, so no other thread loads the same kernel now; were
        // one to, the first module stored would serve both.
        Ok(slot.get_or_init(|| LoadedKernel { module, function }))
    }
}

/// A kernel's module, loaded on first use, and the kernel in it.
pub(crate) struct LoadedKernel {
    pub(crate) module: Arc<CudaModule>,
    pub(crate) function: CudaFunction,
}

/// Sticky faults by device ordinal. Engines of one process share the device's primary context,
/// so a fault under one engine leaves every engine of that device unusable.
static FAULTS: Mutex<BTreeMap<usize, String>> = Mutex::new(BTreeMap::new());

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("device", &self.info)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine on device 0.
    ///
    /// # Errors
    /// [`ConvError::NoDriver`] without an NVIDIA driver, [`ConvError::NoDevice`] without a GPU.
    pub fn new() -> Result<Self> {
        Self::with_device(0)
    }

    /// An engine on device `ordinal`.
    ///
    /// # Errors
    /// As [`Engine::new`].
    pub fn with_device(ordinal: usize) -> Result<Self> {
        // SAFETY: only probes whether the driver library can be opened; cudarc panics on any
        // driver call without one, so nothing else may be called before this check.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(ConvError::NoDriver);
        }
        if let Some(cause) = FAULTS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&ordinal)
        {
            return Err(ConvError::ContextLost {
                cause: cause.clone(),
            });
        }
        let context = CudaContext::new(ordinal).map_err(|e| ConvError::NoDevice {
            ordinal,
            reason: e.to_string(),
        })?;
        let info = device_info(&context)?;
        keep_pool_memory(&context);
        let stream = context
            .new_stream()
            .context(|| "creating a stream".into())?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let lanes: Box<[OnceLock<Lane>]> = (0..cores.clamp(1, MAX_LANES))
            .map(|_| OnceLock::new())
            .collect();
        let _ = lanes[0].set(Lane::new(stream.clone()));
        Ok(Self {
            info,
            stream,
            context,
            lanes,
            next_lane: AtomicUsize::new(0),
            sessions: AtomicUsize::new(0),
            memory_limit: AtomicUsize::new(usize::MAX),
            last_kernel_ms: Mutex::new(None),
            last_host_times: Mutex::new(None),
            handoff: Mutex::new(None),
        })
    }

    /// The device this engine runs on.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// Where the most recent host call's time went (packing, waiting for the GPU, unpacking),
    /// or `None` before the first one.
    pub fn last_host_times(&self) -> Option<HostTimes> {
        *self
            .last_host_times
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remembers `times` as the most recent host call's.
    pub(crate) fn record_host_times(&self, times: HostTimes) {
        *self
            .last_host_times
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(times);
    }

    /// Caps the device memory this engine's host calls may hold at `bytes` (`None`: as much as
    /// the device has free), shared evenly among the lanes open. Inputs whose buffers do not
    /// fit run band by band (rows with their halos in 2D and N-D, chunks with halos in 1D); a
    /// band always takes at least one output row (or element) and the mask's halo, so a cap
    /// below that is an [`ConvError::OutOfMemory`]. Frees the staging buffers held so far.
    pub fn set_device_memory_limit(&self, bytes: Option<usize>) {
        self.memory_limit
            .store(bytes.unwrap_or(usize::MAX), Ordering::Relaxed);
        for lane in self.lanes.iter().filter_map(OnceLock::get) {
            lane.staging
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .release();
        }
    }

    /// The cap [`Engine::set_device_memory_limit`] set, if any.
    pub fn device_memory_limit(&self) -> Option<usize> {
        let limit = self.memory_limit.load(Ordering::Relaxed);
        (limit != usize::MAX).then_some(limit)
    }

    /// GPU time, in milliseconds, of the kernels of the most recent operation on this engine
    /// (all its launches; transfers excluded), measured with CUDA events. `None` before the
    /// first operation, or when the most recent one launched no kernel.
    pub fn last_kernel_time_ms(&self) -> Option<f32> {
        *self
            .last_kernel_ms
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fails early, before any host-side copy, when the buffers of a call cannot fit in the
    /// device's free memory.
    #[cfg(feature = "bench")]
    pub(crate) fn ensure_free_memory(&self, bytes: usize) -> Result<()> {
        self.check_fault()?;
        self.check_free_memory(bytes)
    }

    /// [`ConvError::OutOfMemory`] if `bytes` exceed the device's free memory.
    #[cfg(feature = "bench")]
    pub(crate) fn check_free_memory(&self, bytes: usize) -> Result<()> {
        let (free, total) = self
            .context
            .mem_get_info()
            .context(|| "querying free memory".into())?;
        if bytes > free {
            return Err(ConvError::OutOfMemory {
                requested: bytes,
                free,
                total,
            });
        }
        Ok(())
    }

    /// [`ConvError::ContextLost`] if a kernel faulted earlier on this engine's device.
    fn check_fault(&self) -> Result<()> {
        let faults = FAULTS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match faults.get(&self.info.ordinal) {
            Some(cause) => Err(ConvError::ContextLost {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Exclusive use of the first lane (device arrays' stream), its constant-memory masks and
    /// staging for one call.
    pub(crate) fn lock_staging(&self) -> Result<(&Lane, MutexGuard<'_, Staging>)> {
        self.check_fault()?;
        let lane = self.lane(0)?;
        Ok((lane, lock(&lane.staging)))
    }

    /// Exclusive use of a free lane for one host call: the first one idle, else a new one while
    /// fewer than the engine's most are open, else the next in turn, waited for.
    pub(crate) fn lock_free_lane(&self) -> Result<(&Lane, MutexGuard<'_, Staging>)> {
        self.check_fault()?;
        for index in 0..self.lanes.len() {
            let lane = self.lane(index)?;
            match lane.staging.try_lock() {
                Ok(guard) => return Ok((lane, guard)),
                // A panic elsewhere while holding the lock leaves no state behind that needs
                // repair.
                Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                    return Ok((lane, poisoned.into_inner()));
                }
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        let index = self.next_lane.fetch_add(1, Ordering::Relaxed) % self.lanes.len();
        let lane = self.lane(index)?;
        Ok((lane, lock(&lane.staging)))
    }

    /// Lanes the engine may open.
    pub(crate) fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    /// Lanes opened so far: an engine's memory cap is shared among them.
    pub(crate) fn open_lanes(&self) -> usize {
        self.lanes
            .iter()
            .filter(|lane| lane.get().is_some())
            .count()
            .max(1)
    }

    /// Lane `index`, opened (its stream created) on first use.
    fn lane(&self, index: usize) -> Result<&Lane> {
        let slot = &self.lanes[index];
        if let Some(lane) = slot.get() {
            return Ok(lane);
        }
        let stream = self
            .context
            .new_stream()
            .context(|| "creating a lane's stream".into())?;
        // Another thread may have opened it meanwhile: the first stored serves both.
        Ok(slot.get_or_init(|| Lane::new(stream)))
    }
}

/// `mutex` locked; a panic elsewhere while holding it leaves no state behind that needs repair.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Engine {
    /// Remembers a fault that the driver reports as sticky, so later calls say what happened
    /// instead of returning unrelated-looking driver errors.
    pub(crate) fn record_fault(&self, error: DriverError, context: String) -> ConvError {
        use CUresult::*;
        let sticky = matches!(
            error.0,
            CUDA_ERROR_ILLEGAL_ADDRESS
                | CUDA_ERROR_LAUNCH_FAILED
                | CUDA_ERROR_ILLEGAL_INSTRUCTION
                | CUDA_ERROR_MISALIGNED_ADDRESS
                | CUDA_ERROR_INVALID_ADDRESS_SPACE
                | CUDA_ERROR_INVALID_PC
                | CUDA_ERROR_HARDWARE_STACK_ERROR
                | CUDA_ERROR_ASSERT
                | CUDA_ERROR_LAUNCH_TIMEOUT
        );
        if sticky {
            let mut faults = FAULTS
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            faults
                .entry(self.info.ordinal)
                .or_insert_with(|| format!("{context}: {error}"));
        }
        ConvError::Driver {
            context,
            source: error,
        }
    }
}

/// Keeps the device's stream-ordered memory pool (which `cudarc` allocates from) from returning
/// freed memory to the driver at each synchronisation, so device arrays and staging buffers of
/// a recurring size are reused rather than allocated again. Best effort: a device without
/// memory pools allocates as before.
fn keep_pool_memory(context: &Arc<CudaContext>) {
    use cudarc::driver::sys::{
        CUmemPool_attribute, CUmemoryPool, cuDeviceGetDefaultMemPool, cuMemPoolSetAttribute,
    };
    if context.bind_to_thread().is_err() {
        return;
    }
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // SAFETY: `pool` is a valid out-pointer; the device handle comes from the live context.
    let found = unsafe { cuDeviceGetDefaultMemPool(&mut pool, context.cu_device()) };
    if found.result().is_ok() && !pool.is_null() {
        let mut threshold = u64::MAX;
        // SAFETY: the release threshold attribute takes a pointer to a u64, which `threshold`
        // is, alive for the call.
        let _ = unsafe {
            cuMemPoolSetAttribute(
                pool,
                CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast(),
            )
        };
    }
}
