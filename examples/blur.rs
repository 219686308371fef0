//! The main job: blur an image with a Gaussian on the GPU.
//!
//! ```sh
//! cargo run --release --example blur                      # built-in image -> blur-output.png
//! cargo run --release --example blur -- --input photo.jpg --sigma 3 --mode reflect
//! ```
//!
//! Without an NVIDIA driver or GPU it says so in one line and computes the same image on the
//! CPU (`--require-gpu` makes that an error). Reads grey, grey + alpha, RGB and RGBA PNG or JPEG
//! of 8 or 16 bits per channel and filters the channels interleaved in their own type: the GPU
//! receives and returns the file's bytes, rounding and saturating the results. PNG keeps the
//! depth; JPEG is written in 8 bits.

use conv_host::masks::{DEFAULT_TRUNCATE, gaussian2d};
use conv_host::ndimage::{NdOptions, Ndimage, Runs};
use conv_host::{BoundaryMode, ConvError, Cpu, Element, Engine, Kernel};
use image::{DynamicImage, ImageBuffer};
use ndarray::Array3;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[path = "common/cli.rs"]
mod cli;
#[path = "common/jpeg.rs"]
mod jpeg;

/// JPEG quality of the output, as the `image` crate's default.
const JPEG_QUALITY: u8 = 75;

