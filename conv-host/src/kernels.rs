//! The kernels' PTX, and the module of each kernel in it.
//!
//! The build script compiles `conv-kernels` to one PTX file of about 120 entry points (every
//! specialised size and channel count) for sm_70, and a second one for sm_90 with the kernels
//! that need newer devices (the tensor-copy separable and streaming kernels, and the 3D
//! kernels staged by asynchronous copies, tiled and separable). JIT-compiling all of it takes
//! the driver seconds, most of it for kernels a program never launches, so the engine loads
//! each kernel as its own module the first time it is used: the PTX with every other entry
//! point's definition cut out (the declarations, the constant-memory mask and the helper
//! functions stay; they are about 12 KB).

use std::sync::LazyLock;

use crate::registry::{Arch, Family, KernelId, Shape, Storage};

include!(concat!(env!("OUT_DIR"), "/entry_ranges.rs"));
include!(concat!(env!("OUT_DIR"), "/hopper_entry_ranges.rs"));

/// The PTX of `conv-kernels` for sm_70, compiled by this crate's build script.
pub(crate) const KERNELS_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/conv_kernels.ptx"));
/// The PTX of the kernels that need sm_90, from the build script's second build.
pub(crate) const HOPPER_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/hopper_kernels.ptx"));

/// One compiled kernel: its name and where its definition lies in which PTX.
pub(crate) struct Entry {
    pub(crate) id: KernelId,
    pub(crate) name: &'static str,
    ptx: &'static str,
    ranges: &'static [(&'static str, usize, usize)],
}

/// Every kernel of the registry with its PTX, sorted by [`KernelId`]. The build script has
/// checked that the registry and the PTX hold the same kernels.
static ENTRIES: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    let mut entries: Vec<Entry> = crate::registry::compiled()
        .into_iter()
        .filter_map(|id| {
            let (ptx, ranges) = match id.family().arch() {
                Arch::Sm70 => (KERNELS_PTX, ENTRY_RANGES),
                Arch::Sm90 => (HOPPER_PTX, HOPPER_ENTRY_RANGES),
            };
            let name = id.to_string();
            let &(name, _, _) = ranges.iter().find(|&&(entry, _, _)| entry == name)?;
            Some(Entry {
                id,
                name,
                ptx,
                ranges,
            })
        })
        .collect();
    entries.sort_by_key(|entry| entry.id);
    entries
});

/// Every compiled kernel.
pub(crate) fn entries() -> &'static [Entry] {
    &ENTRIES
}

/// The compiled kernel `id`, if the PTX has it.
pub(crate) fn entry(id: KernelId) -> Option<&'static Entry> {
    let entries = entries();
    entries
        .binary_search_by_key(&id, |entry| entry.id)
        .ok()
        .map(|at| &entries[at])
}

/// `id` if it is compiled.
pub(crate) fn compiled(id: KernelId) -> Option<KernelId> {
    entry(id).map(|entry| entry.id)
}

/// The kernel of `family` over `storage` for a mask shape of `size` (made by `shape`) and
/// `channels`, if one is compiled.
pub(crate) fn specialised(
    family: Family,
    shape: fn(u32) -> Shape,
    size: usize,
    channels: Option<usize>,
    storage: Storage,
) -> Option<KernelId> {
    let size = u32::try_from(size).ok()?;
    let channels = match channels {
        Some(channels) => Some(u32::try_from(channels).ok()?),
        None => None,
    };
    compiled(KernelId::new(family, shape(size), channels, storage))
}

impl KernelId {
    /// The kernel's PTX entry point (`"not compiled"` for a kernel the PTX lacks, which no plan
    /// holds).
    pub fn entry_point(self) -> &'static str {
        entry(self).map_or("not compiled", |entry| entry.name)
    }
}

/// The PTX of a module holding only the kernel `id`, or `None` if it is not compiled.
pub(crate) fn module_source(id: KernelId) -> Option<String> {
    let entry = entry(id)?;
    only_entry(entry.ptx, entry.ranges, entry.name)
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
    fn every_registered_kernel_is_in_its_ptx_once() {
        let registered = crate::registry::compiled();
        assert_eq!(entries().len(), registered.len());
        assert_eq!(
            registered.len(),
            ENTRY_RANGES.len() + HOPPER_ENTRY_RANGES.len()
        );
        assert!(entries().windows(2).all(|pair| pair[0].id < pair[1].id));
        for id in registered {
            assert_eq!(entry(id).map(|entry| entry.name), Some(&*id.to_string()));
        }
    }

    #[test]
    fn the_hopper_ptx_holds_the_kernels_that_need_sm_90_only() {
        assert!(HOPPER_PTX.contains(".target sm_90"));
        assert!(KERNELS_PTX.contains(".target sm_70"));
        for entry in entries() {
            let hopper = HOPPER_ENTRY_RANGES
                .iter()
                .any(|&(name, _, _)| name == entry.name);
            assert_eq!(
                hopper,
                entry.id.family().arch() == Arch::Sm90,
                "{}",
                entry.name
            );
        }
        assert!(!KERNELS_PTX.contains("cp.async"));
        let async_3d = KernelId::new(Family::Conv3dTiledAsync, Shape::Cube(3), None, Storage::F32);
        let text = module_source(async_3d).expect("an entry point");
        assert!(text.contains("cp.async.ca.shared.global") && text.contains(".target sm_90"));
        for id in [
            KernelId::new(
                Family::Conv2dSeparableTma,
                Shape::Square(31),
                Some(1),
                Storage::F32,
            ),
            KernelId::new(
                Family::Conv2dStreamTma,
                Shape::Square(9),
                Some(3),
                Storage::F32,
            ),
        ] {
            let text = module_source(id).expect("an entry point");
            assert!(text.contains("cp.async.bulk.tensor") && text.contains(".target sm_90"));
            assert_eq!(text.matches(".visible .entry ").count(), 1);
        }
    }

    #[test]
    fn a_module_holds_its_kernel_and_everything_else_but_the_other_kernels() {
        let wide = |size| {
            KernelId::new(
                Family::Conv2dSeparableWide,
                Shape::Square(size),
                Some(3),
                Storage::F32,
            )
        };
        let text = module_source(wide(17)).expect("an entry point");
        assert_eq!(text.matches(".visible .entry ").count(), 1);
        assert!(text.contains(".visible .entry conv2d_separable_wide_m17_c3("));
        for shared in [".version", ".target", ".const .align 8 .f32 MASK"] {
            assert!(text.contains(shared), "{shared}");
        }
        // Balanced braces: no definition cut in the middle.
        assert_eq!(text.matches('{').count(), text.matches('}').count());
        assert!(text.len() < 300_000);
        assert!(module_source(wide(16)).is_none());
        assert_eq!(wide(16).entry_point(), "not compiled");
    }
}
