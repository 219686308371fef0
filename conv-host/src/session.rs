//! One operation's hold on a lane of an engine: uploads, the constant-memory mask, launches and
//! downloads, all ordered on the lane's stream.

use crate::abi::MASK_CAPACITY;
use crate::device::DeviceInfo;
use crate::element::{Element, Real};
use crate::engine::{Engine, Lane};
use crate::error::{ConvError, DriverContext, Result};
use crate::plan::LaunchPlan;
#[cfg(feature = "bench")]
use crate::plan::for_each_grid;
use crate::registry::KernelId;
use crate::staging::{Slot, SlotBytes, Staging, memory_error};
#[cfg(feature = "bench")]
use cudarc::driver::PushKernelArg;
use cudarc::driver::sys::{CUevent_flags, CUresult};
use cudarc::driver::{
    CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, DriverError,
    LaunchArgs, LaunchConfig,
};
use std::cell::Cell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

/// The device buffers of one operation.
#[cfg(feature = "bench")]
pub(crate) struct Buffers {
    pub(crate) input: CudaSlice<f32>,
    pub(crate) output: CudaSlice<f32>,
    mask: Option<CudaSlice<f32>>,
    /// A tensor map of `input`, passed in its place to the kernels that stage with tensor
    /// copies.
    pub(crate) tensor_map: Option<CudaSlice<u64>>,
}

/// One operation's hold on a lane of the engine: uploads, the constant mask, launches and
/// downloads, all ordered on the lane's stream.
pub(crate) struct Session<'e> {
    engine: &'e Engine,
    lane: &'e Lane,
    staging: MutexGuard<'e, Staging>,
    kernel_ms: Cell<Option<f32>>,
}

impl Engine {
    /// Exclusive use of the first lane (the device arrays' stream), its constant-memory masks
    /// and its staging for one call.
    pub(crate) fn session(&self) -> Result<Session<'_>> {
        Ok(Session::new(self, self.lock_staging()?))
    }

    /// Exclusive use of a free lane for one host call (see [`Engine`]'s thread safety).
    pub(crate) fn host_session(&self) -> Result<Session<'_>> {
        Ok(Session::new(self, self.lock_free_lane()?))
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
        let trap = KernelId::plain(crate::registry::Family::DiagnosticTrap);
        // SAFETY: `diagnostic_trap` takes no arguments and one thread; faulting is its purpose,
        // and the engine records the fault instead of using the context afterwards.
        unsafe { session.launch(trap, config, |_| {}) }
    }
}

impl<'e> Session<'e> {
    /// The session of `engine` on `lane`, whose staging's lock `staging` holds.
    pub(crate) fn new(
        engine: &'e Engine,
        (lane, staging): (&'e Lane, MutexGuard<'e, Staging>),
    ) -> Self {
        engine.sessions.fetch_add(1, Ordering::Relaxed);
        Self {
            engine,
            lane,
            staging,
            kernel_ms: Cell::new(None),
        }
    }

