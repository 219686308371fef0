//! 1D correlation and convolution: planning, launching, and the `ndarray` API.

pub(crate) mod reference;

use crate::abi::{
    Conv1dParams, MASK_CAPACITY, REGISTER_THREADS_1D, register_outputs_1d, register_shared_words_1d,
};
use crate::engine::{DeviceInfo, Engine};
use crate::error::{ConvError, Result};
use crate::layout::{check_output, fill_output, row_major};
use crate::mask::anchor;
use crate::options::{BoundaryMode, Clamp, Kernel};
use crate::plan::{EntryPoints, Launch, LaunchPlan, check_block};
use cudarc::driver::{DeviceRepr, LaunchConfig};
use ndarray::{Array1, ArrayBase, ArrayViewMut1, Data, Ix1};

// SAFETY: `Conv1dParams` is `repr(C)`, `Copy`, and made of plain integers and floats, exactly as
// the kernels declare their by-value parameter (it is the same source file).
unsafe impl DeviceRepr for Conv1dParams {}

/// Threads per block when [`Conv1dOptions::tile`] is `None`.
pub const DEFAULT_TILE_1D: u32 = 256;

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

const ENTRY_POINTS: EntryPoints = EntryPoints {
    basic: "conv1d_basic",
    constant: "conv1d_constant",
    tiled: "conv1d_tiled",
    tiled_global_mask: "conv1d_tiled_global_mask",
    tiled_l2: "conv1d_tiled_l2",
    tiled_l2_global_mask: "conv1d_tiled_l2_global_mask",
};

/// The register-tiled 1D entry points: `(mask length, name)`, as `conv-kernels` declares them.
pub(crate) const REGISTER_ENTRY_POINTS_1D: [(u32, &str); 6] = [
    (3, "conv1d_register_m3"),
    (5, "conv1d_register_m5"),
    (7, "conv1d_register_m7"),
    (9, "conv1d_register_m9"),
    (15, "conv1d_register_m15"),
    (31, "conv1d_register_m31"),
];

/// Mask taps in correlation order and the number of taps left of the output position.
pub(crate) struct Taps {
    pub(crate) values: Vec<f32>,
    pub(crate) left: usize,
}

/// Validates the origin and orients the mask (flipped for convolution).
pub(crate) fn orient(mask: &[f32], origin: isize, flip: bool) -> Result<Taps> {
    let left = anchor(mask.len(), origin, flip)?;
    let values = if flip {
        mask.iter().rev().copied().collect()
    } else {
        mask.to_vec()
    };
    Ok(Taps { values, left })
}

