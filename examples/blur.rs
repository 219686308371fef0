//! The main job: blur an image with a Gaussian on the GPU.
//!
//! ```sh
//! cargo run --release --example blur                      # built-in image -> blur-output.png
//! cargo run --release --example blur -- --input photo.jpg --sigma 3 --mode reflect
//! ```
//!
//! Without an NVIDIA driver or GPU it says so in one line and computes the same image on the
//! CPU (`--require-gpu` makes that an error). Reads and writes 8-bit grey, grey + alpha, RGB and
//! RGBA PNG or JPEG; the channels are filtered interleaved, clamped to [0, 1] and rounded back.

use conv_host::masks::{DEFAULT_TRUNCATE, gaussian2d};
use conv_host::{BoundaryMode, Clamp, Conv2dOptions, ConvError, Engine, Kernel, reference};
use image::{DynamicImage, ImageBuffer};
use ndarray::Array3;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[path = "common/cli.rs"]
mod cli;

const USAGE: &str = "\
usage: blur [--input PATH] [--output PATH] [--sigma S] [--truncate T | --radius R]
            [--mode constant|nearest|reflect|mirror|wrap] [--cval V]
            [--kernel auto|basic|constant-mask|tiled|tiled-l2|register-tiled|separable|separable-tma|register-tiled-tma] [--tile XxY]
            [--cpu] [--require-gpu]

  --input PATH     PNG or JPEG, 8-bit grey, grey+alpha, RGB or RGBA (default: a built-in image)
  --output PATH    where to write the result, .png or .jpg (default: blur-output.png)
  --sigma S        Gaussian standard deviation in pixels (default 2)
  --truncate T     cut the Gaussian at T sigmas (default 4, as SciPy)
  --radius R       cut the Gaussian at R pixels instead
  --mode MODE      boundary mode (default reflect, as scipy.ndimage.gaussian_filter)
  --cval V         ghost-cell value for --mode constant, in [0, 1] (default 0)
  --kernel NAME    GPU kernel design (default auto)
  --tile XxY       threads per block, e.g. 32x8
  --cpu            compute on the CPU
  --require-gpu    fail instead of falling back to the CPU";

struct Args {
    input: Option<PathBuf>,
    output: PathBuf,
    sigma: f32,
    truncate: f32,
    radius: Option<f32>,
    mode: BoundaryMode,
    cval: f32,
    kernel: Kernel,
    tile: Option<(u32, u32)>,
    cpu: bool,
    require_gpu: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        input: None,
        output: PathBuf::from("blur-output.png"),
        sigma: 2.0,
        truncate: DEFAULT_TRUNCATE,
        radius: None,
        mode: BoundaryMode::Reflect,
        cval: 0.0,
        kernel: Kernel::Auto,
        tile: None,
        cpu: false,
        require_gpu: false,
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let mut value = || words.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<f32>()
                .map_err(|e| format!("{flag} {text}: {e}"))
        };
        match flag.as_str() {
            "--input" => args.input = Some(PathBuf::from(value()?)),
            "--output" => args.output = PathBuf::from(value()?),
            "--sigma" => args.sigma = number(value()?)?,
            "--truncate" => args.truncate = number(value()?)?,
            "--radius" => args.radius = Some(number(value()?)?),
            "--mode" => args.mode = value()?.parse()?,
            "--cval" => args.cval = number(value()?)?,
            "--kernel" => args.kernel = value()?.parse()?,
            "--tile" => {
                let text = value()?;
                let (x, y) = text
                    .split_once('x')
                    .ok_or(format!("--tile {text}: expected XxY"))?;
                let side = |s: &str| s.parse::<u32>().map_err(|e| format!("--tile {text}: {e}"));
                args.tile = Some((side(x)?, side(y)?));
            }
            "--cpu" => args.cpu = true,
            "--require-gpu" => args.require_gpu = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if let BoundaryMode::Constant(_) = args.mode {
        args.mode = BoundaryMode::Constant(args.cval);
    }
    if let Some(radius) = args.radius {
        // SciPy's radius = int(truncate * sigma + 0.5); this truncate gives exactly `radius`.
        args.truncate = if args.sigma > 0.0 {
            radius / args.sigma
        } else {
            0.0
        };
    }
    Ok(args)
}

/// A deterministic 384 x 256 RGB test card: coloured checkerboard, a disc, fine stripes.
fn builtin_image() -> Array3<f32> {
    Array3::from_shape_fn((256, 384, 3), |(y, x, c)| {
        let check = ((x / 32) + (y / 32)) % 2 == 0;
        let (dx, dy) = (x as f32 - 250.0, y as f32 - 120.0);
        let disc = dx * dx + dy * dy < 70.0 * 70.0;
        let stripes = y > 200 && (x / 3) % 2 == 0;
        let base = if check {
            [0.9, 0.8, 0.2]
        } else {
            [0.1, 0.3, 0.7]
        };
        if stripes {
            [1.0, 1.0, 1.0][c]
        } else if disc {
            [0.85, 0.1, 0.2][c]
        } else {
            base[c]
        }
    })
}

