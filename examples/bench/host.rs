//! `--host`: what a user waits for. Per case, the host -> host time of the public call (host
//! `ndarray` in, owned host array out: packing, copies, kernels, unpacking), beside the
//! transfer floor measured in the same run: the case's input uploaded and its output
//! downloaded through page-locked memory, both at once on two streams; and the call's packing
//! and unpacking alone, without the GPU (the host's share, which bounds the call). Medians of
//! `RUNS` timed calls after `WARMUP`; the output is spot-checked against an f64 computation.

use crate::cases::{image_mask, zero_border};
use crate::check::{check_1d, check_2d};
use crate::timing::median;
use crate::{Bench, random_vec};
use conv_host::{Element, Engine, Kernel};
use ndarray::{Array1, Array2, Array3, ArrayView1, Axis, Ix1};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::time::Instant;

/// Untimed calls before the timed ones (the first loads the kernel and allocates the staging).
const WARMUP: usize = 2;
/// Timed calls.
const RUNS: usize = 5;
/// Most elements the transfer floor is measured on (1 GiB of `f32`).
const FLOOR_ELEMENTS: usize = 1 << 28;

/// One host -> host case: an image `rows x cols x channels` (or a signal of `cols` when
/// `rows == 0`), a mask, and the device-memory cap the engine runs it under.
struct HostCase {
    name: &'static str,
    rows: usize,
    cols: usize,
    channels: usize,
    mask: (usize, usize),
    rank_one: bool,
    memory_cap: Option<usize>,
    /// Into a caller's output, allocated once (`correlate2d_into`), instead of a new array.
    into: bool,
    /// A `u8` image in and out (the values in [0, 255]) instead of `f32`.
    bytes: bool,
    /// Page-locked input and output (`PinnedArray`, `_into`), which the pipeline copies in
    /// place.
    pinned: bool,
}

/// The cases: the 2D and 1D targets, a small RGB image, and an image four times larger than
/// the device memory the engine may use.
fn cases() -> Vec<HostCase> {
    let case = |name, rows, cols, channels, mask, rank_one| HostCase {
        name,
        rows,
        cols,
        channels,
        mask,
        rank_one,
        memory_cap: None,
        into: false,
        bytes: false,
        pinned: false,
    };
    let pinned = |name, rows, cols, channels| HostCase {
        pinned: true,
        ..case(
            name,
            rows,
            cols,
            channels,
            (if rows == 0 { 1 } else { 5 }, if rows == 0 { 7 } else { 5 }),
            false,
        )
    };
    vec![
        case("1d 2^26 7 taps", 0, 1 << 26, 1, (1, 7), false),
        case("1d 2^26 31 taps", 0, 1 << 26, 1, (1, 31), false),
        case("2d 8192^2 5x5", 8192, 8192, 1, (5, 5), false),
        HostCase {
            into: true,
            ..case("2d 8192^2 5x5 into", 8192, 8192, 1, (5, 5), false)
        },
        case("2d 8192^2 7x7", 8192, 8192, 1, (7, 7), false),
        case("2d 8192^2 9x9", 8192, 8192, 1, (9, 9), false),
        case("2d 8192^2 31x31", 8192, 8192, 1, (31, 31), false),
        case("2d 8192^2 5x5 rank-1", 8192, 8192, 1, (5, 5), true),
        case("2d 8192^2 17x17 rank-1", 8192, 8192, 1, (17, 17), true),
        case("2d 8192^2 31x31 rank-1", 8192, 8192, 1, (31, 31), true),
        case("2d 4096^2x3 5x5", 4096, 4096, 3, (5, 5), false),
        HostCase {
            bytes: true,
            ..case("2d 8192^2x3 u8 5x5", 8192, 8192, 3, (5, 5), false)
        },
        HostCase {
            bytes: true,
            ..case(
                "2d 6000x4000x3 u8 17x17 rank-1",
                4000,
                6000,
                3,
                (17, 17),
                true,
            )
        },
        case("2d 512^2x3 5x5", 512, 512, 3, (5, 5), false),
        pinned("1d 2^26 7 taps pinned", 0, 1 << 26, 1),
        pinned("2d 8192^2 5x5 pinned", 8192, 8192, 1),
        pinned("2d 4096^2x3 5x5 pinned", 4096, 4096, 3),
        HostCase {
            bytes: true,
            ..pinned("2d 8192^2x3 u8 5x5 pinned", 8192, 8192, 3)
        },
        pinned("2d 512^2x3 5x5 pinned", 512, 512, 3),
        HostCase {
            memory_cap: Some(4 << 30),
            ..case("2d 16GiB 5x5 4GiB-cap", 65536, 65536, 1, (5, 5), false)
        },
        HostCase {
            memory_cap: Some(4 << 30),
            ..pinned("2d 16GiB 5x5 4GiB-cap pinned", 65536, 65536, 1)
        },
    ]
}

