//! Which design runs a 2D operation: the one the caller names, or `Auto`'s choice from the mask
//! (its shape, and whether it is rank 1), the image size and the device. Each rule's constant
//! and the measurement behind it are in PERFORMANCE.md ("How Auto decides").

use super::SEPARABLE_TOLERANCE;
use super::{
    Mask2d, register_tiled, register_tiled_tma, separable, separable_tma, tensor_copy, textbook,
};
use crate::device::DeviceInfo;
use crate::error::{ConvError, Result};
use crate::options::{BoundaryMode, Kernel};
use crate::plan::LaunchPlan;

/// Chooses the kernel, block, output tile and shared memory for an image of `height x width x
/// channels`, and checks them: the design the caller names, or for `Auto` the first of
/// [`RANKING`] that applies; `native`: input and output are of one narrow type that some
/// kernels read and write themselves.
pub(super) fn plan(
    device: &DeviceInfo,
    mask: &Mask2d,
    image: (usize, usize, usize),
    (kernel, mode, native): (Kernel, BoundaryMode, bool),
    tile: Option<(u32, u32)>,
) -> Result<LaunchPlan> {
    let (rows, cols) = (mask.rows, mask.cols);
    let channels = image.2;
    let rank_one = || separable::factor(mask).is_some();
    match kernel {
        Kernel::Separable | Kernel::SeparableTma if !rank_one() => Err(ConvError::InvalidLaunch {
            kernel: "conv2d_separable",
            reason: format!(
                "the {rows} x {cols} mask is not separable: no column x row product matches \
                 every tap within {SEPARABLE_TOLERANCE:e} relative"
            ),
        }),
        Kernel::Separable => separable::plan(device, (rows, cols), channels, tile),
        Kernel::SeparableTma | Kernel::RegisterTiledTma => {
            tensor_copy::plan(device, kernel, mask, (channels, mode), tile)
        }
        Kernel::RegisterTiled => register_tiled::plan(device, (rows, cols), channels, tile),
        Kernel::Auto => {
            let query = Query {
                device,
                mask,
                image,
                mode,
                native,
                tile,
                rank_one: rows > 1 && cols > 1 && rank_one(),
            };
            match RANKING.iter().find_map(|&candidate| query.plan(candidate)) {
                Some(plan) => Ok(plan),
                None => textbook::plan(device, (rows, cols), channels, kernel, tile),
            }
        }
        Kernel::Basic | Kernel::ConstantMask | Kernel::Tiled | Kernel::TiledL2 => {
            textbook::plan(device, (rows, cols), channels, kernel, tile)
        }
    }
}

/// A design `Auto` considers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Candidate {
    /// Narrow images, square masks of the streaming kernels on narrow types: they move the
    /// type's bytes, where every other design widens the image to `f32` and narrows its result,
    /// whether the mask is rank 1 or not (measured: PERFORMANCE.md, Element types).
    NativeStream,
    /// Narrow images, rank-1 square masks: the wide separable kernels on `u8` and `u16`, where
    /// the tensor-copy ones widen the image first.
    NativeSeparable,
    /// Rank-1 masks on Hopper with the zero border: the separable passes staged by tensor
    /// copies, where `separable_tma::auto_prefers`.
    SeparableTma,
    /// Rank-1 masks: the wide separable kernels at every size they have; the general one where
    /// no register-tiled kernel exists or the mask is large (`general_separable_wins`), on
    /// images large enough that the textbook designs do not beat it
    /// (`general_separable_pays_off`). A 1 x N or N x 1 mask gains nothing from two passes.
    Separable,
    /// Square masks of the streaming kernels on Hopper with the zero border: the streaming
    /// passes staged by tensor copies, where `register_tiled_tma::auto_prefers`.
    StreamTma,
    /// General masks: the streaming kernels for square masks up to 9 x 9, the wide ones for
    /// masks 9 to 31 wide where the image fills the GPU (`wide_fills_device`).
    RegisterTiled,
}

/// `Auto`'s candidates, best first; where none applies, a textbook design runs
/// (`textbook::plan`). The measurements behind each rule: PERFORMANCE.md ("How Auto decides").
const RANKING: [Candidate; 6] = [
    Candidate::NativeStream,
    Candidate::NativeSeparable,
    Candidate::SeparableTma,
    Candidate::Separable,
    Candidate::StreamTma,
    Candidate::RegisterTiled,
];

