//! 1D correlation and convolution: the `ndarray` API, the choice of design and the launch.
//! One module per design family, as in `conv-kernels/src/conv1d/`.

mod bands;
mod device;
pub(crate) mod reference;
mod register_tiled;
mod textbook;

use crate::abi::Conv1dParams;
use crate::device::DeviceInfo;
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::row_major;
use crate::mask::anchor;
use crate::options::{BoundaryMode, Clamp, Kernel};
use crate::plan::{Launch, LaunchPlan, for_each_grid};
use crate::registry::Storage;
use crate::session::Session;
use cudarc::driver::{
    CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg,
};
use ndarray::{ArrayBase, ArrayView1, ArrayViewMut1, Data, Ix1};
use std::sync::Arc;

// SAFETY: `Conv1dParams` is `repr(C)`, `Copy`, and made of plain integers and floats, exactly as
// the kernels declare their by-value parameter (it is the same source file).
unsafe impl DeviceRepr for Conv1dParams {}

/// Options of a 1D correlation or convolution. `Default` gives SciPy's defaults except the
/// mode, which is the textbook's zero ghost cells (`Constant(0.0)`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conv1dOptions {
    /// How the input continues past its ends.
    pub mode: BoundaryMode,
    /// Shifts the mask as SciPy's `origin` does: output `i` is anchored at mask element
    /// `len / 2 + origin`. Valid range `[-(len / 2), (len - 1) / 2]` for correlation.
    pub origin: isize,
    /// Kernel design; `Auto` picks one.
    pub kernel: Kernel,
    /// Threads per block (the output tile width); `None` for the default.
    pub tile: Option<u32>,
    /// Clamp every output to a range.
    pub clamp: Option<Clamp>,
}

/// Mask taps in correlation order and the number of taps left of the output position.
pub(crate) struct Taps<R = f32> {
    pub(crate) values: Vec<R>,
    pub(crate) left: usize,
}

/// Validates the origin and orients the mask (flipped for convolution).
pub(crate) fn orient<R: Real>(mask: &[R], origin: isize, flip: bool) -> Result<Taps<R>> {
    let left = anchor(mask.len(), origin, flip)?;
    let values = if flip {
        mask.iter().rev().copied().collect()
    } else {
        mask.to_vec()
    };
    Ok(Taps { values, left })
}

/// Chooses the design and entry point for a signal of `len` elements of `storage` (`f32` or
/// `f64`) and checks the tile against the device: a register-tiled kernel where `Auto` prefers
/// one ([`register_tiled::auto_prefers`]), else a textbook design.
fn plan(
    device: &DeviceInfo,
    (len, mask_len): (usize, usize),
    (kernel, tile): (Kernel, Option<u32>),
    storage: Storage,
) -> Result<LaunchPlan> {
    if matches!(
        kernel,
        Kernel::Separable | Kernel::SeparableTma | Kernel::RegisterTiledTma
    ) {
        return Err(ConvError::InvalidDesign {
            kernel,
            reason: "it runs 2D images, not 1D signals",
        });
    }
    if kernel == Kernel::RegisterTiled
        || (kernel == Kernel::Auto
            && register_tiled::auto_prefers(device, (len, mask_len), storage))
    {
        return register_tiled::plan(device, mask_len, tile, storage);
    }
    if storage == Storage::F64 {
        textbook::plan_f64(device, mask_len, kernel, tile)
    } else {
        textbook::plan(device, mask_len, kernel, tile)
    }
}