/// Chooses the entry point for a signal of `len` elements and checks the tile against the
/// device.
fn plan(
    device: &DeviceInfo,
    (len, mask_len): (usize, usize),
    kernel: Kernel,
    tile: Option<u32>,
) -> Result<LaunchPlan> {
    if matches!(
        kernel,
        Kernel::Separable | Kernel::SeparableTma | Kernel::RegisterTiledTma
    ) {
        return Err(ConvError::InvalidLaunch {
            kernel: "conv1d",
            reason: format!("Kernel::{kernel:?} applies to 2D masks"),
        });
    }
    let register = REGISTER_ENTRY_POINTS_1D
        .iter()
        .find(|&&(m, _)| m as usize == mask_len);
    let outputs_per_block =
        REGISTER_THREADS_1D as usize * register_outputs_1d(mask_len as u64) as usize;
    let auto_register = register.is_some()
        && register_fills_device(len, outputs_per_block, device.multiprocessor_count);
    if kernel == Kernel::RegisterTiled || (kernel == Kernel::Auto && auto_register) {
        let invalid = ConvError::invalid_launch("conv1d_register");
        let &(_, entry_point) = register.ok_or_else(|| {
            let lengths: Vec<u32> = REGISTER_ENTRY_POINTS_1D.iter().map(|&(m, _)| m).collect();
            invalid(format!(
                "no register-tiled 1D kernel for {mask_len} taps (compiled for {lengths:?})"
            ))
        })?;
        if tile.is_some_and(|t| t != REGISTER_THREADS_1D) {
            return Err(invalid(format!(
                "the register-tiled kernels use {REGISTER_THREADS_1D} threads per block"
            )));
        }
        let output_tile = outputs_per_block as u32;
        let shared_floats = register_shared_words_1d(mask_len as u64);
        check_block(
            device,
            entry_point,
            (REGISTER_THREADS_1D, 1),
            shared_floats * 4,
        )?;
        return Ok(LaunchPlan {
            kernel: Kernel::RegisterTiled,
            entry_point,
            block: (REGISTER_THREADS_1D, 1),
            output_tile: (output_tile, 1),
            shared_memory_bytes: shared_floats as u32 * 4,
            mask_in_constant_memory: true,
        });
    }
    let fits = mask_len <= MASK_CAPACITY;
    let tile = tile.unwrap_or(DEFAULT_TILE_1D);
    let tiled_shared_bytes = (u64::from(tile) + mask_len as u64 - 1) * 4;
    // Auto, masks without a register-tiled kernel: the tiled kernel from 10 taps on, where its
    // span fits in shared memory (H100, 2^22 elements: 11 taps 0.037 against 0.045 ms for the
    // constant-mask kernel, 21 taps 0.040 against 0.072, 63 taps 0.059 against 0.184; faster
    // at every length from 2^10 elements on; at 7 taps the constant-mask kernel was faster,
    // 0.032 against 0.034 ms).
    let kernel = match kernel {
        Kernel::Auto
            if mask_len > 9
                && tiled_shared_bytes <= u64::from(device.max_shared_memory_per_block) =>
        {
            Kernel::Tiled
        }
        other => other,
    };
    let (kernel, entry_point) = ENTRY_POINTS.select(kernel, fits);
    let shared_floats = match kernel {
        Kernel::Tiled => u64::from(tile) + mask_len as u64 - 1,
        Kernel::TiledL2 => u64::from(tile),
        _ => 0,
    };
    check_block(device, entry_point, (tile, 1), shared_floats * 4)?;
    Ok(LaunchPlan {
        kernel,
        entry_point,
        block: (tile, 1),
        output_tile: (tile, 1),
        shared_memory_bytes: (shared_floats * 4) as u32,
        mask_in_constant_memory: fits && entry_point != ENTRY_POINTS.basic,
    })
}

/// Whether the register-tiled kernel, `outputs_per_block` outputs per block, launches enough
/// blocks on `len` elements to beat the seeds: at least one per two SMs. Below that its blocks'
/// serial work shows (H100, 15 and 31 taps: 1.2 us slower than the tiled kernel, about 18%, at
/// 2^12 to 2^16 elements, 2 to 32 blocks; faster from 2^18, 128 blocks, on).
fn register_fills_device(len: usize, outputs_per_block: usize, multiprocessors: u32) -> bool {
    len.div_ceil(outputs_per_block.max(1)).saturating_mul(2) >= multiprocessors as usize
}

impl Engine {
    /// The kernel, tile and shared memory a 1D call on a signal of `len` elements with a mask
    /// of `mask_len` taps and these options would use, or the error it would return (`Auto`'s
    /// choice depends on both lengths: short signals, which would leave most SMs idle under the
    /// register-tiled kernel, run on a seed kernel).
    ///
    /// ```no_run
    /// use conv_host::{Conv1dOptions, Engine};
    /// let engine = Engine::new()?;
    /// let plan = engine.plan1d(1 << 24, 31, &Conv1dOptions::default())?;
    /// println!("{} with {} threads per block", plan.kernel, plan.block.0);
    /// # Ok::<(), conv_host::ConvError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Engine::correlate1d`], for the mask length and options.
    pub fn plan1d(
        &self,
        len: usize,
        mask_len: usize,
        options: &Conv1dOptions,
    ) -> Result<LaunchPlan> {
        plan(self.device(), (len, mask_len), options.kernel, options.tile)
    }