/// `len` values uniform in [-1, 1), drawn in parallel (one generator per block of the seed's).
pub(crate) fn random_parallel(seed: u64, len: usize) -> Vec<f32> {
    const BLOCK: usize = 1 << 20;
    let mut values = vec![0.0f32; len];
    values
        .par_chunks_mut(BLOCK)
        .enumerate()
        .for_each(|(block, chunk)| {
            let mut rng = StdRng::seed_from_u64(seed ^ (block as u64).wrapping_mul(0x9E37_79B9));
            chunk
                .iter_mut()
                .for_each(|v| *v = rng.random_range(-1.0f32..1.0));
        });
    values
}

/// Median transfer floor, in ms, of uploading `upload` and downloading `download` floats.
pub(crate) fn floor_ms(
    engine: &Engine,
    upload: usize,
    download: usize,
) -> Result<(f64, f64, f64), String> {
    let times = engine
        .time_pinned_transfers(upload, download, RUNS)
        .map_err(|e| format!("pinned transfers: {e}"))?;
    let pick = |f: fn(&conv_host::PinnedTransfers) -> f32| median(times.iter().map(f).collect());
    Ok((
        pick(|t| t.upload_ms),
        pick(|t| t.download_ms),
        pick(|t| t.overlapped_ms),
    ))
}

/// Median time, in ms, of the case's packing and unpacking alone, without the GPU
/// (`Engine::time_host_copies`): into a new output, or a reused one for `_into` cases; the
/// bytes of a `u8` image, the floats of others, those of inputs above 1 GiB measured on 1 GiB
/// and scaled.
fn host_copies_ms(engine: &Engine, case: &HostCase, elements: usize) -> Result<f64, String> {
    let new_output = !case.into;
    let (times, scale) = if case.bytes {
        let input = vec![1u8; elements];
        (
            engine.time_host_copies(&input, new_output, WARMUP + RUNS),
            1.0,
        )
    } else {
        let measured = elements.min(FLOOR_ELEMENTS);
        let input = vec![1.0f32; measured];
        let times = engine.time_host_copies(&input, new_output, WARMUP + RUNS);
        (times, elements as f64 / measured as f64)
    };
    let times = times.map_err(|e| format!("host copies: {e}"))?;
    Ok(median(times[WARMUP..].to_vec()) * scale)
}

/// Runs `call` `WARMUP + RUNS` times, each given the previous call's output; returns the last
/// output, and the timed calls' wall times and kernel times in ms.
pub(crate) fn timed<T>(
    engine: &Engine,
    mut call: impl FnMut(Option<T>) -> conv_host::Result<T>,
) -> conv_host::Result<(T, Vec<f32>, Vec<f32>)> {
    let (mut times, mut kernel) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    let mut output = None;
    for run in 0..WARMUP + RUNS {
        let start = Instant::now();
        let out = call(output.take())?;
        if run >= WARMUP {
            times.push(start.elapsed().as_secs_f32() * 1e3);
            kernel.push(engine.last_kernel_time_ms().unwrap_or(f32::NAN));
        }
        output = Some(out);
    }
    Ok((output.expect("WARMUP + RUNS > 0 calls"), times, kernel))
}

