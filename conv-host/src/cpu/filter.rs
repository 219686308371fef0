//! Separable filters on the CPU: a filter's terms, each a chain of axis passes, every pass a
//! stencil one column wide (lines lying many abreast: whole rows of them at once) or one row
//! high (few abreast: their values interleaved as channels), through two buffers of the
//! `Real` type.

use super::stencil::{Stencil, correlate};
use crate::axis::{Combine, Pass, around_axis};
use crate::element::Real;
use crate::error::Result;
use crate::layout::try_zeros;
use crate::ndimage::{Filter, UNCLAMPED, term_finish};
use rayon::prelude::*;

/// Lines at least this many abreast are filtered as rows of a stencil one column wide.
const ABREAST: usize = 32;

/// Runs `filter` on `input` (row-major, of `shape`) into `target` (as many elements).
///
/// # Errors
/// [`crate::ConvError::HostOutOfMemory`] for the buffers between passes.
pub(crate) fn run<R: Real>(
    shape: &[usize],
    filter: &Filter,
    input: &[R],
    target: &mut [R],
) -> Result<()> {
    // A root of squares adds its first term to zeros, not to what the output held.
    if term_finish(filter, 0).0 != Combine::Store {
        target.par_iter_mut().for_each(|v| *v = R::from_f64(0.0));
    }
    let mut buffers: [Vec<R>; 2] = [Vec::new(), Vec::new()];
    for (index, term) in filter.terms.iter().enumerate() {
        // The buffer holding the term's latest pass (`None`: none yet, the input).
        let mut latest = None;
        for (i, pass) in term.iter().enumerate() {
            if i + 1 == term.len() {
                let source = latest.map_or(input, |k: usize| &buffers[k][..]);
                apply(shape, pass, term_finish(filter, index), source, target);
                continue;
            }
            let next = usize::from(latest == Some(0));
            if buffers[next].len() != input.len() {
                buffers[next] = zeros(input.len())?;
            }
            let (first, second) = buffers.split_at_mut(1);
            let (source, destination) = match latest {
                None => (input, &mut first[0]),
                Some(0) => (&first[0][..], &mut second[0]),
                Some(_) => (&second[0][..], &mut first[0]),
            };
            apply(
                shape,
                pass,
                (Combine::Store, UNCLAMPED),
                source,
                destination,
            );
            latest = Some(next);
        }
    }
    Ok(())
}

/// `len` zeros, or [`crate::ConvError::HostOutOfMemory`].
pub(crate) fn zeros<R: Real>(len: usize) -> Result<Vec<R>> {
    Ok(try_zeros(ndarray::Ix1(len))?.into_raw_vec_and_offset().0)
}

/// One pass of `input` (of `shape`) combined into `output` by `finish`.
fn apply<R: Real>(
    shape: &[usize],
    pass: &Pass,
    finish: (Combine, (f32, f32)),
    input: &[R],
    output: &mut [R],
) {
    let taps: Vec<R> = pass.taps.iter().map(|&w| R::from_f64(w)).collect();
    let (outer, len, inner) = around_axis(shape, pass.axis);
    let (volume, dims, anchors) = if inner >= ABREAST {
        (
            [outer, len, inner, 1],
            [1, taps.len(), 1],
            [0, pass.left, 0],
        )
    } else {
        (
            [1, outer, len, inner],
            [1, 1, taps.len()],
            [0, 0, pass.left],
        )
    };
    let stencil = Stencil {
        taps: &taps,
        dims,
        anchors,
        mode: pass.mode,
    };
    correlate(volume, &stencil, finish, input, output);
}
