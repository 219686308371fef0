//! The register-tiled design in 2D: the streaming kernels for square masks of 3 to 9 taps (steps
//! of 16 or 32 rows, chosen per device) and the wide kernels for masks 1 or 9 to 31 taps wide.
//! Kernels: `conv-kernels/src/conv2d/register_tiled.rs`.

use super::separable;
use crate::abi::{
    MASK_CAPACITY, REGISTER_CHANNELS, SEPARABLE_THREADS, SEPARABLE_WIDE_CHUNK_ROWS,
    SEPARABLE_WIDE_STRIP, STREAM_MASKS, STREAM_SHORT_STEP_ROWS, StreamLayout, WIDE_BLOCK,
    WIDE_MASK_WIDTHS, WIDE_OUTPUTS, WIDE_ROWS, wide_row_words,
};
use crate::device::DeviceInfo;
use crate::element::Element;
use crate::error::{ConvError, Result};
use crate::kernels::{compiled, specialised};
use crate::options::Kernel;
use crate::plan::{LaunchPlan, check_block};
use crate::registry::{Family, KernelId, Shape, Storage};

/// The register-tiled kernel for this mask and channel count on `device`, if one is compiled:
/// the streaming design for square masks (in steps of 16 rows where
/// `short_stream_steps_pay_off`), else the wide design for the mask's width (any height).
pub(super) fn register_kernel(
    device: &DeviceInfo,
    mask: (usize, usize),
    channels: usize,
) -> Option<KernelId> {
    short_stream_steps_pay_off(device, size_of::<f32>())
        .then(|| square_kernel(Family::Conv2dStream16, mask, channels))
        .flatten()
        .or_else(|| square_kernel(Family::Conv2dStream, mask, channels))
        .or_else(|| {
            let wide = Family::Conv2dRegisterTiledWide;
            specialised(wide, Shape::Width, mask.1, Some(channels), Storage::F32)
        })
}

/// The `f32` kernel of `family` for a square mask of that size and that channel count, if one
/// is compiled.
pub(crate) fn square_kernel(
    family: Family,
    (rows, cols): (usize, usize),
    channels: usize,
) -> Option<KernelId> {
    (rows == cols)
        .then(|| specialised(family, Shape::Square, rows, Some(channels), Storage::F32))
        .flatten()
}

/// Whether some kernels read `I` and write `O` themselves: one narrow type in and out.
pub(crate) fn native_types<I: Element, O: Element>() -> bool {
    I::STORAGE == O::STORAGE && Storage::NARROW.contains(&I::STORAGE)
}

/// Whether a streaming kernel reads and writes narrow images for this mask and channel count.
pub(super) fn has_native_stream_kernel(mask: (usize, usize), channels: usize) -> bool {
    square_kernel(Family::Conv2dStream, mask, channels)
        .is_some_and(|id| compiled(id.with_storage(Storage::U8)).is_some())
}

/// The plan of `plan`'s kernel on images of `I` in and out on `device` where one is compiled
/// (the streaming kernels of the memory-bound masks for the narrow types, the wide separable
/// ones for `u8` and `u16`): the `f32` kernel's plan (block, tile and shared memory are the
/// same) with that kernel, in steps of 16 rows where [`short_steps_for`] says so for `I`.
/// Without it, a `u8` image moves 18 bytes per element through device memory instead of 2:
/// widened to `f32`, filtered, narrowed.
pub(crate) fn native_plan<I: Element, O: Element>(
    plan: &LaunchPlan,
    device: &DeviceInfo,
) -> Option<LaunchPlan> {
    if !native_types::<I, O>() {
        return None;
    }
    let plan = short_steps_for::<I>(plan, device).unwrap_or_else(|| plan.clone());
    let entry = compiled(plan.entry.with_storage(I::STORAGE))?;
    Some(LaunchPlan { entry, ..plan })
}

