//! The kernels' PTX, and the module of each kernel in it.
//!
//! The build script compiles `conv-kernels` to one PTX file of about 120 entry points (every
//! specialised size and channel count). JIT-compiling all of it takes the driver seconds (about
//! 10 s on an H200 for the first run after a build), most of it for kernels a program never
//! launches, so the engine loads each kernel as its own module the first time it is used: the
//! PTX with every other entry point's definition cut out (the declarations, the constant-memory
//! mask and the helper functions stay; they are about 12 KB).

include!(concat!(env!("OUT_DIR"), "/entry_ranges.rs"));

/// The PTX of `conv-kernels`, compiled by this crate's build script.
pub(crate) const KERNELS_PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/conv_kernels.ptx"));

/// The PTX of a module holding only the kernel `entry`, or `None` if the PTX has no such entry
/// point.
pub(crate) fn module_source(entry: &str) -> Option<String> {
    let own = ENTRY_RANGES
        .iter()
        .position(|&(name, _, _)| name == entry)?;
    let (_, start, end) = ENTRY_RANGES[own];
    let others: usize = ENTRY_RANGES.iter().map(|&(_, s, e)| e - s).sum();
    let mut text = String::with_capacity(KERNELS_PTX.len() - others + end - start);
    let mut at = 0;
    for (index, &(_, start, end)) in ENTRY_RANGES.iter().enumerate() {
        text.push_str(&KERNELS_PTX[at..start]);
        if index == own {
            text.push_str(&KERNELS_PTX[start..end]);
        }
        at = end;
    }
    text.push_str(&KERNELS_PTX[at..]);
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ranges_cover_every_entry_point_in_order() {
        let entries = KERNELS_PTX.matches(".visible .entry ").count();
        assert_eq!(ENTRY_RANGES.len(), entries);
        let mut at = 0;
        for &(name, start, end) in ENTRY_RANGES {
            assert!(at <= start && start < end, "{name}");
            let definition = &KERNELS_PTX[start..end];
            assert!(definition.starts_with(&format!(".visible .entry {name}(")));
            assert!(definition.trim_end().ends_with('}'), "{name}");
            at = end;
        }
    }

    #[test]
    fn a_module_holds_its_kernel_and_everything_else_but_the_other_kernels() {
        let name = "conv2d_separable_wide_m17_c3";
        let text = module_source(name).expect("an entry point");
        assert_eq!(text.matches(".visible .entry ").count(), 1);
        assert!(text.contains(&format!(".visible .entry {name}(")));
        for shared in [".version", ".target", ".const .align 4 .f32 MASK"] {
            assert!(text.contains(shared), "{shared}");
        }
        // Balanced braces: no definition cut in the middle.
        assert_eq!(text.matches('{').count(), text.matches('}').count());
        assert!(text.len() < 300_000);
        assert!(module_source("no_such_kernel").is_none());
    }
}
