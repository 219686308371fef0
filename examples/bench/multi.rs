//! `--multi`: host -> host 2D 16384^2 f32 5x5 on 1 to N GPUs of the host (`MultiEngine` over
//! the first k GPUs), throughput against one GPU's, medians of `RUNS` calls after `WARMUP`;
//! every split result must equal one GPU's exactly; beside them, the host's share alone (the
//! call's packing and unpacking without the GPUs, `Engine::time_host_copies`), which bounds
//! every split.

use crate::Bench;
use crate::timing::median;
use conv_host::{Conv2dOptions, MultiEngine};
use ndarray::Array2;
use rand::Rng;
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
        let options = Conv2dOptions::default();
        let copies = {
            let input = image.as_slice().ok_or("a standard-layout image")?;
            let times = self
                .engine
                .time_host_copies(input, true, WARMUP + RUNS)
                .map_err(fail)?;
            median(times[WARMUP..].to_vec())
        };
        let mut lines =
            vec!["gpus,host_ms,throughput_vs_one,efficiency,host_copies_ms".to_string()];
        let mut single = None;
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
                let out = multi.correlate2d(&image, &mask, &options).map_err(fail)?;
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
            println!(
                "{gpus} GPU(s): {ms:8.2} ms, {speedup:.2} x one GPU's throughput ({:.2} per GPU)",
                speedup / gpus as f64
            );
            lines.push(format!(
                "{gpus},{ms:.3},{speedup:.3},{:.3},{copies:.3}",
                speedup / gpus as f64
            ));
        }
        Ok(lines)
    }
}
