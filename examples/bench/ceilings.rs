//! The ceilings every case is measured against: the copy roofline (measured) and the FMA peak
//! (derived from the device's properties).

use crate::timing::{TIMED, WARMUP, median};
use conv_host::Engine;

/// The ceilings measured (copy) or derived (FMA) on this device.
pub(crate) struct Ceilings {
    pub(crate) copy_gbps: f64,
    /// The SM copy kernel's, for reference (percentages are of `copy_gbps`).
    pub(crate) sm_copy_gbps: f64,
    pub(crate) fma_gflops: f64,
}

/// FP32 lanes per SM by compute capability (CUDA programming guide, arithmetic throughput).
fn fp32_lanes(major: i32, minor: i32) -> u32 {
    match (major, minor) {
        (8, 0) | (7, _) | (6, 0) => 64,
        _ => 128,
    }
}

pub(crate) fn measure_ceilings(engine: &Engine) -> Result<Ceilings, String> {
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
