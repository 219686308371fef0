//! The CPU backend: every N-D operation on the host's cores, for machines without a GPU or on
//! request. It sums in the input's `Real` type (`f32`, or `f64` for `f64` data), as the GPU
//! does, on the rayon pool, in blocks of outputs held in vector registers (AVX2 and FMA where
//! the CPU has them, found at run time); separable filters run as passes along their axes, and
//! a 2D mask of rank 1 as two such passes, as on the GPU. See [`stencil`] for the design.

mod convert;
mod filter;
mod stencil;

use crate::axis::{Combine, Pass};
use crate::conv2d::{Conv2dOptions, factor, orient2d};
use crate::element::{Element, Real};
use crate::error::Result;
use crate::layout::check_output;
use crate::ndimage::{Dense, Filter, Terms};
use crate::options::clamp_bounds;
use ndarray::{Array2, ArrayBase, ArrayView, ArrayViewMut, Data, Dimension, Zip};
use std::borrow::Cow;
use stencil::{Stencil, correlate};

/// The CPU backend. Its [`Cpu::ndimage`] operations are the GPU engine's, with the same
/// arguments, results (to the rounding of `Real` sums in another order) and errors; device
/// arrays are for an engine only.
///
/// ```
/// use conv_host::{Cpu, ndimage::NdOptions};
/// let image = ndarray::Array2::<f32>::from_shape_fn((64, 48), |(y, x)| (y * x) as f32);
/// let smooth = Cpu.ndimage().gaussian_filter(&image, 2.0, 0, &NdOptions::default())?;
/// assert_eq!(smooth.dim(), (64, 48));
/// # Ok::<(), conv_host::ConvError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpu;

impl std::fmt::Display for Cpu {
    /// What runs: `cpu (16 threads, AVX2 and FMA)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vectors = if stencil::fused_multiply_add() {
            if cfg!(target_arch = "aarch64") {
                "NEON"
            } else {
                "AVX2 and FMA"
            }
        } else {
            "baseline SIMD"
        };
        write!(
            f,
            "cpu ({} threads, {vectors})",
            rayon::current_num_threads()
        )
    }
}

/// Runs a planned operation from `input` into `output` on the CPU.
///
/// # Errors
/// [`crate::ConvError::ShapeMismatch`], [`crate::ConvError::OverlappingOutput`]; the plan's
/// option errors; [`crate::ConvError::HostOutOfMemory`] for the `Real` copies.
pub(crate) fn run<S, O, D>(
    input: &ArrayBase<S, D>,
    plan: &Dense,
    mut output: ArrayViewMut<'_, O, D>,
) -> Result<()>
where
    S: Data<Elem: Element>,
    O: Element<Real = <S::Elem as Element>::Real>,
    D: Dimension,
{
    check_output(input, &output)?;
    if input.is_empty() {
        return Ok(());
    }
    let values = real_values(input)?;
    let shape = input.shape();
    if let Some(target) = output.as_slice_mut().and_then(O::as_real_mut) {
        return compute(shape, plan, &values, target);
    }
    let mut target = filter::zeros(values.len())?;
    compute(shape, plan, &values, &mut target)?;
    if let Some(output) = output.as_slice_mut() {
        convert::slices(&target, output);
        return Ok(());
    }
    let target = ArrayView::from_shape(input.raw_dim(), &target)
        .map_err(crate::ndimage::ndim_error(input.ndim()))?;
    Zip::from(&mut output)
        .and(&target)
        .par_for_each(|o, &t| *o = O::from_f64(t.to_f64()));
    Ok(())
}

/// The input's elements in its `Real` type, row-major: in place where they are so already.
fn real_values<S, D>(input: &ArrayBase<S, D>) -> Result<Cow<'_, [<S::Elem as Element>::Real]>>
where
    S: Data<Elem: Element>,
    D: Dimension,
{
    if let Some(values) = input.as_slice().and_then(<S::Elem as Element>::as_real) {
        return Ok(Cow::Borrowed(values));
    }
    let mut values = filter::zeros(input.len())?;
    if let Some(input) = input.as_slice() {
        convert::slices(input, &mut values);
        return Ok(Cow::Owned(values));
    }
    let view = ArrayViewMut::from_shape(input.raw_dim(), &mut values)
        .map_err(crate::ndimage::ndim_error(input.ndim()))?;
    Zip::from(view)
        .and(input)
        .par_for_each(|r, &v| *r = <S::Elem as Element>::Real::from_f64(v.to_f64()));
    Ok(Cow::Owned(values))
}

/// Runs `plan` on `input` (row-major, of `shape`) into `target`.
fn compute<R: Real>(shape: &[usize], plan: &Dense, input: &[R], target: &mut [R]) -> Result<()> {
    match plan {
        Dense::Line(filter) => filter::run(shape, filter, input, target),
        Dense::Plane {
            mask,
            options,
            flip,
        } => plane(shape, (mask, options, *flip), input, target),
        Dense::Volume {
            shape: volume,
            mask,
            mode,
            clamp,
        } => {
            let taps: Vec<R> = mask.taps.iter().map(|&w| R::from_f64(w)).collect();
            let stencil = Stencil {
                taps: &taps,
                dims: mask.dims,
                anchors: mask.anchors,
                mode: *mode,
            };
            correlate(*volume, &stencil, (Combine::Store, *clamp), input, target);
            Ok(())
        }
    }
}

/// Masks of at least this many taps and of rank 1 run as two passes (smaller ones are bound by
/// memory either way, which one pass reads once).
const SEPARABLE_TAPS: usize = 49;

/// A 2D image's correlation with `mask` (or, with `flip`, convolution).
fn plane<R: Real>(
    shape: &[usize],
    (mask, options, flip): (&Array2<f64>, &Conv2dOptions, bool),
    input: &[R],
    target: &mut [R],
) -> Result<()> {
    let mask = orient2d(&mask.mapv(R::from_f64), options.origin, flip)?;
    let clamp = clamp_bounds(options.clamp)?;
    let factors = (mask.rows * mask.cols >= SEPARABLE_TAPS)
        .then(|| factor(&mask))
        .flatten();
    if let Some(factors) = factors {
        let (row, column) = factors.split_at(mask.cols);
        let pass = |axis, taps: &[R], left| Pass {
            axis,
            taps: taps.iter().map(|w| w.to_f64()).collect(),
            left,
            mode: options.mode,
        };
        let filter = Filter {
            terms: vec![vec![pass(0, column, mask.top), pass(1, row, mask.left)]],
            combine: Terms::Sum,
            clamp,
        };
        return filter::run(shape, &filter, input, target);
    }
    let stencil = Stencil {
        taps: &mask.values,
        dims: [1, mask.rows, mask.cols],
        anchors: [0, mask.top, mask.left],
        mode: options.mode,
    };
    correlate(
        [1, shape[0], shape[1], 1],
        &stencil,
        (Combine::Store, clamp),
        input,
        target,
    );
    Ok(())
}
