//! The register-tiled design in 1D: 4 or 8 outputs per thread specialised per mask length, and
//! 16 (`f32`) or 8 (`f64`) for masks of any length. Kernels:
//! `conv-kernels/src/conv1d/register_tiled.rs` and `register_tiled_any.rs`.

use crate::abi::{
    LONG_THREADS_1D, REGISTER_THREADS_1D, long_outputs_1d, long_shared_elements_1d,
    register_outputs_1d, register_shared_words_1d,
};
use crate::device::DeviceInfo;
use crate::error::{ConvError, Result};
use crate::kernels::specialised;
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block};
use crate::registry::{Family, KernelId, Shape, Storage};

/// Masks from this many taps on run on the any-length kernel under `Auto` where no specialised
/// kernel is compiled; shorter ones on the textbook designs (measured: PERFORMANCE.md, How Auto
/// decides, 1D rule 3).
const ANY_LENGTH_FROM_TAPS: usize = 17;

/// The register-tiled 1D kernel that runs `mask_len` taps of `storage`: the one specialised on
/// that length where compiled (`f32` only), else the any-length kernel.
fn register_kernel(mask_len: usize, storage: Storage) -> KernelId {
    let fixed = (storage == Storage::F32)
        .then(|| {
            specialised(
                Family::Conv1dRegisterTiled,
                Shape::Taps,
                mask_len,
                None,
                storage,
            )
        })
        .flatten();
    fixed.unwrap_or(KernelId::new(
        Family::Conv1dRegisterTiled,
        Shape::Any,
        None,
        storage,
    ))
}

/// Element size of `storage`, one of the kernels' real types.
fn element_bytes(storage: Storage) -> u64 {
    if storage == Storage::F64 { 8 } else { 4 }
}

/// Outputs per block and shared memory in bytes of `entry` for `mask_len` taps.
fn block_shape(entry: KernelId, mask_len: usize) -> (usize, u64) {
    let taps = mask_len as u64;
    if entry.shape() == Shape::Any {
        let bytes = element_bytes(entry.storage());
        let per_thread = long_outputs_1d(bytes);
        let outputs = LONG_THREADS_1D as usize * per_thread as usize;
        (outputs, long_shared_elements_1d(taps, per_thread) * bytes)
    } else {
        let outputs = REGISTER_THREADS_1D as usize * register_outputs_1d(taps) as usize;
        (outputs, register_shared_words_1d(taps) * 4)
    }
}

/// Whether `Auto` runs a signal of `len` elements with a mask of `mask_len` taps of `storage` on
/// a register-tiled kernel: where one is specialised on that length, or the mask is long
/// ([`ANY_LENGTH_FROM_TAPS`]), and the signal fills the device ([`register_fills_device`]).
pub(super) fn auto_prefers(
    device: &DeviceInfo,
    (len, mask_len): (usize, usize),
    storage: Storage,
) -> bool {
    let entry = register_kernel(mask_len, storage);
    (entry.shape() != Shape::Any || mask_len >= ANY_LENGTH_FROM_TAPS)
        && register_fills_device(
            len,
            block_shape(entry, mask_len).0,
            device.multiprocessor_count,
        )
}

/// Plans the register-tiled kernel for `mask_len` taps of `storage`, or explains why it does
/// not apply.
pub(super) fn plan(
    device: &DeviceInfo,
    mask_len: usize,
    tile: Option<u32>,
    storage: Storage,
) -> Result<LaunchPlan> {
    let entry = register_kernel(mask_len, storage);
    let threads = if entry.shape() == Shape::Any {
        LONG_THREADS_1D
    } else {
        REGISTER_THREADS_1D
    };
    if tile.is_some_and(|t| t != threads) {
        return Err(ConvError::invalid_launch("conv1d_register_tiled")(format!(
            "the register-tiled kernels use {threads} threads per block"
        )));
    }
    let (outputs, shared_bytes) = block_shape(entry, mask_len);
    check_block(device, entry, (threads, 1), shared_bytes)?;
    Ok(LaunchPlan {
        kernel: Kernel::RegisterTiled,
        entry,
        block: (threads, 1),
        output_tile: (outputs as u32, 1),
        shared_memory_bytes: shared_bytes as u32,
        mask_in_constant_memory: entry.shape() != Shape::Any,
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
