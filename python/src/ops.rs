//! The operations the Python package calls, as one typed value each, and their dispatch to the
//! engine's N-D operations (host or device operands) and to the f64 CPU twins.

use conv_host::ndimage::{NdOptions, Ndimage, Operands, PerAxis};
use conv_host::{BoundaryMode, Result};
use ndarray::{Array1, ArrayD, IxDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// One `scipy.ndimage` operation with its own arguments (the shared ones are in [`NdOptions`]).
pub enum Op {
    Correlate1d { weights: Array1<f64>, axis: isize },
    Convolve1d { weights: Array1<f64>, axis: isize },
    Correlate { weights: ArrayD<f64> },
    Convolve { weights: ArrayD<f64> },
    GaussianFilter1d { sigma: f64, axis: isize, order: u32 },
    GaussianFilter { sigma: Vec<f64>, order: Vec<u32> },
    UniformFilter1d { size: usize, axis: isize },
    UniformFilter { size: Vec<usize> },
    Sobel { axis: isize },
    Prewitt { axis: isize },
    Laplace,
    GaussianLaplace { sigma: Vec<f64> },
    GaussianGradientMagnitude { sigma: Vec<f64> },
}

/// A list of one value for every axis, or of one per axis.
fn per_axis<T: Clone>(values: &[T]) -> PerAxis<T> {
    match values {
        [one] => PerAxis::All(one.clone()),
        many => PerAxis::Each(many.to_vec()),
    }
}

/// The arguments of one call, as the Python layer passes them (already checked and
/// normalised there: modes by their canonical names, sequences as lists).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Call {
    op: String,
    weights: Option<Vec<f64>>,
    weights_shape: Option<Vec<usize>>,
    axis: isize,
    sigma: Vec<f64>,
    order: Vec<u32>,
    size: Vec<usize>,
    modes: Vec<String>,
    cval: f64,
    origin: Vec<isize>,
    truncate: f64,
    radius: Option<Vec<usize>>,
    axes: Option<Vec<isize>>,
}

/// A boundary mode by its canonical `scipy.ndimage` name.
fn mode(name: &str, cval: f64) -> PyResult<BoundaryMode> {
    Ok(match name {
        "reflect" => BoundaryMode::Reflect,
        "constant" => BoundaryMode::Constant(cval as f32),
        "nearest" => BoundaryMode::Nearest,
        "mirror" => BoundaryMode::Mirror,
        "wrap" => BoundaryMode::Wrap,
        other => {
            return Err(PyValueError::new_err(format!(
                "boundary mode not supported: {other:?}"
            )));
        }
    })
}

impl Call {
    /// The operation and the options it runs with.
    pub fn parse(self) -> PyResult<(Op, NdOptions)> {
        let modes = self
            .modes
            .iter()
            .map(|name| mode(name, self.cval))
            .collect::<PyResult<Vec<_>>>()?;
        let options = NdOptions {
            mode: per_axis(&modes),
            origin: per_axis(&self.origin),
            truncate: self.truncate,
            radius: self.radius.as_deref().map(per_axis),
            clamp: None,
            axes: self.axes,
            ..NdOptions::default()
        };
        let weights = || -> PyResult<ArrayD<f64>> {
            let shape = self.weights_shape.clone().unwrap_or_default();
            ArrayD::from_shape_vec(IxDyn(&shape), self.weights.clone().unwrap_or_default())
                .map_err(|error| PyValueError::new_err(format!("weights: {error}")))
        };
        let line = || Ok::<_, PyErr>(Array1::from(self.weights.clone().unwrap_or_default()));
        let axis = self.axis;
        let op = match self.op.as_str() {
            "correlate1d" => Op::Correlate1d {
                weights: line()?,
                axis,
            },
            "convolve1d" => Op::Convolve1d {
                weights: line()?,
                axis,
            },
            "correlate" => Op::Correlate {
                weights: weights()?,
            },
            "convolve" => Op::Convolve {
                weights: weights()?,
            },
            "gaussian_filter1d" => Op::GaussianFilter1d {
                sigma: self.sigma[0],
                axis,
                order: self.order[0],
            },
            "gaussian_filter" => Op::GaussianFilter {
                sigma: self.sigma,
                order: self.order,
            },
            "uniform_filter1d" => Op::UniformFilter1d {
                size: self.size[0],
                axis,
            },
            "uniform_filter" => Op::UniformFilter { size: self.size },
            "sobel" => Op::Sobel { axis },
            "prewitt" => Op::Prewitt { axis },
            "laplace" => Op::Laplace,
            "gaussian_laplace" => Op::GaussianLaplace { sigma: self.sigma },
            "gaussian_gradient_magnitude" => Op::GaussianGradientMagnitude { sigma: self.sigma },
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown operation {other:?}"
                )));
            }
        };
        Ok((op, options))
    }
}

/// Declares `$run(op, engine-or-twin, input, options, output)` over every operation, calling
/// `$call!(name, args..)` for each: the engine's `_into` methods and the CPU twins share it.
macro_rules! each_op {
    ($op:expr, $call:ident) => {
        match $op {
            Op::Correlate1d { weights, axis } => {
                $call!(correlate1d, correlate1d_into, weights, *axis)
            }
            Op::Convolve1d { weights, axis } => $call!(convolve1d, convolve1d_into, weights, *axis),
            Op::Correlate { weights } => $call!(correlate, correlate_into, weights),
            Op::Convolve { weights } => $call!(convolve, convolve_into, weights),
            Op::GaussianFilter1d { sigma, axis, order } => {
                $call!(
                    gaussian_filter1d,
                    gaussian_filter1d_into,
                    *sigma,
                    *axis,
                    *order
                )
            }
            Op::GaussianFilter { sigma, order } => {
                $call!(
                    gaussian_filter,
                    gaussian_filter_into,
                    per_axis(sigma),
                    per_axis(order)
                )
            }
            Op::UniformFilter1d { size, axis } => {
                $call!(uniform_filter1d, uniform_filter1d_into, *size, *axis)
            }
            Op::UniformFilter { size } => {
                $call!(uniform_filter, uniform_filter_into, per_axis(size))
            }
            Op::Sobel { axis } => $call!(sobel, sobel_into, *axis),
            Op::Prewitt { axis } => $call!(prewitt, prewitt_into, *axis),
            Op::Laplace => $call!(laplace, laplace_into),
            Op::GaussianLaplace { sigma } => {
                $call!(gaussian_laplace, gaussian_laplace_into, per_axis(sigma))
            }
            Op::GaussianGradientMagnitude { sigma } => $call!(
                gaussian_gradient_magnitude,
                gaussian_gradient_magnitude_into,
                per_axis(sigma)
            ),
        }
    };
}

impl Op {
    /// Runs the operation on `nd` (a GPU engine's or the CPU backend's) from `input` into
    /// `output` (host or device operands of any rank).
    pub fn run<I, O>(&self, nd: Ndimage<'_>, input: I, options: &NdOptions, output: O) -> Result<()>
    where
        (I, O): Operands<Dim = IxDyn>,
    {
        macro_rules! on_engine {
            ($name:ident, $into:ident $(, $arg:expr)*) => {
                nd.$into(input, $($arg,)* options, output)
            };
        }
        each_op!(self, on_engine)
    }
}
