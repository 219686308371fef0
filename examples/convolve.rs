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
//! the CPU backend (all cores, in the input's real type as on the GPU) otherwise or with
//! `--cpu`.

use conv_host::ndimage::{NdOptions, Ndimage};
use conv_host::{BoundaryMode, ConvError, Cpu, Element, Engine};
use ndarray::{ArrayD, Axis, Ix1};
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
    let nd = engine.as_ref().map_or(Cpu.ndimage(), Engine::ndimage);
    let job = Job {
        nd,
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

/// One filtering job: where it runs, the mask and the options.
struct Job<'a> {
    nd: Ndimage<'a>,
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
        let (n, k) = (input.ndim(), mask.ndim());
        if self.args.axis.is_some() && k != 1 {
            return Err(format!(
                "--axis takes a 1-D mask; {} has {k} dimensions",
                self.args.mask
            ));
        }
        let mut output = ArrayD::from_elem(input.raw_dim(), O::default());
        let correlate = self.args.correlate;
        let result = match (n, k) {
            (_, 1) if self.args.axis.is_some() => {
                let mask = mask
                    .into_dimensionality::<Ix1>()
                    .map_err(|e| e.to_string())?;
                let (options, axis) = (self.options(n, n), self.args.axis.unwrap_or(-1));
                let output = output.view_mut();
                if correlate {
                    self.nd
                        .correlate1d_into(&input, &mask, axis, &options, output)
                } else {
                    self.nd
                        .convolve1d_into(&input, &mask, axis, &options, output)
                }
            }
            (1, 1) | (2, 2) | (3, 3) | (3, 2) | (4, 3) => {
                // An image's or a volume's channels: the mask one deep along them.
                let mask = if n > k {
                    mask.insert_axis(Axis(k))
                } else {
                    mask
                };
                let options = self.options(n, k);
                if correlate {
                    self.nd
                        .correlate_into(&input, &mask, &options, output.view_mut())
                } else {
                    self.nd
                        .convolve_into(&input, &mask, &options, output.view_mut())
                }
            }
            (n, k) => {
                return Err(format!(
                    "unsupported shapes: a {n}-D input with a {k}-D mask (1-D with 1-D, 2-D or 3-D \
                     with 2-D, 3-D or 4-D with 3-D, any with 1-D and --axis)"
                ));
            }
        };
        result.map(|()| output).map_err(|e| e.to_string())
    }

    /// The options of an input of `ndim` dimensions whose first `filtered` axes the mask
    /// spans: the origin on those, 0 on the channels.
    fn options(&self, ndim: usize, filtered: usize) -> NdOptions {
        let origin = (0..ndim)
            .map(|axis| if axis < filtered { self.args.origin } else { 0 })
            .collect::<Vec<_>>();
        NdOptions {
            mode: self.args.mode.into(),
            origin: origin.into(),
            ..Default::default()
        }
    }
}

fn main() -> ExitCode {
    cli::main(USAGE, parse_args, run)
}