    /// The lane's copy thread where every lane is taken, else `None` (the shared pool, whose
    /// threads fewer calls share to their gain).
    pub(crate) fn copier(&self) -> Option<&rayon::ThreadPool> {
        let lanes = self.engine.lane_count();
        let busy = lanes > 1 && self.engine.sessions.load(Ordering::Relaxed) >= lanes;
        busy.then(|| self.lane.copier()).flatten()
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let mut last = self
            .engine
            .last_kernel_ms
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *last = self.kernel_ms.get();
        self.engine.sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Session<'_> {
    pub(crate) fn device(&self) -> &DeviceInfo {
        &self.engine.info
    }

    /// The kernel `kernel`, loaded on first use.
    fn function(&self, kernel: KernelId) -> Result<&CudaFunction> {
        Ok(&self.lane.kernel(self.engine, kernel)?.function)
    }

    /// Blocks of `plan`'s kernel that run at once on one multiprocessor of this device, with
    /// its block and shared memory (the driver's occupancy calculation; at least 1).
    pub(crate) fn resident_blocks(&self, plan: &LaunchPlan) -> Result<u32> {
        let kernel = plan.entry;
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
    #[cfg(feature = "bench")]
    pub(crate) fn reserve(&self, bytes: usize) -> Result<()> {
        self.engine.check_free_memory(bytes)
    }

    /// The lane's stream, which this session's operations are ordered on.
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.lane.stream
    }

    /// Copies `data` to a new device buffer.
    pub(crate) fn upload<T: Element>(&self, data: &[T]) -> Result<CudaSlice<T>> {
        self.lane
            .stream
            .clone_htod(data)
            .map_err(|e| memory_error(&self.engine.context, e, size_of_val(data), "upload"))
    }

    /// A device buffer of `len` elements, filled with NaN so that an element no kernel wrote
    /// cannot pass for a result.
    #[cfg(feature = "bench")]
    pub(crate) fn alloc_poisoned(&self, len: usize) -> Result<CudaSlice<f32>> {
        let stream = &self.lane.stream;
        // SAFETY: the memory is uninitialised until the memset below, which is ordered before
        // any use on the same stream.
        let mut buffer = unsafe { stream.alloc::<f32>(len) }.map_err(|e| {
            memory_error(
                &self.engine.context,
                e,
                len * size_of::<f32>(),
                "allocation",
            )
        })?;
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
    pub(crate) fn set_constant_mask<R: Real>(&self, kernel: KernelId, taps: &[R]) -> Result<()> {
        debug_assert!(size_of_val(taps) <= MASK_CAPACITY * size_of::<f32>());
        let mut symbol = self
            .lane
            .kernel(self.engine, kernel)?
            .module
            .get_global("MASK", &self.lane.stream)
            .context(|| "finding the constant-memory symbol MASK".into())?;
        // SAFETY: MASK is an 8-byte aligned array of MASK_CAPACITY f32, at least `taps`' bytes.
        let mut view =
            unsafe { symbol.transmute_mut::<R>(taps.len()) }.ok_or_else(|| ConvError::Driver {
                context: format!("MASK holds fewer than {} taps", taps.len()),
                source: DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
            })?;
        self.lane
            .stream
            .memcpy_htod(taps, &mut view)
            .context(|| "uploading the mask to constant memory".into())
    }

    /// Makes a tensor map of `input` (`elements x height` `f32`, rows `pitch` elements apart,
    /// boxes of `box_dims`, zeros outside) and uploads it on `stream`.
    pub(crate) fn tensor_map<T>(
        &self,
        stream: &Arc<CudaStream>,
        input: &impl cudarc::driver::DevicePtr<T>,
        (elements, height, pitch): (u64, u64, u64),
        box_dims: (u32, u32),
    ) -> Result<CudaSlice<u64>> {
        use cudarc::driver::sys::{
            CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
            CUtensorMapL2promotion, CUtensorMapSwizzle, cuTensorMapEncodeTiled,
        };
        let (address, _record) = input.device_ptr(stream);
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
        stream
            .clone_htod(&map.opaque)
            .context(|| "uploading the tensor map".into())
    }

    /// Stages one operation's data for `plan`: uploads `input`, allocates a poisoned output of
    /// the same length, and puts the mask in the kernel's constant memory or in a device buffer.
    #[cfg(feature = "bench")]
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
        let mask = self.place_mask(plan, mask)?;
        Ok(Buffers {
            input: input_buffer,
            output,
            mask,
            tensor_map: None,
        })
    }

    /// Launches a convolution kernel with the arguments every one takes: input (its tensor map
    /// for the tensor-copy kernels), mask (only the global-mask kernels), output, parameters.
    ///
    /// # Safety
    /// `buffers`, `params` and `config` meet `kernel`'s contract (its `# Safety` section in
    /// `conv-kernels`), as for [`Session::launch`].
    #[cfg(feature = "bench")]
    unsafe fn launch_conv<'a, P: DeviceRepr>(
        &'a self,
        kernel: KernelId,
        config: LaunchConfig,
        buffers: &'a mut Buffers,
        params: &'a P,
    ) -> Result<()> {
        // SAFETY: the caller's contract.
        unsafe {
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
    }

    /// Runs one convolution `runs` times on staged `buffers`, then downloads the output into
    /// `out`. A run covers `blocks` blocks along the axis that may need more than one grid, in
    /// grids of at most `max_grid` blocks; `grid(offset, count)` gives the launch configuration
    /// and the parameters of the grid whose first block is `offset`. Returns each run's kernel
    /// time in milliseconds.
    ///
    /// # Safety
    /// Every launch configuration and parameter set that `grid` returns, with `buffers`, meets
    /// `kernel`'s contract (its `# Safety` section in `conv-kernels`): buffer sizes, shared
    /// memory, block shape and the mask's place.
    #[allow(clippy::too_many_arguments)]
    #[cfg(feature = "bench")]
    pub(crate) unsafe fn run_conv<P: DeviceRepr>(
        &self,
        kernel: KernelId,
        buffers: &mut Buffers,
        blocks: u64,
        max_grid: u64,
        runs: usize,
        out: &mut [f32],
        mut grid: impl FnMut(u64, u64) -> (LaunchConfig, P),
    ) -> Result<Vec<f32>> {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let before = self.kernel_ms();
            for_each_grid(blocks, max_grid, |offset, count| {
                let (config, params) = grid(offset, count);
                // SAFETY: the caller's contract covers every grid `grid` returns.
                unsafe { self.launch_conv(kernel, config, buffers, &params) }
            })?;
            times.push(self.kernel_ms() - before);
        }
        self.download(&buffers.output, out)?;
        Ok(times)
    }

