//! The CUDA engine: context, stream, device limits and the kernels' modules, created once and
//! shared.

use crate::abi::{MASK_CAPACITY, SM_COPY_QUADS_PER_THREAD, SM_COPY_THREADS};
use crate::error::{ConvError, DriverContext, Result};
use crate::plan::LaunchPlan;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUfunction_attribute, CUresult};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr,
    DriverError, LaunchArgs, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// What the library needs to know about the GPU it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Most threads one block may have.
    pub max_threads_per_block: u32,
    /// Most shared memory one block may use, in bytes (the opt-in limit, above the 48 KiB default).
    pub max_shared_memory_per_block: u32,
    /// Most threads along a block's x and y axes.
    pub max_block_dim: (u32, u32),
    /// Most blocks along a grid's x and y axes.
    pub max_grid_dim: (u32, u32),
    /// Number of streaming multiprocessors.
    pub multiprocessor_count: u32,
    /// Peak SM clock in kHz.
    pub clock_rate_khz: u32,
    /// Peak memory clock in kHz (0 where the driver does not say).
    pub memory_clock_rate_khz: u32,
    /// Width of the memory bus in bits (0 where the driver does not say).
    pub memory_bus_width_bits: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
}

impl DeviceInfo {
    /// Peak device-memory bandwidth in bytes per second, from the memory clock and bus width
    /// (two transfers per clock): 3.35e12 for an H100 SXM, 4.81e12 for an H200. What a kernel
    /// reaches is less: the benchmark measures it (`bench`'s copy roofline).
    pub fn peak_memory_bandwidth(&self) -> f64 {
        2.0 * f64::from(self.memory_clock_rate_khz) * 1e3 * f64::from(self.memory_bus_width_bits)
            / 8.0
    }
}

/// A CUDA context on one device, its convolution kernels, and one stream.
///
/// Create it once and reuse it: creation loads the driver and creates the context; each kernel
/// is JIT-compiled from its PTX the first time an operation launches it (a fraction of a second
/// per kernel; the driver caches the result on disk, so later runs of the program load it in
/// milliseconds). Every operation takes `&self`.
///
/// # Thread safety
/// `Engine` is `Send + Sync`. Calls from several threads are safe and are serialised on the
/// engine's stream: a call holds the engine from its first upload to its last download, so the
/// constant-memory mask one call uploads is never rewritten while that call's kernel reads it.
/// For parallel GPU work from several threads, create one engine per thread.
pub struct Engine {
    info: DeviceInfo,
    kernels: HashMap<&'static str, OnceLock<LoadedKernel>>,
    stream: Arc<CudaStream>,
    context: Arc<CudaContext>,
    exclusive: Mutex<()>,
    last_kernel_ms: Mutex<Option<f32>>,
}

