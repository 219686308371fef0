//! Benchmark of every kernel against the memory roofline, on the GPU.
//!
//! ```sh
//! cargo run --release --example bench                    # full run, results in bench-results/
//! cargo run --release --example bench -- --quick         # a short run
//! cargo run --release --example bench -- --targets       # issue 7's cases, fast designs only
//! cargo run --release --example bench -- --auto          # Auto against every design, small to large
//! cargo run --release --example bench -- --plot-only bench-results/bench.csv
//! ```
//!
//! Method: for each case, fresh random inputs (uniform in [-1, 1), never zeros), an output
//! buffer poisoned with NaN, 3 warm-up runs and 20 timed runs of the kernel on the same device
//! buffers (CUDA events), the median reported; then the output is checked: every element
//! written, and 2,000 sampled positions against an f64 CPU computation. In the same run, the
//! device-to-device copy bandwidth (bytes read + written) gives the memory roofline, and
//! `2 x SMs x FP32 lanes per SM x clock` the FMA peak. Case names are stable across runs.

mod auto;
mod plot;

use conv_host::{Conv1dOptions, Conv2dOptions, Engine, Kernel, LaunchPlan, reference};
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

const WARMUP: usize = 3;
const TIMED: usize = 20;
const SAMPLES: usize = 2000;
/// Cases whose CPU reference would take longer than this many multiply-adds are not timed on
/// the CPU.
const CPU_BUDGET: f64 = 3e8;
/// `--auto` lists the cases where `Auto` is more than this fraction slower than the fastest
/// design (the run-to-run spread of one kernel is a few percent).
const AUTO_TOLERANCE: f64 = 0.05;

/// One measured case: a CSV row.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub dims: u8,
    pub kernel: Kernel,
    pub entry_point: &'static str,
    pub elements: usize,
    pub taps: usize,
    pub mask: String,
    pub tile: String,
    pub kernel_ms: f64,
    pub gbps: f64,
    pub roofline_pct: f64,
    pub gflops: f64,
    pub fma_pct: f64,
    pub end_to_end_ms: f64,
    pub cpu_ms: Option<f64>,
    pub reduction: Option<f64>,
    pub max_error: f64,
}

impl Row {
    const HEADER: &'static str = "name,dims,kernel,entry_point,elements,taps,mask,tile,kernel_ms,gbps,roofline_pct,gflops,fma_pct,end_to_end_ms,cpu_ms,speedup_kernel,speedup_end_to_end,predicted_reduction,max_rel_error";

    fn csv(&self) -> String {
        let optional = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        format!(
            "{},{},{},{},{},{},{},{},{:.5},{:.1},{:.1},{:.1},{:.1},{:.4},{},{},{},{},{:.2e}",
            self.name,
            self.dims,
            self.kernel,
            self.entry_point,
            self.elements,
            self.taps,
            self.mask,
            self.tile,
            self.kernel_ms,
            self.gbps,
            self.roofline_pct,
            self.gflops,
            self.fma_pct,
            self.end_to_end_ms,
            optional(self.cpu_ms),
            optional(self.cpu_ms.map(|c| c / self.kernel_ms)),
            optional(self.cpu_ms.map(|c| c / self.end_to_end_ms)),
            optional(self.reduction),
            self.max_error,
        )
    }
}

/// The ceilings measured (copy) or derived (FMA) on this device.
struct Ceilings {
    copy_gbps: f64,
    /// The SM copy kernel's, for reference (percentages are of `copy_gbps`).
    sm_copy_gbps: f64,
    fma_gflops: f64,
}

/// Which cases run: every size and tile, a short selection, or only issue 7's target cases
/// with the fast designs (register-tiled and separable).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Full,
    Quick,
    Targets,
}

struct Plan {
    scope: Scope,
    /// `Auto` against every design instead of `scope`'s cases (`--auto`).
    auto: bool,
    out_dir: PathBuf,
}

/// One benchmark run: the device, its ceilings, what to run, the inputs' generator and the
/// rows measured so far.
struct Bench<'a> {
    engine: &'a Engine,
    ceilings: Ceilings,
    plan: Plan,
    rng: StdRng,
    rows: Vec<Row>,
}

