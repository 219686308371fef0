//! Where an N-D call runs, from the kinds of its arrays: a host input and a host view out run
//! through the engine's host pipeline; a device input and a device array out are enqueued on
//! the engine's stream, without a host copy or a wait.

use super::Ndimage;
use super::dense::Dense;
use super::design::Design;
use crate::device_array::{DeviceArray, DeviceDim};
use crate::element::Element;
use crate::error::Result;
use ndarray::{ArrayBase, ArrayViewMut, Data, Dimension};

/// An input and the output it is filtered into, as the `_into` operations of [`Ndimage`]
/// take them:
///
/// - `(&ArrayBase<S, D>, ArrayViewMut<O, D>)`: host arrays of any layout;
/// - `(&DeviceArray<D, T>, &mut DeviceArray<D, O>)`: device arrays of one GPU, the call
///   enqueued on the engine's stream (it returns before the GPU finishes; the next device
///   operation, [`Engine::download`](crate::Engine::download) or
///   [`Engine::synchronize`](crate::Engine::synchronize) comes after it).
///
/// In both, the output's element type has the input's `Real` type (a `u8` image into `f32`).
pub trait Operands: sealed::Run {
    /// The arrays' dimension type.
    type Dim: Dimension;
}

impl<T: sealed::Run> Operands for T {
    type Dim = T::Dim;
}

pub(crate) mod sealed {
    use super::{Dense, Design, Ndimage, Result};

    /// A plan made for the operands' shape, and the design options.
    pub struct Planned(pub(crate) Dense, pub(crate) Design);

    /// The operands' shape and how a plan runs on them.
    pub trait Run {
        /// The arrays' dimension type.
        type Dim: ndarray::Dimension;
        /// The input's shape.
        fn shape(&self) -> &[usize];
        /// Runs `plan` from the input into the output.
        fn run(self, nd: &Ndimage<'_>, plan: Planned) -> Result<()>;
    }
}

impl<S, O, D> sealed::Run for (&ArrayBase<S, D>, ArrayViewMut<'_, O, D>)
where
    S: Data<Elem: Element>,
    O: Element<Real = <S::Elem as Element>::Real>,
    D: Dimension,
{
    type Dim = D;

    fn shape(&self) -> &[usize] {
        self.0.shape()
    }

    fn run(self, nd: &Ndimage<'_>, plan: sealed::Planned) -> Result<()> {
        nd.dense(self.0, plan, self.1)
    }
}

impl<T, O, D> sealed::Run for (&DeviceArray<D, T>, &mut DeviceArray<D, O>)
where
    T: Element,
    O: Element<Real = T::Real>,
    D: DeviceDim,
{
    type Dim = D;

    fn shape(&self) -> &[usize] {
        self.0.shape()
    }

    fn run(self, nd: &Ndimage<'_>, plan: sealed::Planned) -> Result<()> {
        nd.dense_device(self.0, plan, self.1)
    }
}