/// A kernel's module, loaded on first use, and the kernel in it.
struct LoadedKernel {
    module: Arc<CudaModule>,
    function: CudaFunction,
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
        let stream = context
            .new_stream()
            .context(|| "creating a stream".into())?;
        let kernels = crate::kernels::ENTRY_RANGES
            .iter()
            .chain(crate::kernels::HOPPER_ENTRY_RANGES)
            .map(|&(name, _, _)| (name, OnceLock::new()))
            .collect();
        Ok(Self {
            info,
            kernels,
            stream,
            context,
            exclusive: Mutex::new(()),
            last_kernel_ms: Mutex::new(None),
        })
    }

    /// The device this engine runs on.
    pub fn device(&self) -> &DeviceInfo {
        &self.info
    }

    /// The kernel `kernel`, its module loaded (and JIT-compiled by the driver) on first use.
    fn kernel(&self, kernel: &'static str) -> Result<&LoadedKernel> {
        let slot = self
            .kernels
            .get(kernel)
            .ok_or_else(|| ConvError::InvalidLaunch {
                kernel,
                reason: "the kernels' PTX has no such entry point".into(),
            })?;
        if let Some(loaded) = slot.get() {
            return Ok(loaded);
        }
        let source =
            crate::kernels::module_source(kernel).ok_or_else(|| ConvError::InvalidLaunch {
                kernel,
                reason: "the kernels' PTX has no such entry point".into(),
            })?;
        let module = self
            .context
            .load_module(Ptx::from_src(source))
            .context(|| format!("loading the PTX module of kernel `{kernel}`"))?;
        let function = module
            .load_function(kernel)
            .context(|| format!("loading kernel `{kernel}`"))?;
        // Tiled kernels size their shared memory at launch; allow up to the device's opt-in
        // limit instead of the default 48 KiB.
        function
            .set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                self.info.max_shared_memory_per_block as i32,
            )
            .context(|| format!("raising the shared-memory limit of `{kernel}`"))?;
        // Operations hold the engine's lock, so no other thread loads the same kernel now; were
        // one to, the first module stored would serve both.
        Ok(slot.get_or_init(|| LoadedKernel { module, function }))
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

    /// Benchmark support: times `runs` device-to-device copies of `len` `f32` (one buffer to
    /// another, on the engine's stream) with CUDA events, in milliseconds. The copy bandwidth,
    /// `2 * 4 * len / time` (bytes read plus bytes written), is the memory roofline a
    /// convolution kernel, which reads its input and writes its output once, can approach.
    ///
    /// # Errors
    /// [`ConvError::OutOfMemory`], [`ConvError::Driver`].
    pub fn time_device_copy(&self, len: usize, runs: usize) -> Result<Vec<f32>> {
        let session = self.session()?;
        session.reserve(2 * len * size_of::<f32>())?;
        let source = session.alloc_poisoned(len)?;
        let mut destination = session.alloc_poisoned(len)?;
        let stream = &self.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let describe = || format!("device-to-device copy of {len} floats");
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = stream.record_event(timing).context(describe)?;
            stream
                .memcpy_dtod(&source, &mut destination)
                .context(describe)?;
            let end = stream.record_event(timing).context(describe)?;
            end.synchronize().context(describe)?;
            times.push(start.elapsed_ms(&end).context(describe)?);
        }
        Ok(times)
    }

    /// Benchmark support: copies `input` to the device, then copies it on the device `runs`
    /// times with the SM copy kernel (`sm_copy`: each element read once and written once by
    /// 16-byte accesses, nothing else), timed with CUDA events. Returns the copy, downloaded,
    /// and each run's time in milliseconds. `2 * 4 * len / time` is the memory roofline of a
    /// kernel on the SMs, beside [`Engine::time_device_copy`]'s copy engines.
    ///
    /// # Errors
    /// [`ConvError::InvalidLaunch`] if `input.len()` is not a multiple of 4 or needs more
    /// blocks than one grid holds; [`ConvError::OutOfMemory`], [`ConvError::Driver`].
    pub fn time_sm_copy(&self, input: &[f32], runs: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let invalid = ConvError::invalid_launch("sm_copy");
        if !input.len().is_multiple_of(4) {
            return Err(invalid(format!(
                "copies whole 16-byte quads; {} floats is not a multiple of 4",
                input.len()
            )));
        }
        let quads = (input.len() / 4) as u64;
        let per_block = u64::from(SM_COPY_THREADS * SM_COPY_QUADS_PER_THREAD);
        let blocks = u32::try_from(quads.div_ceil(per_block))
            .ok()
            .filter(|&blocks| blocks <= self.info.max_grid_dim.0)
            .ok_or_else(|| invalid(format!("{} floats need more than one grid", input.len())))?;
        let session = self.session()?;
        session.reserve(2 * size_of_val(input))?;
        let source = session.upload(input)?;
        let mut destination = session.alloc_poisoned(input.len())?;
        let config = LaunchConfig {
            grid_dim: (blocks.max(1), 1, 1),
            block_dim: (SM_COPY_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let before = session.kernel_ms();
            // Contract of `sm_copy`: both buffers hold `quads` quads (cudarc allocations are
            // 256-byte aligned), distinct allocations, `blocks` cover the quads.
            session.launch("sm_copy", config, |args| {
                args.arg(&source);
                args.arg(&mut destination);
                args.arg(&quads);
            })?;
            times.push(session.kernel_ms() - before);
        }
        let mut copy = vec![0.0; input.len()];
        session.download(&destination, &mut copy)?;
        Ok((copy, times))
    }

    /// Fails early, before any host-side copy, when the buffers of a call cannot fit in the
    /// device's free memory.
    pub(crate) fn ensure_free_memory(&self, bytes: usize) -> Result<()> {
        self.check_fault()?;
        self.check_free_memory(bytes)
    }

    /// [`ConvError::OutOfMemory`] if `bytes` exceed the device's free memory.
    fn check_free_memory(&self, bytes: usize) -> Result<()> {
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

    /// Launches the diagnostic kernel that faults on purpose, to test fault handling.
    /// The CUDA context of this process is unusable afterwards.
    ///
    /// # Errors
    /// Always: the fault, as [`ConvError::Driver`] naming the kernel.
    #[doc(hidden)]
    pub fn inject_fault_for_testing(&self) -> Result<()> {
        let session = self.session()?;
        let config = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        session.launch("diagnostic_trap", config, |_| {})
    }

    /// Exclusive use of the stream and the constant-memory mask for one operation.
    pub(crate) fn session(&self) -> Result<Session<'_>> {
        self.check_fault()?;
        // A panic elsewhere while holding the lock leaves no state behind that needs repair.
        let guard = self
            .exclusive
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(Session {
            engine: self,
            _guard: guard,
            kernel_ms: Cell::new(None),
        })
    }
}

