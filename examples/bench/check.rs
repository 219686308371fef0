//! The output checks: every element written, and sampled positions against an f64 CPU
//! computation.

use conv_host::Element;
use ndarray::{Array2, ArrayView1, ArrayView3};
use rand::Rng;
use rand::rngs::StdRng;

/// Positions checked per case.
const SAMPLES: usize = 2000;

/// Largest relative error over sampled positions, and whether every element was written.
fn spot_check(samples: impl Iterator<Item = (f64, f64, f64)>) -> f64 {
    samples
        .map(|(got, expected, magnitude)| {
            if got.is_nan() {
                f64::INFINITY
            } else {
                (got - expected).abs() / magnitude.max(f64::MIN_POSITIVE)
            }
        })
        .fold(0.0, f64::max)
}

pub(crate) fn check_1d(
    input: ArrayView1<f32>,
    mask: ArrayView1<f32>,
    output: ArrayView1<f32>,
    rng: &mut StdRng,
) -> f64 {
    let (n, taps) = (input.len(), mask.len());
    if output.iter().any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let positions = (0..SAMPLES).map(|k| match k {
        0 => 0,
        1 => n - 1,
        _ => rng.random_range(0..n),
    });
    let left = taps / 2;
    spot_check(positions.map(|i| {
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for (j, &w) in mask.iter().enumerate() {
            if let Some(k) = (i + j).checked_sub(left).filter(|&k| k < n) {
                sum += f64::from(w) * f64::from(input[k]);
                magnitude += (f64::from(w) * f64::from(input[k])).abs();
            }
        }
        (f64::from(output[i]), sum, magnitude)
    }))
}

/// [`check_1d`] for images of any element type with the zero border. Integer outputs count
/// as exact when they are the f64 sum rounded and saturated, within half a step.
pub(crate) fn check_2d<I: Element<Real = f32>, O: Element<Real = f32>>(
    image: ArrayView3<I>,
    mask: &Array2<f32>,
    output: ArrayView3<O>,
    rng: &mut StdRng,
) -> f64 {
    let (h, w, c) = image.dim();
    if output.iter().any(|v| v.to_f64().is_nan()) {
        return f64::INFINITY;
    }
    let integer = O::from_f64(0.25).to_f64() == 0.0;
    let (mh, mw) = mask.dim();
    let (top, left) = (mh / 2, mw / 2);
    spot_check((0..SAMPLES).map(|k| {
        let (y, x, ch) = match k {
            0 => (0, 0, 0),
            1 => (h - 1, w - 1, c - 1),
            _ => (
                rng.random_range(0..h),
                rng.random_range(0..w),
                rng.random_range(0..c),
            ),
        };
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for i in 0..mh {
            for j in 0..mw {
                let (yy, xx) = ((y + i).checked_sub(top), (x + j).checked_sub(left));
                if let (Some(yy), Some(xx)) = (yy.filter(|&v| v < h), xx.filter(|&v| v < w)) {
                    let term = f64::from(mask[[i, j]]) * image[[yy, xx, ch]].to_f64();
                    sum += term;
                    magnitude += term.abs();
                }
            }
        }
        let got = output[[y, x, ch]].to_f64();
        let rounded =
            (got - sum).abs() <= 0.5 + 1e-6 * magnitude || got == O::from_f64(sum).to_f64();
        if integer && rounded {
            (got, got, magnitude)
        } else {
            (got, sum, magnitude)
        }
    }))
}
