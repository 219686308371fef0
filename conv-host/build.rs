//! Compiles the `conv-kernels` crate to PTX for `nvptx64-nvidia-cuda` and leaves it in
//! `$OUT_DIR/conv_kernels.ptx` and `$OUT_DIR/hopper_kernels.ptx` for `include_str!`.
//!
//! The nested cargo gets its own target directory (sharing ours would deadlock on the build lock),
//! `RUSTC_BOOTSTRAP=1` for the kernel crate's unstable features (this build only), and
//! `-Zbuild-std=core` because rustup ships no prebuilt `core` for the NVPTX target.
//!
//! GPU architectures: every kernel for `sm_70` with PTX ISA 7.0 (the driver JIT-compiles this
//! PTX for the GPU it runs on, so one build serves every NVIDIA GPU from Volta on, Hopper
//! included), and the kernels that need Hopper's tensor copies (`conv2d_separable_tma_*`,
//! `conv2d_register_tiled_tma_*`) or the asynchronous copies of sm_80
//! (`conv3d_{tiled,separable}_async_*`) again for `sm_90` with PTX ISA 8.0, from a second
//! build of the crate with `--cfg conv_hopper`; the engine loads those only on devices of
//! compute capability 9.0 or more.

use std::collections::HashMap;
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

#[allow(unused_macros)]
#[macro_use]
#[path = "../conv-kernels/src/sizes.rs"]
mod sizes;

#[allow(dead_code)]
#[path = "src/registry.rs"]
mod registry;

use registry::{Arch, KernelId};

const TARGET: &str = "nvptx64-nvidia-cuda";

/// One PTX build of the kernel crate.
struct Build {
    /// Target directory under `OUT_DIR` (each build its own, so neither invalidates the other).
    dir: &'static str,
    cpu: &'static str,
    ptx_isa: &'static str,
    cfg: Option<&'static str>,
    /// Output PTX and entry table, and the table's name.
    ptx_file: &'static str,
    table_file: &'static str,
    table: &'static str,
    /// The kernels of this build's architecture the PTX keeps.
    arch: Arch,
}

const BUILDS: [Build; 2] = [
    Build {
        dir: "kernels",
        cpu: "sm_70",
        ptx_isa: "+ptx70",
        cfg: None,
        ptx_file: "conv_kernels.ptx",
        table_file: "entry_ranges.rs",
        table: "ENTRY_RANGES",
        arch: Arch::Sm70,
    },
    Build {
        dir: "kernels-sm90",
        cpu: "sm_90",
        ptx_isa: "+ptx80",
        cfg: Some("conv_hopper"),
        ptx_file: "hopper_kernels.ptx",
        table_file: "hopper_entry_ranges.rs",
        table: "HOPPER_ENTRY_RANGES",
        arch: Arch::Sm90,
    },
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let kernel_dir = manifest_dir.join("../conv-kernels");
    println!(
        "cargo::rerun-if-changed={}",
        kernel_dir.join("src").display()
    );
    println!(
        "cargo::rerun-if-changed={}",
        kernel_dir.join("Cargo.toml").display()
    );
    println!("cargo::rerun-if-changed=src/registry.rs");

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_components(&rustc);

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let registry: HashMap<String, KernelId> = registry::compiled()
        .into_iter()
        .map(|id| (id.to_string(), id))
        .collect();
    let mut built = 0;
    for build in &BUILDS {
        let ptx = build_ptx(&kernel_dir, &out_dir, &rustc, build);
        let kept = keep_entries(&ptx, |name| {
            registered(&registry, name).family().arch() == build.arch
        });
        built += entry_spans(&kept).len();
        let bounded = bound_block_size(&kept, &registry);
        std::fs::write(out_dir.join(build.ptx_file), &bounded)
            .unwrap_or_else(|e| fail(&format!("cannot write the PTX: {e}")));
        std::fs::write(
            out_dir.join(build.table_file),
            entry_ranges(&bounded, build.table),
        )
        .unwrap_or_else(|e| fail(&format!("cannot write the entry table: {e}")));
    }
    if built != registry.len() {
        fail(&format!(
            "the kernel registry (conv-host/src/registry.rs) lists {} kernels, the PTX has {built}",
            registry.len()
        ));
    }
}

/// The kernel the entry point `name` is, by the registry; fails the build for one the
/// registry does not list.
fn registered(registry: &HashMap<String, KernelId>, name: &str) -> KernelId {
    *registry.get(name).unwrap_or_else(|| {
        fail(&format!(
            "the PTX has an entry point `{name}` that the kernel registry \
             (conv-host/src/registry.rs) does not list"
        ))
    })
}

