//! Where a planned call runs: on one GPU, split between several, or on the CPU; and what a
//! correlation would run ([`Ndimage::plan_correlate`]).

use super::bands::NdWork;
use super::dense::{self};
use super::design::{Designed, Gpu, Runs};
use super::operands::sealed::Planned;
use super::{NdOptions, Ndimage, RunsOn, device, ndim_error, taps};
use crate::conv3d::{Mask3d, VolumeShape};
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::{Element, Real};
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use crate::layout::check_output;
use crate::options::BoundaryMode;
use ndarray::{ArrayBase, ArrayView, ArrayViewMut, Axis, Data, Dimension, Ix1, Ix2, Ix3};
use std::ops::Range;

impl Ndimage<'_> {
    /// What [`Ndimage::correlate`] (or [`Ndimage::convolve`], planned the same way) of an
    /// input of `shape` with `weights` would run, or the error it would return. On the GPU a
    /// 1D signal or a 2D image runs on one of the seeds' designs (the plan names it, its entry
    /// point, block and tile; `Auto`'s choice depends on the mask's values and the input's
    /// size), other inputs on the N-D kernels.
    ///
    /// ```no_run
    /// use conv_host::{Engine, ndimage::{NdOptions, Runs}};
    /// let engine = Engine::new()?;
    /// let general = ndarray::Array2::from_shape_fn((15, 15), |(i, j)| (i * 15 + j) as f32);
    /// let nd = engine.ndimage();
    /// if let Runs::Design(plan) = nd.plan_correlate(&[4096, 4096], &general, &NdOptions::default())? {
    ///     println!("{} ({}), {} x {} threads", plan.kernel, plan.entry, plan.block.0, plan.block.1);
    /// }
    /// # Ok::<(), conv_host::ConvError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Ndimage::correlate`], for the shapes and options.
    pub fn plan_correlate<M, D>(
        &self,
        shape: &[usize],
        weights: &ArrayBase<M, D>,
        options: &NdOptions,
    ) -> Result<Runs>
    where
        M: Data<Elem: Real>,
        D: Dimension,
    {
        let (values, weights_shape) = taps(weights);
        let plan = dense::plan(shape, values, &weights_shape, false, options)?;
        let engine = match self.runs_on {
            RunsOn::Gpu(engine) => engine,
            RunsOn::Multi(engines) => &engines.engines()[0],
            RunsOn::Cpu => return Ok(Runs::Cpu),
        };
        Ok(match Gpu::new(plan, shape, options.design())? {
            Gpu::Design(Designed::Signal { taps, options }) => {
                Runs::Design(engine.plan_signal::<M::Elem>(shape[0], taps.len(), &options)?)
            }
            Gpu::Design(Designed::Image {
                mask,
                options,
                channels,
                ..
            }) => {
                let mask = mask.mapv(<M::Elem as Element>::from_f64);
                Runs::Design(engine.plan_image(&mask, (shape[0], shape[1], channels), &options)?)
            }
            Gpu::Volume { .. } => Runs::Volume,
            Gpu::Lines(_) => Runs::AxisPasses,
        })
    }

    /// Runs a planned call from a host input into a host view.
    pub(super) fn dense<S, O, D>(
        &self,
        input: &ArrayBase<S, D>,
        Planned(plan, design): Planned,
        output: ArrayViewMut<'_, O, D>,
    ) -> Result<()>
    where
        S: Data<Elem: Element>,
        O: Element<Real = <S::Elem as Element>::Real>,
        D: Dimension,
    {
        let (engine, several) = match self.runs_on {
            RunsOn::Gpu(engine) => (engine, None),
            RunsOn::Multi(engines) => (&engines.engines()[0], Some(engines)),
            RunsOn::Cpu => return crate::cpu::run(input, &plan, output),
        };
        match Gpu::new(plan, input.shape(), design)? {
            Gpu::Design(designed) => {
                check_output(input, &output)?;
                let input = input.view();
                match several {
                    Some(engines) => engines.run_parts(output, |engine, part, output| {
                        run_part(engine, &designed, input.view(), part, output)
                    }),
                    None => {
                        let rows = input.len_of(Axis(0));
                        run_part(engine, &designed, input, 0..rows, output)
                    }
                }
            }
            Gpu::Lines(filter) => engine.filter_nd(input, NdWork::Filter(&filter), output),
            Gpu::Volume {
                shape,
                mask,
                mode,
                clamp,
            } => engine.filter_nd(input, volume_work(&mask, mode, clamp, shape), output),
        }
    }

    /// Enqueues a planned call from one device array into another, on the engine of their
    /// GPU.
    pub(super) fn dense_device<T, O, D>(
        &self,
        input: &DeviceArray<D, T>,
        Planned(plan, design): Planned,
        output: &mut DeviceArray<D, O>,
    ) -> Result<()>
    where
        T: Element,
        O: Element<Real = T::Real>,
        D: DeviceDim,
    {
        let engine = match self.runs_on {
            RunsOn::Gpu(engine) => engine,
            RunsOn::Multi(engines) => engines.engine_of(input.device_ordinal())?,
            RunsOn::Cpu => return Err(ConvError::DeviceArrayOnCpu),
        };
        let shape = input.shape().to_vec();
        let real = T::Real::from_f64;
        match Gpu::new(plan, &shape, design)? {
            Gpu::Design(Designed::Signal { taps, options }) => {
                engine.filter1d_device(input, &taps.mapv(real), &options, false, output)
            }
            Gpu::Design(Designed::Image {
                mask,
                options,
                flip,
                channels,
            }) => {
                let mask = mask.mapv(real);
                engine.plane_device(input, (&mask, &options, flip), channels, output)
            }
            Gpu::Lines(filter) => {
                if let Some(native) = device::native_image::<T, O>(&shape, &filter) {
                    let mask = native.mask.mapv(real);
                    let work = (&mask, &native.options, false);
                    return engine.image2d_device(input, native.image, work, output);
                }
                engine.on_device_arrays(input, output, |session, source, target| {
                    NdWork::Filter(&filter).enqueue::<T::Real>(session, &shape, source, target)
                })
            }
            Gpu::Volume {
                shape: volume,
                mask,
                mode,
                clamp,
            } => {
                let work = volume_work(&mask, mode, clamp, volume);
                engine.on_device_arrays(input, output, |session, source, target| {
                    work.enqueue::<T::Real>(session, &shape, source, target)
                })
            }
        }
    }
}

