//! The f64 CPU reference of 2D correlation and convolution.

use super::{Conv2dOptions, ImageDim, orient2d};
use crate::conv1d::reference::{clamp_output, fold, ghost_value};
use crate::element::Element;
use crate::error::Result;
use crate::options::clamp_bounds;
use ndarray::{Array, ArrayBase, Data, Ix2};
use rayon::prelude::*;

pub(crate) fn filter2d<S, T, D>(
    image: &ArrayBase<S, D>,
    mask: &ArrayBase<T, Ix2>,
    options: &Conv2dOptions,
    flip: bool,
) -> Result<Array<f64, D>>
where
    S: Data<Elem: Element>,
    T: Data<Elem = <S::Elem as Element>::Real>,
    D: ImageDim,
{
    let mask = orient2d(mask, options.origin, flip)?;
    let bounds = clamp_bounds(options.clamp)?;
    let cval = ghost_value(options.mode);
    let (height, width, channels) = D::image_shape(image.shape());
    let pixels: Vec<f64> = image.iter().map(|&v| v.to_f64()).collect();
    let taps: Vec<f64> = mask.values.iter().map(|v| v.to_f64()).collect();
    let mut out = vec![0.0; pixels.len()];
    // Rows on the rayon pool: every output is the same serial f64 sum, whichever thread.
    out.par_chunks_mut((width * channels).max(1))
        .enumerate()
        .for_each(|(y, out_row)| {
            for x in 0..width {
                for c in 0..channels {
                    let mut sum = 0.0;
                    for i in 0..mask.rows {
                        let row = fold(y as i64 + i as i64 - mask.top as i64, height, options.mode);
                        for j in 0..mask.cols {
                            let col =
                                fold(x as i64 + j as i64 - mask.left as i64, width, options.mode);
                            let value = match (row, col) {
                                (Some(r), Some(k)) => pixels[(r * width + k) * channels + c],
                                _ => cval,
                            };
                            sum += taps[i * mask.cols + j] * value;
                        }
                    }
                    out_row[x * channels + c] = clamp_output(sum, bounds);
                }
            }
        });
    Ok(Array::from_shape_vec(image.raw_dim(), out).expect("one output per input element"))
}
