//! Convolution of NumPy arrays, to check results against SciPy directly.
//!
//! ```sh
//! cargo run --release --example convolve -- --input x.npy --mask m.npy --output y.npy \
//!     [--mode reflect] [--cval 0] [--origin 0] [--correlate] [--cpu] [--output-dtype float32] \
//!     [--axis K]
//! ```
//!
//! `x.npy` is an array of float64, float32, float16, uint8 or uint16; `m.npy` a float64 or
//! float32 mask: with one axis for a signal `(N,)`, two for an image `(H, W)` or `(H, W, C)`
//! (interleaved channels, each filtered with the mask), three for a volume `(D, H, W)` or
//! `(D, H, W, C)`; with `--axis K`, a 1D mask along axis `K` of an input of any dimensions
//! (`scipy.ndimage.convolve1d`). The output has the input's dtype
//! unless `--output-dtype` names another (float64 inputs give float64 only); integer outputs are
//! rounded to nearest and saturated, where SciPy truncates and wraps around. The defaults are
//! `scipy.ndimage.convolve`'s: mode `reflect`, cval 0, origin 0; the origin applies to every axis.
//! `--correlate` computes `scipy.ndimage.correlate` instead. The GPU is used when there is one,
//! the f64 CPU reference otherwise or with `--cpu`.

use conv_host::ndimage::NdOptions;
use conv_host::{
    BoundaryMode, Conv1dOptions, Conv2dOptions, ConvError, Element, Engine, ImageDim, reference,
};
use ndarray::{
    Array, Array1, ArrayD, ArrayView, ArrayView1, ArrayView2, ArrayViewD, Ix1, Ix2, Ix3,
};
use npy::{Dtype, Npy};
use std::process::ExitCode;
use std::time::Instant;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/npy.rs"]
mod npy;

const USAGE: &str = "usage: convolve --input X.npy --mask M.npy --output Y.npy \
[--mode constant|nearest|reflect|mirror|wrap] [--cval V] [--origin K] [--correlate] [--cpu] \
[--output-dtype float64|float32|float16|uint8|uint16] [--axis K]";

struct Args {
    input: String,
    mask: String,
    output: String,
    mode: BoundaryMode,
    origin: isize,
    correlate: bool,
    cpu: bool,
    output_dtype: Option<Dtype>,
    axis: Option<isize>,
}