/// Pixels as `H x W x C` floats in [0, 1], and the channel count of the file.
fn load(path: &PathBuf) -> Result<Array3<f32>, String> {
    let image = image::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (width, height) = (image.width() as usize, image.height() as usize);
    let (channels, bytes) = match image {
        DynamicImage::ImageLuma8(buffer) => (1, buffer.into_raw()),
        DynamicImage::ImageLumaA8(buffer) => (2, buffer.into_raw()),
        DynamicImage::ImageRgb8(buffer) => (3, buffer.into_raw()),
        other => (4, other.into_rgba8().into_raw()),
    };
    let floats = bytes.iter().map(|&b| f32::from(b) / 255.0).collect();
    Array3::from_shape_vec((height, width, channels), floats).map_err(|e| e.to_string())
}

fn save(pixels: &Array3<f32>, path: &PathBuf) -> Result<(), String> {
    let (height, width, channels) = pixels.dim();
    let bytes: Vec<u8> = pixels
        .iter()
        .map(|&v| (v.clamp(0.0, 1.0) * 255.0).round() as u8)
        .collect();
    let (w, h) = (width as u32, height as u32);
    let shape_error = || "pixel buffer does not match the image size".to_string();
    let image = match channels {
        1 => DynamicImage::ImageLuma8(ImageBuffer::from_raw(w, h, bytes).ok_or_else(shape_error)?),
        2 => DynamicImage::ImageLumaA8(ImageBuffer::from_raw(w, h, bytes).ok_or_else(shape_error)?),
        3 => DynamicImage::ImageRgb8(ImageBuffer::from_raw(w, h, bytes).ok_or_else(shape_error)?),
        _ => DynamicImage::ImageRgba8(ImageBuffer::from_raw(w, h, bytes).ok_or_else(shape_error)?),
    };
    // JPEG has no alpha channel.
    let is_jpeg = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg"));
    let image = if is_jpeg && channels % 2 == 0 {
        DynamicImage::ImageRgb8(image.to_rgb8())
    } else {
        image
    };
    image
        .save(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn blur_on_gpu(
    engine: &Engine,
    pixels: &Array3<f32>,
    args: &Args,
    options: &Conv2dOptions,
) -> Result<Array3<f32>, ConvError> {
    let mask = gaussian2d(args.sigma, args.truncate)?;
    let plan = engine.plan2d(&mask, pixels.dim(), options)?;
    engine.correlate2d(pixels, &mask, options)?; // warm-up: loads the kernel, the staging
    let start = Instant::now();
    let blurred = engine.correlate2d(pixels, &mask, options)?;
    let call_ms = start.elapsed().as_secs_f64() * 1e3;
    let kernel_ms = engine.last_kernel_time_ms().unwrap_or(f32::NAN);
    let stages = engine.last_host_times().unwrap_or_default();
    let bytes = 2.0 * (pixels.len() * size_of::<f32>()) as f64;
    let device = engine.device();
    println!(
        "device: {} (compute capability {}.{})",
        device.name, device.compute_capability.0, device.compute_capability.1
    );
    println!(
        "kernel: {} ({}), mask {} x {}, tile {} x {} threads, output tile {} x {}",
        plan.kernel,
        plan.entry_point,
        mask.nrows(),
        mask.ncols(),
        plan.block.0,
        plan.block.1,
        plan.output_tile.0,
        plan.output_tile.1
    );
    println!(
        "kernel time: {kernel_ms:.3} ms, effective bandwidth {:.1} GB/s (f32 image read + written)",
        bytes / (f64::from(kernel_ms) * 1e6)
    );
    println!("host -> host: {call_ms:.1} ms in {stages}");
    Ok(blurred)
}

fn run(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    let pixels = match &args.input {
        Some(path) => load(path)?,
        None => builtin_image(),
    };
    let read_ms = started.elapsed().as_secs_f64() * 1e3;
    let (height, width, channels) = pixels.dim();
    let source = args
        .input
        .as_ref()
        .map_or("built-in test card".into(), |p| p.display().to_string());
    println!(
        "image: {source}, {width} x {height}, {channels} channel(s); Gaussian sigma {}, truncate {}",
        args.sigma, args.truncate
    );
    let options = Conv2dOptions {
        mode: args.mode,
        kernel: args.kernel,
        tile: args.tile,
        clamp: Some(Clamp { lo: 0.0, hi: 1.0 }),
        ..Default::default()
    };
    let engine = if args.cpu {
        None
    } else {
        match Engine::new() {
            Ok(engine) => Some(engine),
            Err(e @ (ConvError::NoDriver | ConvError::NoDevice { .. })) if !args.require_gpu => {
                println!("no GPU ({e}); computing on the CPU");
                None
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let blurred = match engine {
        Some(engine) => blur_on_gpu(&engine, &pixels, args, &options).map_err(|e| e.to_string())?,
        None => {
            let start = Instant::now();
            let blurred = reference::gaussian_filter(&pixels, args.sigma, args.truncate, &options)
                .map_err(|e| e.to_string())?;
            println!(
                "CPU (f64 reference, separable): {:.1} ms",
                start.elapsed().as_secs_f64() * 1e3
            );
            blurred.mapv(|v| v as f32)
        }
    };
    let write_start = Instant::now();
    save(&blurred, &args.output)?;
    println!(
        "wrote {}; read and decode {read_ms:.1} ms, encode and write {:.1} ms, whole run {:.1} ms",
        args.output.display(),
        write_start.elapsed().as_secs_f64() * 1e3,
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

fn main() -> ExitCode {
    cli::main(USAGE, parse_args, run)
}
