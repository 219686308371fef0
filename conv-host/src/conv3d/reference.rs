//! The f64 CPU twin of the 3D kernel.

use super::{Mask3d, VolumeShape};
use crate::conv1d::reference::{clamp_output, fold, ghost_value};
use crate::options::BoundaryMode;
use rayon::prelude::*;

/// The correlation of `input` (row-major, of `shape`) with `mask`, ghost cells by `mode`,
/// clamped to `clamp`, into `output` (as many elements): the sums the 3D kernel computes, in
/// f64.
pub(crate) fn apply(
    shape: VolumeShape,
    mask: &Mask3d,
    (mode, clamp): (BoundaryMode, (f32, f32)),
    input: &[f64],
    output: &mut [f64],
) {
    let [depth, height, width, channels] = shape;
    let [mask_d, mask_h, mask_w] = mask.dims;
    let [front, top, left] = mask.anchors.map(|n| n as i64);
    let cval = ghost_value(mode);
    // Outputs on the rayon pool: each is the same serial f64 sum, whichever thread.
    output.par_iter_mut().enumerate().for_each(|(index, slot)| {
        let c = index % channels;
        let x = (index / channels % width) as i64;
        let y = (index / (channels * width) % height) as i64;
        let z = (index / (channels * width * height)) as i64;
        let mut sum = 0.0;
        for i in 0..mask_d {
            let source_z = fold(z + i as i64 - front, depth, mode);
            for j in 0..mask_h {
                let source_y = fold(y + j as i64 - top, height, mode);
                for k in 0..mask_w {
                    let source_x = fold(x + k as i64 - left, width, mode);
                    let value = match (source_z, source_y, source_x) {
                        (Some(sz), Some(sy), Some(sx)) => {
                            input[((sz * height + sy) * width + sx) * channels + c]
                        }
                        _ => cval,
                    };
                    sum += mask.taps[(i * mask_h + j) * mask_w + k] * value;
                }
            }
        }
        *slot = clamp_output(sum, clamp);
    });
}