    /// 1D correlation on the GPU: `out[i] = sum_j mask[j] * in[i + j - mask.len() / 2 - origin]`,
    /// ghost cells by `options.mode`. Accepts any 1D array or view (strided, reversed).
    ///
    /// # Errors
    /// [`ConvError::EmptyMask`], [`ConvError::InvalidOrigin`], [`ConvError::InvalidClamp`],
    /// [`ConvError::InvalidLaunch`] for a tile the device cannot run, [`ConvError::OutOfMemory`],
    /// [`ConvError::Driver`]. An empty input gives an empty output.
    pub fn correlate1d<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
    ) -> Result<Array1<f32>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        let mut output = Array1::zeros(input.len());
        self.filter1d(input, mask, options, false, output.view_mut(), 1)?;
        Ok(output)
    }

    /// [`Engine::correlate1d`] into a caller's array view of the input's length.
    ///
    /// # Errors
    /// As [`Engine::correlate1d`], plus [`ConvError::ShapeMismatch`] and
    /// [`ConvError::OverlappingOutput`].
    pub fn correlate1d_into<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        output: ArrayViewMut1<'_, f32>,
    ) -> Result<()>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        self.filter1d(input, mask, options, false, output, 1)
            .map(drop)
    }

    /// 1D convolution on the GPU: correlation with the flipped mask, as
    /// `scipy.ndimage.convolve1d` (including its origin rule for even-length masks).
    ///
    /// # Errors
    /// As [`Engine::correlate1d`].
    pub fn convolve1d<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
    ) -> Result<Array1<f32>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        let mut output = Array1::zeros(input.len());
        self.filter1d(input, mask, options, true, output.view_mut(), 1)?;
        Ok(output)
    }

    /// [`Engine::convolve1d`] into a caller's array view of the input's length.
    ///
    /// # Errors
    /// As [`Engine::correlate1d_into`].
    pub fn convolve1d_into<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        output: ArrayViewMut1<'_, f32>,
    ) -> Result<()>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        self.filter1d(input, mask, options, true, output, 1)
            .map(drop)
    }

    /// Benchmark support: the correlation of [`Engine::correlate1d`], with the kernel run
    /// `runs` times on the same device buffers. Returns the output and each run's kernel time in
    /// milliseconds (CUDA events); the output buffer is poisoned with NaN once, before the runs.
    ///
    /// # Errors
    /// As [`Engine::correlate1d`].
    pub fn time_correlate1d<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        runs: usize,
    ) -> Result<(Array1<f32>, Vec<f32>)>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        let mut output = Array1::zeros(input.len());
        let times = self.filter1d(input, mask, options, false, output.view_mut(), runs.max(1))?;
        Ok((output, times))
    }

    fn filter1d<S, T>(
        &self,
        input: &ArrayBase<S, Ix1>,
        mask: &ArrayBase<T, Ix1>,
        options: &Conv1dOptions,
        flip: bool,
        output: ArrayViewMut1<'_, f32>,
        runs: usize,
    ) -> Result<Vec<f32>>
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
    {
        check_output(input, &output)?;
        let taps = orient(&row_major(mask), options.origin, flip)?;
        let plan = self.plan1d(input.len(), taps.values.len(), options)?;
        let launch = Launch::new(&plan, options.mode, options.clamp, runs)?;
        if input.is_empty() {
            return Ok(Vec::new());
        }
        let mask_bytes = if plan.mask_in_constant_memory {
            0
        } else {
            mask.len() * 4
        };
        self.ensure_free_memory(input.len().saturating_mul(8).saturating_add(mask_bytes))?;
        let data = row_major(input);
        let mut times = Vec::new();
        fill_output(output, |out| {
            times = self.launch1d(&data, &taps, launch, out)?;
            Ok(())
        })?;
        Ok(times)
    }

    /// Uploads, launches the plan `runs` times over as many grids as the length needs, downloads
    /// into `out`; returns each run's kernel time in milliseconds.
    fn launch1d(
        &self,
        input: &[f32],
        taps: &Taps,
        launch: Launch<'_>,
        out: &mut [f32],
    ) -> Result<Vec<f32>> {
        let (plan, (clamp_lo, clamp_hi)) = (launch.plan, launch.clamp);
        let len = input.len();
        if len > i64::MAX as usize / 2 {
            return Err(ConvError::TooLarge { len });
        }
        let session = self.session()?;
        let mut buffers = session.stage(plan, input, &taps.values)?;
        let (mode, cval) = launch.mode.code_and_cval();
        let blocks = len.div_ceil(plan.output_tile.0 as usize) as u64;
        let max_grid = u64::from(session.device().max_grid_dim.0);
        session.run_conv(
            plan.entry_point,
            &mut buffers,
            blocks,
            max_grid,
            launch.runs,
            out,
            |block_offset, count| {
                // Contract of every conv1d kernel: input and output hold `len` elements (staged
                // above), the mask holds `mask_len` taps (in MASK or `device_mask`), shared
                // memory as `plan` computed for this kernel, and `left < mask_len`.
                let params = Conv1dParams {
                    len: len as u64,
                    mask_len: taps.values.len() as u64,
                    left: taps.left as u64,
                    block_offset,
                    mode,
                    cval,
                    clamp_lo,
                    clamp_hi,
                };
                let config = LaunchConfig {
                    grid_dim: (count as u32, 1, 1),
                    block_dim: (plan.block.0, 1, 1),
                    shared_mem_bytes: plan.shared_memory_bytes,
                };
                (config, params)
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::register_fills_device;
    use crate::abi::{register_outputs_1d, register_shared_words_1d, register_word_1d};

    /// Auto leaves the register-tiled kernel for signals that give it fewer blocks than half
    /// the SMs (132 SMs, 2,048 outputs per block at 15 and 31 taps).
    #[test]
    fn register_kernel_needs_a_block_per_two_sms() {
        assert!(!register_fills_device(1 << 16, 2048, 132)); // 32 blocks
        assert!(!register_fills_device(65 * 2048, 2048, 132));
        assert!(register_fills_device(65 * 2048 + 1, 2048, 132)); // 66 blocks
        assert!(register_fills_device(1 << 18, 2048, 132));
        assert!(!register_fills_device(0, 2048, 1));
        assert!(register_fills_device(usize::MAX, 1, u32::MAX));
    }

    /// The kernel reads quad `q` of the window of thread `t` (first element `P t`) at
    /// `register_word_1d(P t) + register_word_1d(4 q)`: that must be the quad's own word, and the
    /// 8 threads of a quarter-warp must read 8 different groups of 4 banks.
    #[test]
    fn padded_spans_give_compile_time_offsets_and_no_bank_conflicts() {
        for mask_len in [3u64, 7, 15, 31] {
            let per_thread = register_outputs_1d(mask_len);
            let quads = (per_thread + mask_len - 1).div_ceil(4);
            for q in 0..quads {
                for first_thread in (0..256).step_by(8) {
                    let mut groups: Vec<u64> = (first_thread..first_thread + 8)
                        .map(|t| {
                            let base = per_thread * t;
                            let word = register_word_1d(base, mask_len)
                                + register_word_1d(4 * q, mask_len);
                            assert_eq!(word, register_word_1d(base + 4 * q, mask_len));
                            assert!(word + 4 <= register_shared_words_1d(mask_len));
                            (word / 4) % 8
                        })
                        .collect();
                    groups.sort_unstable();
                    groups.dedup();
                    assert_eq!(groups.len(), 8, "{mask_len} taps, quad {q}");
                }
            }
        }
    }
}
