//! The separable filters as axis passes: each filter is a list of terms, each term a chain of
//! passes along axes, the terms summed (Laplacians) or combined as a root of squares (gradient
//! magnitudes). The GPU and the CPU twin run the same lists.

use super::{NdOptions, PerAxis};
use crate::axis::Pass;
use crate::error::{ConvError, Result};
use crate::mask::anchor;
use crate::masks::{MAX_MASK_TAPS_1D, gaussian_taps};
use crate::options::{BoundaryMode, clamp_bounds};

/// How a filter's terms combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Terms {
    /// Their sum.
    Sum,
    /// The square root of the sum of their squares.
    Magnitude,
}

/// A separable filter: terms of passes, combined by `combine`, the result clamped to `clamp`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Filter {
    pub(crate) terms: Vec<Vec<Pass>>,
    pub(crate) combine: Terms,
    pub(crate) clamp: (f32, f32),
}

/// SciPy's threshold below which `gaussian_filter` leaves an axis alone.
const SIGMA_EPSILON: f64 = 1e-15;

/// `axis` (negative counts from the end) as an index below `ndim`.
pub(crate) fn normalize_axis(axis: isize, ndim: usize) -> Result<usize> {
    let index = if axis < 0 { axis + ndim as isize } else { axis };
    if (0..ndim as isize).contains(&index) {
        Ok(index as usize)
    } else {
        Err(ConvError::InvalidAxis {
            axis,
            ndim,
            expected: "an axis of the input: -ndim <= axis < ndim",
        })
    }
}

impl<T: Clone> PerAxis<T> {
    /// One value per axis of an `ndim`-dimensional input.
    ///
    /// # Errors
    /// [`ConvError::InvalidParameter`] (named `name`) for a list of another length.
    pub(crate) fn resolve(&self, ndim: usize, name: &'static str) -> Result<Vec<T>> {
        match self {
            PerAxis::All(value) => Ok(vec![value.clone(); ndim]),
            PerAxis::Each(values) if values.len() == ndim => Ok(values.clone()),
            PerAxis::Each(values) => Err(ConvError::InvalidParameter {
                name,
                value: values.len() as f64,
                expected: "one value, or as many values as the input has axes",
            }),
        }
    }
}

/// The axes `options.axes` names in an `ndim`-dimensional input, or all of them.
///
/// # Errors
/// [`ConvError::InvalidAxis`] for an axis out of range or named twice.
pub(crate) fn filtered_axes(ndim: usize, options: &NdOptions) -> Result<Vec<usize>> {
    let Some(axes) = &options.axes else {
        return Ok((0..ndim).collect());
    };
    let mut resolved = Vec::with_capacity(axes.len());
    for &axis in axes {
        let axis = normalize_axis(axis, ndim)?;
        if resolved.contains(&axis) {
            return Err(ConvError::InvalidAxis {
                axis: axis as isize,
                ndim,
                expected: "distinct axes",
            });
        }
        resolved.push(axis);
    }
    Ok(resolved)
}

/// The filter `build(k)` makes for `k` axes, run along the axes `options.axes` names (or
/// every axis of an `ndim`-dimensional input): its pass along axis `i` moves to the `i`-th
/// named axis.
///
/// # Errors
/// As [`filtered_axes`] and `build`.
pub(crate) fn along_axes(
    ndim: usize,
    options: &NdOptions,
    build: impl FnOnce(usize) -> Result<Filter>,
) -> Result<Filter> {
    let axes = filtered_axes(ndim, options)?;
    let mut filter = build(axes.len())?;
    for pass in filter.terms.iter_mut().flatten() {
        pass.axis = axes[pass.axis];
    }
    Ok(filter)
}

/// [`ConvError::InvalidParameter`] where `options.axes` is given to an operation of one
/// `axis` (SciPy's take no `axes`).
fn no_axes(options: &NdOptions) -> Result<()> {
    match &options.axes {
        None => Ok(()),
        Some(axes) => Err(ConvError::InvalidParameter {
            name: "axes",
            value: axes.len() as f64,
            expected: "None: this operation filters along its `axis`",
        }),
    }
}

/// The options resolved per axis.
struct Resolved {
    modes: Vec<BoundaryMode>,
    origins: Vec<isize>,
    radii: Option<Vec<usize>>,
    truncate: f64,
    clamp: (f32, f32),
}

