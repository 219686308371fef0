//! `--nd`: the N-D cases (3D volumes, a batch of small images, correlation along the first axis,
//! the Gaussian gradient magnitude) through the public `ndimage` API. Device time: the
//! operation's kernels as the engine reports them (CUDA events), the median of `RUNS` calls
//! after `WARMUP`; the roofline: the copy bandwidth of the same run; the dense cases' outputs
//! are checked at sampled positions against an f64 sum.

use crate::Bench;
use crate::timing::median;
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Engine};
use ndarray::{ArrayD, IxDyn};
use rand::Rng;
use rand::rngs::StdRng;

const WARMUP: usize = 2;
const RUNS: usize = 7;
/// Positions of a dense case's output checked against an f64 sum.
const SAMPLES: usize = 500;

/// The zero border: the sampled sums need no boundary rule.
fn zero_border() -> NdOptions {
    NdOptions {
        mode: BoundaryMode::Constant(0.0).into(),
        ..Default::default()
    }
}

/// The engine's device time of `call`, the median of `RUNS` runs after `WARMUP`, and the last
/// output.
fn device_ms(
    engine: &Engine,
    mut call: impl FnMut() -> conv_host::Result<ArrayD<f32>>,
) -> Result<(f64, ArrayD<f32>), String> {
    let mut times = Vec::with_capacity(RUNS);
    let mut output = None;
    for run in 0..WARMUP + RUNS {
        let out = call().map_err(|e| e.to_string())?;
        if run >= WARMUP {
            times.push(engine.last_kernel_time_ms().ok_or("no device time")?);
        }
        output = Some(out);
    }
    Ok((median(times), output.ok_or("no run")?))
}

/// Largest relative error of `SAMPLES` outputs of the zero-border correlation of `input` with
/// `mask` (same dimensions), against f64 sums.
fn sampled_error(
    rng: &mut StdRng,
    input: &ArrayD<f32>,
    mask: &ArrayD<f32>,
    output: &ArrayD<f32>,
) -> f64 {
    let ndim = input.ndim();
    let mut worst = 0.0f64;
    for _ in 0..SAMPLES {
        let at: Vec<usize> = input
            .shape()
            .iter()
            .map(|&n| rng.random_range(0..n))
            .collect();
        let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
        for (offset, &w) in mask.indexed_iter() {
            let source: Option<Vec<usize>> = (0..ndim)
                .map(|a| {
                    let i = at[a] as i64 + offset[a] as i64 - (mask.shape()[a] / 2) as i64;
                    (0..input.shape()[a] as i64)
                        .contains(&i)
                        .then_some(i as usize)
                })
                .collect();
            if let Some(source) = source {
                let v = f64::from(input[IxDyn(&source)]);
                sum += f64::from(w) * v;
                magnitude += (f64::from(w) * v).abs();
            }
        }
        let error = (f64::from(output[IxDyn(&at)]) - sum).abs() / magnitude.max(1e-30);
        worst = worst.max(if error.is_nan() { f64::INFINITY } else { error });
    }
    worst
}

impl Bench<'_> {
    fn random_array(&mut self, shape: &[usize]) -> ArrayD<f32> {
        ArrayD::from_shape_simple_fn(IxDyn(shape), || self.rng.random_range(-1.0f32..1.0))
    }

    /// Measures the N-D cases; returns the CSV lines.
    pub(crate) fn bench_nd(&mut self) -> Result<Vec<String>, String> {
        let engine = self.engine;
        let nd = engine.ndimage();
        let copy_gbps = self.ceilings.copy_gbps;
        let fma_gflops = self.ceilings.fma_gflops;
        let mut lines =
            vec!["case,device_ms,roofline_ms,fraction_of_roofline,fma_floor_ms,check".to_string()];
        let mut report = |name: &str, ms: f64, elements: usize, taps: usize, check: String| {
            let roofline_ms = (2 * 4 * elements) as f64 / copy_gbps / 1e6;
            let fma_ms = (2 * taps * elements) as f64 / fma_gflops / 1e6;
            println!(
                "{name:<44} {ms:8.3} ms  roofline {roofline_ms:7.3} ms ({:5.1}%)  FMA floor {fma_ms:7.3} ms  {check}",
                100.0 * roofline_ms / ms
            );
            lines.push(format!(
                "{name},{ms:.4},{roofline_ms:.4},{:.3},{fma_ms:.4},{check}",
                roofline_ms / ms
            ));
        };
        println!("\nN-D cases, f32, device time");
        let volume = self.random_array(&[512, 512, 512]);
        for side in [3, 5] {
            let mask = self.random_array(&[side, side, side]);
            let (ms, out) = device_ms(engine, || nd.correlate(&volume, &mask, &zero_border()))?;
            let error = sampled_error(&mut self.rng, &volume, &mask, &out);
            report(
                &format!("3d_512^3_{side}x{side}x{side}"),
                ms,
                volume.len(),
                side * side * side,
                format!("max_rel_err={error:.1e}"),
            );
        }
        // Masks of 3 to 17 taps a side (radius 4 sigma).
        for (sigma, taps) in [(0.25, 3), (0.5, 5), (0.75, 7), (1.0, 9), (2.0, 17)] {
            let (ms, _) = device_ms(engine, || {
                nd.gaussian_filter(&volume, sigma, 0, &NdOptions::default())
            })?;
            report(
                &format!("3d_512^3_gaussian_sigma{sigma}_separable"),
                ms,
                volume.len(),
                3 * taps,
                "tests".into(),
            );
        }
        let taps =
            ndarray::Array1::from_shape_simple_fn(17, || self.rng.random_range(-1.0f32..1.0));
        for axis in 0..3 {
            let (ms, _) = device_ms(engine, || {
                nd.correlate1d(&volume, &taps, axis, &zero_border())
            })?;
            report(
                &format!("correlate1d_axis{axis}_512^3_17"),
                ms,
                volume.len(),
                17,
                "tests".into(),
            );
        }
        drop(volume);
        let batch = self.random_array(&[4096, 128, 128, 3]);
        let mask = self.random_array(&[1, 5, 5, 1]);
        let (ms, out) = device_ms(engine, || nd.correlate(&batch, &mask, &zero_border()))?;
        let error = sampled_error(&mut self.rng, &batch, &mask, &out);
        report(
            "batch_4096x128^2x3_5x5",
            ms,
            batch.len(),
            25,
            format!("max_rel_err={error:.1e}"),
        );
        drop(batch);
        let image = self.random_array(&[8192, 8192]);
        let taps =
            ndarray::Array1::from_shape_simple_fn(31, || self.rng.random_range(-1.0f32..1.0));
        let (ms, _) = device_ms(engine, || nd.correlate1d(&image, &taps, 0, &zero_border()))?;
        report(
            "correlate1d_axis0_8192^2_31",
            ms,
            image.len(),
            31,
            "tests".into(),
        );
        let (gaussian, _) = device_ms(engine, || {
            nd.gaussian_filter(&image, 2.0, 0, &NdOptions::default())
        })?;
        report(
            "gaussian_filter_8192^2_sigma2",
            gaussian,
            image.len(),
            34,
            "tests".into(),
        );
        let (magnitude, _) = device_ms(engine, || {
            nd.gaussian_gradient_magnitude(&image, 2.0, &NdOptions::default())
        })?;
        report(
            "gaussian_gradient_magnitude_8192^2_sigma2",
            magnitude,
            image.len(),
            68,
            format!("{:.2}x_gaussian", magnitude / gaussian),
        );
        Ok(lines)
    }
}