impl Engine {
    /// Remembers a fault that the driver reports as sticky, so later calls say what happened
    /// instead of returning unrelated-looking driver errors.
    fn record_fault(&self, error: DriverError, context: String) -> ConvError {
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

fn device_info(context: &Arc<CudaContext>) -> Result<DeviceInfo> {
    let attribute = |a: CUdevice_attribute| {
        context
            .attribute(a)
            .map(|v| v.max(0) as u32)
            .context(|| format!("reading device attribute {a:?}"))
    };
    use CUdevice_attribute::*;
    Ok(DeviceInfo {
        ordinal: context.ordinal(),
        name: context
            .name()
            .context(|| "reading the device name".into())?,
        compute_capability: context
            .compute_capability()
            .context(|| "reading the compute capability".into())?,
        max_threads_per_block: attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_shared_memory_per_block: attribute(
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        max_block_dim: (
            attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        ),
        max_grid_dim: (
            attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        ),
        multiprocessor_count: attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        clock_rate_khz: attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_rate_khz: attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width_bits: attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        total_memory: context
            .total_mem()
            .context(|| "reading the memory size".into())?,
    })
}

/// The device buffers of one operation.
pub(crate) struct Buffers {
    input: CudaSlice<f32>,
    pub(crate) output: CudaSlice<f32>,
    mask: Option<CudaSlice<f32>>,
    /// A tensor map of `input`, passed in its place to the kernels that stage with tensor
    /// copies.
    tensor_map: Option<CudaSlice<u64>>,
}

/// One operation's hold on the engine: uploads, the constant mask, launches and downloads,
/// all ordered on the engine's stream.
pub(crate) struct Session<'e> {
    engine: &'e Engine,
    _guard: MutexGuard<'e, ()>,
    kernel_ms: Cell<Option<f32>>,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let mut last = self
            .engine
            .last_kernel_ms
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *last = self.kernel_ms.get();
    }
}

impl Session<'_> {
    pub(crate) fn device(&self) -> &DeviceInfo {
        &self.engine.info
    }

    /// The kernel `kernel`, loaded on first use.
    fn function(&self, kernel: &'static str) -> Result<&CudaFunction> {
        Ok(&self.engine.kernel(kernel)?.function)
    }

    /// Blocks of `plan`'s kernel that run at once on one multiprocessor of this device, with
    /// its block and shared memory (the driver's occupancy calculation; at least 1).
    pub(crate) fn resident_blocks(&self, plan: &LaunchPlan) -> Result<u32> {
        let kernel = plan.entry_point;
        let blocks = self
            .function(kernel)?
            .occupancy_max_active_blocks_per_multiprocessor(
                plan.block.0 * plan.block.1,
                plan.shared_memory_bytes as usize,
                None,
            )
            .context(|| format!("the occupancy of `{kernel}`"))?;
        Ok(blocks.max(1))
    }