fn median(mut times: Vec<f32>) -> f64 {
    times.sort_by(f32::total_cmp);
    let n = times.len();
    f64::from(if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    })
}

/// FP32 lanes per SM by compute capability (CUDA programming guide, arithmetic throughput).
fn fp32_lanes(major: i32, minor: i32) -> u32 {
    match (major, minor) {
        (8, 0) | (7, _) | (6, 0) => 64,
        _ => 128,
    }
}

fn measure_ceilings(engine: &Engine) -> Result<Ceilings, String> {
    let copy_gbps = copy_engine_gbps(engine, 1 << 28)?; // 1 GiB per buffer: far beyond L2
    let device = engine.device();
    let (major, minor) = device.compute_capability;
    let lanes = fp32_lanes(major, minor);
    let fma_gflops = 2.0
        * f64::from(device.multiprocessor_count)
        * f64::from(lanes)
        * f64::from(device.clock_rate_khz)
        * 1e3
        / 1e9;
    println!(
        "device: {} (cc {major}.{minor}, {} SMs, {:.0} MHz)",
        device.name,
        device.multiprocessor_count,
        f64::from(device.clock_rate_khz) / 1e3
    );
    println!("copy roofline: {copy_gbps:.0} GB/s (device-to-device, 2 x 1 GiB, median of {TIMED})");
    // For reference only (every percentage below is of the copy roofline): the copy engines at
    // the targets' size, and the copy a kernel on the SMs makes at both sizes.
    let sm_copy_gbps = sm_kernel_copy_gbps(engine, 1 << 28)?;
    println!(
        "SM copy: {sm_copy_gbps:.0} GB/s at 2 x 1 GiB ({:.1}% of the copy roofline); at 2 x 256 MiB \
         (the targets' size): copy engines {:.0} GB/s, SM copy {:.0} GB/s",
        100.0 * sm_copy_gbps / copy_gbps,
        copy_engine_gbps(engine, 1 << 26)?,
        sm_kernel_copy_gbps(engine, 1 << 26)?,
    );
    println!(
        "FMA peak: {fma_gflops:.0} GFLOP/s (2 x {} SMs x {lanes} lanes x clock)",
        device.multiprocessor_count
    );
    Ok(Ceilings {
        copy_gbps,
        sm_copy_gbps,
        fma_gflops,
    })
}

/// Bytes read plus bytes written per second, in GB/s, of a copy of `len` floats that took `ms`.
fn copy_gbps(len: usize, ms: f64) -> f64 {
    2.0 * 4.0 * len as f64 / (ms * 1e6)
}

/// The copy engines' device-to-device copy of `len` floats: median bandwidth.
fn copy_engine_gbps(engine: &Engine, len: usize) -> Result<f64, String> {
    let times = engine
        .time_device_copy(len, WARMUP + TIMED)
        .map_err(|e| e.to_string())?;
    Ok(copy_gbps(len, median(times[WARMUP..].to_vec())))
}

/// The SM copy kernel over `len` floats: median bandwidth, after checking the copy.
fn sm_kernel_copy_gbps(engine: &Engine, len: usize) -> Result<f64, String> {
    let input: Vec<f32> = (0..len).map(|i| (i % 4093) as f32 - 2046.5).collect();
    let (copy, times) = engine
        .time_sm_copy(&input, WARMUP + TIMED)
        .map_err(|e| e.to_string())?;
    if copy != input {
        return Err(format!(
            "the SM copy of {len} floats differs from its input"
        ));
    }
    Ok(copy_gbps(len, median(times[WARMUP..].to_vec())))
}

