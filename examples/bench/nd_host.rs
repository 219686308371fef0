//! `--host`, N-D part: the `scipy.ndimage`-named calls on host arrays (ordinary and
//! page-locked) against the transfer floor of the same run, and calls from several threads on
//! one engine. Each output is checked on slabs at both ends of its first axis against the f64
//! twin run on the slab (the rows a slab's halo leaves exact).

use crate::cases::{image_mask, zero_border};
use crate::host::{floor_ms, random_parallel, timed};
use crate::timing::median;
use crate::{Bench, random_vec};
use conv_host::ndimage::NdOptions;
use conv_host::reference as cpu;
use conv_host::{Engine, Kernel};
use ndarray::{Array2, Array3, ArrayD, ArrayViewD, Axis, IxDyn, Slice};
use rand::Rng;
use std::time::Instant;

/// Output rows checked at each end of the first axis.
const CHECKED_ROWS: usize = 16;

/// The largest difference between `got` and `twin` (run on the input's first and last
/// `CHECKED_ROWS + halo` rows) over their outer `CHECKED_ROWS` rows, relative to the input's
/// largest magnitude times `gain`.
fn slab_error(
    input: &ArrayViewD<'_, f32>,
    got: &ArrayViewD<'_, f32>,
    halo: usize,
    gain: f64,
    twin: impl Fn(&ArrayViewD<'_, f32>) -> ArrayD<f64>,
) -> f64 {
    let rows = input.len_of(Axis(0));
    let take = (CHECKED_ROWS + halo).min(rows);
    let peak = input
        .iter()
        .fold(0f64, |m, &v| m.max(f64::from(v).abs()))
        .max(1e-30);
    let mut worst = 0f64;
    for (start, kept) in [
        (0, 0..CHECKED_ROWS),
        (rows - take, take - CHECKED_ROWS..take),
    ] {
        let slab = input.slice_axis(Axis(0), Slice::from(start..start + take));
        let expected = twin(&slab);
        let expected = expected.slice_axis(Axis(0), Slice::from(kept.clone()));
        let got = got.slice_axis(Axis(0), Slice::from(start + kept.start..start + kept.end));
        for (&g, &e) in got.iter().zip(expected.iter()) {
            worst = worst.max((f64::from(g) - e).abs() / (peak * gain));
        }
    }
    worst
}

/// One N-D host case: its name, the input's shape, the filter's reach along the first axis,
/// and whether the arrays are page-locked.
struct NdCase {
    name: &'static str,
    shape: &'static [usize],
    halo: usize,
    pinned: bool,
}

impl Bench<'_> {
    /// The N-D host cases and the threads cases, printed; their CSV rows.
    pub(crate) fn bench_nd_host(&mut self) -> Result<Vec<String>, String> {
        let cases = [
            NdCase {
                name: "nd 256x512^2 gaussian s2",
                shape: &[256, 512, 512],
                halo: 8,
                pinned: false,
            },
            NdCase {
                name: "nd 256x512^2 gaussian s2 pinned",
                shape: &[256, 512, 512],
                halo: 8,
                pinned: true,
            },
            NdCase {
                name: "nd 256x512^2 sobel axis 0",
                shape: &[256, 512, 512],
                halo: 1,
                pinned: false,
            },
            NdCase {
                name: "nd 8192^2 5x5 correlate reflect",
                shape: &[8192, 8192],
                halo: 2,
                pinned: false,
            },
        ];
        let mut lines = Vec::new();
        for case in &cases {
            lines.push(self.nd_case(case)?);
        }
        for pinned in [false, true] {
            for threads in [1, 4, 16] {
                lines.push(self.threads_case(threads, pinned)?);
            }
        }
        Ok(lines)
    }

    fn nd_case(&mut self, case: &NdCase) -> Result<String, String> {
        let engine = self.engine;
        let nd = engine.ndimage();
        let options = NdOptions::default();
        let elements: usize = case.shape.iter().product();
        let input = ArrayD::from_shape_vec(
            IxDyn(case.shape),
            random_parallel(self.rng.random(), elements),
        )
        .map_err(|e| e.to_string())?;
        let mask = ArrayD::from_shape_vec(IxDyn(&[5, 5]), random_vec(&mut self.rng, 25))
            .map_err(|e| e.to_string())?;
        let failed = |e: conv_host::ConvError| format!("{}: {e}", case.name);
        let run = |x: &ArrayViewD<'_, f32>, out: ndarray::ArrayViewMutD<'_, f32>| match case.name {
            n if n.contains("gaussian") => nd.gaussian_filter_into(x, 2.0, 0, &options, out),
            n if n.contains("sobel") => nd.sobel_into(x, 0, &options, out),
            _ => nd.correlate_into(x, &mask, &options, out),
        };
        // Ordinary arrays into a new array each call, as a user's call returns one.
        let owned = |x: &ArrayD<f32>| match case.name {
            n if n.contains("gaussian") => nd.gaussian_filter(x, 2.0, 0, &options),
            n if n.contains("sobel") => nd.sobel(x, 0, &options),
            _ => nd.correlate(x, &mask, &options),
        };
        let (output, times, kernel) = if case.pinned {
            let mut source = engine
                .alloc_pinned::<f32, _>(IxDyn(case.shape))
                .map_err(failed)?;
            source.view_mut().assign(&input);
            let mut target = engine
                .alloc_pinned::<f32, _>(IxDyn(case.shape))
                .map_err(failed)?;
            let (_, times, kernel) =
                timed(engine, |_| run(&source.view(), target.view_mut())).map_err(failed)?;
            (target.view().to_owned(), times, kernel)
        } else {
            timed(engine, |_| owned(&input)).map_err(failed)?
        };
        let stages = engine.last_host_times().unwrap_or_default();
        let twin = |x: &ArrayViewD<'_, f32>| {
            match case.name {
                n if n.contains("gaussian") => cpu::gaussian_filter(x, 2.0, 0, &options),
                n if n.contains("sobel") => cpu::sobel(x, 0, &options),
                _ => cpu::correlate(x, &mask, &options),
            }
            .expect("the twin takes what the GPU took")
        };
        let gain = if case.name.contains("gaussian") {
            1.0
        } else {
            25.0
        };
        let error = slab_error(&input.view(), &output.view(), case.halo, gain, twin);
        let (_, _, floor) = floor_ms(engine, elements, elements)?;
        let (host, kernel) = (median(times), median(kernel));
        println!(
            "{:34} {host:>9.3} ms {floor:>8.3} ms floor {:>6.2} x  kernel {kernel:>7.3} ms  error {error:.1e}{}",
            case.name,
            host / floor,
            if error > 1e-5 { "  CHECK FAILED" } else { "" }
        );
        println!("{:34} {stages}", "");
        if error > 1e-5 {
            return Err(format!(
                "{}: relative error {error:.2e} against the f64 twin",
                case.name
            ));
        }
        Ok(format!(
            "{},{host:.4},{floor:.4},{:.3},{kernel:.4},,,{error:.2e},{},{:.3},{:.3},{:.3},{:.3},{:.3},",
            case.name,
            host / floor,
            stages.bands,
            stages.setup_ms,
            stages.first_pack_ms,
            stages.pack_unpack_ms,
            stages.wait_ms,
            stages.last_unpack_ms
        ))
    }

    /// `threads` threads each filtering its own 512 x 512 x 3 `f32` image with a 5 x 5 mask on
    /// the one engine, host array in and out (page-locked ones where `pinned`): images a second
    /// over all threads, and the transfer floor of one image's bytes.
    fn threads_case(&mut self, threads: usize, pinned: bool) -> Result<String, String> {
        const CALLS: usize = 64;
        let engine: &Engine = self.engine;
        let shape = (512, 512, 3);
        let image =
            Array3::from_shape_vec(shape, random_parallel(self.rng.random(), 512 * 512 * 3))
                .map_err(|e| e.to_string())?;
        let mask = Array2::from_shape_vec((5, 5), random_vec(&mut self.rng, 25))
            .map_err(|e| e.to_string())?;
        let options = zero_border(Kernel::Auto, None);
        let (nd, mask) = (engine.ndimage(), image_mask(&mask));
        let failed = |e: conv_host::ConvError| format!("threads: {e}");
        let ready = std::sync::Barrier::new(threads);
        let worker = || -> conv_host::Result<(Instant, Instant, Vec<[f32; 5]>)> {
            let mut input = engine.alloc_pinned::<f32, _>(image.raw_dim())?;
            input.view_mut().assign(&image);
            let mut output = engine.alloc_pinned::<f32, _>(image.raw_dim())?;
            let call = |input: &_, output: &mut conv_host::PinnedArray<f32, _>| {
                if pinned {
                    nd.correlate_into(input, &mask, &options, output.view_mut())
                } else {
                    nd.correlate(&image, &mask, &options).map(drop)
                }
            };
            for _ in 0..4 {
                call(&input.view(), &mut output)?;
            }
            ready.wait();
            // Each call's latency beside a recent call's host times (another thread's, maybe).
            let mut calls = Vec::with_capacity(CALLS);
            let started = Instant::now();
            for _ in 0..CALLS {
                let call_started = Instant::now();
                call(&input.view(), &mut output)?;
                let ms = call_started.elapsed().as_secs_f32() * 1e3;
                let t = engine.last_host_times().unwrap_or_default();
                let unpack = t.pack_unpack_ms + t.last_unpack_ms;
                calls.push([ms, t.setup_ms, t.first_pack_ms, t.wait_ms, unpack]);
            }
            Ok((started, Instant::now(), calls))
        };
        type Run = conv_host::Result<(Instant, Instant, Vec<[f32; 5]>)>;
        let results: Vec<Run> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(worker)).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a worker thread panicked"))
                .collect()
        });
        // From the first thread's first timed call to the last thread's last: every thread
        // warmed up before any timed call.
        let (mut first, mut last) = (None::<Instant>, None::<Instant>);
        let mut calls = Vec::with_capacity(threads * CALLS);
        for result in results {
            let (start, end, times) = result.map_err(failed)?;
            calls.extend(times);
            first = Some(first.map_or(start, |f| f.min(start)));
            last = Some(last.map_or(end, |l| l.max(end)));
        }
        let wall = match (first, last) {
            (Some(first), Some(last)) => (last - first).as_secs_f64(),
            _ => return Err("threads: no thread ran".into()),
        };
        let rate = (threads * CALLS) as f64 / wall;
        let (_, _, floor) = floor_ms(engine, 512 * 512 * 3, 512 * 512 * 3)?;
        let name = format!(
            "threads {threads} 512^2x3 5x5{}",
            if pinned { " pinned" } else { "" }
        );
        println!(
            "{name:34} {rate:>9.0} images/s (floor of one image {floor:.3} ms: {:.0} images/s)",
            1e3 / floor
        );
        let median = |k: usize| {
            let mut v: Vec<f32> = calls.iter().map(|c| c[k]).collect();
            v.sort_by(f32::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "{:34} a call {:.3} ms; recent calls' setup {:.3}, pack {:.3}, waiting for the GPU \
             {:.3}, unpack {:.3} ms (medians)",
            "",
            median(0),
            median(1),
            median(2),
            median(3),
            median(4)
        );
        Ok(format!(
            "{name},{:.4},{floor:.4},{:.3},,,,,,,,,,,",
            1e3 / rate,
            1e3 / rate / floor
        ))
    }
}
