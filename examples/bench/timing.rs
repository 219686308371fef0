//! Timing: warm-up and timed runs on the device, the median, and the CPU reference's time.

use std::time::Instant;

/// Untimed runs before the timed ones, and timed runs (the median is reported).
pub(crate) const WARMUP: usize = 3;
pub(crate) const TIMED: usize = 20;
/// Cases whose CPU reference would take longer than this many multiply-adds are not timed on
/// the CPU.
const CPU_BUDGET: f64 = 3e8;

/// The median of `times`.
pub(crate) fn median(mut times: Vec<f32>) -> f64 {
    times.sort_by(f32::total_cmp);
    let n = times.len();
    f64::from(if n % 2 == 1 {
        times[n / 2]
    } else {
        (times[n / 2 - 1] + times[n / 2]) / 2.0
    })
}

/// Times one configuration: `timed(runs)` runs the kernel on device-resident data
/// (`WARMUP` + `TIMED` runs; the median of the timed ones), then `call` once through the public
/// API for the end-to-end time. Returns the output of the timed runs and both times in ms.
pub(crate) fn measure<O>(
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
pub(crate) fn cpu_time(multiply_adds: usize, run: impl FnOnce()) -> Option<f64> {
    (multiply_adds as f64 <= CPU_BUDGET).then(|| {
        let start = Instant::now();
        run();
        start.elapsed().as_secs_f64() * 1e3
    })
}
