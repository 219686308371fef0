//! The f64 CPU reference of 1D correlation and convolution.
//!
//! It shares only option validation with the GPU path. Its boundary extension is written
//! apart from the kernels' (same rule: whole periods, then one reflection); the comparisons
//! with SciPy check both.

use crate::options::BoundaryMode;

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