impl Engine {
    /// Benchmark support (cargo feature `bench`): a 1D design's correlation, with the kernel run
    /// `runs` times on the same device buffers. Returns the output and each run's kernel time in
    /// milliseconds (CUDA events); the output buffer is poisoned with NaN once, before the runs.
    ///
    /// # Errors
    /// As the call.
    #[cfg(feature = "bench")]
    pub(crate) fn time_correlate1d<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        runs: usize,
    ) -> Result<(ndarray::Array1<f32>, Vec<f32>)>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        let mut output = crate::layout::try_zeros(ndarray::Ix1(input.len()))?;
        let taps = orient(&row_major(mask), options.origin, false)?;
        let plan = self.plan_signal::<f32>(input.len(), taps.values.len(), options)?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if input.is_empty() {
            return Ok((output, Vec::new()));
        }
        let mask_bytes = if plan.mask_in_constant_memory {
            0
        } else {
            mask.len() * 4
        };
        self.ensure_free_memory(input.len().saturating_mul(8).saturating_add(mask_bytes))?;
        let data = row_major(input);
        let mut times = Vec::new();
        crate::layout::fill_output(output.view_mut(), |out| {
            times = self.launch1d(&data, &taps, (launch, runs.max(1)), out)?;
            Ok(())
        })?;
        Ok((output, times))
    }

    /// The plan of a mask of `mask_len` taps of the real type `R` on a signal of `len`
    /// elements: every design for `f32`; the textbook designs and the any-length register-tiled
    /// kernel for `f64`.
    pub(crate) fn plan_signal<R: Real>(
        &self,
        len: usize,
        mask_len: usize,
        options: &Conv1dOptions,
    ) -> Result<LaunchPlan> {
        let storage = if R::NAME == f64::NAME {
            Storage::F64
        } else {
            Storage::F32
        };
        plan(
            self.device(),
            (len, mask_len),
            (options.kernel, options.tile),
            storage,
        )
    }

    /// Filters the elements `part` of a host signal into `output`, a view of those elements
    /// (checked by the caller not to overlap the input): one engine's share of a
    /// [`crate::MultiEngine`] call, or the whole signal.
    pub(crate) fn filter1d_part<M, I, O>(
        &self,
        input: ArrayView1<'_, I>,
        (mask, options, flip): (&ArrayBase<M, Ix1>, &Conv1dOptions, bool),
        part: std::ops::Range<usize>,
        output: ArrayViewMut1<'_, O>,
    ) -> Result<()>
    where
        I: Element,
        M: Data<Elem = I::Real>,
        O: Element<Real = I::Real>,
    {
        let taps = orient(&row_major(mask), options.origin, flip)?;
        let plan = self.plan_signal::<I::Real>(input.len(), taps.values.len(), options)?;
        let launch = Launch::new(&plan, options.mode, options.clamp)?;
        if input.is_empty() || part.is_empty() {
            return Ok(());
        }
        self.filter1d_bands((input, part), &taps, launch, output)
    }

    /// Benchmark support: uploads, launches the plan `runs` times over as many grids as the
    /// length needs, downloads into `out`; returns each run's kernel time in milliseconds.
    #[cfg(feature = "bench")]
    fn launch1d(
        &self,
        input: &[f32],
        taps: &Taps,
        (launch, runs): (Launch<'_>, usize),
        out: &mut [f32],
    ) -> Result<Vec<f32>> {
        let plan = launch.plan;
        let len = input.len();
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let session = self.session()?;
        let mut buffers = session.stage(plan, input, &taps.values)?;
        let blocks = len.div_ceil(plan.output_tile.0 as usize) as u64;
        let max_grid = u64::from(session.device().max_grid_dim.0);
        // SAFETY: every grid meets the conv1d kernels' contract (`grid1d`): the buffers staged
        // above hold `len` elements, the mask is where the plan put it.
        unsafe {
            session.run_conv(
                plan.entry,
                &mut buffers,
                blocks,
                max_grid,
                runs,
                out,
                |block_offset, count| grid1d(launch, len, taps, block_offset, count),
            )
        }
    }
}

/// The configuration and parameters of the grid of `count` blocks from `block_offset` on, over
/// a signal of `len` elements.
///
/// Contract of every conv1d kernel, which the caller's buffers complete: input and output hold
/// `len` elements, the mask holds `mask_len` taps (in MASK or a device buffer), shared memory as
/// the plan computed for its kernel, and `left < mask_len`.
fn grid1d<R>(
    launch: Launch<'_>,
    len: usize,
    taps: &Taps<R>,
    block_offset: u64,
    count: u64,
) -> (LaunchConfig, Conv1dParams) {
    let plan = launch.plan;
    let (mode, cval) = launch.mode.code_and_cval();
    let params = Conv1dParams {
        len: len as u64,
        mask_len: taps.values.len() as u64,
        left: taps.left as u64,
        block_offset,
        mode,
        cval,
        clamp_lo: launch.clamp.0,
        clamp_hi: launch.clamp.1,
    };
    let config = LaunchConfig {
        grid_dim: (count as u32, 1, 1),
        block_dim: (plan.block.0, 1, 1),
        shared_mem_bytes: plan.shared_memory_bytes,
    };
    (config, params)
}

/// Enqueues the grids over a signal of `len` elements on `stream`: the planned kernel reading
/// `input` and `mask` (the global-mask kernels), writing `output`. Returns without waiting.
///
/// # Safety
/// `input` and `output` are distinct buffers of at least `len` elements, 16-byte aligned; the
/// mask is where the plan reads it (in MASK, or in `mask`), written before in `stream`'s order.
pub(crate) unsafe fn enqueue1d<R: DeviceRepr>(
    session: &Session<'_>,
    stream: &Arc<CudaStream>,
    (launch, taps, len): (Launch<'_>, &Taps<R>, usize),
    input: &CudaView<'_, u8>,
    mask: Option<&CudaSlice<R>>,
    output: &mut CudaViewMut<'_, u8>,
) -> Result<()> {
    let plan = launch.plan;
    let blocks = len.div_ceil(plan.output_tile.0 as usize) as u64;
    let max_grid = u64::from(session.device().max_grid_dim.0);
    for_each_grid(blocks, max_grid, |offset, count| {
        let (config, params) = grid1d(launch, len, taps, offset, count);
        // SAFETY: the grid meets the conv1d kernels' contract (`grid1d`), and the buffers and
        // mask are as the caller's contract says.
        unsafe {
            session.launch_async(stream, plan.entry, config, |args| {
                args.arg(input);
                if let Some(mask) = mask {
                    args.arg(mask);
                }
                args.arg(&mut *output);
                args.arg(&params);
            })
        }
    })
}