fn random_vec(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// The textbook's predicted reduction of global-memory reads for the tiled designs
/// (Fig. 7.22): reads of the basic kernel over reads of the tiled one, for an interior block.
fn predicted_reduction(plan: &LaunchPlan, mask: (usize, usize), channels: usize) -> Option<f64> {
    if !matches!(plan.kernel, Kernel::Tiled | Kernel::TiledL2) {
        return None;
    }
    let (ox, oy) = (
        plan.output_tile.0 as f64 / channels as f64,
        f64::from(plan.output_tile.1),
    );
    let (mh, mw) = (mask.0 as f64, mask.1 as f64);
    Some(ox * oy * mh * mw / ((ox + mw - 1.0) * (oy + mh - 1.0)))
}

/// Largest relative error over sampled positions, and whether every element was written.
fn spot_check(samples: impl Iterator<Item = (f64, f64, f64)>) -> f64 {
    samples
        .map(|(got, expected, magnitude)| {
            if got.is_nan() {
                f64::INFINITY
            } else {
                (got - expected).abs() / magnitude.max(f64::MIN_POSITIVE)
            }
        })
        .fold(0.0, f64::max)
}

impl Bench<'_> {
    /// Measures 1D signals of every size, mask length and tile in scope.
    fn bench_1d(&mut self) -> Result<(), String> {
        let sizes: Vec<u32> = match self.plan.scope {
            Scope::Targets => vec![26],
            Scope::Quick => vec![16, 20, 24],
            Scope::Full => (12..=28).step_by(2).collect(),
        };
        let masks: &[usize] = match self.plan.scope {
            Scope::Targets => &[7, 31],
            Scope::Quick => &[3, 7, 31],
            Scope::Full => &[3, 5, 7, 9, 15, 31],
        };
        let tiles: &[u32] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[256],
            Scope::Full => &[128, 256, 1024],
        };
        for &log2 in &sizes {
            let n = 1usize << log2;
            let input = Array1::from(random_vec(&mut self.rng, n));
            for &taps in masks {
                let mask = Array1::from(random_vec(&mut self.rng, taps));
                let cpu_ms = cpu_time(n * taps, || {
                    let _ = reference::correlate1d(&input, &mask, &Conv1dOptions::default());
                });
                let register = Conv1dOptions {
                    kernel: Kernel::RegisterTiled,
                    ..Default::default()
                };
                let fixed = if self.engine.plan1d(n, taps, &register).is_ok() {
                    &[Kernel::RegisterTiled][..]
                } else {
                    &[]
                };
                for (kernel, tile) in variants(tiles, fixed) {
                    let options = Conv1dOptions {
                        kernel,
                        tile,
                        ..Default::default()
                    };
                    let case = Case1d {
                        input: &input,
                        mask: &mask,
                        log2,
                        options,
                        cpu_ms,
                    };
                    let row = case.measure(self)?;
                    self.rows.push(row);
                }
            }
            eprintln!("1d n = 2^{log2} done");
        }
        Ok(())
    }
}

/// One 1D case to measure: a signal of `2^log2` elements.
struct Case1d<'a> {
    input: &'a Array1<f32>,
    mask: &'a Array1<f32>,
    log2: u32,
    options: Conv1dOptions,
    cpu_ms: Option<f64>,
}

impl Case1d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (input, mask, options) = (self.input, self.mask, &self.options);
        let (engine, (n, taps)) = (bench.engine, (input.len(), mask.len()));
        let launch = engine.plan1d(n, taps, options).map_err(|e| e.to_string())?;
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| engine.time_correlate1d(input, mask, options, runs),
            || engine.correlate1d(input, mask, options).map(drop),
        )?;
        let tile = launch.block.0;
        let measured = Measured {
            name: format!("1d/{}/n2^{}/m{taps}/t{tile}", options.kernel, self.log2),
            dims: 1,
            elements: n,
            taps,
            mask: taps.to_string(),
            tile: tile.to_string(),
            kernel_ms,
            end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: predicted_reduction(&launch, (1, taps), 1),
            max_error: check_1d(input.view(), mask.view(), output.view(), &mut bench.rng),
            launch,
        };
        Ok(measured.into_row(&bench.ceilings))
    }
}

fn check_1d(
    input: ArrayView1<f32>,
    mask: ArrayView1<f32>,
    output: ArrayView1<f32>,
    rng: &mut StdRng,
) -> f64 {
    let (n, taps) = (input.len(), mask.len());
    if output.iter().any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let positions = (0..SAMPLES).map(|k| match k {
        0 => 0,
        1 => n - 1,
        _ => rng.random_range(0..n),
    });
    let left = taps / 2;
    spot_check(positions.map(|i| {
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for (j, &w) in mask.iter().enumerate() {
            if let Some(k) = (i + j).checked_sub(left).filter(|&k| k < n) {
                sum += f64::from(w) * f64::from(input[k]);
                magnitude += (f64::from(w) * f64::from(input[k])).abs();
            }
        }
        (f64::from(output[i]), sum, magnitude)
    }))
}

