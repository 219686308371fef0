//! Mask orientation: SciPy's origin rule, and the flip that turns convolution into correlation.

use crate::error::{ConvError, Result};

/// Number of taps before the output position along one mask axis of `len >= 1` taps:
/// `len / 2 + origin` for correlation. Convolution flips the axis and, as `scipy.ndimage`
/// does, negates the origin and moves even-length axes by one; the origin given is checked in
/// the caller's terms.
pub(crate) fn anchor(len: usize, origin: isize, flip: bool) -> Result<usize> {
    if len == 0 {
        return Err(ConvError::EmptyMask);
    }
    let half = (len / 2) as isize;
    let upper = (len as isize - 1) / 2;
    let even = isize::from(len.is_multiple_of(2));
    let (min, max) = if flip {
        (-upper - even, half - even)
    } else {
        (-half, upper)
    };
    if origin < min || origin > max {
        return Err(ConvError::InvalidOrigin {
            origin,
            mask_len: len,
            min,
            max,
        });
    }
    let correlation_origin = if flip { -origin - even } else { origin };
    Ok((half + correlation_origin) as usize)
}