impl Bench<'_> {
    /// Measures every host -> host case (`only`: `nd` keeps the N-D and threads cases, `2d`
    /// the others) and prints a table; returns the rows as CSV lines.
    pub(crate) fn bench_host(&mut self, only: Option<&str>) -> Result<Vec<String>, String> {
        let mut lines = vec![
            "case,host_ms,floor_ms,ratio,kernel_ms,upload_gbps,download_gbps,max_rel_error,bands,setup_ms,first_pack_ms,pack_unpack_ms,wait_ms,last_unpack_ms,host_copies_ms"
                .to_string(),
        ];
        println!(
            "\n{:28} {:>10} {:>10} {:>7} {:>10} {:>9} {:>9} {:>10}",
            "case",
            "host ms",
            "floor ms",
            "ratio",
            "kernel ms",
            "up GB/s",
            "down GB/s",
            "copies ms"
        );
        if only != Some("nd") {
            for case in cases() {
                let line = self.host_case(&case)?;
                lines.push(line);
            }
            self.engine.set_device_memory_limit(None);
        }
        if only != Some("2d") {
            lines.extend(self.bench_nd_host()?);
        }
        if only.is_none() {
            lines.push(self.device_chain()?);
        }
        Ok(lines)
    }

    /// Ten 5 x 5 filters chained on a device-resident 8192^2 image (`correlate2d_device`
    /// between two device arrays, one wait at the end) against ten times the kernel's median
    /// time on the same image.
    fn device_chain(&mut self) -> Result<String, String> {
        const FILTERS: usize = 10;
        let engine = self.engine;
        let image = Array2::from_shape_vec(
            (8192, 8192),
            random_parallel(self.rng.random(), 8192 * 8192),
        )
        .map_err(|e| e.to_string())?;
        let mask = Array2::from_shape_vec((5, 5), random_vec(&mut self.rng, 25))
            .map_err(|e| e.to_string())?;
        let options = zero_border(Kernel::Auto, None);
        let fail = |e: conv_host::ConvError| format!("device chain: {e}");
        let nd = engine.ndimage();
        let (_, kernel) = nd
            .time_correlate(&image, &mask, &options, 20)
            .map_err(fail)?;
        let kernel = median(kernel);
        let mut a = engine.upload(&image).map_err(fail)?;
        let mut b = engine
            .alloc_device::<f32, _>(image.raw_dim())
            .map_err(fail)?;
        let mut times = Vec::with_capacity(RUNS);
        for run in 0..WARMUP + RUNS {
            let start = Instant::now();
            for step in 0..FILTERS {
                let (from, to) = if step % 2 == 0 {
                    (&a, &mut b)
                } else {
                    (&b, &mut a)
                };
                nd.correlate_into(from, &mask, &options, to).map_err(fail)?;
            }
            engine.synchronize().map_err(fail)?;
            if run >= WARMUP {
                times.push(start.elapsed().as_secs_f32() * 1e3);
            }
        }
        let chain = median(times);
        let sum = FILTERS as f64 * kernel;
        println!(
            "\n{FILTERS} 5x5 filters chained on a device-resident 8192^2 image: {chain:.3} ms, {:.3} x the sum of their kernel times ({sum:.3} ms)",
            chain / sum
        );
        Ok(format!(
            "device chain 10x 8192^2 5x5,{chain:.4},{sum:.4},{:.3},{kernel:.4},,,,,,,,,",
            chain / sum
        ))
    }

    /// The timed 2D calls of `case` on `image` (into a new array, into the previous call's
    /// output for `case.into`, or between page-locked copies of `image` for `case.pinned`) and
    /// the spot check of the last output.
    fn image_case<T: Element<Real = f32>>(
        &mut self,
        case: &HostCase,
        image: &Array3<T>,
        mask: &Array2<f32>,
    ) -> conv_host::Result<(f64, Vec<f32>, Vec<f32>)> {
        let engine = self.engine;
        let (nd, options) = (engine.ndimage(), zero_border(Kernel::Auto, None));
        let weights = image_mask(mask);
        if case.pinned {
            let mut input = engine.alloc_pinned::<T, _>(image.raw_dim())?;
            input.view_mut().assign(image);
            let mut output = engine.alloc_pinned::<T, _>(image.raw_dim())?;
            let (_, times, kernel) = timed(engine, |_| {
                nd.correlate_into(&input.view(), &weights, &options, output.view_mut())
            })?;
            let error = check_2d(input.view(), mask, output.view(), &mut self.rng);
            return Ok((error, times, kernel));
        }
        let (output, times, kernel) = timed(engine, |previous: Option<Array3<T>>| match previous
            .filter(|_| case.into)
        {
            Some(mut out) => nd
                .correlate_into(image, &weights, &options, out.view_mut())
                .map(|()| out),
            None => nd.correlate(image, &weights, &options),
        })?;
        let error = check_2d(image.view(), mask, output.view(), &mut self.rng);
        Ok((error, times, kernel))
    }

    /// The timed calls of a signal `case` between page-locked arrays (`PinnedArray`, filled
    /// with `data`): `correlate1d_into`, which the pipeline copies in place; and the spot check
    /// of the last output.
    fn pinned_signal_case(
        &mut self,
        data: &[f32],
        mask: &Array2<f32>,
    ) -> conv_host::Result<(f64, Vec<f32>, Vec<f32>)> {
        let engine = self.engine;
        let mut input = engine.alloc_pinned::<f32, _>(Ix1(data.len()))?;
        input.view_mut().assign(&ArrayView1::from(data));
        let mut output = engine.alloc_pinned::<f32, _>(Ix1(data.len()))?;
        let taps = mask.index_axis(Axis(0), 0).to_owned();
        let (nd, options) = (engine.ndimage(), zero_border(Kernel::Auto, None));
        let (_, times, kernel) = timed(engine, |_| {
            nd.correlate1d_into(&input.view(), &taps, 0, &options, output.view_mut())
        })?;
        let error = check_1d(input.view(), taps.view(), output.view(), &mut self.rng);
        Ok((error, times, kernel))
    }

    fn host_case(&mut self, case: &HostCase) -> Result<String, String> {
        let engine = self.engine;
        engine.set_device_memory_limit(case.memory_cap);
        let elements = case.rows.max(1) * case.cols * case.channels;
        let seed: u64 = self.rng.random();
        let data = random_parallel(seed, elements);
        let (mask_rows, mask_cols) = case.mask;
        let mask = if case.rank_one {
            let column = random_vec(&mut self.rng, mask_rows);
            let row = random_vec(&mut self.rng, mask_cols);
            Array2::from_shape_fn(case.mask, |(i, j)| column[i] * row[j])
        } else {
            Array2::from_shape_vec(case.mask, random_vec(&mut self.rng, mask_rows * mask_cols))
                .map_err(|e| e.to_string())?
        };
        let failed = |e: conv_host::ConvError| format!("{}: {e}", case.name);
        let (error, times, kernel) = if case.pinned && case.rows == 0 {
            self.pinned_signal_case(&data, &mask).map_err(failed)?
        } else if case.rows == 0 {
            let signal = Array1::from(data);
            let taps = mask.index_axis(Axis(0), 0).to_owned();
            let (nd, options) = (engine.ndimage(), zero_border(Kernel::Auto, None));
            let (output, times, kernel) =
                timed(engine, |_| nd.correlate1d(&signal, &taps, 0, &options)).map_err(failed)?;
            let error = check_1d(signal.view(), taps.view(), output.view(), &mut self.rng);
            (error, times, kernel)
        } else {
            let image = Array3::from_shape_vec((case.rows, case.cols, case.channels), data)
                .map_err(|e| e.to_string())?;
            if case.bytes {
                let bytes = image.mapv(|v| (v * 127.5 + 127.5) as u8);
                self.image_case(case, &bytes, &mask).map_err(failed)?
            } else {
                self.image_case(case, &image, &mask).map_err(failed)?
            }
        };
        engine.set_device_memory_limit(None);
        // Transfers scale linearly with their size: the floor of inputs above 1 GiB is that of
        // 1 GiB, scaled.
        // The floor moves the case's bytes: a `u8` image takes a quarter of the floats.
        let element_bytes = if case.bytes { 1 } else { 4 };
        let floats = (elements * element_bytes).div_ceil(4);
        let measured = floats.min(FLOOR_ELEMENTS);
        let (upload, download, floor) = floor_ms(engine, measured, measured)?;
        let scale = floats as f64 / measured as f64;
        let (upload, download, floor) = (upload * scale, download * scale, floor * scale);
        // Page-locked arrays are copied in place: no host copies.
        let copies = match case.pinned {
            true => 0.0,
            false => host_copies_ms(engine, case, elements)?,
        };
        let host = median(times);
        let kernel = median(kernel);
        let stages = engine.last_host_times().unwrap_or_default();
        let gbps = |ms: f64| (floats * 4) as f64 / (ms * 1e-3) / 1e9;
        println!(
            "{:28} {:>10.3} {:>10.3} {:>7.2} {:>10.3} {:>9.1} {:>9.1} {:>10.3}{}",
            case.name,
            host,
            floor,
            host / floor,
            kernel,
            gbps(upload),
            gbps(download),
            copies,
            if error > 1e-5 { "  CHECK FAILED" } else { "" }
        );
        println!("{:28} {stages}", "");
        if error > 1e-5 {
            return Err(format!(
                "{}: max relative error {error:.2e} against the f64 reference",
                case.name
            ));
        }
        Ok(format!(
            "{},{host:.4},{floor:.4},{:.3},{kernel:.4},{:.1},{:.1},{error:.2e},{},{:.3},{:.3},{:.3},{:.3},{:.3},{copies:.3}",
            case.name,
            host / floor,
            gbps(upload),
            gbps(download),
            stages.bands,
            stages.setup_ms,
            stages.first_pack_ms,
            stages.pack_unpack_ms,
            stages.wait_ms,
            stages.last_unpack_ms
        ))
    }
}