/// Compiles the kernel crate to PTX as `build` says, and returns the PTX.
fn build_ptx(kernel_dir: &Path, out_dir: &Path, rustc: &str, build: &Build) -> String {
    let target_dir = out_dir.join(build.dir);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // The unroll threshold lets LLVM fully unroll the register-tiled kernels' loops over
    // compile-time mask sizes (up to 9 x 9), so their accumulators stay in registers.
    let mut flags = vec![
        format!("-Ctarget-cpu={}", build.cpu),
        format!("-Ctarget-feature={}", build.ptx_isa),
        "-Cllvm-args=-unroll-threshold=20000".to_string(),
    ];
    if let Some(cfg) = build.cfg {
        flags.extend(["--cfg".to_string(), cfg.to_string()]);
    }

    let mut command = Command::new(cargo);
    command
        .current_dir(kernel_dir)
        .args([
            "build",
            "--release",
            "--locked",
            "-Zbuild-std=core",
            "--target",
            TARGET,
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .env("RUSTC", rustc)
        .env("RUSTC_BOOTSTRAP", "1")
        .env("CARGO_ENCODED_RUSTFLAGS", flags.join("\u{1f}"));
    // Nothing of the host build (clippy's wrapper, host RUSTFLAGS, a target override) may leak in.
    for var in [
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(var);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run cargo: {e}")));
    if !output.status.success() {
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        fail(&format!(
            "the kernel crate conv-kernels did not compile to PTX for {} (its cargo output is above)",
            build.cpu
        ));
    }

    let ptx = target_dir
        .join(TARGET)
        .join("release")
        .join("conv_kernels.ptx");
    std::fs::read_to_string(&ptx)
        .unwrap_or_else(|e| fail(&format!("no PTX at {}: {e}", ptx.display())))
}

/// The PTX without the definitions of the entry points `keep` rejects (their declarations,
/// the module-scope symbols and the helper functions stay).
fn keep_entries(ptx: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut text = String::with_capacity(ptx.len());
    let mut at = 0;
    for (name, start, end) in entry_spans(ptx) {
        if !keep(name) {
            text.push_str(&ptx[at..start]);
            at = end;
        }
    }
    text.push_str(&ptx[at..]);
    text
}

/// The byte range of every kernel entry point's definition in the PTX (from its `.visible
/// .entry` line to its closing brace), as a Rust table `table` in PTX order: the engine loads
/// each kernel as its own module, the PTX without the other entries' definitions, so that the
/// driver JIT-compiles only the kernels a program uses.
fn entry_ranges(ptx: &str, table: &str) -> String {
    let mut text = format!(
        "/// `(entry point, start, end)`: each kernel's definition in its PTX, in order.\n\
         pub(crate) const {table}: &[(&str, usize, usize)] = &[\n"
    );
    for (name, start, end) in entry_spans(ptx) {
        text.push_str(&format!("    (\"{name}\", {start}, {end}),\n"));
    }
    text.push_str("];\n");
    text
}

/// `(entry point, start, end)` of every kernel entry point's definition in the PTX.
fn entry_spans(ptx: &str) -> Vec<(&str, usize, usize)> {
    let mut spans = Vec::new();
    let mut at = 0;
    let mut entry: Option<(&str, usize, i64)> = None;
    for line in ptx.split_inclusive('\n') {
        let end = at + line.len();
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            let name = rest.split(['(', ' ', '\n']).next().unwrap_or_default();
            entry = Some((name, at, 0));
        }
        if let Some((name, start, depth)) = entry.as_mut() {
            let opened = line.contains('{');
            *depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            if (opened || line.contains('}')) && *depth == 0 {
                spans.push((*name, *start, end));
                entry = None;
            }
        }
        at = end;
    }
    if entry.is_some() {
        fail("the PTX ends inside a kernel entry point");
    }
    spans
}

/// Adds each kernel's launch bounds from the registry ([`KernelId::bounds`]) to its entry:
/// `.maxntid` (the most threads a block may have, which lets ptxas budget registers for it)
/// and, where bounded, `.minnctapersm`. Rust has no `__launch_bounds__`; these PTX directives
/// are its equivalent.
fn bound_block_size(ptx: &str, registry: &HashMap<String, KernelId>) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut header = None;
    for line in ptx.lines() {
        if let Some(rest) = line.strip_prefix(".visible .entry ") {
            let name = rest.split(['(', ' ']).next().unwrap_or_default();
            header = Some(registered(registry, name).bounds());
        }
        if line == "{"
            && let Some(bounds) = header.take()
        {
            out.push_str(&format!(".maxntid {}, 1, 1\n", bounds.threads));
            if let Some(blocks) = bounds.blocks_per_sm {
                out.push_str(&format!(".minnctapersm {blocks}\n"));
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Fails with one line naming the exact `rustup component add` command for a missing component.
fn check_components(rustc: &str) {
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| fail(&format!("`{rustc} --print sysroot` failed")));
    let host = env::var("HOST").expect("set by cargo");
    let tools = sysroot.join("lib/rustlib").join(&host).join("bin");
    // llvm-bitcode-linker drives llvm-link, opt and llc from llvm-tools (matching rustc's LLVM).
    let required = [
        (
            "rust-src",
            sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml"),
        ),
        (
            "llvm-bitcode-linker",
            tools.join("self-contained/llvm-bitcode-linker"),
        ),
        ("llvm-tools", tools.join("llvm-link")),
    ];
    for (component, marker) in required {
        if !marker.exists() {
            fail(&format!(
                "missing Rust component `{component}`, needed to build the GPU kernels: run `rustup component add {component}`"
            ));
        }
    }
}

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    exit(1)
}
