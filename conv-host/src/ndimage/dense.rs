//! `correlate` and `convolve` with a mask of the input's dimensions: which machinery runs
//! them (an axis pass in 1D, the 2D designs in 2D, the 3D kernel for volumes and batches).

use super::filters::filtered_axes;
use super::filters::{Filter, Terms};
use super::{NdOptions, PerAxis};
use crate::axis::Pass;
use crate::conv2d::Conv2dOptions;
use crate::conv3d::{Mask3d, VolumeShape};
use crate::error::{ConvError, Result};
use crate::mask::anchor;
use crate::options::{BoundaryMode, clamp_bounds};
use ndarray::Array2;

/// How a dense correlation runs.
pub(crate) enum Dense {
    /// A 1D input: one axis pass.
    Line(Filter),
    /// A 2D input: the 2D designs, with the mask in correlation order or, with `flip`, as given.
    Plane {
        mask: Array2<f64>,
        options: Conv2dOptions,
        flip: bool,
    },
    /// A 3D input (a volume, or a batch where the mask is one slice deep), or a 4D one whose
    /// last axis the mask leaves alone (channels).
    Volume {
        shape: VolumeShape,
        mask: Mask3d,
        mode: BoundaryMode,
        clamp: (f32, f32),
    },
}

/// The plan of correlating (or, with `flip`, convolving) an input of `shape` with `weights`
/// (row-major, of `weights_shape`).
///
/// # Errors
/// [`ConvError::EmptyMask`], [`ConvError::InvalidOrigin`], [`ConvError::InvalidClamp`];
/// [`ConvError::InvalidRank`] for a mask of other dimensions than the input or an input of
/// more than 4; [`ConvError::InvalidParameter`] for a 4D mask that reaches across the
/// channels or modes that differ per axis.
pub(crate) fn plan(
    shape: &[usize],
    weights: Vec<f64>,
    weights_shape: &[usize],
    flip: bool,
    options: &NdOptions,
) -> Result<Dense> {
    let ndim = shape.len();
    if !(1..=4).contains(&ndim) {
        return Err(rank_error(ndim));
    }
    if options.axes.is_some() {
        return plan_along_axes(shape, weights, weights_shape, flip, options);
    }
    if weights_shape.len() != ndim {
        return Err(ConvError::InvalidRank {
            array: "weights",
            ndim: weights_shape.len(),
            expected: "a mask has as many dimensions as the input",
        });
    }
    if weights.is_empty() {
        return Err(ConvError::EmptyMask);
    }
    let modes = options.mode.resolve(ndim, "mode")?;
    let mode = modes[0];
    if modes.iter().any(|&m| m != mode) {
        return Err(ConvError::InvalidParameter {
            name: "mode",
            value: modes.len() as f64,
            expected: "one mode for every axis (correlate and convolve take one, as SciPy's)",
        });
    }
    let origins = options.origin.resolve(ndim, "origin")?;
    let clamp = clamp_bounds(options.clamp)?;
    match ndim {
        1 => {
            let left = anchor(weights.len(), origins[0], flip)?;
            let taps = if flip {
                weights.into_iter().rev().collect()
            } else {
                weights
            };
            Ok(Dense::Line(Filter {
                terms: vec![vec![Pass {
                    axis: 0,
                    taps,
                    left,
                    mode,
                }]],
                combine: Terms::Sum,
                clamp,
            }))
        }
        2 => Ok(Dense::Plane {
            mask: Array2::from_shape_vec((weights_shape[0], weights_shape[1]), weights)
                .map_err(|_| ConvError::EmptyMask)?,
            options: Conv2dOptions {
                mode,
                origin: [origins[0], origins[1]],
                clamp: options.clamp,
                ..Default::default()
            },
            flip,
        }),
        3 | 4 => {
            if ndim == 4 && (weights_shape[3] != 1 || origins[3] != 0) {
                return Err(ConvError::InvalidParameter {
                    name: "weights.shape[3]",
                    value: weights_shape[3] as f64,
                    expected: "1 (with origin 0): the last axis of a 4D input holds channels",
                });
            }
            let channels = if ndim == 4 { shape[3] } else { 1 };
            let dims = [weights_shape[0], weights_shape[1], weights_shape[2]];
            let mut anchors = [0; 3];
            for axis in 0..3 {
                anchors[axis] = anchor(dims[axis], origins[axis], flip)?;
            }
            // Reversing the row-major taps flips every axis.
            let taps = if flip {
                weights.into_iter().rev().collect()
            } else {
                weights
            };
            Ok(Dense::Volume {
                shape: [shape[0], shape[1], shape[2], channels],
                mask: Mask3d {
                    taps,
                    dims,
                    anchors,
                },
                mode,
                clamp,
            })
        }
        _ => Err(rank_error(ndim)),
    }
}

/// The error for an input of a rank `correlate` and `convolve` do not take.
fn rank_error(ndim: usize) -> ConvError {
    ConvError::InvalidRank {
        array: "input",
        ndim,
        expected: "correlate and convolve take 1 to 4 (4: a volume with channels last)",
    }
}

/// [`plan`] with `options.axes`: the mask's axes go with the named axes, extent 1 (and origin
/// 0) along the others.
fn plan_along_axes(
    shape: &[usize],
    weights: Vec<f64>,
    weights_shape: &[usize],
    flip: bool,
    options: &NdOptions,
) -> Result<Dense> {
    let axes = filtered_axes(shape.len(), options)?;
    if weights_shape.len() != axes.len() {
        return Err(ConvError::InvalidRank {
            array: "weights",
            ndim: weights_shape.len(),
            expected: "a mask has one dimension per axis of `axes`",
        });
    }
    let origins = options.origin.resolve(axes.len(), "origin")?;
    let (mut full_shape, mut full_origins) = (vec![1; shape.len()], vec![0; shape.len()]);
    for (k, &axis) in axes.iter().enumerate() {
        full_shape[axis] = weights_shape[k];
        full_origins[axis] = origins[k];
    }
    // One mode per named axis: they must agree (`plan` checks); the others, of extent 1,
    // take the first.
    let mode = match &options.mode {
        PerAxis::Each(modes) if modes.len() == axes.len() && !modes.is_empty() => {
            let mut full = vec![modes[0]; shape.len()];
            for (k, &axis) in axes.iter().enumerate() {
                full[axis] = modes[k];
            }
            PerAxis::Each(full)
        }
        mode => mode.clone(),
    };
    let options = NdOptions {
        mode,
        origin: PerAxis::Each(full_origins),
        axes: None,
        ..options.clone()
    };
    plan(shape, weights, &full_shape, flip, &options)
}