const USAGE: &str = "\
usage: blur [--input PATH] [--output PATH] [--sigma S] [--truncate T | --radius R]
            [--mode constant|nearest|reflect|mirror|wrap] [--cval V]
            [--kernel auto|basic|constant-mask|tiled|tiled-l2|register-tiled|separable|separable-tma|register-tiled-tma] [--tile XxY]
            [--cpu] [--require-gpu]

  --input PATH     PNG or JPEG, grey, grey+alpha, RGB or RGBA of 8 or 16 bits (default: a
                   built-in image), filtered in its own type on the GPU
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
    let mut flags = cli::Flags::default();
    while let Some(flag) = words.next() {
        flags.once(&flag)?;
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
    match args.mode {
        BoundaryMode::Constant(_) => args.mode = BoundaryMode::Constant(args.cval),
        _ if flags.has("--cval") => return Err("--cval applies to --mode constant only".into()),
        _ => {}
    }
    let conflicts = [
        ("--truncate", "--radius", "give one of them"),
        ("--cpu", "--require-gpu", "they contradict each other"),
        ("--cpu", "--kernel", "--kernel picks a GPU design"),
        ("--cpu", "--tile", "--tile sizes GPU blocks"),
    ];
    for (a, b, why) in conflicts {
        if flags.has(a) && flags.has(b) {
            return Err(format!("{a} and {b} together: {why}"));
        }
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
/// Pixels as the file holds them: 8 or 16 bits per channel.
enum Pixels {
    Bytes(Array3<u8>),
    Words(Array3<u16>),
}

fn builtin_image() -> Array3<u8> {
    Array3::from_shape_fn((256, 384, 3), |(y, x, c)| {
        let check = ((x / 32) + (y / 32)) % 2 == 0;
        let (dx, dy) = (x as f32 - 250.0, y as f32 - 120.0);
        let disc = dx * dx + dy * dy < 70.0 * 70.0;
        let stripes = y > 200 && (x / 3) % 2 == 0;
        let base = if check { [230, 204, 51] } else { [26, 77, 179] };
        if stripes {
            255
        } else if disc {
            [217, 26, 51][c]
        } else {
            base[c]
        }
    })
}

fn load(path: &PathBuf) -> Result<Pixels, String> {
    let image = image::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (width, height) = (image.width() as usize, image.height() as usize);
    let shape = |channels| (height, width, channels);
    let shaped = |e: ndarray::ShapeError| e.to_string();
    Ok(match image {
        DynamicImage::ImageLuma8(b) => {
            Pixels::Bytes(Array3::from_shape_vec(shape(1), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageLumaA8(b) => {
            Pixels::Bytes(Array3::from_shape_vec(shape(2), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageRgb8(b) => {
            Pixels::Bytes(Array3::from_shape_vec(shape(3), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageLuma16(b) => {
            Pixels::Words(Array3::from_shape_vec(shape(1), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageLumaA16(b) => {
            Pixels::Words(Array3::from_shape_vec(shape(2), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageRgb16(b) => {
            Pixels::Words(Array3::from_shape_vec(shape(3), b.into_raw()).map_err(shaped)?)
        }
        DynamicImage::ImageRgba16(b) => {
            Pixels::Words(Array3::from_shape_vec(shape(4), b.into_raw()).map_err(shaped)?)
        }
        other => Pixels::Bytes(
            Array3::from_shape_vec(shape(4), other.into_rgba8().into_raw()).map_err(shaped)?,
        ),
    })
}

/// The pixel types of the files: their channels in an `image` buffer.
trait Channel: Element<Real = f32> + image::Primitive {
    /// The largest value: white.
    const WHITE: f32;
    /// The image of `channels` channels of `width x height` of these pixels.
    fn image(raw: Vec<Self>, size: (u32, u32, usize)) -> Option<DynamicImage>;
}

impl Channel for u8 {
    const WHITE: f32 = 255.0;
    fn image(raw: Vec<u8>, (w, h, channels): (u32, u32, usize)) -> Option<DynamicImage> {
        Some(match channels {
            1 => DynamicImage::ImageLuma8(ImageBuffer::from_raw(w, h, raw)?),
            2 => DynamicImage::ImageLumaA8(ImageBuffer::from_raw(w, h, raw)?),
            3 => DynamicImage::ImageRgb8(ImageBuffer::from_raw(w, h, raw)?),
            _ => DynamicImage::ImageRgba8(ImageBuffer::from_raw(w, h, raw)?),
        })
    }
}

impl Channel for u16 {
    const WHITE: f32 = 65535.0;
    fn image(raw: Vec<u16>, (w, h, channels): (u32, u32, usize)) -> Option<DynamicImage> {
        Some(match channels {
            1 => DynamicImage::ImageLuma16(ImageBuffer::from_raw(w, h, raw)?),
            2 => DynamicImage::ImageLumaA16(ImageBuffer::from_raw(w, h, raw)?),
            3 => DynamicImage::ImageRgb16(ImageBuffer::from_raw(w, h, raw)?),
            _ => DynamicImage::ImageRgba16(ImageBuffer::from_raw(w, h, raw)?),
        })
    }
}

/// Writes the pixels as PNG (their own depth) or JPEG (8-bit gray or RGB, encoded in strips on
/// every core, quality 75).
fn save<T: Channel>(pixels: Array3<T>, path: &PathBuf) -> Result<(), String> {
    let (height, width, channels) = pixels.dim();
    let raw = pixels.into_raw_vec_and_offset().0;
    let image = T::image(raw, (width as u32, height as u32, channels))
        .ok_or("pixel buffer does not match the image size")?;
    let cannot_write = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", path.display());
    let is_jpeg = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e.eq_ignore_ascii_case("jpeg"));
    if !is_jpeg {
        return image.save(path).map_err(|e| cannot_write(&e));
    }
    let (bytes, channels) = match channels {
        1 => (image.into_luma8().into_raw(), 1),
        _ => (image.into_rgb8().into_raw(), 3),
    };
    let too_large = || cannot_write(&"JPEG holds at most 65,535 x 65,535 pixels");
    let size = (
        u16::try_from(width).map_err(|_| too_large())?,
        u16::try_from(height).map_err(|_| too_large())?,
    );
    let file = jpeg::encode(&bytes, size, channels, JPEG_QUALITY).map_err(|e| cannot_write(&e))?;
    std::fs::write(path, file).map_err(|e| cannot_write(&e))
}

/// Prints what runs the blur on the GPU and how long the engine's first call took.
fn report_gpu(engine: &Engine, runs: &Runs, mask: (usize, usize), bytes: usize, call_ms: f64) {
    let kernel_ms = engine.last_kernel_time_ms().unwrap_or(f32::NAN);
    let stages = engine.last_host_times().unwrap_or_default();
    let device = engine.device();
    println!(
        "device: {} (compute capability {}.{})",
        device.name, device.compute_capability.0, device.compute_capability.1
    );
    if let Runs::Design(plan) = runs {
        println!(
            "kernel: {} ({}), mask {} x {}, tile {} x {} threads, output tile {} x {}",
            plan.kernel,
            plan.entry,
            mask.0,
            mask.1,
            plan.block.0,
            plan.block.1,
            plan.output_tile.0,
            plan.output_tile.1
        );
    }
    // The kernel reads and writes f32; the transfers move the pixels' own bytes.
    println!(
        "kernel time: {kernel_ms:.3} ms, effective bandwidth {:.1} GB/s (f32 image read + written)",
        2.0 * bytes as f64 / (f64::from(kernel_ms) * 1e6)
    );
    println!(
        "host -> host (the engine's first call, so it loads the kernel and allocates the staging): {call_ms:.1} ms in {stages}"
    );
}

/// Blurs `pixels` on the GPU, or on the CPU backend without one, and writes the result.
fn blur<T: Channel>(pixels: Array3<T>, engine: Option<&Engine>, args: &Args) -> Result<(), String> {
    let mode = match args.mode {
        BoundaryMode::Constant(cval) => BoundaryMode::Constant(cval * T::WHITE),
        other => other,
    };
    let options = NdOptions {
        mode: mode.into(),
        kernel: args.kernel,
        tile: args.tile,
        ..Default::default()
    };
    // The Gaussian's 2D mask, one channel deep: every channel blurred on its own.
    let mask = gaussian2d(args.sigma, args.truncate)
        .map_err(|e| e.to_string())?
        .insert_axis(ndarray::Axis(2));
    let nd: Ndimage<'_> = engine.map_or(Cpu.ndimage(), Engine::ndimage);
    let runs = nd
        .plan_correlate(pixels.shape(), &mask, &options)
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let blurred = nd
        .correlate(&pixels, &mask, &options)
        .map_err(|e| e.to_string())?;
    let call_ms = start.elapsed().as_secs_f64() * 1e3;
    match engine {
        Some(engine) => {
            let size = (mask.shape()[0], mask.shape()[1]);
            report_gpu(
                engine,
                &runs,
                size,
                pixels.len() * size_of::<f32>(),
                call_ms,
            );
        }
        None => println!("{Cpu}: {call_ms:.1} ms"),
    }
    let write_start = Instant::now();
    save(blurred, &args.output)?;
    println!(
        "wrote {}; encode and write {:.1} ms",
        args.output.display(),
        write_start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

fn run(args: &Args) -> Result<(), String> {
    let started = Instant::now();
    // The driver and the context start on their own thread while the file is decoded.
    let starting = (!args.cpu).then(|| {
        std::thread::spawn(|| {
            let start = Instant::now();
            (Engine::new(), start.elapsed().as_secs_f64() * 1e3)
        })
    });
    let pixels = match &args.input {
        Some(path) => load(path)?,
        None => Pixels::Bytes(builtin_image()),
    };
    let read_ms = started.elapsed().as_secs_f64() * 1e3;
    let ((height, width, channels), bits) = match &pixels {
        Pixels::Bytes(p) => (p.dim(), 8),
        Pixels::Words(p) => (p.dim(), 16),
    };
    let source = args
        .input
        .as_ref()
        .map_or("built-in test card".into(), |p| p.display().to_string());
    println!(
        "image: {source}, {width} x {height}, {channels} channel(s) of {bits} bits; Gaussian sigma {}, truncate {}",
        args.sigma, args.truncate
    );
    println!("read and decode {read_ms:.1} ms");
    let engine = match starting.map(std::thread::JoinHandle::join) {
        None => None,
        Some(Err(_)) => return Err("the thread starting the engine panicked".into()),
        Some(Ok((Ok(engine), start_ms))) => {
            println!("engine start (driver, context; beside the decoding) {start_ms:.1} ms");
            Some(engine)
        }
        Some(Ok((Err(e @ (ConvError::NoDriver | ConvError::NoDevice { .. })), _)))
            if !args.require_gpu =>
        {
            println!("no GPU ({e}); computing on the CPU");
            None
        }
        Some(Ok((Err(e), _))) => return Err(e.to_string()),
    };
    match pixels {
        Pixels::Bytes(p) => blur(p, engine.as_ref(), args)?,
        Pixels::Words(p) => blur(p, engine.as_ref(), args)?,
    }
    println!("whole run {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

fn main() -> ExitCode {
    cli::main(USAGE, parse_args, run)
}
