//! Mask builders: Gaussian (as `scipy.ndimage.gaussian_filter` defines it), box, sharpen.

use crate::error::{ConvError, Result};
use ndarray::{Array1, Array2};

/// SciPy's default `truncate`: the Gaussian is cut at 4 standard deviations.
pub const DEFAULT_TRUNCATE: f32 = 4.0;

/// Most taps a 1D mask builder makes (2^24): a Gaussian of sigma up to about 2 million at the
/// default truncate. Larger requests are [`ConvError::InvalidParameter`], not an allocation
/// that fails.
pub const MAX_MASK_TAPS_1D: usize = 1 << 24;

/// Most taps a 2D mask builder makes (2^26, 256 MiB of `f32`): a square Gaussian up to 8191
/// taps a side, sigma about 1000.
pub const MAX_MASK_TAPS_2D: usize = 1 << 26;

/// The radius SciPy uses for `sigma` and `truncate`: `int(truncate * sigma + 0.5)`.
///
/// # Errors
/// [`ConvError::InvalidParameter`] for a negative or non-finite `sigma` or `truncate`.
pub fn gaussian_radius(sigma: f32, truncate: f32) -> Result<usize> {
    if !(sigma.is_finite() && sigma >= 0.0) {
        return Err(ConvError::InvalidParameter {
            name: "sigma",
            value: f64::from(sigma),
            expected: "a finite standard deviation >= 0",
        });
    }
    if !(truncate.is_finite() && truncate >= 0.0) {
        return Err(ConvError::InvalidParameter {
            name: "truncate",
            value: f64::from(truncate),
            expected: "a finite number of standard deviations >= 0",
        });
    }
    let radius = f64::from(truncate) * f64::from(sigma) + 0.5;
    if 2.0 * radius.floor() + 1.0 > MAX_MASK_TAPS_1D as f64 {
        return Err(ConvError::InvalidParameter {
            name: "sigma",
            value: f64::from(sigma),
            expected: "a sigma whose mask, 2 * int(truncate * sigma + 0.5) + 1 taps, has at most \
                       MAX_MASK_TAPS_1D (2^24) taps",
        });
    }
    Ok(radius as usize)
}

