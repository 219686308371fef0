//! The tensor-copy designs (`separable-tma`, `register-tiled-tma`): whether the device has
//! them, and one configuration checked against the reference.

use super::images::random_array3;
use super::{check_gpu2d, engine, random_origin};
use conv_host::ndimage::NdOptions;
use conv_host::{Clamp, Kernel};
use ndarray::{Array2, Axis, s};
use rand::Rng;
use rand::rngs::StdRng;

/// Whether the device has Hopper's tensor copies (`Kernel::SeparableTma`,
/// `Kernel::RegisterTiledTma`).
pub fn has_tensor_copies() -> bool {
    engine().device().compute_capability.0 >= 9
}

/// One tensor-copy configuration of `kernel` (zero border, mask centred along the rows, a
/// random anchor down the columns, correlation or convolution, contiguous or strided, clamped
/// or not) over `channels` channels against the reference.
pub fn check_tensor_copies(
    rng: &mut StdRng,
    mask: &Array2<f32>,
    (kernel, channels): (Kernel, usize),
    (h, w): (usize, usize),
) {
    let convolve = rng.random_bool(0.5);
    let options = NdOptions {
        origin: [random_origin(rng, mask.nrows(), convolve), 0].into(),
        kernel,
        clamp: rng.random_bool(0.25).then_some(Clamp { lo: -0.1, hi: 0.2 }),
        ..super::zero_border()
    };
    let what = format!(
        "tensor copies {kernel} {:?} c{channels} {h}x{w} {options:?} convolve {convolve}",
        mask.dim()
    );
    let big = random_array3(rng, (2 * h, w + 3, channels));
    let image = if rng.random_bool(0.25) {
        big.slice(s![..;2, 3.., ..])
    } else {
        big.slice(s![..h, ..w, ..])
    };
    if channels == 1 {
        check_gpu2d(
            image.index_axis_move(Axis(2), 0),
            mask.view(),
            &options,
            convolve,
            &what,
        );
    } else {
        check_gpu2d(image, mask.view(), &options, convolve, &what);
    }
}