fn parse_args() -> Result<Args, String> {
    let (mut input, mut mask, mut output) = (None, None, None);
    let (mut mode, mut cval, mut origin) = (BoundaryMode::Reflect, 0.0f32, 0isize);
    let (mut correlate, mut cpu, mut output_dtype, mut axis) = (false, false, None, None);
    let mut words = std::env::args().skip(1);
    let mut flags = cli::Flags::default();
    while let Some(flag) = words.next() {
        flags.once(&flag)?;
        let mut value = || words.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--input" => input = Some(value()?),
            "--mask" => mask = Some(value()?),
            "--output" => output = Some(value()?),
            "--mode" => mode = value()?.parse()?,
            "--cval" => cval = value()?.parse().map_err(|e| format!("--cval: {e}"))?,
            "--origin" => origin = value()?.parse().map_err(|e| format!("--origin: {e}"))?,
            "--correlate" => correlate = true,
            "--cpu" => cpu = true,
            "--output-dtype" => output_dtype = Some(Dtype::parse(&value()?)?),
            "--axis" => axis = Some(value()?.parse().map_err(|e| format!("--axis: {e}"))?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    // As `scipy.ndimage`'s `cval`: given with any mode, used by `constant` alone.
    if let BoundaryMode::Constant(_) = mode {
        mode = BoundaryMode::Constant(cval);
    }
    let required = |v: Option<String>, name: &str| v.ok_or_else(|| format!("{name} is required"));
    Ok(Args {
        input: required(input, "--input")?,
        mask: required(mask, "--mask")?,
        output: required(output, "--output")?,
        mode,
        origin,
        correlate,
        cpu,
        output_dtype,
        axis,
    })
}

fn run(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let input = npy::read(&args.input)?;
    let mask = npy::read(&args.mask)?;
    let read_ms = ms_since(started);
    let engine_start = Instant::now();
    let engine = if args.cpu {
        None
    } else {
        match Engine::new() {
            Ok(engine) => Some(engine),
            Err(e @ (ConvError::NoDriver | ConvError::NoDevice { .. })) => {
                eprintln!("no GPU ({e}); computing on the CPU");
                None
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let engine_ms = ms_since(engine_start);
    let filter_start = Instant::now();
    let mask = mask.to_f64();
    let output_dtype = args.output_dtype.unwrap_or(input.dtype());
    let job = Job {
        engine: &engine,
        mask: &mask,
        args,
    };
    let result = match (input, output_dtype) {
        (Npy::F64(x), Dtype::F64) => Npy::F64(job.filter(x)?),
        (Npy::F64(_), other) => {
            return Err(format!(
                "float64 inputs give float64 outputs, not {}",
                other.name()
            ));
        }
        (_, Dtype::F64) => return Err("float64 outputs need a float64 input".into()),
        (Npy::F32(x), out) => job.filter_as(x, out)?,
        (Npy::F16(x), out) => job.filter_as(x, out)?,
        (Npy::U8(x), out) => job.filter_as(x, out)?,
        (Npy::U16(x), out) => job.filter_as(x, out)?,
    };
    let filter_ms = ms_since(filter_start);
    let write_start = Instant::now();
    npy::write(&args.output, &result)?;
    println!(
        "wrote {} {:?} {}",
        args.output,
        result.shape(),
        result.dtype().name()
    );
    let stages = engine
        .as_ref()
        .and_then(|e| e.last_host_times())
        .map_or(String::new(), |t| format!(" (GPU call: {t})"));
    println!(
        "read {read_ms:.1} ms, engine start {engine_ms:.1} ms, filter {filter_ms:.2} ms{stages}, \
         write {:.1} ms, whole run {:.1} ms",
        ms_since(write_start),
        ms_since(started)
    );
    Ok(())
}

/// Milliseconds since `start`.
fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e3
}

/// One filtering job: the engine (or the CPU), the mask and the options.
struct Job<'a> {
    engine: &'a Option<Engine>,
    mask: &'a ArrayD<f64>,
    args: &'a Args,
}

impl Job<'_> {
    /// Filters an input of a type computed in `f32` into the output dtype `out`.
    fn filter_as<T: Element<Real = f32>>(&self, x: ArrayD<T>, out: Dtype) -> Result<Npy, String> {
        Ok(match out {
            Dtype::F32 => Npy::F32(self.filter(x)?),
            Dtype::F16 => Npy::F16(self.filter(x)?),
            Dtype::U8 => Npy::U8(self.filter(x)?),
            Dtype::U16 => Npy::U16(self.filter(x)?),
            Dtype::F64 => unreachable!("routed before"),
        })
    }

    /// Filters `input` (1-D with a 1-D mask, 2-D or 3-D with a 2-D one, 3-D or 4-D with a 3-D
    /// one, any with a 1-D mask along `--axis`) into an array of `O`.
    fn filter<T: Element, O: Element<Real = T::Real>>(
        &self,
        input: ArrayD<T>,
    ) -> Result<ArrayD<O>, String> {
        let mask = self.mask.mapv(<T::Real as Element>::from_f64);
        let shaped = |e: ndarray::ShapeError| {
            format!("input {:?} / mask {:?}: {e}", input.shape(), mask.shape())
        };
        let x = input.view();
        if self.args.axis.is_some() && mask.ndim() != 1 {
            return Err(format!(
                "--axis takes a 1-D mask; {} has {} dimensions",
                self.args.mask,
                mask.ndim()
            ));
        }
        let result = match (input.ndim(), mask.ndim()) {
            (_, 1) if self.args.axis.is_some() => {
                let m = mask.view().into_dimensionality::<Ix1>().map_err(shaped)?;
                self.filter_axis(x, m)
            }
            (3, 3) => self.filter_nd(x, mask.view()),
            (4, 3) => self.filter_nd(x, mask.view().insert_axis(ndarray::Axis(3))),
            (1, 1) => {
                let m = mask.view().into_dimensionality::<Ix1>().map_err(shaped)?;
                self.filter1d(x.into_dimensionality::<Ix1>().map_err(shaped)?, m)
                    .map(Array::into_dyn)
            }
            (2 | 3, 2) => {
                let m = mask.view().into_dimensionality::<Ix2>().map_err(shaped)?;
                match x.into_dimensionality::<Ix2>() {
                    Ok(image) => self.filter2d(image, m).map(Array::into_dyn),
                    Err(_) => {
                        let image = input.view().into_dimensionality::<Ix3>().map_err(shaped)?;
                        self.filter2d(image, m).map(Array::into_dyn)
                    }
                }
            }
            (n, k) => {
                return Err(format!(
                    "unsupported shapes: a {n}-D input with a {k}-D mask (1-D with 1-D, 2-D or 3-D \
                     with 2-D, 3-D or 4-D with 3-D, any with 1-D and --axis)"
                ));
            }
        };
        result.map_err(|e| e.to_string())
    }

    /// A signal on the 1D kernels (or the CPU reference), into `O`.
    fn filter1d<T: Element, O: Element<Real = T::Real>>(
        &self,
        signal: ArrayView1<T>,
        mask: ArrayView1<T::Real>,
    ) -> Result<Array1<O>, ConvError> {
        let options = Conv1dOptions {
            mode: self.args.mode,
            origin: self.args.origin,
            ..Default::default()
        };
        let correlate = self.args.correlate;
        match self.engine {
            Some(engine) => {
                let mut output = Array1::from_elem(signal.len(), O::default());
                if correlate {
                    engine.correlate1d_into(&signal, &mask, &options, output.view_mut())?;
                } else {
                    engine.convolve1d_into(&signal, &mask, &options, output.view_mut())?;
                }
                Ok(output)
            }
            None if correlate => {
                Ok(reference::correlate1d(&signal, &mask, &options)?.mapv(O::from_f64))
            }
            None => Ok(reference::convolve1d(&signal, &mask, &options)?.mapv(O::from_f64)),
        }
    }

    /// The options of an input of `ndim` dimensions: the origin on every axis but a 4-D
    /// volume's channels.
    fn nd_options(&self, ndim: usize) -> NdOptions {
        let mut origin = vec![self.args.origin; ndim];
        if ndim == 4 && self.args.axis.is_none() {
            origin[3] = 0;
        }
        NdOptions {
            mode: self.args.mode.into(),
            origin: origin.into(),
            ..Default::default()
        }
    }

    /// A 1D mask along `--axis` of an input of any dimensions, into `O`.
    fn filter_axis<T: Element, O: Element<Real = T::Real>>(
        &self,
        input: ArrayViewD<T>,
        mask: ArrayView1<T::Real>,
    ) -> Result<ArrayD<O>, ConvError> {
        let (options, axis) = (self.nd_options(input.ndim()), self.args.axis.unwrap_or(-1));
        let correlate = self.args.correlate;
        match self.engine {
            Some(engine) => {
                let nd = engine.ndimage();
                let mut output = ArrayD::from_elem(input.raw_dim(), O::default());
                if correlate {
                    nd.correlate1d_into(&input, &mask, axis, &options, output.view_mut())?;
                } else {
                    nd.convolve1d_into(&input, &mask, axis, &options, output.view_mut())?;
                }
                Ok(output)
            }
            None if correlate => Ok(reference::ndimage::correlate1d(
                &input, &mask, axis, &options,
            )?
            .mapv(O::from_f64)),
            None => Ok(
                reference::ndimage::convolve1d(&input, &mask, axis, &options)?.mapv(O::from_f64),
            ),
        }
    }

    /// A volume (channels last in 4-D) on the 3D kernel, into `O`.
    fn filter_nd<T: Element, O: Element<Real = T::Real>>(
        &self,
        input: ArrayViewD<T>,
        mask: ArrayViewD<T::Real>,
    ) -> Result<ArrayD<O>, ConvError> {
        let options = self.nd_options(input.ndim());
        let correlate = self.args.correlate;
        match self.engine {
            Some(engine) => {
                let nd = engine.ndimage();
                let mut output = ArrayD::from_elem(input.raw_dim(), O::default());
                if correlate {
                    nd.correlate_into(&input, &mask, &options, output.view_mut())?;
                } else {
                    nd.convolve_into(&input, &mask, &options, output.view_mut())?;
                }
                Ok(output)
            }
            None if correlate => {
                Ok(reference::ndimage::correlate(&input, &mask, &options)?.mapv(O::from_f64))
            }
            None => Ok(reference::ndimage::convolve(&input, &mask, &options)?.mapv(O::from_f64)),
        }
    }

    fn options(&self) -> Conv2dOptions {
        Conv2dOptions {
            mode: self.args.mode,
            origin: [self.args.origin; 2],
            ..Default::default()
        }
    }

    /// An image on the 2D kernels (or the CPU reference), into `O`.
    fn filter2d<T: Element, O: Element<Real = T::Real>, D: ImageDim>(
        &self,
        image: ArrayView<T, D>,
        mask: ArrayView2<T::Real>,
    ) -> Result<Array<O, D>, ConvError> {
        let options = self.options();
        let correlate = self.args.correlate;
        match self.engine {
            Some(engine) => {
                let mut output = Array::from_elem(image.raw_dim(), O::default());
                if correlate {
                    engine.correlate2d_into(&image, &mask, &options, output.view_mut())?;
                } else {
                    engine.convolve2d_into(&image, &mask, &options, output.view_mut())?;
                }
                Ok(output)
            }
            None if correlate => {
                Ok(reference::correlate2d(&image, &mask, &options)?.mapv(O::from_f64))
            }
            None => Ok(reference::convolve2d(&image, &mask, &options)?.mapv(O::from_f64)),
        }
    }
}

fn main() -> ExitCode {
    cli::main(USAGE, parse_args, run)
}