/// A normalised 1D Gaussian of `2 * radius + 1` taps, `exp(-x^2 / (2 sigma^2))` for
/// `x = -radius..=radius`, computed in f64 as SciPy does. `sigma = 0` gives the identity `[1]`.
///
/// ```
/// let g = conv_host::masks::gaussian1d(1.0, 4.0).unwrap();
/// assert_eq!(g.len(), 9);
/// assert!((g.sum() - 1.0).abs() < 1e-6);
/// ```
///
/// # Errors
/// As [`gaussian_radius`].
pub fn gaussian1d(sigma: f32, truncate: f32) -> Result<Array1<f32>> {
    let radius = gaussian_radius(sigma, truncate)?;
    if sigma == 0.0 {
        return Ok(Array1::ones(1));
    }
    let variance = f64::from(sigma).powi(2);
    let r = radius as i64;
    let weights: Vec<f64> = (-r..=r)
        .map(|x| (-0.5 * (x * x) as f64 / variance).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    Ok(weights.iter().map(|w| (w / total) as f32).collect())
}

/// SciPy's 1D Gaussian derivative kernel (`scipy.ndimage`'s `_gaussian_kernel1d`): the
/// normalised Gaussian of [`gaussian1d`] for `order` 0, its first or second derivative for
/// `order` 1 or 2, over `x = -radius..=radius`, computed in f64. Taps are in convolution order,
/// as SciPy returns them: correlating with the reversed kernel (or convolving with this one)
/// gives `gaussian_filter1d(input, sigma, order=order)`.
///
/// ```
/// let d1 = conv_host::masks::gaussian_kernel1d(1.5, 1, 4.0).unwrap();
/// assert_eq!(d1.len(), 13);
/// assert!(d1[6].abs() < 1e-12 && d1[5] > 0.0 && d1[7] < 0.0);
/// ```
///
/// # Errors
/// As [`gaussian_radius`]; [`ConvError::InvalidParameter`] for an `order` above 2.
pub fn gaussian_kernel1d(sigma: f32, order: u32, truncate: f32) -> Result<Array1<f32>> {
    if order > 2 {
        return Err(ConvError::InvalidParameter {
            name: "order",
            value: f64::from(order),
            expected: "0, 1 or 2",
        });
    }
    let radius = gaussian_radius(sigma, truncate)?;
    Ok(gaussian_taps(f64::from(sigma), order, radius)
        .iter()
        .map(|&w| w as f32)
        .collect())
}

/// The taps of [`gaussian_kernel1d`] in f64 for `sigma >= 0`, `order <= 2` and any `radius`
/// (SciPy's `radius` argument): `sigma = 0` gives the identity for order 0 and zeros for the
/// derivatives.
pub(crate) fn gaussian_taps(sigma: f64, order: u32, radius: usize) -> Vec<f64> {
    let r = radius as i64;
    if sigma == 0.0 {
        let centre = if order == 0 { 1.0 } else { 0.0 };
        return (-r..=r)
            .map(|x| if x == 0 { centre } else { 0.0 })
            .collect();
    }
    let variance = sigma * sigma;
    let phi: Vec<f64> = (-r..=r)
        .map(|x| (-0.5 * (x * x) as f64 / variance).exp())
        .collect();
    let total: f64 = phi.iter().sum();
    // f(x) = q(x) phi(x): each derivative maps q to q' - q x / sigma^2, starting from q = 1.
    let derivative = |x: f64| match order {
        0 => 1.0,
        1 => -x / variance,
        _ => (x * x / variance - 1.0) / variance,
    };
    (-r..=r)
        .zip(&phi)
        .map(|(x, p)| derivative(x as f64) * p / total)
        .collect()
}

/// The 2D Gaussian with the same sigma on both axes: the outer product of two
/// [`gaussian1d`] masks, so correlating with it equals SciPy's `gaussian_filter` on an image.
///
/// # Errors
/// As [`gaussian_radius`].
pub fn gaussian2d(sigma: f32, truncate: f32) -> Result<Array2<f32>> {
    let g = gaussian1d(sigma, truncate)?;
    let n = g.len();
    if n.saturating_mul(n) > MAX_MASK_TAPS_2D {
        return Err(ConvError::InvalidParameter {
            name: "sigma",
            value: f64::from(sigma),
            expected: "a sigma whose square mask has at most MAX_MASK_TAPS_2D (2^26) taps",
        });
    }
    Ok(Array2::from_shape_fn((n, n), |(i, j)| g[i] * g[j]))
}

/// A `rows x cols` box (mean) filter: every tap `1 / (rows * cols)`.
///
/// # Errors
/// [`ConvError::InvalidParameter`] for a zero side.
pub fn box2d(rows: usize, cols: usize) -> Result<Array2<f32>> {
    if rows == 0 || cols == 0 {
        return Err(ConvError::InvalidParameter {
            name: "box size",
            value: rows.min(cols) as f64,
            expected: "at least 1 x 1",
        });
    }
    if rows.saturating_mul(cols) > MAX_MASK_TAPS_2D {
        return Err(ConvError::InvalidParameter {
            name: "box size",
            value: rows.saturating_mul(cols) as f64,
            expected: "at most MAX_MASK_TAPS_2D (2^26) taps",
        });
    }
    Ok(Array2::from_elem((rows, cols), 1.0 / (rows * cols) as f32))
}

/// The 3 x 3 sharpening mask `[[0, -1, 0], [-1, 5, -1], [0, -1, 0]]` (identity plus a
/// Laplacian); its taps sum to 1, so flat regions keep their value.
pub fn sharpen() -> Array2<f32> {
    ndarray::array![[0.0, -1.0, 0.0], [-1.0, 5.0, -1.0], [0.0, -1.0, 0.0]]
}
