//! The register-tiled design in 1D: 4 or 8 outputs per thread, specialised per mask length.
//! Kernels: `conv-kernels/src/conv1d/register_tiled.rs`.

use crate::abi::{REGISTER_THREADS_1D, register_outputs_1d, register_shared_words_1d};
use crate::device::DeviceInfo;
use crate::error::{ConvError, Result};
use crate::kernels::{sizes, specialised};
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block};
use crate::registry::{Family, KernelId, Shape, Storage};

/// The register-tiled 1D kernel for `mask_len` taps, if one is compiled.
fn register_kernel(mask_len: usize) -> Option<KernelId> {
    specialised(
        Family::Conv1dRegisterTiled,
        Shape::Taps,
        mask_len,
        None,
        Storage::F32,
    )
}

/// Outputs per block of the register-tiled kernel for `mask_len` taps.
fn outputs_per_block(mask_len: usize) -> usize {
    REGISTER_THREADS_1D as usize * register_outputs_1d(mask_len as u64) as usize
}

/// Whether `Auto` runs a signal of `len` elements with a mask of `mask_len` taps on the
/// register-tiled kernel: where one is compiled for that length and the signal fills the device
/// ([`register_fills_device`]).
pub(super) fn auto_prefers(device: &DeviceInfo, (len, mask_len): (usize, usize)) -> bool {
    register_kernel(mask_len).is_some()
        && register_fills_device(
            len,
            outputs_per_block(mask_len),
            device.multiprocessor_count,
        )
}

/// Plans the register-tiled kernel for `mask_len` taps, or explains why it does not apply.
pub(super) fn plan(device: &DeviceInfo, mask_len: usize, tile: Option<u32>) -> Result<LaunchPlan> {
    let invalid = ConvError::invalid_launch("conv1d_register_tiled");
    let entry = register_kernel(mask_len).ok_or_else(|| {
        let lengths = sizes(Family::Conv1dRegisterTiled);
        invalid(format!(
            "no register-tiled 1D kernel for {mask_len} taps (compiled for {lengths:?})"
        ))
    })?;
    if tile.is_some_and(|t| t != REGISTER_THREADS_1D) {
        return Err(invalid(format!(
            "the register-tiled kernels use {REGISTER_THREADS_1D} threads per block"
        )));
    }
    let output_tile = outputs_per_block(mask_len) as u32;
    let shared_floats = register_shared_words_1d(mask_len as u64);
    check_block(device, entry, (REGISTER_THREADS_1D, 1), shared_floats * 4)?;
    Ok(LaunchPlan {
        kernel: Kernel::RegisterTiled,
        entry,
        block: (REGISTER_THREADS_1D, 1),
        output_tile: (output_tile, 1),
        shared_memory_bytes: shared_floats as u32 * 4,
        mask_in_constant_memory: true,
    })
}

/// Whether the register-tiled kernel, `outputs_per_block` outputs per block, launches enough
/// blocks on `len` elements to beat the textbook designs: at least one per two SMs. Below that
/// its blocks' serial work shows (measured: PERFORMANCE.md, How Auto decides, 1D rule 1).
fn register_fills_device(len: usize, outputs_per_block: usize, multiprocessors: u32) -> bool {
    len.div_ceil(outputs_per_block.max(1)).saturating_mul(2) >= multiprocessors as usize
}

#[cfg(test)]
mod tests {
    use super::register_fills_device;
    use crate::abi::{register_outputs_1d, register_shared_words_1d, register_word_1d};

    /// Auto leaves the register-tiled kernel for signals that give it fewer blocks than half
    /// the SMs (132 SMs, 2,048 outputs per block at 15 and 31 taps).
    #[test]
    fn register_kernel_needs_a_block_per_two_sms() {
        assert!(!register_fills_device(1 << 16, 2048, 132)); // 32 blocks
        assert!(!register_fills_device(65 * 2048, 2048, 132));
        assert!(register_fills_device(65 * 2048 + 1, 2048, 132)); // 66 blocks
        assert!(register_fills_device(1 << 18, 2048, 132));
        assert!(!register_fills_device(0, 2048, 1));
        assert!(register_fills_device(usize::MAX, 1, u32::MAX));
    }

    /// The kernel reads quad `q` of the window of thread `t` (first element `P t`) at
    /// `register_word_1d(P t) + register_word_1d(4 q)`: that must be the quad's own word, and the
    /// 8 threads of a quarter-warp must read 8 different groups of 4 banks.
    #[test]
    fn padded_spans_give_compile_time_offsets_and_no_bank_conflicts() {
        for mask_len in [3u64, 7, 15, 31] {
            let per_thread = register_outputs_1d(mask_len);
            let quads = (per_thread + mask_len - 1).div_ceil(4);
            for q in 0..quads {
                for first_thread in (0..256).step_by(8) {
                    let mut groups: Vec<u64> = (first_thread..first_thread + 8)
                        .map(|t| {
                            let base = per_thread * t;
                            let word = register_word_1d(base, mask_len)
                                + register_word_1d(4 * q, mask_len);
                            assert_eq!(word, register_word_1d(base + 4 * q, mask_len));
                            assert!(word + 4 <= register_shared_words_1d(mask_len));
                            (word / 4) % 8
                        })
                        .collect();
                    groups.sort_unstable();
                    groups.dedup();
                    assert_eq!(groups.len(), 8, "{mask_len} taps, quad {q}");
                }
            }
        }
    }
}
