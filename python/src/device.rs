//! Device arrays in and out (CuPy arrays, PyTorch CUDA tensors): the caller's memory filtered
//! where it is, on the GPU that holds it, ordered after the work enqueued so far on the
//! caller's stream and before its later work there; nothing waits on the host.

use crate::ops::Call;
use crate::{engine, to_py_error};
use conv_host::{Element, Engine};
use pyo3::prelude::*;

/// A contiguous row-major device array of the caller's: its address and its element type's
/// NumPy name, a tuple (cheaper to build and read than a dict on every call).
#[derive(FromPyObject)]
pub struct Borrowed(u64, String);

/// Runs `call` from `input` of `T` into `output` of `O`, both of `shape`, on `engine`, ordered
/// on the caller's `stream`.
fn run_typed<T: Element, O: Element<Real = T::Real>>(
    engine: &Engine,
    call: Call,
    (input, output): (&Borrowed, &Borrowed),
    shape: &[usize],
    stream: u64,
) -> PyResult<()> {
    let (op, options) = call.parse()?;
    // SAFETY: the Python layer passes the addresses of live, contiguous, row-major arrays of
    // `shape` and these element types on the engine's device, which it keeps alive for the
    // call; the work is ordered after the caller's stream and the caller's stream after it,
    // so the caller's own kernels do not race with it.
    let (source, target) = unsafe {
        (
            engine.borrow_device::<T>(input.0, shape),
            engine.borrow_device::<O>(output.0, shape),
        )
    };
    let (source, mut target) = (source.map_err(to_py_error)?, target.map_err(to_py_error)?);
    // SAFETY: `stream` is the caller's current stream of the device's primary context.
    unsafe { engine.wait_for_stream(stream) }.map_err(to_py_error)?;
    let result = op
        .run(engine.ndimage(), &source, &options, &mut target)
        .map_err(to_py_error);
    // SAFETY: as above; the caller's later work waits for this call's, error or not.
    let ordered = unsafe { engine.signal_stream(stream) }.map_err(to_py_error);
    result.and(ordered)
}

/// Filters the device array `input` into `output` (contiguous, row-major, of `shape`) on
/// device `device`, after the work enqueued on `stream` and before its later work.
#[pyfunction]
pub fn filter_device(
    py: Python<'_>,
    call: Call,
    arrays: (Borrowed, Borrowed),
    shape: Vec<usize>,
    place: (usize, u64),
) -> PyResult<()> {
    let (device, stream) = place;
    let (input, output) = (&arrays.0, &arrays.1);
    py.detach(|| {
        let engine = engine(device)?;
        let types = (input.1.as_str(), output.1.as_str());
        crate::element_pairs!(
            types,
            run_typed(engine, call, (input, output), &shape, stream)
        )
    })
}
