//! The native part of the `gpu_conv` Python package: `scipy.ndimage`'s filters on the engine
//! of `conv-host`, for NumPy arrays (through the host pipeline) and device arrays (CuPy,
//! PyTorch), or on the f64 CPU twins where no GPU is found. The Python layer (`gpu_conv/`)
//! checks and normalises SciPy's arguments; this module runs what it passes.

mod device;
mod host;
mod ops;

use conv_host::{ConvError, Engine};
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Calls `$run::<T, O>($args)` for the NumPy names of an input and an output element type the
/// engine filters natively (`bfloat16` is `ml_dtypes`' name); a `TypeError` for other pairs.
#[macro_export]
macro_rules! element_pairs {
    ($types:expr, $run:ident($($arg:expr),*)) => {{
        use conv_host::{bf16, f16};
        match $types {
            ("uint8", "uint8") => $run::<u8, u8>($($arg),*),
            ("uint16", "uint16") => $run::<u16, u16>($($arg),*),
            ("float16", "float16") => $run::<f16, f16>($($arg),*),
            ("bfloat16", "bfloat16") => $run::<bf16, bf16>($($arg),*),
            ("float32", "float32") => $run::<f32, f32>($($arg),*),
            ("float64", "float64") => $run::<f64, f64>($($arg),*),
            ("uint8", "float32") => $run::<u8, f32>($($arg),*),
            ("uint16", "float32") => $run::<u16, f32>($($arg),*),
            ("float16", "float32") => $run::<f16, f32>($($arg),*),
            ("bfloat16", "float32") => $run::<bf16, f32>($($arg),*),
            (a, b) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "no native filter from {a} into {b}"
            ))),
        }
    }};
}

/// The process's engine of each device, created on first use and kept (its modules, lanes and
/// staging are reused by every later call); a failed creation is kept too, as its message.
fn engine(ordinal: usize) -> PyResult<&'static Engine> {
    static ENGINES: OnceLock<Mutex<HashMap<usize, Result<&'static Engine, String>>>> =
        OnceLock::new();
    let engines = ENGINES.get_or_init(Default::default);
    let mut engines = engines
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let entry = engines.entry(ordinal).or_insert_with(|| {
        Engine::with_device(ordinal)
            .map(|engine| &*Box::leak(Box::new(engine)))
            .map_err(|error| error.to_string())
    });
    entry.clone().map_err(PyRuntimeError::new_err)
}

/// The library's error as the Python exception SciPy raises for the same kind of problem.
pub(crate) fn to_py_error(error: ConvError) -> PyErr {
    let message = error.to_string();
    match error {
        ConvError::OutOfMemory { .. } | ConvError::HostOutOfMemory { .. } => {
            PyMemoryError::new_err(message)
        }
        ConvError::InvalidParameter { .. }
        | ConvError::InvalidRank { .. }
        | ConvError::InvalidAxis { .. }
        | ConvError::InvalidOrigin { .. }
        | ConvError::EmptyMask
        | ConvError::ShapeMismatch { .. }
        | ConvError::OverlappingOutput
        | ConvError::InvalidClamp { .. }
        | ConvError::TooLarge { .. } => PyValueError::new_err(message),
        ConvError::DeviceMismatch { .. } => PyValueError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// The GPU the package filters on: its name and compute capability, or the reason none is
/// used (then the f64 CPU twins run).
#[pyfunction]
fn gpu_info(py: Python<'_>, ordinal: usize) -> PyResult<(String, (i32, i32))> {
    py.detach(|| {
        let engine = engine(ordinal)?;
        let info = engine.device();
        Ok((info.name.clone(), info.compute_capability))
    })
}

/// What the CPU backend runs on: `cpu (16 threads, AVX2 and FMA)`.
#[pyfunction]
fn cpu_info() -> String {
    conv_host::Cpu.to_string()
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(host::filter_host, module)?)?;
    module.add_function(wrap_pyfunction!(device::filter_device, module)?)?;
    module.add_function(wrap_pyfunction!(gpu_info, module)?)?;
    module.add_function(wrap_pyfunction!(cpu_info, module)?)?;
    Ok(())
}
