//! Convolution of NumPy arrays, to check results against SciPy directly.
//!
//! ```sh
//! cargo run --release --example convolve -- --input x.npy --mask m.npy --output y.npy \
//!     [--mode reflect] [--cval 0] [--origin 0] [--correlate] [--cpu]
//! ```
//!
//! `x.npy` is a float32 array of shape `(N,)`, `(H, W)` or `(H, W, C)` (interleaved channels);
//! `m.npy` is a float32 mask with one axis for a 1D input and two otherwise (applied to every
//! channel). The defaults are `scipy.ndimage.convolve`'s: mode `reflect`, cval 0, origin 0; the
//! origin applies to every axis. `--correlate` computes `scipy.ndimage.correlate` instead. The GPU
//! is used when there is one, the f64 CPU reference otherwise or with `--cpu`.

use conv_host::{BoundaryMode, Conv1dOptions, Conv2dOptions, ConvError, Engine, reference};
use ndarray::{ArrayD, Ix1, Ix2, Ix3};
use ndarray_npy::{read_npy, write_npy};
use std::process::ExitCode;
use std::time::Instant;

#[path = "common/cli.rs"]
mod cli;

const USAGE: &str = "usage: convolve --input X.npy --mask M.npy --output Y.npy \
[--mode constant|nearest|reflect|mirror|wrap] [--cval V] [--origin K] [--correlate] [--cpu]";

struct Args {
    input: String,
    mask: String,
    output: String,
    mode: BoundaryMode,
    origin: isize,
    correlate: bool,
    cpu: bool,
}

fn parse_args() -> Result<Args, String> {
    let (mut input, mut mask, mut output) = (None, None, None);
    let (mut mode, mut cval, mut origin) = (BoundaryMode::Reflect, 0.0f32, 0isize);
    let (mut correlate, mut cpu) = (false, false);
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
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
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
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
    })
}

fn run(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let input: ArrayD<f32> = read_npy(&args.input).map_err(|e| format!("{}: {e}", args.input))?;
    let mask: ArrayD<f32> = read_npy(&args.mask).map_err(|e| format!("{}: {e}", args.mask))?;
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
    let shape_error = |e: ndarray::ShapeError| {
        format!("input {:?} / mask {:?}: {e}", input.shape(), mask.shape())
    };
    let result: Result<ArrayD<f32>, ConvError> = match (input.ndim(), mask.ndim()) {
        (1, 1) => {
            let (x, m) = (
                input
                    .view()
                    .into_dimensionality::<Ix1>()
                    .map_err(shape_error)?,
                mask.view()
                    .into_dimensionality::<Ix1>()
                    .map_err(shape_error)?,
            );
            let options = Conv1dOptions {
                mode: args.mode,
                origin: args.origin,
                ..Default::default()
            };
            match (&engine, args.correlate) {
                (Some(e), true) => e.correlate1d(&x, &m, &options).map(|a| a.into_dyn()),
                (Some(e), false) => e.convolve1d(&x, &m, &options).map(|a| a.into_dyn()),
                (None, true) => reference::correlate1d(&x, &m, &options)
                    .map(|a| a.mapv(|v| v as f32).into_dyn()),
                (None, false) => {
                    reference::convolve1d(&x, &m, &options).map(|a| a.mapv(|v| v as f32).into_dyn())
                }
            }
        }
        (2, 2) => {
            let x = input
                .view()
                .into_dimensionality::<Ix2>()
                .map_err(shape_error)?;
            filter2d(&engine, x, &mask, args)
        }
        (3, 2) => {
            let x = input
                .view()
                .into_dimensionality::<Ix3>()
                .map_err(shape_error)?;
            filter2d(&engine, x, &mask, args)
        }
        (n, k) => {
            return Err(format!(
                "unsupported shapes: a {n}-D input with a {k}-D mask (1-D with 1-D, 2-D or 3-D with 2-D)"
            ));
        }
    };
    let result = result.map_err(|e| e.to_string())?;
    let filter_ms = ms_since(filter_start);
    let write_start = Instant::now();
    write_npy(&args.output, &result).map_err(|e| format!("{}: {e}", args.output))?;
    println!("wrote {} {:?}", args.output, result.shape());
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

fn filter2d<D: conv_host::ImageDim>(
    engine: &Option<Engine>,
    image: ndarray::ArrayView<f32, D>,
    mask: &ArrayD<f32>,
    args: &Args,
) -> Result<ArrayD<f32>, ConvError> {
    let mask = mask
        .view()
        .into_dimensionality::<Ix2>()
        .expect("checked: a 2-D mask");
    let options = Conv2dOptions {
        mode: args.mode,
        origin: [args.origin; 2],
        ..Default::default()
    };
    let result = match (engine, args.correlate) {
        (Some(e), true) => e.correlate2d(&image, &mask, &options)?,
        (Some(e), false) => e.convolve2d(&image, &mask, &options)?,
        (None, true) => reference::correlate2d(&image, &mask, &options)?.mapv(|v| v as f32),
        (None, false) => reference::convolve2d(&image, &mask, &options)?.mapv(|v| v as f32),
    };
    Ok(result.into_dyn())
}

fn main() -> ExitCode {
    cli::main(USAGE, parse_args, run)
}
