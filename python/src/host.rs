//! NumPy arrays in and out: the input read where it is (any strides), the output written into
//! the caller's array, the GIL released for the whole call.

use crate::ops::Call;
use crate::{engine, to_py_error};
use conv_host::{Cpu, Element, bf16, f16};
use ndarray::{ArrayViewD, ArrayViewMutD};
use numpy::{PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::prelude::*;

/// A NumPy element type the engine filters natively. `bfloat16` arrives as its `uint16` bits.
trait Native: Element {
    /// The NumPy type that carries the values.
    type Carrier: numpy::Element + Copy;
}

macro_rules! native {
    ($($t:ty => $carrier:ty),+) => {$(
        impl Native for $t {
            type Carrier = $carrier;
        }
    )+};
}

native!(u8 => u8, u16 => u16, f16 => f16, bf16 => u16, f32 => f32, f64 => f64);

/// `view` of carriers as a view of `T` (the same type, or `bfloat16` bits as `bf16`).
fn as_native<'a, T: Native>(view: ArrayViewD<'a, T::Carrier>) -> ArrayViewD<'a, T> {
    let raw = view.raw_view().cast::<T>();
    // SAFETY: `T` and its carrier have one size and alignment (`cast` checks the size) and
    // every carrier value is a value of `T` (the same type, or `u16` bits read as `bf16`);
    // the array lives for `'a`, its shape and strides are kept.
    unsafe { raw.deref_into_view() }
}

/// `view` of carriers as a mutable view of `T`, as [`as_native`].
fn as_native_mut<'a, T: Native>(mut view: ArrayViewMutD<'a, T::Carrier>) -> ArrayViewMutD<'a, T> {
    let raw = view.raw_view_mut().cast::<T>();
    // SAFETY: as in `as_native`, for the unique view, which is consumed.
    unsafe { raw.deref_into_view_mut() }
}

/// Runs `call` from the NumPy array `input` of `T` into `output` of `O`, on the GPU where
/// `gpu`, else on the CPU backend.
fn run_typed<T: Native, O: Native + Element<Real = T::Real>>(
    py: Python<'_>,
    call: Call,
    input: &Bound<'_, PyAny>,
    output: &Bound<'_, PyAny>,
    gpu: bool,
) -> PyResult<()> {
    let (op, options) = call.parse()?;
    let input: PyReadonlyArrayDyn<'_, T::Carrier> = input.extract()?;
    let mut output: PyReadwriteArrayDyn<'_, O::Carrier> = output.extract()?;
    let input = as_native::<T>(input.as_array());
    let mut output = as_native_mut::<O>(output.as_array_mut());
    py.detach(|| {
        let nd = if gpu {
            engine(0)?.ndimage()
        } else {
            Cpu.ndimage()
        };
        op.run(nd, &input, &options, output.view_mut())
            .map_err(to_py_error)
    })
}

/// Filters the NumPy array `input` into the NumPy array `output` (of the input's shape), the
/// element types named as NumPy names them (`bfloat16` arrays passed as their `uint16` bits).
#[pyfunction]
pub fn filter_host(
    py: Python<'_>,
    call: Call,
    input: &Bound<'_, PyAny>,
    output: &Bound<'_, PyAny>,
    types: (String, String),
    gpu: bool,
) -> PyResult<()> {
    let types = (types.0.as_str(), types.1.as_str());
    crate::element_pairs!(types, run_typed(py, call, input, output, gpu))
}