fn check_2d(
    image: ArrayView3<f32>,
    mask: &Array2<f32>,
    output: ArrayView3<f32>,
    rng: &mut StdRng,
) -> f64 {
    let (h, w, c) = image.dim();
    if output.iter().any(|v| v.is_nan()) {
        return f64::INFINITY;
    }
    let (mh, mw) = mask.dim();
    let (top, left) = (mh / 2, mw / 2);
    spot_check((0..SAMPLES).map(|k| {
        let (y, x, ch) = match k {
            0 => (0, 0, 0),
            1 => (h - 1, w - 1, c - 1),
            _ => (
                rng.random_range(0..h),
                rng.random_range(0..w),
                rng.random_range(0..c),
            ),
        };
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for i in 0..mh {
            for j in 0..mw {
                let (yy, xx) = ((y + i).checked_sub(top), (x + j).checked_sub(left));
                if let (Some(yy), Some(xx)) = (yy.filter(|&v| v < h), xx.filter(|&v| v < w)) {
                    let term = f64::from(mask[[i, j]]) * f64::from(image[[yy, xx, ch]]);
                    sum += term;
                    magnitude += term.abs();
                }
            }
        }
        (f64::from(output[[y, x, ch]]), sum, magnitude)
    }))
}

impl Bench<'_> {
    /// Measures 2D images of every size, mask shape and tile in scope, and rank-1 masks through
    /// the separable kernels.
    fn bench_2d(&mut self) -> Result<(), String> {
        let mut images: Vec<(usize, usize)> = match self.plan.scope {
            Scope::Targets => vec![(8192, 1)],
            Scope::Quick => vec![(1024, 1), (4096, 1), (8192, 1)],
            Scope::Full => [256, 1024, 4096, 8192].iter().map(|&s| (s, 1)).collect(),
        };
        images.push((4096, 3));
        let sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[5, 7, 9, 31],
            Scope::Quick => &[3, 5, 9, 31],
            Scope::Full => &[3, 5, 7, 9, 15, 31],
        };
        let mut masks: Vec<(usize, usize)> = sides.iter().map(|&s| (s, s)).collect();
        let line_sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[31],
            Scope::Full => &[3, 9, 31],
        };
        masks.extend(line_sides.iter().flat_map(|&s| [(1, s), (s, 1)]));
        // Gaussian sizes (SciPy's truncate 4: sigma 1.5, 2, 2.5 and 3; 17 x 17 is the blur
        // example's default), measured as rank-1 masks only, on the single-channel images.
        let gaussian_sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[17],
            Scope::Quick => &[],
            Scope::Full => &[13, 17, 21, 25],
        };
        let tiles: &[(u32, u32)] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[(32, 8)],
            Scope::Full => &[(32, 8), (16, 16)],
        };
        for &(side, channels) in &images {
            let shape = (side, side, channels);
            let image =
                Array3::from_shape_vec(shape, random_vec(&mut self.rng, side * side * channels))
                    .expect("shape");
            for &mask_shape in &masks {
                if self.plan.scope == Scope::Targets && channels == 3 && mask_shape != (5, 5) {
                    continue;
                }
                let mask = Array2::from_shape_vec(
                    mask_shape,
                    random_vec(&mut self.rng, mask_shape.0 * mask_shape.1),
                )
                .expect("shape");
                let cpu_ms = cpu_time(image.len() * mask.len(), || {
                    let _ = reference::correlate2d(&image, &mask, &Conv2dOptions::default());
                });
                // The register-tiled designs (staged by the threads, and by tensor copies) where
                // one was compiled for the case.
                let fixed: Vec<Kernel> = [Kernel::RegisterTiled, Kernel::RegisterTiledTma]
                    .into_iter()
                    .filter(|&kernel| {
                        let options = Conv2dOptions {
                            kernel,
                            ..Default::default()
                        };
                        self.engine.plan2d(&mask, image.dim(), &options).is_ok()
                    })
                    .collect();
                for (kernel, tile) in variants(tiles, &fixed) {
                    let options = Conv2dOptions {
                        kernel,
                        tile,
                        ..Default::default()
                    };
                    let case = Case2d {
                        image: &image,
                        mask: &mask,
                        options,
                        cpu_ms,
                    };
                    let row = case.measure(self)?;
                    self.rows.push(row);
                }
                // The same shape as a rank-1 mask (an outer product), through the fused kernel.
                if mask_shape.0 > 1 && mask_shape.1 > 1 {
                    self.measure_rank_one(&image, mask_shape, cpu_ms)?;
                }
            }
            if channels == 1 {
                for &side in gaussian_sides {
                    self.measure_rank_one(&image, (side, side), None)?;
                }
            }
            eprintln!("2d {side}x{side}x{channels} done");
        }
        Ok(())
    }
}