    /// Launches `kernel`; `push_args` adds its arguments in order. Waits for it to finish so a
    /// fault is reported with the kernel's name and configuration.
    ///
    /// # Safety
    /// The arguments `push_args` adds and `config` meet `kernel`'s contract (its `# Safety`
    /// section in `conv-kernels`): argument types and order, buffer sizes, block shape and
    /// shared memory. A kernel that breaks its contract may read or write device memory it
    /// does not own.
    pub(crate) unsafe fn launch<'a>(
        &'a self,
        kernel: KernelId,
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
        let stream = &self.lane.stream;
        let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let start = stream.record_event(timing).context(describe)?;
        let mut builder = stream.launch_builder(function);
        push_args(&mut builder);
        // SAFETY: the caller's contract: arguments and configuration meet the kernel's.
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

    /// Enqueues `kernel` on `stream` and returns at once; a fault shows when the stream is
    /// synchronised (see [`Session::finish`]).
    ///
    /// # Safety
    /// As [`Session::launch`].
    pub(crate) unsafe fn launch_async<'a>(
        &'a self,
        stream: &'a Arc<CudaStream>,
        kernel: KernelId,
        config: LaunchConfig,
        push_args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<()> {
        let function = self.function(kernel)?;
        let mut builder = stream.launch_builder(function);
        push_args(&mut builder);
        // SAFETY: the caller's contract: arguments and configuration meet the kernel's.
        unsafe { builder.launch(config) }
            .context(|| format!("launching `{kernel}` (grid {:?})", config.grid_dim))?;
        Ok(())
    }

    /// Waits for `stream`; a failure is recorded as the device's fault when it is sticky, and
    /// reported with `what` (the work the stream ran).
    pub(crate) fn finish(&self, stream: &CudaStream, what: impl FnOnce() -> String) -> Result<()> {
        stream
            .synchronize()
            .map_err(|error| self.engine.record_fault(error, what()))
    }

    /// `count` pipeline slots with buffers of at least `bytes`, taken from the engine's staging
    /// (give them back with [`Session::return_slots`]).
    ///
    /// # Errors
    /// As [`Staging::slots`].
    pub(crate) fn take_slots(
        &mut self,
        count: usize,
        bytes: SlotBytes,
        scratch: bool,
    ) -> Result<Vec<Slot>> {
        let context = self.engine.context.clone();
        self.staging.take(&context, count, bytes, scratch)
    }

