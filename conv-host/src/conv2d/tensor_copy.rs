//! The kernels staged by Hopper's tensor copies (`Kernel::SeparableTma`,
//! `Kernel::RegisterTiledTma`): what they need of the device, the mask and the boundary mode,
//! and their plans.

use super::{Mask2d, register_tiled_tma, separable, separable_tma};
use crate::abi::{SEPARABLE_THREADS, SEPARABLE_WIDE_STRIP, SeparableTmaLayout, StreamTmaLayout};
use crate::device::DeviceInfo;
use crate::error::{ConvError, Result};
use crate::options::{BoundaryMode, Kernel};
use crate::plan::{LaunchPlan, check_block};

/// Why no tensor-copy kernel can run this mask and mode on this device, if none can: they need
/// a GPU of compute capability 9.0 or more (Hopper's tensor memory accelerator), a mask whose
/// anchor is its centre along the rows (`origin[1] = 0`: copies start at 16-byte aligned
/// elements, so the kernels are compiled for that anchor), and the zero border, which the
/// copies supply by reading elements outside the image as zeros.
pub(crate) fn unsupported(
    device: &DeviceInfo,
    mask: &Mask2d,
    mode: BoundaryMode,
) -> Option<String> {
    let (major, minor) = device.compute_capability;
    if major < 9 {
        return Some(format!(
            "tensor copies need compute capability 9.0 or more; this device has {major}.{minor}"
        ));
    }
    if mask.left != mask.cols / 2 {
        return Some("compiled for masks centred along the rows (origin[1] = 0)".into());
    }
    if mode != BoundaryMode::Constant(0.0) {
        return Some(format!(
            "the tensor copies supply the zero border only (Constant(0.0)), not {mode:?}"
        ));
    }
    None
}

/// Plans the tensor-copy design `kernel` (`SeparableTma`, or else `RegisterTiledTma`) for this
/// mask, channel count and mode, or explains why it cannot run: its entry point where one
/// applies, a fixed block of 256 threads (a strip of 256 elements; the host sizes its height)
/// and the shared memory of its layout.
pub(crate) fn plan(
    device: &DeviceInfo,
    kernel: Kernel,
    mask: &Mask2d,
    (channels, mode): (usize, BoundaryMode),
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let separable = kernel == Kernel::SeparableTma;
    let (invalid, entry) = if separable {
        (
            ConvError::invalid_launch("conv2d_separable_tma"),
            separable_tma::kernel(mask, channels),
        )
    } else {
        (
            ConvError::invalid_launch("conv2d_register_tiled_tma"),
            register_tiled_tma::kernel(mask, channels),
        )
    };
    let entry = entry
        .and_then(|entry| unsupported(device, mask, mode).map_or(Ok(entry), Err))
        .map_err(&invalid)?;
    let block = (SEPARABLE_THREADS, 1);
    if tile.is_some_and(|t| t != block) {
        return Err(invalid(format!(
            "the tensor-copy kernels use a fixed {block:?} block"
        )));
    }
    let words = if separable {
        SeparableTmaLayout::new(mask.rows as u64).words
    } else {
        StreamTmaLayout::new(mask.rows as u64, channels as u64).words
    };
    check_block(device, entry, block, words * 4)?;
    Ok(LaunchPlan {
        kernel,
        entry,
        block,
        output_tile: (SEPARABLE_WIDE_STRIP, separable::ROWS_PER_BLOCK),
        shared_memory_bytes: (words * 4) as u32,
        mask_in_constant_memory: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv2d::separable_tma::tests::{centred, device};

    #[test]
    fn tensor_copies_need_hopper_the_zero_border_and_a_mask_centred_along_the_rows() {
        let (hopper, zero) = (device((9, 0)), BoundaryMode::Constant(0.0));
        for m in [3, 9, 31] {
            assert!(unsupported(&hopper, &centred(m), zero).is_none());
            assert!(unsupported(&device((8, 9)), &centred(m), zero).is_some());
            for mode in [
                BoundaryMode::Constant(1.0),
                BoundaryMode::Nearest,
                BoundaryMode::Reflect,
                BoundaryMode::Mirror,
                BoundaryMode::Wrap,
            ] {
                assert!(
                    unsupported(&hopper, &centred(m), mode).is_some(),
                    "{mode:?}"
                );
            }
            let off_centre = Mask2d {
                left: 0,
                ..centred(m)
            };
            assert!(unsupported(&hopper, &off_centre, zero).is_some());
            // Only the anchor along the rows matters: copies start anywhere down the columns.
            let lower = Mask2d {
                top: 0,
                ..centred(m)
            };
            assert!(unsupported(&hopper, &lower, zero).is_none());
        }
    }

    #[test]
    fn plans_name_their_design_and_refuse_tiles_and_what_does_not_apply() {
        let (hopper, zero) = (device((9, 0)), BoundaryMode::Constant(0.0));
        for (kernel, mask, entry) in [
            (Kernel::SeparableTma, 31, "conv2d_separable_tma_m31_c1"),
            (
                Kernel::RegisterTiledTma,
                9,
                "conv2d_register_tiled_tma_m9_c1",
            ),
        ] {
            let mask = centred(mask);
            let planned = plan(&hopper, kernel, &mask, (1, zero), None).expect("applies");
            assert_eq!(
                (planned.kernel, planned.entry.entry_point()),
                (kernel, entry)
            );
            assert_eq!(planned.block, (SEPARABLE_THREADS, 1));
            for (mode, tile) in [(BoundaryMode::Reflect, None), (zero, Some((32, 8)))] {
                assert!(matches!(
                    plan(&hopper, kernel, &mask, (1, mode), tile),
                    Err(ConvError::InvalidLaunch { .. })
                ));
            }
        }
    }
}