/// Runs a design's call on rows `part` of a host input (checked not to overlap the output)
/// into `output`, a view of those rows: one GPU's share, or the whole input.
fn run_part<I, O, D>(
    engine: &Engine,
    designed: &Designed,
    input: ArrayView<'_, I, D>,
    part: Range<usize>,
    output: ArrayViewMut<'_, O, D>,
) -> Result<()>
where
    I: Element,
    O: Element<Real = I::Real>,
    D: Dimension,
{
    let real = I::Real::from_f64;
    let ndim = input.ndim();
    let dims = |e| ndim_error(ndim)(e);
    match designed {
        Designed::Signal { taps, options } => {
            let input = input.into_dimensionality::<Ix1>().map_err(dims)?;
            let output = output.into_dimensionality::<Ix1>().map_err(dims)?;
            let work = (&taps.mapv(real), options, false);
            engine.filter1d_part(input, work, part, output)
        }
        Designed::Image {
            mask,
            options,
            flip,
            ..
        } => {
            let mask = mask.mapv(real);
            let work = (&mask, options, *flip);
            if ndim == 2 {
                let input = input.into_dimensionality::<Ix2>().map_err(dims)?;
                let output = output.into_dimensionality::<Ix2>().map_err(dims)?;
                engine.filter2d_part(input, work, part, output)
            } else {
                let input = input.into_dimensionality::<Ix3>().map_err(dims)?;
                let output = output.into_dimensionality::<Ix3>().map_err(dims)?;
                engine.filter2d_part(input, work, part, output)
            }
        }
    }
}

#[cfg(feature = "bench")]
impl Ndimage<'_> {
    /// Benchmark support (cargo feature `bench`): [`Ndimage::correlate`] of an `f32` signal
    /// or image on one of the seeds' designs, the kernel run `runs` times on the same device
    /// buffers. Returns the output and each run's kernel time in milliseconds (CUDA events);
    /// the output buffer is poisoned with NaN once, before the runs.
    ///
    /// # Errors
    /// As [`Ndimage::correlate`]; [`ConvError::InvalidDesign`] for a call no design runs, or
    /// on the CPU.
    pub fn time_correlate<S, M, D>(
        &self,
        input: &ArrayBase<S, D>,
        weights: &ArrayBase<M, D>,
        options: &NdOptions,
        runs: usize,
    ) -> Result<(ndarray::Array<f32, D>, Vec<f32>)>
    where
        S: Data<Elem = f32>,
        M: Data<Elem = f32>,
        D: Dimension,
    {
        let (values, weights_shape) = taps(weights);
        let plan = dense::plan(input.shape(), values, &weights_shape, false, options)?;
        let not_designed = ConvError::InvalidDesign {
            kernel: options.kernel,
            reason: "timing runs one GPU's designs: 1D signals and 2D images",
        };
        let engine = match self.runs_on {
            RunsOn::Gpu(engine) => engine,
            _ => return Err(not_designed),
        };
        let ndim = input.ndim();
        let dims = |e| ndim_error(ndim)(e);
        let (output, times) = match Gpu::new(plan, input.shape(), options.design())? {
            Gpu::Design(Designed::Signal { taps, options }) => {
                let input = input.view().into_dimensionality::<Ix1>().map_err(dims)?;
                let taps = taps.mapv(|w| w as f32);
                let (output, times) = engine.time_correlate1d(&input, &taps, &options, runs)?;
                (output.into_dyn(), times)
            }
            Gpu::Design(Designed::Image { mask, options, .. }) => {
                let mask = mask.mapv(|w| w as f32);
                if ndim == 2 {
                    let input = input.view().into_dimensionality::<Ix2>().map_err(dims)?;
                    let (output, times) = engine.time_correlate2d(&input, &mask, &options, runs)?;
                    (output.into_dyn(), times)
                } else {
                    let input = input.view().into_dimensionality::<Ix3>().map_err(dims)?;
                    let (output, times) = engine.time_correlate2d(&input, &mask, &options, runs)?;
                    (output.into_dyn(), times)
                }
            }
            Gpu::Lines(_) | Gpu::Volume { .. } => return Err(not_designed),
        };
        Ok((output.into_dimensionality::<D>().map_err(dims)?, times))
    }
}

/// The 3D kernel's work over volumes `[D, H, W, channels]` of `shape`.
fn volume_work(
    mask: &Mask3d,
    mode: BoundaryMode,
    clamp: (f32, f32),
    shape: VolumeShape,
) -> NdWork<'_> {
    NdWork::Volume {
        mask,
        mode,
        clamp,
        channels: shape[3],
    }
}
