//! The f64 CPU twin of one axis pass.

use super::{Combine, Pass, around_axis};
use crate::conv1d::reference::{clamp_output, fold, ghost_value};
use rayon::prelude::*;

/// Applies `pass` to `input` (row-major, of `shape`) and combines the result into `output`
/// (as many elements) by `combine`, clamped to `clamp`: the sums the axis kernels compute, in
/// f64.
pub(crate) fn apply(
    shape: &[usize],
    pass: &Pass,
    (combine, clamp): (Combine, (f32, f32)),
    input: &[f64],
    output: &mut [f64],
) {
    let (_, len, inner) = around_axis(shape, pass.axis);
    if len == 0 || inner == 0 {
        return;
    }
    let cval = ghost_value(pass.mode);
    // Outputs on the rayon pool: each is the same serial f64 sum, whichever thread.
    output.par_iter_mut().enumerate().for_each(|(index, slot)| {
        let line = index / (len * inner) * len * inner + index % inner;
        let i = index / inner % len;
        let first = i as i64 - pass.left as i64;
        let value: f64 = pass
            .taps
            .iter()
            .enumerate()
            .map(|(j, w)| {
                let source = fold(first + j as i64, len, pass.mode);
                w * source.map_or(cval, |s| input[line + s * inner])
            })
            .sum();
        let combined = match combine {
            Combine::Store => value,
            Combine::Add => *slot + value,
            Combine::AddSquare => *slot + value * value,
            Combine::AddSquareRoot => (*slot + value * value).sqrt(),
        };
        *slot = clamp_output(combined, clamp);
    });
}