impl Bench<'_> {
    /// Measures a random rank-1 mask of `shape` (an outer product) over `image` through the
    /// fused separable kernels: staged by the threads, and by tensor copies where they apply.
    fn measure_rank_one(
        &mut self,
        image: &Array3<f32>,
        shape: (usize, usize),
        cpu_ms: Option<f64>,
    ) -> Result<(), String> {
        let column = Array1::from(random_vec(&mut self.rng, shape.0));
        let row = Array1::from(random_vec(&mut self.rng, shape.1));
        let rank_one = Array2::from_shape_fn(shape, |(i, j)| column[i] * row[j]);
        for kernel in [Kernel::Separable, Kernel::SeparableTma] {
            let options = Conv2dOptions {
                kernel,
                ..Default::default()
            };
            if kernel == Kernel::SeparableTma
                && self
                    .engine
                    .plan2d(&rank_one, image.dim(), &options)
                    .is_err()
            {
                continue;
            }
            let case = Case2d {
                image,
                mask: &rank_one,
                options,
                cpu_ms,
            };
            let row = case.measure(self)?;
            self.rows.push(row);
        }
        Ok(())
    }
}

/// One 2D case to measure.
struct Case2d<'a> {
    image: &'a Array3<f32>,
    mask: &'a Array2<f32>,
    options: Conv2dOptions,
    cpu_ms: Option<f64>,
}

impl Case2d<'_> {
    /// Times the case on `bench`'s engine and checks its output with `bench`'s generator.
    fn measure(&self, bench: &mut Bench<'_>) -> Result<Row, String> {
        let (image, mask, options) = (self.image, self.mask, &self.options);
        let launch = bench
            .engine
            .plan2d(mask, image.dim(), options)
            .map_err(|e| e.to_string())?;
        let (output, kernel_ms, end_to_end_ms) = measure(
            |runs| bench.engine.time_correlate2d(image, mask, options, runs),
            || bench.engine.correlate2d(image, mask, options).map(drop),
        )?;
        let (side, channels) = (image.dim().0, image.dim().2);
        let mask_name = format!("{}x{}", mask.dim().0, mask.dim().1);
        let tile_name = format!("{}x{}", launch.block.0, launch.block.1);
        let measured = Measured {
            name: format!(
                "2d/{}/{side}x{side}x{channels}/m{mask_name}/t{tile_name}",
                options.kernel
            ),
            dims: 2,
            elements: image.len(),
            taps: mask.len(),
            mask: mask_name,
            tile: tile_name,
            kernel_ms,
            end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: predicted_reduction(&launch, mask.dim(), channels),
            max_error: check_2d(image.view(), mask, output.view(), &mut bench.rng),
            launch,
        };
        Ok(measured.into_row(&bench.ceilings))
    }
}

/// The seed designs at every tile, and the designs of fixed blocks `fixed`.
fn variants<T: Copy>(tiles: &[T], fixed: &[Kernel]) -> Vec<(Kernel, Option<T>)> {
    let seeds = Kernel::ALL
        .iter()
        .flat_map(|&k| tiles.iter().map(move |&t| (k, Some(t))));
    seeds.chain(fixed.iter().map(|&k| (k, None))).collect()
}

