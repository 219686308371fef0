//! What the library knows about a GPU: its limits and speeds, read from the driver.

use crate::error::{DriverContext, Result};
use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;
use std::sync::Arc;

/// What the library needs to know about the GPU it runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H100 80GB HBM3".
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Most threads one block may have.
    pub max_threads_per_block: u32,
    /// Most shared memory one block may use, in bytes (the opt-in limit, above the 48 KiB default).
    pub max_shared_memory_per_block: u32,
    /// Most threads along a block's x and y axes.
    pub max_block_dim: (u32, u32),
    /// Most blocks along a grid's x and y axes.
    pub max_grid_dim: (u32, u32),
    /// Number of streaming multiprocessors.
    pub multiprocessor_count: u32,
    /// Peak SM clock in kHz.
    pub clock_rate_khz: u32,
    /// Peak memory clock in kHz (0 where the driver does not say).
    pub memory_clock_rate_khz: u32,
    /// Width of the memory bus in bits (0 where the driver does not say).
    pub memory_bus_width_bits: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
}

impl DeviceInfo {
    /// Peak device-memory bandwidth in bytes per second, from the memory clock and bus width
    /// (two transfers per clock): 3.35e12 for an H100 SXM, 4.81e12 for an H200. What a kernel
    /// reaches is less: the benchmark measures it (`bench`'s copy roofline).
    pub fn peak_memory_bandwidth(&self) -> f64 {
        2.0 * f64::from(self.memory_clock_rate_khz) * 1e3 * f64::from(self.memory_bus_width_bits)
            / 8.0
    }
}

/// Reads `context`'s device facts from the driver.
pub(crate) fn device_info(context: &Arc<CudaContext>) -> Result<DeviceInfo> {
    let attribute = |a: CUdevice_attribute| {
        context
            .attribute(a)
            .map(|v| v.max(0) as u32)
            .context(|| format!("reading device attribute {a:?}"))
    };
    use CUdevice_attribute::*;
    Ok(DeviceInfo {
        ordinal: context.ordinal(),
        name: context
            .name()
            .context(|| "reading the device name".into())?,
        compute_capability: context
            .compute_capability()
            .context(|| "reading the compute capability".into())?,
        max_threads_per_block: attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_shared_memory_per_block: attribute(
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        max_block_dim: (
            attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
        ),
        max_grid_dim: (
            attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
        ),
        multiprocessor_count: attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        clock_rate_khz: attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_rate_khz: attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width_bits: attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        total_memory: context
            .total_mem()
            .context(|| "reading the memory size".into())?,
    })
}