/// The 16-row steps of a streaming plan in 32-row steps, for images of 16-bit elements
/// (`u16`, `f16`, `bf16`) on a device where short steps pay off for their bytes
/// ([`short_stream_steps_pay_off`]): such an image moves half the bytes of `f32` for the same
/// multiply-adds, so the passes show where the `f32` kernel waits on memory. `u8` images keep
/// the `f32` plan's steps, where short ones gain nothing (measured: PERFORMANCE.md, How Auto
/// decides, 2D rule 0).
fn short_steps_for<I: Element>(plan: &LaunchPlan, device: &DeviceInfo) -> Option<LaunchPlan> {
    if size_of::<I>() != 2
        || !short_stream_steps_pay_off(device, size_of::<I>())
        || plan.entry.family() != Family::Conv2dStream
    {
        return None;
    }
    let (shape, channels) = (plan.entry.shape(), plan.entry.channels());
    let entry = compiled(KernelId::new(
        Family::Conv2dStream16,
        shape,
        channels,
        Storage::F32,
    ))?;
    let layout = StreamLayout::new(
        u64::from(shape.size()?),
        u64::from(channels?),
        STREAM_SHORT_STEP_ROWS,
    );
    Some(LaunchPlan {
        entry,
        shared_memory_bytes: (layout.words * 4) as u32,
        ..plan.clone()
    })
}

/// Input rows per step of the streaming kernel `entry`, or `None` for another kernel.
pub(super) fn stream_step_rows(entry: KernelId) -> Option<u32> {
    match entry.family() {
        Family::Conv2dStream16 => Some(STREAM_SHORT_STEP_ROWS as u32),
        Family::Conv2dStream => Some(SEPARABLE_WIDE_CHUNK_ROWS),
        _ => None,
    }
}

/// Whether `plan` runs a streaming kernel.
pub(super) fn is_stream(plan: &LaunchPlan) -> bool {
    stream_step_rows(plan.entry).is_some()
}

/// Device-memory bytes per SM and SM clock cycle, at their peaks, from which the 3 x 3 and 5 x
/// 5 streaming kernels walk steps of 16 rows, four blocks per SM, instead of 32 rows and three
/// blocks: where memory is fast for the SMs, the passes' multiply-adds show unless more blocks
/// cover them; where it is slower, the short steps' extra reads and barriers cost more than
/// they hide. The line lies between the two devices measured, one on each side; others are
/// placed by the same figure (measured: PERFORMANCE.md, How Auto decides, 2D rule 6).
const SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE: f64 = 16.0;

/// Whether `device` runs the 3 x 3 and 5 x 5 streaming kernels over elements of
/// `element_bytes` bytes in steps of 16 rows: its memory bandwidth, counted in `f32` elements'
/// bytes (scaled by 4 / `element_bytes`), at least
/// [`SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE`].
fn short_stream_steps_pay_off(device: &DeviceInfo, element_bytes: usize) -> bool {
    let sm_cycles = f64::from(device.multiprocessor_count) * f64::from(device.clock_rate_khz) * 1e3;
    let scale = size_of::<f32>() as f64 / element_bytes as f64;
    device.peak_memory_bandwidth() * scale >= SHORT_STREAM_STEPS_FROM_BYTES_PER_SM_CYCLE * sm_cycles
}

/// Most shared memory a wide register-tiled block should take, so that two fit on an SM of
/// 228 KiB (Hopper; one fits on smaller ones, and `check_block` rejects what does not).
const WIDE_SHARED_BYTES_TARGET: u64 = 100 * 1024;

/// Shared memory of a wide register-tiled block of `threads_y` rows of threads: its output rows
/// and the mask's `rows - 1` halo rows, staged rows as `wide_row_words` lays them out.
fn wide_shared_bytes(threads_y: u32, rows: usize, cols: usize, channels: usize) -> u64 {
    let staged_rows = u64::from(threads_y * WIDE_ROWS) + rows as u64 - 1;
    staged_rows * wide_row_words(cols as u64, channels as u64) * 4
}