/// Times one configuration: `timed(runs)` runs the kernel on device-resident data
/// (`WARMUP` + `TIMED` runs; the median of the timed ones), then `call` once through the public
/// API for the end-to-end time. Returns the output of the timed runs and both times in ms.
fn measure<O>(
    timed: impl FnOnce(usize) -> conv_host::Result<(O, Vec<f32>)>,
    call: impl FnOnce() -> conv_host::Result<()>,
) -> Result<(O, f64, f64), String> {
    let (output, times) = timed(WARMUP + TIMED).map_err(|e| e.to_string())?;
    let kernel_ms = median(times[WARMUP..].to_vec());
    let start = Instant::now();
    call().map_err(|e| e.to_string())?;
    Ok((output, kernel_ms, start.elapsed().as_secs_f64() * 1e3))
}

/// Single-threaded CPU reference time in ms, for cases of at most `CPU_BUDGET` multiply-adds.
fn cpu_time(multiply_adds: usize, run: impl FnOnce()) -> Option<f64> {
    (multiply_adds as f64 <= CPU_BUDGET).then(|| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64() * 1e3
    })
}

/// One case: what identifies it and what was measured.
struct Measured {
    name: String,
    dims: u8,
    elements: usize,
    taps: usize,
    mask: String,
    tile: String,
    kernel_ms: f64,
    end_to_end_ms: f64,
    cpu_ms: Option<f64>,
    reduction: Option<f64>,
    max_error: f64,
    launch: LaunchPlan,
}

impl Measured {
    /// The CSV row, with bandwidth and FLOP rate against this run's ceilings.
    fn into_row(self, ceilings: &Ceilings) -> Row {
        let gbps = 2.0 * 4.0 * self.elements as f64 / (self.kernel_ms * 1e6);
        let gflops = 2.0 * self.taps as f64 * self.elements as f64 / (self.kernel_ms * 1e6);
        Row {
            name: self.name,
            dims: self.dims,
            kernel: self.launch.kernel,
            entry_point: self.launch.entry_point,
            elements: self.elements,
            taps: self.taps,
            mask: self.mask,
            tile: self.tile,
            kernel_ms: self.kernel_ms,
            gbps,
            roofline_pct: 100.0 * gbps / ceilings.copy_gbps,
            gflops,
            fma_pct: 100.0 * gflops / ceilings.fma_gflops,
            end_to_end_ms: self.end_to_end_ms,
            cpu_ms: self.cpu_ms,
            reduction: self.reduction,
            max_error: self.max_error,
        }
    }
}