fn resolve(ndim: usize, options: &NdOptions) -> Result<Resolved> {
    if ndim == 0 {
        return Err(ConvError::InvalidRank {
            array: "input",
            ndim: 0,
            expected: "these filters take arrays of at least one dimension",
        });
    }
    if !(options.truncate.is_finite() && options.truncate >= 0.0) {
        return Err(ConvError::InvalidParameter {
            name: "truncate",
            value: options.truncate,
            expected: "a finite number of standard deviations >= 0",
        });
    }
    Ok(Resolved {
        modes: options.mode.resolve(ndim, "mode")?,
        origins: options.origin.resolve(ndim, "origin")?,
        radii: options
            .radius
            .as_ref()
            .map(|radius| radius.resolve(ndim, "radius"))
            .transpose()?,
        truncate: options.truncate,
        clamp: clamp_bounds(options.clamp)?,
    })
}

/// A pass of `taps` (correlation order) along `axis`, anchored by SciPy's origin rule.
fn pass(axis: usize, taps: Vec<f64>, origin: isize, mode: BoundaryMode) -> Result<Pass> {
    let left = anchor(taps.len(), origin, false)?;
    Ok(Pass {
        axis,
        taps,
        left,
        mode,
    })
}

/// The pass that leaves an array as it is (an identity term).
fn identity() -> Pass {
    Pass {
        axis: 0,
        taps: vec![1.0],
        left: 0,
        mode: BoundaryMode::Nearest,
    }
}

/// One term: its passes, or the identity where there are none.
fn term(passes: Vec<Pass>) -> Vec<Pass> {
    if passes.is_empty() {
        vec![identity()]
    } else {
        passes
    }
}

fn single(passes: Vec<Pass>, clamp: (f32, f32)) -> Filter {
    Filter {
        terms: vec![term(passes)],
        combine: Terms::Sum,
        clamp,
    }
}

/// `correlate1d` (or, with `flip`, `convolve1d`) along `axis`.
pub(crate) fn filter1d(
    ndim: usize,
    weights: Vec<f64>,
    axis: isize,
    flip: bool,
    options: &NdOptions,
) -> Result<Filter> {
    no_axes(options)?;
    let r = resolve(ndim, options)?;
    let axis = normalize_axis(axis, ndim)?;
    let left = anchor(weights.len(), r.origins[axis], flip)?;
    let taps = if flip {
        weights.into_iter().rev().collect()
    } else {
        weights
    };
    let pass = Pass {
        axis,
        taps,
        left,
        mode: r.modes[axis],
    };
    Ok(single(vec![pass], r.clamp))
}

/// The Gaussian taps of `sigma` and `order` (SciPy's radius rule), in correlation order.
fn gaussian(sigma: f64, order: u32, radius: Option<usize>, truncate: f64) -> Result<Vec<f64>> {
    if !(sigma.is_finite() && sigma >= 0.0) {
        return Err(ConvError::InvalidParameter {
            name: "sigma",
            value: sigma,
            expected: "a finite standard deviation >= 0",
        });
    }
    if order > 2 {
        return Err(ConvError::InvalidParameter {
            name: "order",
            value: f64::from(order),
            expected: "0, 1 or 2",
        });
    }
    let radius = radius.map_or((truncate * sigma + 0.5).floor(), |r| r as f64);
    if 2.0 * radius + 1.0 > MAX_MASK_TAPS_1D as f64 {
        return Err(ConvError::InvalidParameter {
            name: "sigma",
            value: sigma,
            expected: "a Gaussian of at most MAX_MASK_TAPS_1D (2^24) taps",
        });
    }
    // SciPy correlates with the reversed kernel.
    let mut taps = gaussian_taps(sigma, order, radius as usize);
    taps.reverse();
    Ok(taps)
}

/// `gaussian_filter1d` along `axis`.
pub(crate) fn gaussian_filter1d(
    ndim: usize,
    sigma: f64,
    axis: isize,
    order: u32,
    options: &NdOptions,
) -> Result<Filter> {
    no_axes(options)?;
    let r = resolve(ndim, options)?;
    let axis = normalize_axis(axis, ndim)?;
    let radius = r.radii.as_ref().map(|radii| radii[axis]);
    let taps = gaussian(sigma, order, radius, r.truncate)?;
    Ok(single(vec![pass(axis, taps, 0, r.modes[axis])?], r.clamp))
}

/// The passes of `gaussian_filter` with `sigmas` and `orders` per axis, every pass in
/// `modes[axis]`: one per axis whose sigma exceeds SciPy's threshold.
fn gaussian_passes(
    r: &Resolved,
    sigmas: &[f64],
    orders: &[u32],
    modes: &[BoundaryMode],
) -> Result<Vec<Pass>> {
    let mut passes = Vec::new();
    for (axis, (&sigma, &order)) in sigmas.iter().zip(orders).enumerate() {
        // Checked on every axis, skipped or not, so that a bad value is never silent.
        let radius = r.radii.as_ref().map(|radii| radii[axis]);
        let taps = gaussian(sigma, order, radius, r.truncate)?;
        if sigma > SIGMA_EPSILON {
            passes.push(pass(axis, taps, 0, modes[axis])?);
        }
    }
    Ok(passes)
}