/// What `Auto` chooses for.
struct Query<'a> {
    device: &'a DeviceInfo,
    mask: &'a Mask2d,
    /// `(height, width, channels)`.
    image: (usize, usize, usize),
    mode: BoundaryMode,
    native: bool,
    tile: Option<(u32, u32)>,
    /// Whether the mask is rank 1 with both sides longer than 1.
    rank_one: bool,
}

impl Query<'_> {
    /// The plan of `candidate` where it applies and plans.
    fn plan(&self, candidate: Candidate) -> Option<LaunchPlan> {
        let (device, tile) = (self.device, self.tile);
        let (height, width, channels) = self.image;
        let mask = (self.mask.rows, self.mask.cols);
        let pixels = height.saturating_mul(width);
        let tensor_copies =
            |kernel| tensor_copy::plan(device, kernel, self.mask, (channels, self.mode), tile);
        match candidate {
            Candidate::NativeStream => (self.native
                && register_tiled::has_native_stream_kernel(mask, channels))
            .then(|| register_tiled::plan(device, mask, channels, tile).ok())
            .flatten(),
            Candidate::NativeSeparable => {
                (self.native && self.rank_one && separable::has_wide_kernel(mask, channels))
                    .then(|| separable::plan(device, mask, channels, tile).ok())
                    .flatten()
                    .filter(separable::is_wide)
            }
            Candidate::SeparableTma => (self.separable_applies()
                && separable_tma::auto_prefers(mask.0, pixels))
            .then(|| tensor_copies(Kernel::SeparableTma).ok())
            .flatten(),
            Candidate::Separable => self
                .separable_applies()
                .then(|| separable::plan(device, mask, channels, tile).ok())
                .flatten()
                .filter(|plan| {
                    separable::is_wide(plan)
                        || general_separable_pays_off(
                            pixels.saturating_mul(channels),
                            mask.0.saturating_mul(mask.1),
                            device.multiprocessor_count,
                        )
                }),
            Candidate::StreamTma => register_tiled::plan(device, mask, channels, tile)
                .ok()
                .filter(register_tiled::is_stream)
                .filter(|_| register_tiled_tma::auto_prefers(mask.0, channels, pixels))
                .and_then(|_| tensor_copies(Kernel::RegisterTiledTma).ok()),
            Candidate::RegisterTiled => register_tiled::plan(device, mask, channels, tile)
                .ok()
                .filter(|plan| {
                    register_tiled::is_stream(plan)
                        || wide_fills_device(plan, self.image, device.multiprocessor_count)
                }),
        }
    }

    /// Whether a rank-1 mask runs on a separable design at all: where a wide separable kernel
    /// covers it, the general one wins (`general_separable_wins`) or no register-tiled kernel
    /// exists for it.
    fn separable_applies(&self) -> bool {
        let (mask, channels) = ((self.mask.rows, self.mask.cols), self.image.2);
        self.rank_one
            && (separable::has_wide_kernel(mask, channels)
                || general_separable_wins(mask.0, mask.1)
                || register_tiled::register_kernel(self.device, mask, channels).is_none())
    }
}

/// Whether the wide register-tiled `plan` launches enough blocks on an image of `height x width
/// x channels` to beat the tiled kernel: at least one per five SMs. Each of its threads computes
/// 32 outputs from up to 31 x 31 taps, so a block takes as long on a small image as on a large
/// one, where the tiled kernel's time grows with the image: a few wide blocks lose to it, a
/// block per five SMs or more beat it (measured: PERFORMANCE.md, How Auto decides, 2D rule 7).
fn wide_fills_device(
    plan: &LaunchPlan,
    (height, width, channels): (usize, usize, usize),
    multiprocessors: u32,
) -> bool {
    let (tile_w, tile_h) = (plan.output_tile.0 as usize, plan.output_tile.1 as usize);
    let blocks = width
        .saturating_mul(channels)
        .div_ceil(tile_w.max(1))
        .saturating_mul(height.div_ceil(tile_h.max(1)));
    blocks.saturating_mul(5) >= multiprocessors as usize
}

