//! `--multi`: host -> host 2D 16384^2 f32 5x5 on 1 to N GPUs of the host (`MultiEngine` over
//! the first k GPUs), throughput against one GPU's, medians of `RUNS` calls after `WARMUP`;
//! every split result must equal one GPU's exactly; beside them, the host's share alone (the
//! call's packing and unpacking without the GPUs, `Engine::time_host_copies`), which bounds
//! every split of pageable arrays; and the same calls between page-locked arrays
//! (`PinnedArray`, `correlate2d_into`), which the GPUs copy in place, against the transfer
//! floor of the GPUs together: each GPU's share uploaded and downloaded through page-locked
//! memory, every GPU at once (the slowest GPU's time per round).

use crate::Bench;
use crate::cases::zero_border;
use crate::timing::median;
use conv_host::{Kernel, MultiEngine};
use ndarray::Array2;
use rand::Rng;
use std::sync::Barrier;
use std::time::Instant;

const WARMUP: usize = 2;
const RUNS: usize = 5;
const SIDE: usize = 16384;

impl Bench<'_> {
    /// Measures the split call on 1 to N GPUs; returns the CSV lines.
    pub(crate) fn bench_multi(&mut self) -> Result<Vec<String>, String> {
        let fail = |e: conv_host::ConvError| e.to_string();
        let count = MultiEngine::new().map_err(fail)?.engines().len();
        let image =
            Array2::from_shape_simple_fn((SIDE, SIDE), || self.rng.random_range(-1.0f32..1.0));
        let mask = Array2::from_shape_simple_fn((5, 5), || self.rng.random_range(-1.0f32..1.0));
        let options = zero_border(Kernel::Auto, None);
        let copies = {
            let input = image.as_slice().ok_or("a standard-layout image")?;
            let times = self
                .engine
                .time_host_copies(input, true, WARMUP + RUNS)
                .map_err(fail)?;
            median(times[WARMUP..].to_vec())
        };
        let mut lines = vec![
            "gpus,host_ms,throughput_vs_one,efficiency,host_copies_ms,pinned_ms,pinned_vs_one,floor_ms"
                .to_string(),
        ];
        let mut pinned_input = self
            .engine
            .alloc_pinned::<f32, _>(image.raw_dim())
            .map_err(fail)?;
        pinned_input.view_mut().assign(&image);
        let mut pinned_output = self
            .engine
            .alloc_pinned::<f32, _>(image.raw_dim())
            .map_err(fail)?;
        let (mut single, mut single_pinned) = (None, None);
        let mut expected = None;
        println!("\n16384^2 f32 5x5, host -> host, split over GPUs ({count} on this host)");
        println!("host copies alone (packing and unpacking, no GPU): {copies:8.2} ms");
        for gpus in 1..=count {
            let ordinals: Vec<usize> = (0..gpus).collect();
            let multi = MultiEngine::with_devices(&ordinals).map_err(fail)?;
            let mut times = Vec::with_capacity(RUNS);
            let mut output = None;
            for run in 0..WARMUP + RUNS {
                let start = Instant::now();
                let out = multi
                    .ndimage()
                    .correlate(&image, &mask, &options)
                    .map_err(fail)?;
                if run >= WARMUP {
                    times.push(start.elapsed().as_secs_f32() * 1e3);
                }
                output = Some(out);
            }
            let output = output.ok_or("no run")?;
            match &expected {
                None => expected = Some(output),
                Some(one) if *one != output => {
                    return Err(format!("{gpus} GPUs: the result differs from one GPU's"));
                }
                Some(_) => {}
            }
            let ms = median(times);
            let one = *single.get_or_insert(ms);
            let speedup = one / ms;
            let mut pinned_times = Vec::with_capacity(RUNS);
            for run in 0..WARMUP + RUNS {
                let start = Instant::now();
                let (input, output) = (pinned_input.view(), pinned_output.view_mut());
                multi
                    .ndimage()
                    .correlate_into(&input, &mask, &options, output)
                    .map_err(fail)?;
                if run >= WARMUP {
                    pinned_times.push(start.elapsed().as_secs_f32() * 1e3);
                }
            }
            if expected
                .as_ref()
                .is_some_and(|one| pinned_output.view() != one.view())
            {
                return Err(format!(
                    "{gpus} GPUs, page-locked: the result differs from one GPU's"
                ));
            }
            let pinned = median(pinned_times);
            let pinned_speedup = *single_pinned.get_or_insert(pinned) / pinned;
            let floor = floor_ms(&multi)?;
            println!(
                "{gpus} GPU(s): {ms:8.2} ms, {speedup:.2} x one GPU's throughput ({:.2} per GPU); \
                 page-locked arrays {pinned:8.2} ms, {pinned_speedup:.2} x; floor {floor:.2} ms",
                speedup / gpus as f64
            );
            lines.push(format!(
                "{gpus},{ms:.3},{speedup:.3},{:.3},{copies:.3},{pinned:.3},{pinned_speedup:.3},{floor:.3}",
                speedup / gpus as f64
            ));
        }
        Ok(lines)
    }
}

/// The transfer floor of `multi`'s GPUs together, in ms: each GPU's share of the image
/// uploaded and downloaded at once through page-locked memory
/// (`Engine::time_pinned_transfers`), every GPU on its own thread from one start, the slowest
/// GPU's time per round; the median of `RUNS` rounds.
fn floor_ms(multi: &MultiEngine) -> Result<f64, String> {
    let engines = multi.engines();
    let share = SIDE * SIDE / engines.len();
    let start = Barrier::new(engines.len());
    let rounds = std::thread::scope(|scope| {
        let threads: Vec<_> = engines
            .iter()
            .map(|engine| {
                let start = &start;
                scope.spawn(move || {
                    start.wait();
                    engine.time_pinned_transfers(share, share, RUNS)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| match thread.join() {
                Ok(rounds) => rounds.map_err(|e| e.to_string()),
                Err(_) => Err("a transfer thread panicked".to_string()),
            })
            .collect::<Result<Vec<_>, String>>()
    })?;
    let slowest = (0..RUNS)
        .map(|run| {
            rounds
                .iter()
                .map(|r| r[run].overlapped_ms)
                .fold(0.0, f32::max)
        })
        .collect();
    Ok(median(slowest))
}