/// `gaussian_filter` with a sigma and an order per axis.
pub(crate) fn gaussian_filter(
    ndim: usize,
    sigma: &PerAxis<f64>,
    order: &PerAxis<u32>,
    options: &NdOptions,
) -> Result<Filter> {
    let r = resolve(ndim, options)?;
    let sigmas = sigma.resolve(ndim, "sigma")?;
    let orders = order.resolve(ndim, "order")?;
    let passes = gaussian_passes(&r, &sigmas, &orders, &r.modes)?;
    Ok(single(passes, r.clamp))
}

/// The uniform taps of `size` (at least 1).
fn uniform(size: usize) -> Result<Vec<f64>> {
    if size == 0 || size > MAX_MASK_TAPS_1D {
        return Err(ConvError::InvalidParameter {
            name: "size",
            value: size as f64,
            expected: "a size from 1 to MAX_MASK_TAPS_1D (2^24)",
        });
    }
    Ok(vec![1.0 / size as f64; size])
}

/// `uniform_filter1d` along `axis`.
pub(crate) fn uniform_filter1d(
    ndim: usize,
    size: usize,
    axis: isize,
    options: &NdOptions,
) -> Result<Filter> {
    no_axes(options)?;
    let r = resolve(ndim, options)?;
    let axis = normalize_axis(axis, ndim)?;
    let taps = uniform(size)?;
    Ok(single(
        vec![pass(axis, taps, r.origins[axis], r.modes[axis])?],
        r.clamp,
    ))
}

/// `uniform_filter` with a size per axis: one pass per axis of size above 1.
pub(crate) fn uniform_filter(
    ndim: usize,
    size: &PerAxis<usize>,
    options: &NdOptions,
) -> Result<Filter> {
    let r = resolve(ndim, options)?;
    let mut passes = Vec::new();
    for (axis, size) in size.resolve(ndim, "size")?.into_iter().enumerate() {
        let taps = uniform(size)?;
        if size > 1 {
            passes.push(pass(axis, taps, r.origins[axis], r.modes[axis])?);
        }
    }
    Ok(single(passes, r.clamp))
}

/// `sobel` (`smooth` = `[1, 2, 1]`) or `prewitt` (`[1, 1, 1]`) along `axis`: the difference
/// `[-1, 0, 1]` along it, then the smoothing along every other axis.
pub(crate) fn edge(
    ndim: usize,
    axis: isize,
    smooth: [f64; 3],
    options: &NdOptions,
) -> Result<Filter> {
    no_axes(options)?;
    let r = resolve(ndim, options)?;
    let axis = normalize_axis(axis, ndim)?;
    let mut passes = vec![pass(axis, vec![-1.0, 0.0, 1.0], 0, r.modes[axis])?];
    for other in (0..ndim).filter(|&other| other != axis) {
        passes.push(pass(other, smooth.to_vec(), 0, r.modes[other])?);
    }
    Ok(single(passes, r.clamp))
}

/// `laplace`: the sum over the axes of the second difference `[1, -2, 1]` along each.
pub(crate) fn laplace(ndim: usize, options: &NdOptions) -> Result<Filter> {
    let r = resolve(ndim, options)?;
    let terms = (0..ndim)
        .map(|axis| Ok(vec![pass(axis, vec![1.0, -2.0, 1.0], 0, r.modes[axis])?]))
        .collect::<Result<_>>()?;
    Ok(Filter {
        terms,
        combine: Terms::Sum,
        clamp: r.clamp,
    })
}

/// `gaussian_laplace` (`order` 2, summed) or `gaussian_gradient_magnitude` (`order` 1, root
/// of squares): one Gaussian term per axis, differentiated along that axis. As in SciPy, term
/// `k` filters every axis in `mode[k]`.
pub(crate) fn gaussian_derivatives(
    ndim: usize,
    sigma: &PerAxis<f64>,
    order: u32,
    options: &NdOptions,
) -> Result<Filter> {
    let r = resolve(ndim, options)?;
    let sigmas = sigma.resolve(ndim, "sigma")?;
    let terms = (0..ndim)
        .map(|axis| {
            let orders: Vec<u32> = (0..ndim)
                .map(|a| if a == axis { order } else { 0 })
                .collect();
            let modes = vec![r.modes[axis]; ndim];
            Ok(term(gaussian_passes(&r, &sigmas, &orders, &modes)?))
        })
        .collect::<Result<_>>()?;
    Ok(Filter {
        terms,
        combine: if order == 1 {
            Terms::Magnitude
        } else {
            Terms::Sum
        },
        clamp: r.clamp,
    })
}
