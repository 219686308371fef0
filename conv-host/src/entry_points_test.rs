//! The entry points the host names against the PTX the build embeds.

use crate::kernels::{ENTRY_RANGES, HOPPER_ENTRY_RANGES};

/// The kernels the host launches by a fixed name.
const KERNEL_NAMES: &[&str] = &[
    "diagnostic_trap",
    "sm_copy",
    "conv1d_basic",
    "conv1d_constant_mask",
    "conv1d_tiled",
    "conv1d_tiled_global_mask",
    "conv1d_tiled_l2",
    "conv1d_tiled_l2_global_mask",
    "conv2d_basic",
    "conv2d_constant_mask",
    "conv2d_tiled",
    "conv2d_tiled_global_mask",
    "conv2d_tiled_l2",
    "conv2d_tiled_l2_global_mask",
    "conv2d_separable",
    "conv1d_basic_f64",
    "conv1d_constant_mask_f64",
    "conv1d_tiled_f64",
    "conv1d_tiled_global_mask_f64",
    "conv1d_tiled_l2_f64",
    "conv1d_tiled_l2_global_mask_f64",
    "conv2d_basic_f64",
    "conv2d_constant_mask_f64",
    "conv2d_tiled_f64",
    "conv2d_tiled_global_mask_f64",
    "conv2d_tiled_l2_f64",
    "conv2d_tiled_l2_global_mask_f64",
    "convert_u8_f32",
    "convert_u16_f32",
    "convert_f16_f32",
    "convert_f32_u8",
    "convert_f32_u16",
    "convert_f32_f16",
    "convert_bf16_f32",
    "convert_f32_bf16",
    "axis_staged",
    "axis_staged_f64",
    "axis_direct",
    "axis_direct_f64",
    "conv3d_tiled",
    "conv3d_tiled_f64",
    "conv3d_tiled_m3",
    "conv3d_tiled_m3_f64",
    "conv3d_tiled_m5",
    "conv3d_tiled_m1x3",
    "conv3d_tiled_m1x3_f64",
    "conv3d_tiled_m1x5",
    "conv3d_tiled_m1x5_f64",
];

/// The ring axis entry points cover the lengths the abi compiles.
#[test]
fn the_ring_table_matches_the_abi() {
    let lengths: Vec<u32> = crate::axis::RING_ENTRY_POINTS
        .iter()
        .map(|&(n, _)| n as u32)
        .collect();
    assert_eq!(lengths, crate::abi::AXIS_RING_MASKS);
}

/// Every kernel the host may launch is in the PTX, so that loading it on first use can
/// only fail for reasons of the driver's.
#[test]
fn every_kernel_the_host_names_is_in_the_ptx() {
    let register_1d = crate::conv1d::REGISTER_ENTRY_POINTS_1D
        .iter()
        .map(|&(_, name)| name);
    let specialised_2d = crate::conv2d::SEPARABLE_ENTRY_POINTS
        .iter()
        .chain(crate::conv2d::WIDE_ENTRY_POINTS)
        .chain(crate::conv2d::STREAM_ENTRY_POINTS)
        .chain(crate::conv2d::STREAM16_ENTRY_POINTS)
        .map(|&(_, _, name)| name);
    let ring = crate::axis::RING_ENTRY_POINTS
        .iter()
        .chain(&crate::conv2d::ROW_ENTRY_POINTS)
        .chain(&crate::conv2d::PAIR_ENTRY_POINTS)
        .chain(&crate::conv2d::COLUMN_ENTRY_POINTS)
        .map(|&(_, name)| name);
    // The streaming kernels of the memory-bound masks and the wide separable ones on narrow
    // images.
    let native_2d: Vec<String> = crate::conv2d::STREAM_ENTRY_POINTS
        .iter()
        .chain(crate::conv2d::STREAM16_ENTRY_POINTS)
        .filter(|&&(mask, _, _)| crate::abi::STREAM_SHORT_STEP_MASKS.contains(&mask))
        .flat_map(|&(_, _, name)| {
            crate::conv2d::NATIVE_STREAM_ELEMENTS
                .iter()
                .map(move |element| format!("{name}_{element}"))
        })
        .chain(
            crate::conv2d::SEPARABLE_ENTRY_POINTS
                .iter()
                .flat_map(|&(_, _, name)| {
                    crate::conv2d::NATIVE_SEPARABLE_ELEMENTS
                        .iter()
                        .map(move |element| format!("{name}_{element}"))
                }),
        )
        .collect();
    let names: Vec<&str> = KERNEL_NAMES
        .iter()
        .copied()
        .chain(register_1d)
        .chain(ring)
        .chain(specialised_2d)
        .chain(native_2d.iter().map(String::as_str))
        .collect();
    for name in &names {
        assert!(
            ENTRY_RANGES.iter().any(|&(entry, _, _)| entry == *name),
            "{name}"
        );
    }
    // And nothing in the PTX is left unlaunched.
    assert_eq!(names.len(), ENTRY_RANGES.len());
    // The same for the sm_90 PTX: the tensor-copy kernels and the 3D ones staged by
    // asynchronous copies (volumes, and `f64` images).
    let tensor_copies: Vec<&str> = crate::conv2d::SEPARABLE_TMA_ENTRY_POINTS
        .iter()
        .map(|&(_, name)| name)
        .chain(
            crate::conv2d::REGISTER_TILED_TMA_ENTRY_POINTS
                .iter()
                .map(|&(_, _, name)| name),
        )
        .chain(
            crate::conv3d::ASYNC_ENTRY_POINTS
                .iter()
                .map(|&(_, _, name)| name),
        )
        .chain(crate::conv3d::image::async_entry_points())
        .chain(
            crate::conv3d::separable::SEPARABLE3D_ENTRY_POINTS
                .iter()
                .map(|&(_, name)| name),
        )
        .collect();
    for name in &tensor_copies {
        assert!(
            HOPPER_ENTRY_RANGES
                .iter()
                .any(|&(entry, _, _)| entry == *name),
            "{name}"
        );
    }
    assert_eq!(tensor_copies.len(), HOPPER_ENTRY_RANGES.len());
}
