//! The CPU backend's N-D operations against their f64 CPU twins: the GPU's sweeps of
//! `common/sweeps.rs` (every axis, the filter family, volumes, batches and channels, every
//! element type), and what only the CPU backend does.

mod common;

use common::{rng, sweeps};
use conv_host::Cpu;

/// One test per sweep of [`sweeps`], on the CPU backend.
macro_rules! cpu_sweeps {
    ($($name:ident),+) => {$(
        #[test]
        fn $name() {
            let (mut rng, _) = rng(stringify!($name));
            sweeps::$name(Cpu.ndimage(), &mut rng);
        }
    )+};
}

cpu_sweeps!(
    correlation_along_every_axis_matches_the_reference,
    the_filter_family_matches_the_reference,
    volumes_batches_and_channels_match_the_reference,
    fused_filters_of_images_and_volumes_match_the_reference,
    a_batch_filters_each_image_on_its_own
);