fn write_csv(rows: &[Row], path: &Path, header_comment: &str) -> Result<(), String> {
    let mut text = String::new();
    for line in header_comment.lines() {
        let _ = writeln!(text, "# {line}");
    }
    let _ = writeln!(text, "{}", Row::HEADER);
    for row in rows {
        let _ = writeln!(text, "{}", row.csv());
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The channel count in a 2D case name (`2d/kernel/HxWxC/...`).
fn image_channels(name: &str) -> Option<&str> {
    name.split('/').nth(2)?.rsplit('x').next()
}

fn summary(rows: &[Row]) {
    println!(
        "\n{:<44} {:>9} {:>8} {:>6} {:>9} {:>6}",
        "best tile per case (largest sizes)", "ms", "GB/s", "%roof", "GFLOP/s", "%FMA"
    );
    let largest_1d = rows
        .iter()
        .filter(|r| r.dims == 1)
        .map(|r| r.elements)
        .max();
    let largest_2d = rows
        .iter()
        .filter(|r| r.dims == 2 && image_channels(&r.name) == Some("1"))
        .map(|r| r.elements)
        .max();
    let rgb = rows
        .iter()
        .find(|r| r.dims == 2 && image_channels(&r.name) == Some("3"))
        .map(|r| r.elements);
    for (dims, elements) in [(1, largest_1d), (2, largest_2d), (2, rgb)] {
        let Some(elements) = elements else { continue };
        let mut keys: Vec<(String, String)> = rows
            .iter()
            .filter(|r| r.dims == dims && r.elements == elements)
            .map(|r| (r.kernel.to_string(), r.mask.clone()))
            .collect();
        keys.dedup();
        for (kernel, mask) in keys {
            let best = rows
                .iter()
                .filter(|r| {
                    r.dims == dims
                        && r.elements == elements
                        && r.kernel.to_string() == kernel
                        && r.mask == mask
                })
                .min_by(|a, b| a.kernel_ms.total_cmp(&b.kernel_ms))
                .expect("at least one row");
            let label = best
                .name
                .rsplit_once('/')
                .map_or(best.name.as_str(), |(head, _)| head);
            println!(
                "{label:<44} {:>9.4} {:>8.0} {:>6.1} {:>9.0} {:>6.1}",
                best.kernel_ms, best.gbps, best.roofline_pct, best.gflops, best.fma_pct
            );
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut plan = Plan {
        scope: Scope::Full,
        auto: false,
        out_dir: PathBuf::from("bench-results"),
    };
    let mut only: Option<String> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => plan.scope = Scope::Quick,
            "--targets" => plan.scope = Scope::Targets,
            "--auto" => plan.auto = true,
            "--out" => plan.out_dir = PathBuf::from(args.next().ok_or("--out needs a directory")?),
            "--only" => only = Some(args.next().ok_or("--only needs 1d or 2d")?),
            "--plot-only" => {
                let csv = PathBuf::from(args.next().ok_or("--plot-only needs a CSV file")?);
                let dir = csv.parent().unwrap_or(Path::new(".")).to_path_buf();
                return plot::plot_csv(&csv, &dir);
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}` (--quick, --targets, --auto, --out DIR, --only \
                     1d|2d, --plot-only CSV)"
                ));
            }
        }
    }
    std::fs::create_dir_all(&plan.out_dir).map_err(|e| e.to_string())?;
    let engine = Engine::new().map_err(|e| format!("the benchmark needs a GPU: {e}"))?;
    let ceilings = measure_ceilings(&engine)?;
    let seed: u64 = rand::rng().random();
    println!("input seed {seed}");
    let mut bench = Bench {
        engine: &engine,
        ceilings,
        plan,
        rng: StdRng::seed_from_u64(seed),
        rows: Vec::new(),
    };
    let started = Instant::now();
    let auto = bench.plan.auto;
    if only.as_deref() != Some("2d") {
        if auto {
            bench.auto_1d()?;
        } else {
            bench.bench_1d()?;
        }
    }
    if only.as_deref() != Some("1d") {
        if auto {
            bench.auto_2d()?;
        } else {
            bench.bench_2d()?;
        }
    }
    let Bench {
        ceilings,
        plan,
        rows,
        ..
    } = bench;
    let device = engine.device();
    let header = format!(
        "device: {}\ncopy_roofline_gbps: {:.1}\nsm_copy_gbps: {:.1}\nfma_peak_gflops: {:.1}\nseed: {seed}\nmode: {}\nruns: {WARMUP} warm-up + {TIMED} timed, median",
        device.name,
        ceilings.copy_gbps,
        ceilings.sm_copy_gbps,
        ceilings.fma_gflops,
        match (plan.auto, plan.scope) {
            (true, _) => "auto",
            (false, Scope::Full) => "full",
            (false, Scope::Quick) => "quick",
            (false, Scope::Targets) => "targets",
        }
    );
    let csv = plan.out_dir.join("bench.csv");
    write_csv(&rows, &csv, &header)?;
    if auto {
        auto::report(&rows, &plan.out_dir, AUTO_TOLERANCE)?;
    } else {
        summary(&rows);
    }
    let failures: Vec<&Row> = rows.iter().filter(|r| r.max_error > 1e-5).collect();
    println!(
        "\n{} cases in {:.0} s, written to {}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        csv.display()
    );
    if let Err(e) = plot::plot_csv(&csv, &plan.out_dir) {
        println!("plots skipped: {e}");
    }
    if !failures.is_empty() {
        for row in &failures {
            println!(
                "CHECK FAILED: {} (max relative error {:.2e})",
                row.name, row.max_error
            );
        }
        return Err(format!("{} cases failed the spot check", failures.len()));
    }
    println!("all cases passed the spot check (relative error <= 1e-5)");
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