    /// Fails with [`ConvError::OutOfMemory`] if `bytes` exceed the device's free memory.
    pub(crate) fn reserve(&self, bytes: usize) -> Result<()> {
        self.engine.check_free_memory(bytes)
    }

    /// Copies `data` to a new device buffer.
    pub(crate) fn upload(&self, data: &[f32]) -> Result<CudaSlice<f32>> {
        self.engine
            .stream
            .clone_htod(data)
            .map_err(|e| self.memory_error(e, data.len(), "upload"))
    }

    /// A device buffer of `len` elements, filled with NaN so that an element no kernel wrote
    /// cannot pass for a result.
    pub(crate) fn alloc_poisoned(&self, len: usize) -> Result<CudaSlice<f32>> {
        let stream = &self.engine.stream;
        // SAFETY: the memory is uninitialised until the memset below, which is ordered before
        // any use on the same stream.
        let mut buffer = unsafe { stream.alloc::<f32>(len) }
            .map_err(|e| self.memory_error(e, len, "allocation"))?;
        {
            let (pointer, _record) = buffer.device_ptr_mut(stream);
            // SAFETY: `pointer` addresses `len * 4` bytes of `buffer`, allocated on `stream`.
            // Bytes of 0xFF make every f32 the NaN 0xFFFFFFFF.
            unsafe {
                cudarc::driver::result::memset_d8_async(
                    pointer,
                    0xFF,
                    len * size_of::<f32>(),
                    stream.cu_stream(),
                )
            }
            .context(|| "poisoning the output buffer".into())?;
        }
        Ok(buffer)
    }

    /// Writes `taps` into the constant-memory symbol `MASK` of `kernel`'s module on the stream,
    /// so it lands after every earlier kernel and before every later one.
    pub(crate) fn set_constant_mask(&self, kernel: &'static str, taps: &[f32]) -> Result<()> {
        debug_assert!(taps.len() <= MASK_CAPACITY);
        let mut symbol = self
            .engine
            .kernel(kernel)?
            .module
            .get_global("MASK", &self.engine.stream)
            .context(|| "finding the constant-memory symbol MASK".into())?;
        // SAFETY: MASK is an f32 array of MASK_CAPACITY >= taps.len() elements.
        let mut view = unsafe { symbol.transmute_mut::<f32>(taps.len()) }.ok_or_else(|| {
            ConvError::Driver {
                context: format!("MASK holds fewer than {} taps", taps.len()),
                source: DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
            }
        })?;
        self.engine
            .stream
            .memcpy_htod(taps, &mut view)
            .context(|| "uploading the mask to constant memory".into())
    }