    /// Whether the lane's staging holds `count` slots of at least `bytes`, with a conversion
    /// buffer if `scratch` (taking them then allocates nothing).
    pub(crate) fn holds_slots(&self, count: usize, bytes: SlotBytes, scratch: bool) -> bool {
        self.staging.holds(count, bytes, scratch)
    }

    /// Gives slots back to the engine's staging, for the next call.
    pub(crate) fn return_slots(&mut self, slots: Vec<Slot>) {
        self.staging.put_back(slots);
    }

    /// Device bytes the engine's staging holds between calls.
    pub(crate) fn staging_bytes(&self) -> usize {
        self.staging.device_bytes()
    }

    /// Fills the first `elements` of `buffer` with NaN on `stream`, so that an element no kernel
    /// writes cannot pass for a result.
    pub(crate) fn poison<T: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        buffer: &mut CudaSlice<T>,
        bytes: usize,
    ) -> Result<()> {
        let bytes = bytes.min(buffer.num_bytes());
        let (pointer, _record) = buffer.device_ptr_mut(stream);
        // SAFETY: `pointer` addresses at least `bytes` bytes of `buffer`, used in `stream`'s
        // order. Bytes of 0xFF make every f32 and f64 a NaN.
        unsafe { cudarc::driver::result::memset_d8_async(pointer, 0xFF, bytes, stream.cu_stream()) }
            .context(|| "poisoning the output buffer".into())
    }

    /// Orders the work later enqueued on `slots`' streams after everything enqueued so far on
    /// the session's lane stream (the mask's upload), without waiting on the host.
    pub(crate) fn order_after_session_stream(&self, slots: &[Slot]) -> Result<()> {
        let describe = || "ordering the pipeline after the mask's upload".to_string();
        let Some(first) = slots.first() else {
            return Ok(());
        };
        let uploaded = &first.after_lane;
        uploaded.record(&self.lane.stream).context(describe)?;
        for slot in slots {
            slot.stream.wait(uploaded).context(describe)?;
        }
        Ok(())
    }

    /// Device bytes a host call may hold in its pipeline: the engine's cap, or the device's
    /// free memory (plus what the staging holds already) less `headroom`.
    pub(crate) fn pipeline_budget(&self, limit: Option<usize>, headroom: usize) -> Result<usize> {
        let (free, _total) = self
            .engine
            .context
            .mem_get_info()
            .context(|| "querying free memory".into())?;
        let available = (free + self.staging_bytes()).saturating_sub(headroom);
        Ok(limit.map_or(available, |limit| limit.min(available)))
    }

    /// Puts `taps` where `plan`'s kernel reads them, on the session's stream: in the kernel's
    /// constant memory, or in a device buffer, returned, for the global-mask kernels.
    pub(crate) fn place_mask<R: Real>(
        &self,
        plan: &LaunchPlan,
        taps: &[R],
    ) -> Result<Option<CudaSlice<R>>> {
        if plan.mask_in_constant_memory {
            self.set_constant_mask(plan.entry, taps)?;
            Ok(None)
        } else {
            self.upload(taps).map(Some)
        }
    }

    /// Adds the time between `timing`'s events (a finished band's kernels) to this session's
    /// kernel time.
    pub(crate) fn add_kernel_time(&self, (start, end): &(CudaEvent, CudaEvent)) -> Result<()> {
        let ms = start
            .elapsed_ms(end)
            .context(|| "reading the kernels' time".into())?;
        self.add_kernel_ms(ms);
        Ok(())
    }

    /// Adds `ms` of kernel time to this session's.
    pub(crate) fn add_kernel_ms(&self, ms: f32) {
        self.kernel_ms.set(Some(self.kernel_ms() + ms));
    }

    /// Kernel time of this session's launches so far, in milliseconds.
    pub(crate) fn kernel_ms(&self) -> f32 {
        self.kernel_ms.get().unwrap_or(0.0)
    }

    /// Copies a device buffer into `out` (same length) and waits for it.
    #[cfg(feature = "bench")]
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
}