/// Plans the register-tiled design, or explains why it does not apply.
pub(super) fn plan(
    device: &DeviceInfo,
    (rows, cols): (usize, usize),
    channels: usize,
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let invalid = ConvError::invalid_launch("conv2d_register_tiled");
    let entry = register_kernel(device, (rows, cols), channels).ok_or_else(|| {
        invalid(format!(
            "no register-tiled kernel for a {rows} x {cols} mask with {channels} channel(s): it is \
             compiled for square masks of {STREAM_MASKS:?} and masks {WIDE_MASK_WIDTHS:?} \
             wide, with {REGISTER_CHANNELS:?} channels"
        ))
    })?;
    let stream_steps = stream_step_rows(entry);
    let block = if stream_steps.is_some() {
        (SEPARABLE_THREADS, 1)
    } else {
        // Fewer rows of threads where the staged region would leave one block per SM.
        let mut threads_y = WIDE_BLOCK.1;
        while threads_y > 2
            && wide_shared_bytes(threads_y, rows, cols, channels) > WIDE_SHARED_BYTES_TARGET
        {
            threads_y /= 2;
        }
        (WIDE_BLOCK.0, threads_y)
    };
    if tile.is_some_and(|t| t != block) {
        return Err(invalid(format!(
            "the register-tiled kernel for this mask uses a fixed {block:?} block"
        )));
    }
    if rows * cols > MASK_CAPACITY {
        return Err(invalid(format!(
            "the {rows} x {cols} mask has more than the {MASK_CAPACITY} taps constant memory holds"
        )));
    }
    let (output_tile, shared_bytes) = if let Some(steps) = stream_steps {
        let layout = StreamLayout::new(rows as u64, channels as u64, u64::from(steps));
        (
            (SEPARABLE_WIDE_STRIP, separable::ROWS_PER_BLOCK),
            layout.words * 4,
        )
    } else {
        let bytes = wide_shared_bytes(block.1, rows, cols, channels);
        ((block.0 * WIDE_OUTPUTS, block.1 * WIDE_ROWS), bytes)
    };
    check_block(device, entry, block, shared_bytes)?;
    Ok(LaunchPlan {
        kernel: Kernel::RegisterTiled,
        entry,
        block,
        output_tile,
        shared_memory_bytes: shared_bytes as u32,
        mask_in_constant_memory: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::STREAM_SHORT_STEP_MASKS;

    /// A streaming pass thread `c < 64` reads the quads of its window (elements from `4c` on,
    /// `4 + (M - 1) C` of them, rounded up to quads) from a ring row: they must lie within the
    /// row, cover the window, and the blocks per SM that the build asks for (four in steps of
    /// 16 rows, three in steps of 32) must fit a Hopper SM (228 KiB) with their ring and
    /// column table.
    #[test]
    fn stream_windows_stay_in_their_rows() {
        let steps_of = |mask: u32| {
            let short = STREAM_SHORT_STEP_MASKS.contains(&mask);
            [Some(32), short.then_some(STREAM_SHORT_STEP_ROWS)]
        };
        for &mask in &STREAM_MASKS {
            for step in steps_of(mask).into_iter().flatten() {
                for &channels in &REGISTER_CHANNELS {
                    let (mask, channels) = (u64::from(mask), u64::from(channels));
                    let layout = StreamLayout::new(mask, channels, step);
                    let window = 4 + (mask - 1) * channels;
                    let last_thread = 63;
                    assert!(4 * last_thread + 4 * window.div_ceil(4) <= layout.row_words);
                    assert!(layout.row_words >= u64::from(SEPARABLE_WIDE_STRIP) + window - 4);
                    // A step's rows and the halo, rounded up to whole groups of 8 for the pass.
                    assert_eq!(layout.ring_rows, (step + mask - 1).next_multiple_of(8));
                    assert!(layout.column_table >= layout.ring_rows * layout.row_words);
                    let blocks = if step == 16 { 4 } else { 3 };
                    let what = format!("{mask} x {channels}, steps of {step}");
                    assert!(blocks * layout.words * 4 <= 228 * 1024, "{what}");
                }
            }
        }
    }

    /// The 3 x 3 and 5 x 5 masks run in steps of 16 rows on an H200, in steps of 32 on an H100
    /// and on a GPU whose driver does not give the memory's clock; the other sizes always in
    /// steps of 32.
    #[test]
    fn short_stream_steps_follow_the_memory_speed() {
        let h100 = crate::conv2d::separable_tma::tests::device((9, 0));
        let h200 = DeviceInfo {
            memory_clock_rate_khz: 3_130_000,
            memory_bus_width_bits: 6144,
            ..h100.clone()
        };
        let unknown = DeviceInfo {
            memory_clock_rate_khz: 0,
            ..h200.clone()
        };
        assert!((h100.peak_memory_bandwidth() - 3.35e12).abs() < 0.01e12);
        assert!((h200.peak_memory_bandwidth() - 4.81e12).abs() < 0.01e12);
        let steps = |device: &DeviceInfo, m: usize, c: usize| {
            register_kernel(device, (m, m), c).and_then(stream_step_rows)
        };
        for c in [1, 3, 4] {
            for m in [3, 5] {
                assert_eq!(steps(&h200, m, c), Some(16));
                assert_eq!(steps(&h100, m, c), Some(32));
                assert_eq!(steps(&unknown, m, c), Some(32));
            }
            for m in [7, 9] {
                assert_eq!(steps(&h200, m, c), Some(32));
            }
        }
        assert_eq!(steps(&h200, 11, 1), None);
    }

    /// 16-bit images take the short steps where memory is fast enough for their bytes (the
    /// H100's is for 2 bytes, not for 4), with the short steps' shared memory; `u8` images keep
    /// the `f32` plan's steps.
    #[test]
    fn sixteen_bit_images_take_short_steps_where_their_bytes_allow() {
        let h100 = crate::conv2d::separable_tma::tests::device((9, 0));
        let slow = DeviceInfo {
            memory_clock_rate_khz: h100.memory_clock_rate_khz / 4,
            ..h100.clone()
        };
        for c in [1, 3, 4] {
            for m in [3, 5] {
                let plan = plan(&h100, (m, m), c, None).unwrap();
                assert_eq!(stream_step_rows(plan.entry), Some(32));
                let native = |plan: &LaunchPlan, device: &DeviceInfo| {
                    let u16_plan = native_plan::<u16, u16>(plan, device).unwrap();
                    let u8_plan = native_plan::<u8, u8>(plan, device).unwrap();
                    (u16_plan, u8_plan.entry.entry_point())
                };
                let (u16_plan, u8_entry) = native(&plan, &h100);
                assert_eq!(
                    u16_plan.entry.entry_point(),
                    format!("conv2d_register_tiled_stream16_m{m}_c{c}_u16")
                );
                let short = StreamLayout::new(m as u64, c as u64, STREAM_SHORT_STEP_ROWS);
                assert_eq!(u64::from(u16_plan.shared_memory_bytes), short.words * 4);
                assert_eq!(
                    u8_entry,
                    format!("conv2d_register_tiled_stream_m{m}_c{c}_u8")
                );
                let (u16_plan, _) = native(&plan, &slow);
                assert_eq!(
                    u16_plan.entry.entry_point(),
                    format!("conv2d_register_tiled_stream_m{m}_c{c}_u16")
                );
                assert!(native_plan::<f32, f32>(&plan, &h100).is_none());
            }
        }
    }

    /// The wide kernel reads quad `q` of thread `t`'s window (first element `16 t`) at
    /// `wide_word(16 t) + 4 q + 4 (q / 4)` and stages element `lane + 32 k` at
    /// `wide_word(lane) + 40 k`: both must be the elements' own words, the 8 threads of a
    /// quarter-warp must read 8 different groups of 4 banks, and every read stays in the row.
    #[test]
    fn wide_rows_give_compile_time_offsets_and_no_bank_conflicts() {
        use crate::abi::wide_word;
        for (width, channels) in [(1u64, 1u64), (9, 1), (9, 4), (31, 3), (31, 4)] {
            let row_words = wide_row_words(width, channels);
            let window = u64::from(WIDE_OUTPUTS) + (width - 1) * channels;
            for q in 0..window.div_ceil(4) {
                for first_thread in [0u64, 8] {
                    let mut groups: Vec<u64> = (first_thread..first_thread + 8)
                        .map(|t| {
                            let word = wide_word(16 * t) + 4 * q + 4 * (q / 4);
                            assert_eq!(word, wide_word(16 * t + 4 * q));
                            assert!(word + 4 <= row_words, "{width} x {channels}");
                            (word / 4) % 8
                        })
                        .collect();
                    groups.sort_unstable();
                    groups.dedup();
                    assert_eq!(groups.len(), 8, "{width} x {channels}, quad {q}");
                }
            }
            let staged = u64::from(WIDE_BLOCK.0 * WIDE_OUTPUTS) + (width - 1) * channels;
            for rx in 0..staged {
                let (lane, k) = (rx % 32, rx / 32);
                assert_eq!(wide_word(rx), wide_word(lane) + 40 * k);
                assert!(wide_word(rx) < row_words);
            }
        }
    }
}
