//! The f64 CPU reference of 1D correlation and convolution.
//!
//! It shares only option validation with the GPU path. Its boundary extension is written
//! apart from the kernels' (same rule: whole periods, then one reflection); the comparisons
//! with SciPy check both.

use super::{Conv1dOptions, orient};
use crate::element::Element;
use crate::error::Result;
use crate::layout::row_major;
use crate::options::{BoundaryMode, clamp_bounds};
use ndarray::{Array1, ArrayBase, Data, Ix1};
use rayon::prelude::*;

/// The input index that stands at `index` when a line of `len >= 1` elements is extended by
/// `mode`, or `None` where the mode supplies its constant; `index` may lie anywhere.
pub(crate) fn fold(index: i64, len: usize, mode: BoundaryMode) -> Option<usize> {
    let len = len as i64;
    let mut k = index;
    match mode {
        BoundaryMode::Constant(_) if !(0..len).contains(&k) => return None,
        BoundaryMode::Constant(_) => {}
        BoundaryMode::Nearest => k = k.clamp(0, len - 1),
        BoundaryMode::Wrap => k = k.rem_euclid(len),
        // Whole periods (2 len for reflect, 2 len - 2 for mirror) first, so that a reach far
        // past a short line costs one step, then the one reflection left.
        BoundaryMode::Reflect => {
            k = k.rem_euclid(2 * len);
            if k >= len {
                k = 2 * len - 1 - k;
            }
        }
        BoundaryMode::Mirror if len == 1 => k = 0,
        BoundaryMode::Mirror => {
            k = k.rem_euclid(2 * len - 2);
            if k >= len {
                k = 2 * len - 2 - k;
            }
        }
    }
    Some(k as usize)
}

/// The constant a mode puts in ghost cells (only `Constant` has one).
pub(crate) fn ghost_value(mode: BoundaryMode) -> f64 {
    match mode {
        BoundaryMode::Constant(cval) => f64::from(cval),
        _ => 0.0,
    }
}

/// Applies the output clamp; written as comparisons so NaN passes through, as on the GPU.
pub(crate) fn clamp_output(sum: f64, (lo, hi): (f32, f32)) -> f64 {
    if sum < f64::from(lo) {
        f64::from(lo)
    } else if sum > f64::from(hi) {
        f64::from(hi)
    } else {
        sum
    }
}

fn filter1d<S, T>(
    input: &ArrayBase<S, Ix1>,
    mask: &ArrayBase<T, Ix1>,
    options: &Conv1dOptions,
    flip: bool,
) -> Result<Array1<f64>>
where
    S: Data<Elem: Element>,
    T: Data<Elem = <S::Elem as Element>::Real>,
{
    let taps = orient(&row_major(mask), options.origin, flip)?;
    let bounds = clamp_bounds(options.clamp)?;
    let cval = ghost_value(options.mode);
    let line: Vec<f64> = input.iter().map(|&v| v.to_f64()).collect();
    let weights: Vec<f64> = taps.values.iter().map(|&v| v.to_f64()).collect();
    // Outputs on the rayon pool: every one is the same serial f64 sum, whichever thread.
    let out: Vec<f64> = (0..line.len() as i64)
        .into_par_iter()
        .map(|i| {
            let first = i - taps.left as i64;
            let sum: f64 = weights
                .iter()
                .enumerate()
                .map(|(j, w)| {
                    let source = fold(first + j as i64, line.len(), options.mode);
                    w * source.map_or(cval, |k| line[k])
                })
                .sum();
            clamp_output(sum, bounds)
        })
        .collect();
    Ok(Array1::from(out))
}

/// CPU twin of [`crate::Engine::correlate1d`] for every element type, accumulating in f64 and
/// returning the unrounded sums. `options.kernel` and `options.tile` are ignored.
///
/// # Errors
/// The option errors of the GPU call ([`crate::ConvError::EmptyMask`],
/// [`crate::ConvError::InvalidOrigin`], [`crate::ConvError::InvalidClamp`]).
pub fn correlate1d<S, T>(
    input: &ArrayBase<S, Ix1>,
    mask: &ArrayBase<T, Ix1>,
    options: &Conv1dOptions,
) -> Result<Array1<f64>>
where
    S: Data<Elem: Element>,
    T: Data<Elem = <S::Elem as Element>::Real>,
{
    filter1d(input, mask, options, false)
}

/// CPU twin of [`crate::Engine::convolve1d`], accumulating in f64.
///
/// # Errors
/// As [`correlate1d`].
pub fn convolve1d<S, T>(
    input: &ArrayBase<S, Ix1>,
    mask: &ArrayBase<T, Ix1>,
    options: &Conv1dOptions,
) -> Result<Array1<f64>>
where
    S: Data<Elem: Element>,
    T: Data<Elem = <S::Elem as Element>::Real>,
{
    filter1d(input, mask, options, true)
}
