//! The kernels' PTX, and the module of each kernel in it.
//!
//! The build script compiles `conv-kernels` to one PTX file of about 120 entry points (every
//! specialised size and channel count) for sm_70, and a second one for sm_90 with the kernels
//! that need newer devices (the tensor-copy separable and streaming kernels, and the 3D
//! kernels staged by asynchronous copies, tiled and separable). JIT-compiling all of it takes the
//! driver seconds (about 10 s on an H200 for the first run after a build), most of it for
//! kernels a program never launches, so the engine loads each kernel as its own module the
//! first time it is used: the PTX with every other entry point's definition cut out (the
//! declarations, the constant-memory mask and the helper functions stay; they are about 12 KB).

include!(concat!(env!("OUT_DIR"), "/entry_ranges.rs"));
include!(concat!(env!("OUT_DIR"), "/hopper_entry_ranges.rs"));

/// The PTX of `conv-kernels` for sm_70, compiled by this crate's build script.
pub(crate) const KERNELS_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/conv_kernels.ptx"));
/// The PTX of the kernels that need sm_90, from the build script's second build.
pub(crate) const HOPPER_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/hopper_kernels.ptx"));

/// The entry point `name` of the sm_70 PTX, if it has one.
pub(crate) fn entry_point(name: &str) -> Option<&'static str> {
    ENTRY_RANGES
        .iter()
        .find(|&&(entry, _, _)| entry == name)
        .map(|&(entry, _, _)| entry)
}

/// The PTX of a module holding only the kernel `entry`, or `None` if neither PTX has such an
/// entry point.
pub(crate) fn module_source(entry: &str) -> Option<String> {
    [
        (KERNELS_PTX, ENTRY_RANGES),
        (HOPPER_PTX, HOPPER_ENTRY_RANGES),
    ]
    .into_iter()
    .find_map(|(ptx, ranges)| only_entry(ptx, ranges, entry))
}

/// `ptx` without the definitions of its entry points (`ranges`) other than `entry`.
fn only_entry(ptx: &str, ranges: &[(&str, usize, usize)], entry: &str) -> Option<String> {
    let own = ranges.iter().position(|&(name, _, _)| name == entry)?;
    let (_, start, end) = ranges[own];
    let others: usize = ranges.iter().map(|&(_, s, e)| e - s).sum();
    let mut text = String::with_capacity(ptx.len() - others + end - start);
    let mut at = 0;
    for (index, &(_, start, end)) in ranges.iter().enumerate() {
        text.push_str(&ptx[at..start]);
        if index == own {
            text.push_str(&ptx[start..end]);
        }
        at = end;
    }
    text.push_str(&ptx[at..]);
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ranges_cover_every_entry_point_in_order() {
        for (ptx, ranges) in [
            (KERNELS_PTX, ENTRY_RANGES),
            (HOPPER_PTX, HOPPER_ENTRY_RANGES),
        ] {
            let entries = ptx.matches(".visible .entry ").count();
            assert_eq!(ranges.len(), entries);
            let mut at = 0;
            for &(name, start, end) in ranges {
                assert!(at <= start && start < end, "{name}");
                let definition = &ptx[start..end];
                assert!(definition.starts_with(&format!(".visible .entry {name}(")));
                assert!(definition.trim_end().ends_with('}'), "{name}");
                at = end;
            }
        }
    }

    #[test]
    fn the_hopper_ptx_holds_the_kernels_that_need_sm_90_only() {
        assert!(HOPPER_PTX.contains(".target sm_90"));
        assert!(KERNELS_PTX.contains(".target sm_70"));
        let names: Vec<&str> = HOPPER_ENTRY_RANGES
            .iter()
            .map(|&(name, _, _)| name)
            .collect();
        let streaming = crate::abi::STREAM_MASKS.len() * crate::abi::REGISTER_CHANNELS.len();
        let asynchronous = crate::conv3d::ASYNC_ENTRY_POINTS.len()
            + crate::conv3d::image::async_entry_points().count()
            + crate::conv3d::separable::SEPARABLE3D_ENTRY_POINTS.len();
        assert_eq!(
            names.len(),
            crate::abi::SEPARABLE_MASKS.len() + streaming + asynchronous
        );
        assert!(names.iter().all(|name| {
            name.starts_with("conv2d_separable_tma_m")
                || name.starts_with("conv2d_register_tiled_tma_m")
                || name.starts_with("conv3d_tiled_async_m")
                || name.starts_with("conv3d_separable_async_m")
        }));
        assert!(!KERNELS_PTX.contains("cp.async"));
        let text = module_source("conv3d_tiled_async_m3").expect("an entry point");
        assert!(text.contains("cp.async.ca.shared.global") && text.contains(".target sm_90"));
        for entry in [
            "conv2d_separable_tma_m31_c1",
            "conv2d_register_tiled_tma_m9_c3",
        ] {
            let text = module_source(entry).expect("an entry point");
            assert!(text.contains("cp.async.bulk.tensor") && text.contains(".target sm_90"));
            assert_eq!(text.matches(".visible .entry ").count(), 1);
        }
    }

    #[test]
    fn a_module_holds_its_kernel_and_everything_else_but_the_other_kernels() {
        let name = "conv2d_separable_wide_m17_c3";
        let text = module_source(name).expect("an entry point");
        assert_eq!(text.matches(".visible .entry ").count(), 1);
        assert!(text.contains(&format!(".visible .entry {name}(")));
        for shared in [".version", ".target", ".const .align 8 .f32 MASK"] {
            assert!(text.contains(shared), "{shared}");
        }
        // Balanced braces: no definition cut in the middle.
        assert_eq!(text.matches('{').count(), text.matches('}').count());
        assert!(text.len() < 300_000);
        assert!(module_source("no_such_kernel").is_none());
    }
}