    /// Makes a tensor map of `buffers`' input (`elements x height` `f32`, rows `pitch` elements
    /// apart, boxes of `box_dims`, zeros outside) and uploads it; the launches then pass it in
    /// the input's place, as the tensor-copy kernels take it.
    pub(crate) fn set_tensor_map(
        &self,
        buffers: &mut Buffers,
        (elements, height, pitch): (u64, u64, u64),
        box_dims: (u32, u32),
    ) -> Result<()> {
        use cudarc::driver::DevicePtr;
        use cudarc::driver::sys::{
            CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
            CUtensorMapL2promotion, CUtensorMapSwizzle, cuTensorMapEncodeTiled,
        };
        let stream = &self.engine.stream;
        let (address, _record) = buffers.input.device_ptr(stream);
        let mut map = CUtensorMap { opaque: [0; 16] };
        let dims = [elements, height];
        let strides = [pitch * 4];
        let boxes = [box_dims.0, box_dims.1];
        let element_strides = [1u32, 1];
        // SAFETY: `map` is a writable tensor map; the arrays hold the rank's (2) dimensions,
        // box sides and element strides and its rank - 1 strides; `address` is a live device
        // allocation of `pitch * height` f32, 16-byte aligned, as the driver requires.
        unsafe {
            cuTensorMapEncodeTiled(
                &mut map,
                CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                2,
                address as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }
        .result()
        .context(|| "encoding the input's tensor map".into())?;
        buffers.tensor_map = Some(
            stream
                .clone_htod(&map.opaque)
                .context(|| "uploading the tensor map".into())?,
        );
        Ok(())
    }

    /// Stages one operation's data for `plan`: uploads `input`, allocates a poisoned output of
    /// the same length, and puts the mask in the kernel's constant memory or in a device buffer.
    pub(crate) fn stage(&self, plan: &LaunchPlan, input: &[f32], mask: &[f32]) -> Result<Buffers> {
        let mask_in_constant_memory = plan.mask_in_constant_memory;
        let mask_bytes = if mask_in_constant_memory {
            0
        } else {
            size_of_val(mask)
        };
        self.reserve(2 * size_of_val(input) + mask_bytes)?;
        let input_buffer = self.upload(input)?;
        let output = self.alloc_poisoned(input.len())?;
        let mask = if mask_in_constant_memory {
            self.set_constant_mask(plan.entry_point, mask)?;
            None
        } else {
            Some(self.upload(mask)?)
        };
        Ok(Buffers {
            input: input_buffer,
            output,
            mask,
            tensor_map: None,
        })
    }

    /// Launches a convolution kernel with the arguments every one takes: input (its tensor map
    /// for the tensor-copy kernels), mask (only the global-mask kernels), output, parameters.
    fn launch_conv<'a, P: DeviceRepr>(
        &'a self,
        kernel: &'static str,
        config: LaunchConfig,
        buffers: &'a mut Buffers,
        params: &'a P,
    ) -> Result<()> {
        self.launch(kernel, config, |args| {
            match &buffers.tensor_map {
                Some(map) => args.arg(map),
                None => args.arg(&buffers.input),
            };
            if let Some(mask) = &buffers.mask {
                args.arg(mask);
            }
            args.arg(&mut buffers.output);
            args.arg(params);
        })
    }

    /// Runs one convolution `runs` times on staged `buffers`, then downloads the output into
    /// `out`. A run covers `blocks` blocks along the axis that may need more than one grid, in
    /// grids of at most `max_grid` blocks; `grid(offset, count)` gives the launch configuration
    /// and the parameters of the grid whose first block is `offset`. Returns each run's kernel
    /// time in milliseconds.
    ///
    /// Each caller documents, beside its `grid`, how every grid meets `kernel`'s contract.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run_conv<P: DeviceRepr>(
        &self,
        kernel: &'static str,
        buffers: &mut Buffers,
        blocks: u64,
        max_grid: u64,
        runs: usize,
        out: &mut [f32],
        mut grid: impl FnMut(u64, u64) -> (LaunchConfig, P),
    ) -> Result<Vec<f32>> {
        let max_grid = max_grid.max(1);
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let before = self.kernel_ms();
            let mut offset = 0;
            while offset < blocks {
                let count = (blocks - offset).min(max_grid);
                let (config, params) = grid(offset, count);
                self.launch_conv(kernel, config, buffers, &params)?;
                offset += count;
            }
            times.push(self.kernel_ms() - before);
        }
        self.download(&buffers.output, out)?;
        Ok(times)
    }

    /// Launches `kernel`; `push_args` adds its arguments in order. Waits for it to finish so a
    /// fault is reported with the kernel's name and configuration.
    pub(crate) fn launch<'a>(
        &'a self,
        kernel: &'static str,
        config: LaunchConfig,
        push_args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<()> {
        let function = self.function(kernel)?;
        let describe = || {
            format!(
                "kernel `{kernel}` (grid {:?}, block {:?}, {} bytes shared memory)",
                config.grid_dim, config.block_dim, config.shared_mem_bytes
            )
        };
        let stream = &self.engine.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = stream.record_event(timing).context(describe)?;
        let mut builder = stream.launch_builder(function);
        push_args(&mut builder);
        // SAFETY: each operation module documents, beside its `run_conv` grid (or its launch),
        // how arguments and configuration satisfy the kernel's contract.
        unsafe { builder.launch(config) }.context(describe)?;
        let end = stream.record_event(timing).context(describe)?;
        if let Err(error) = stream.synchronize() {
            return Err(self.engine.record_fault(error, describe()));
        }
        let elapsed = start.elapsed_ms(&end).context(describe)?;
        self.kernel_ms
            .set(Some(self.kernel_ms.get().unwrap_or(0.0) + elapsed));
        Ok(())
    }

    /// Kernel time of this session's launches so far, in milliseconds.
    pub(crate) fn kernel_ms(&self) -> f32 {
        self.kernel_ms.get().unwrap_or(0.0)
    }

    /// Copies a device buffer into `out` (same length) and waits for it.
    pub(crate) fn download(&self, buffer: &CudaSlice<f32>, out: &mut [f32]) -> Result<()> {
        self.engine
            .stream
            .memcpy_dtoh(buffer, out)
            .context(|| "downloading the result".into())?;
        self.engine
            .stream
            .synchronize()
            .context(|| "downloading the result".into())
    }

    fn memory_error(&self, error: DriverError, len: usize, what: &str) -> ConvError {
        let requested = len * size_of::<f32>();
        if error.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            let (free, total) = self.engine.context.mem_get_info().unwrap_or((0, 0));
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
}