/// Whether the general separable kernel beats the register-tiled one on a rank-1 `rows x cols`
/// mask that no wide separable kernel covers: above 50 taps, where the register-tiled kernel's
/// `rows x cols` multiply-adds per output outweigh the separable one's `rows + cols` and its
/// heavier staging. Of the shapes measured only 7 x 9 lands on its slower side (measured:
/// PERFORMANCE.md, How Auto decides, 2D rule 2).
pub(crate) fn general_separable_wins(rows: usize, cols: usize) -> bool {
    rows.saturating_mul(cols) > 50
}

/// Whether the general separable kernel beats the textbook designs on an image of `outputs`
/// elements with a rank-1 mask of `taps` taps: where the tiled kernel would do at least 30,000
/// multiply-adds per SM. The general kernel takes about as long on every small image, the tiled
/// kernel less where its work is small (measured: PERFORMANCE.md, How Auto decides, 2D rule 4).
fn general_separable_pays_off(outputs: usize, taps: usize, multiprocessors: u32) -> bool {
    outputs.saturating_mul(taps) >= 30_000 * multiprocessors as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::{WIDE_BLOCK, WIDE_OUTPUTS, WIDE_ROWS};
    use crate::registry::{Family, KernelId, Shape, Storage};

    /// Auto leaves the wide register-tiled kernel for images that give it fewer blocks than a
    /// fifth of the SMs.
    #[test]
    fn wide_kernel_needs_a_block_per_five_sms() {
        let wide = LaunchPlan {
            kernel: Kernel::RegisterTiled,
            entry: KernelId::new(
                Family::Conv2dRegisterTiledWide,
                Shape::Width(31),
                Some(1),
                Storage::F32,
            ),
            block: WIDE_BLOCK,
            output_tile: (WIDE_BLOCK.0 * WIDE_OUTPUTS, WIDE_BLOCK.1 * WIDE_ROWS),
            shared_memory_bytes: 0,
            mask_in_constant_memory: true,
        };
        assert_eq!(wide.output_tile, (256, 32));
        // 132 SMs: 384^2 gives 2 x 12 = 24 blocks, 512^2 32, 256^2 x 3 channels 24.
        assert!(!wide_fills_device(&wide, (384, 384, 1), 132));
        assert!(wide_fills_device(&wide, (512, 512, 1), 132));
        assert!(!wide_fills_device(&wide, (256, 256, 3), 132));
        assert!(wide_fills_device(&wide, (256, 256, 3), 120));
        assert!(!wide_fills_device(&wide, (0, 0, 1), 1));
        assert!(wide_fills_device(
            &wide,
            (usize::MAX, usize::MAX, 4),
            u32::MAX
        ));
    }

    /// Small images with rank-1 masks no wide separable kernel covers go to the seeds (132
    /// SMs: the line is 3.96 million multiply-adds of the tiled kernel).
    #[test]
    fn general_separable_needs_work_for_the_tiled_kernel_to_lose() {
        let sms = 132;
        assert!(!general_separable_pays_off(128 * 128 * 3, 5 * 7, sms));
        assert!(!general_separable_pays_off(256 * 256, 5 * 11, sms));
        assert!(general_separable_pays_off(256 * 256, 9 * 11, sms));
        assert!(general_separable_pays_off(384 * 384, 5 * 7, sms));
        assert!(general_separable_pays_off(128 * 128, 45 * 31, sms));
        assert!(general_separable_pays_off(usize::MAX, usize::MAX, u32::MAX));
    }

    /// The measured shapes `general_separable_wins` rests on, each on the side of its faster
    /// kernel (7 x 9, which the rule puts on its slower side, is left out).
    #[test]
    fn general_separable_wins_only_for_large_masks() {
        let register_faster = [(3, 9), (5, 9), (3, 11), (3, 13), (3, 15)];
        for (rows, cols) in register_faster {
            assert!(!general_separable_wins(rows, cols), "{rows} x {cols}");
        }
        let separable_faster = [
            (5, 11),
            (5, 13),
            (7, 11),
            (5, 15),
            (7, 13),
            (3, 31),
            (5, 21),
            (9, 11),
            (11, 9),
            (7, 15),
            (13, 9),
            (9, 15),
            (13, 11),
            (11, 15),
            (9, 21),
            (21, 9),
            (7, 31),
            (11, 21),
            (9, 31),
            (15, 31),
            (21, 31),
            (45, 31),
            (61, 61),
        ];
        for (rows, cols) in separable_faster {
            assert!(general_separable_wins(rows, cols), "{rows} x {cols}");
        }
    }
}
