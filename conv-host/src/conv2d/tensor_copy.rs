//! What the kernels staged by Hopper's tensor copies (`Kernel::SeparableTma`,
//! `Kernel::RegisterTiledTma`) need of the device, the mask and the boundary mode.

use super::Mask2d;
use crate::engine::DeviceInfo;
use crate::options::BoundaryMode;

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
