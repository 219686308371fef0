//! Gaussian blur, as `scipy.ndimage.gaussian_filter` on the two image axes.

use crate::conv1d::reference::{clamp_output, fold, ghost_value};
use crate::conv2d::{Conv2dOptions, ImageDim};
use crate::element::Element;
use crate::engine::Engine;
use crate::error::Result;
use crate::mask::anchor;
use crate::masks::{gaussian1d, gaussian2d};
use crate::options::clamp_bounds;
use ndarray::{Array, ArrayBase, Data};

impl Engine {
    /// Gaussian blur of an `H x W` or interleaved `H x W x C` image of any element type on the
    /// GPU, into the same type: correlation with [`gaussian2d`]`(sigma, truncate)` under
    /// `options` (SciPy's `gaussian_filter` uses `mode = Reflect` and `truncate = 4`).
    ///
    /// ```no_run
    /// use conv_host::{BoundaryMode, Conv2dOptions, Engine, masks::DEFAULT_TRUNCATE};
    /// let engine = Engine::new()?;
    /// let image = ndarray::Array3::<f32>::zeros((240, 320, 3));
    /// let options = Conv2dOptions { mode: BoundaryMode::Reflect, ..Default::default() };
    /// let blurred = engine.gaussian_filter(&image, 2.0, DEFAULT_TRUNCATE, &options)?;
    /// # Ok::<(), conv_host::ConvError>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::ConvError::InvalidParameter`] for a bad sigma or truncate, then as
    /// [`Engine::correlate2d`].
    pub fn gaussian_filter<S, D>(
        &self,
        image: &ArrayBase<S, D>,
        sigma: f32,
        truncate: f32,
        options: &Conv2dOptions,
    ) -> Result<Array<S::Elem, D>>
    where
        S: Data<Elem: Element>,
        D: ImageDim,
    {
        let mask = gaussian2d(sigma, truncate)?.mapv(|w| Element::from_f64(f64::from(w)));
        self.correlate2d(image, &mask, options)
    }
}

/// CPU twin of [`Engine::gaussian_filter`] for every element type, accumulating in f64 and
/// returning the unrounded values. It filters the rows, then the columns (the Gaussian is
/// separable), which is what SciPy does and is fast enough to serve machines without a GPU.
///
/// # Errors
/// As [`Engine::gaussian_filter`]'s option errors.
pub fn gaussian_filter<S, D>(
    image: &ArrayBase<S, D>,
    sigma: f32,
    truncate: f32,
    options: &Conv2dOptions,
) -> Result<Array<f64, D>>
where
    S: Data<Elem: Element>,
    D: ImageDim,
{
    let taps: Vec<f64> = gaussian1d(sigma, truncate)?
        .iter()
        .map(|&w| f64::from(w))
        .collect();
    let top = anchor(taps.len(), options.origin[0], false)? as i64;
    let left = anchor(taps.len(), options.origin[1], false)? as i64;
    let bounds = clamp_bounds(options.clamp)?;
    let cval = ghost_value(options.mode);
    let (height, width, channels) = D::image_shape(image.shape());
    let pixels: Vec<f64> = image.iter().map(|&v| v.to_f64()).collect();
    let index = |y: usize, x: usize, c: usize| (y * width + x) * channels + c;
    // Rows first; a ghost row (Constant mode) filters to cval, since the taps sum to one.
    let mut rows = vec![0.0; pixels.len()];
    for y in 0..height {
        for x in 0..width {
            for c in 0..channels {
                rows[index(y, x, c)] = (0..taps.len())
                    .map(|j| {
                        let source = fold(x as i64 + j as i64 - left, width, options.mode);
                        taps[j] * source.map_or(cval, |k| pixels[index(y, k, c)])
                    })
                    .sum();
            }
        }
    }
    let mut out = Vec::with_capacity(pixels.len());
    for y in 0..height {
        for x in 0..width {
            for c in 0..channels {
                let sum: f64 = (0..taps.len())
                    .map(|i| {
                        let source = fold(y as i64 + i as i64 - top, height, options.mode);
                        taps[i] * source.map_or(cval, |k| rows[index(k, x, c)])
                    })
                    .sum();
                out.push(clamp_output(sum, bounds));
            }
        }
    }
    Ok(Array::from_shape_vec(image.raw_dim(), out).expect("one output per input element"))
}
