//! The f64 CPU twins of the N-D operations: the same filters (passes, terms, 3D masks) as the
//! GPU runs, summed in f64 by the axis and 3D references.

use super::dense::{self, Dense};
use super::device::{UNCLAMPED, term_finish};
use super::filters::{self, Filter};
use super::{NdOptions, PerAxis, ndim_error, separable_operations, taps, weighted_operations};
use crate::axis::Combine;
use crate::element::{Element, Real};
use crate::error::Result;
use ndarray::{Array, ArrayBase, Data, Dimension, Ix1, Ix2};

/// `filter` applied to the row-major `input` of `shape`.
fn run(shape: &[usize], filter: &Filter, input: &[f64]) -> Vec<f64> {
    let mut target = vec![0.0; input.len()];
    for (index, term) in filter.terms.iter().enumerate() {
        let finish = term_finish(filter, index);
        let mut current = input.to_vec();
        for (i, pass) in term.iter().enumerate() {
            if i + 1 == term.len() {
                crate::axis::reference::apply(shape, pass, finish, &current, &mut target);
            } else {
                let mut next = vec![0.0; input.len()];
                let step = (Combine::Store, UNCLAMPED);
                crate::axis::reference::apply(shape, pass, step, &current, &mut next);
                current = next;
            }
        }
    }
    target
}

/// The input's elements as f64, row-major.
fn values<S: Data<Elem: Element>, D: Dimension>(input: &ArrayBase<S, D>) -> Vec<f64> {
    input.iter().map(|v| v.to_f64()).collect()
}

/// `filter` applied to `input`.
fn separable<S: Data<Elem: Element>, D: Dimension>(
    input: &ArrayBase<S, D>,
    filter: &Filter,
) -> Array<f64, D> {
    let out = run(input.shape(), filter, &values(input));
    Array::from_shape_vec(input.raw_dim(), out).expect("one output per input element")
}

/// The CPU twins of a list of operations (see [`Ndimage`](crate::ndimage::Ndimage)'s
/// `engine_methods`: the generic parameters, the errors' documentation, which the twins take
/// from the methods, and the operations).
macro_rules! reference_functions {
    ($generics:tt $errors:tt $($(#[$doc:meta])* $name:ident, $into:ident($($arg:ident: $ty:ty),*) => $build:expr;)+) => {$(
        reference_functions!(@one $generics $name($($arg: $ty),*) => $build);
    )+};
    (@one [$($generic:tt)*] $name:ident($($arg:ident: $ty:ty),*) => $build:expr) => {
        #[doc = concat!("CPU twin of [`Ndimage::", stringify!($name), "`](crate::ndimage::Ndimage::", stringify!($name), "), for every element type, returning the unrounded f64 result.")]
        ///
        /// # Errors
        #[doc = concat!("As [`Ndimage::", stringify!($name), "`](crate::ndimage::Ndimage::", stringify!($name), ")'s parameter errors.")]
        pub fn $name<S, $($generic)* D>(
            input: &ArrayBase<S, D>,
            $($arg: $ty,)*
            options: &NdOptions,
        ) -> Result<Array<f64, D>>
        where
            S: Data<Elem: Element>,
            D: Dimension,
        {
            let plan = ($build)(input.shape(), options)?;
            filter_dense(input, plan)
        }
    };
}

separable_operations!(reference_functions);

weighted_operations!(reference_functions);

/// A planned correlation with a mask, in f64.
fn filter_dense<S, D>(input: &ArrayBase<S, D>, plan: Dense) -> Result<Array<f64, D>>
where
    S: Data<Elem: Element>,
    D: Dimension,
{
    match plan {
        Dense::Line(filter) => Ok(separable(input, &filter)),
        Dense::Plane {
            mask,
            options,
            flip,
        } => {
            // The mask in the input's `Real` type, as the GPU gets it.
            let mask = mask.mapv(<S::Elem as Element>::Real::from_f64);
            let image = input
                .view()
                .into_dimensionality::<Ix2>()
                .map_err(ndim_error(input.ndim()))?;
            let out = crate::conv2d::reference::filter2d(&image, &mask, &options, flip)?;
            out.into_dimensionality::<D>()
                .map_err(ndim_error(input.ndim()))
        }
        Dense::Volume {
            shape,
            mask,
            mode,
            clamp,
        } => {
            let mut out = vec![0.0; input.len()];
            crate::conv3d::reference::apply(shape, &mask, (mode, clamp), &values(input), &mut out);
            Ok(Array::from_shape_vec(input.raw_dim(), out).expect("one output per input element"))
        }
    }
}