#[cfg(test)]
mod tests {
    use crate::kernels::{ENTRY_RANGES, HOPPER_ENTRY_RANGES};

    /// The kernels the host launches by a fixed name.
    const KERNEL_NAMES: &[&str] = &[
        "diagnostic_trap",
        "sm_copy",
        "conv1d_basic",
        "conv1d_constant",
        "conv1d_tiled",
        "conv1d_tiled_global_mask",
        "conv1d_tiled_l2",
        "conv1d_tiled_l2_global_mask",
        "conv2d_basic",
        "conv2d_constant",
        "conv2d_tiled",
        "conv2d_tiled_global_mask",
        "conv2d_tiled_l2",
        "conv2d_tiled_l2_global_mask",
        "conv2d_separable",
    ];

    /// Every kernel the host may launch is in the PTX, so that loading it on first use can
    /// only fail for reasons of the driver's.
    #[test]
    fn every_kernel_the_host_names_is_in_the_ptx() {
        let register_1d = crate::conv1d::REGISTER_ENTRY_POINTS_1D
            .iter()
            .map(|&(_, name)| name);
        let specialised_2d = crate::conv2d::SEPARABLE_ENTRY_POINTS
            .iter()
            .chain(crate::conv2d::WIDE_ENTRY_POINTS)
            .chain(crate::conv2d::STREAM_ENTRY_POINTS)
            .chain(crate::conv2d::STREAM16_ENTRY_POINTS)
            .map(|&(_, _, name)| name);
        let names: Vec<&str> = KERNEL_NAMES
            .iter()
            .copied()
            .chain(register_1d)
            .chain(specialised_2d)
            .collect();
        for name in &names {
            assert!(
                ENTRY_RANGES.iter().any(|&(entry, _, _)| entry == *name),
                "{name}"
            );
        }
        // And nothing in the PTX is left unlaunched.
        assert_eq!(names.len(), ENTRY_RANGES.len());
        // The same for the sm_90 PTX: the tensor-copy kernels.
        let tensor_copies: Vec<&str> = crate::conv2d::TMA_ENTRY_POINTS
            .iter()
            .map(|&(_, name)| name)
            .chain(
                crate::conv2d::STREAM_TMA_ENTRY_POINTS
                    .iter()
                    .map(|&(_, _, name)| name),
            )
            .collect();
        for name in &tensor_copies {
            assert!(
                HOPPER_ENTRY_RANGES
                    .iter()
                    .any(|&(entry, _, _)| entry == *name),
                "{name}"
            );
        }
        assert_eq!(tensor_copies.len(), HOPPER_ENTRY_RANGES.len());
    }
}
