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

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

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
    /// Which entry points the PTX keeps.
    keep: fn(&str) -> bool,
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
        keep: |_| true,
    },
    Build {
        dir: "kernels-sm90",
        cpu: "sm_90",
        ptx_isa: "+ptx80",
        cfg: Some("conv_hopper"),
        ptx_file: "hopper_kernels.ptx",
        table_file: "hopper_entry_ranges.rs",
        table: "HOPPER_ENTRY_RANGES",
        keep: |entry| entry.contains("_tma_") || entry.contains("_async_"),
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

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_components(&rustc);

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    for build in &BUILDS {
        let ptx = build_ptx(&kernel_dir, &out_dir, &rustc, build);
        let kept = keep_entries(&ptx, build.keep);
        let bounded = bound_block_size(&kept);
        std::fs::write(out_dir.join(build.ptx_file), &bounded)
            .unwrap_or_else(|e| fail(&format!("cannot write the PTX: {e}")));
        std::fs::write(
            out_dir.join(build.table_file),
            entry_ranges(&bounded, build.table),
        )
        .unwrap_or_else(|e| fail(&format!("cannot write the entry table: {e}")));
    }
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
fn keep_entries(ptx: &str, keep: fn(&str) -> bool) -> String {
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

/// Adds `.maxntid 1024, 1, 1` (256 for the register-tiled, streaming and separable kernels)
/// to every kernel entry, and `.minnctapersm` to those. Rust has no
/// `__launch_bounds__`; these PTX directives are its equivalent: `.maxntid 1024` tells the
/// assembler that blocks may have 1024 threads, so it keeps such kernels within 64 registers
/// and every tile size up to 1024 threads can launch.
/// Blocks per SM for the general separable kernel (`conv2d_separable`): ptxas fits three in 72
/// registers without spilling (four spilled 8 bytes at 64). Against two (127 registers), three
/// took an H100 from 0.501 to 0.430 ms on a 9 x 11 rank-1 mask at 8192^2, 0.634 to 0.541 ms at
/// 15 x 31 and 0.432 to 0.370 ms at 7 x 3; four gained at most 3% more (PERFORMANCE.md).
const GENERAL_SEPARABLE_BLOCKS: u32 = 3;
/// Blocks per SM for the staged and direct axis kernels: three (up to 80 registers; they use
/// 58 to 76).
const AXIS_BLOCKS: u32 = 3;
/// Blocks per SM for the ring axis kernels: two (up to 128 registers), where the sums and
/// loads in flight of masks from 23 taps spilled at 80; one (255) from `AXIS_RING_ONE_BLOCK`
/// taps, which spilled at 128.
const AXIS_RING_BLOCKS: u32 = 2;
const AXIS_RING_ONE_BLOCK: u32 = 27;
/// The pair kernels from this many taps on fit one block per SM by their shared memory
/// (`SeparableWidePairLayout`), so they may take up to 255 registers: at 128, the 31-tap one
/// spilled 4 bytes.
const PAIR_ONE_BLOCK: u32 = 27;

/// Blocks per SM for the one-pass separable 3D kernels (`conv3d_separable_async_m{M}`, up to 9
/// taps): four below this many taps (their ring of `4 M` sums fits 64 registers), three from
/// it on (80 registers at 7), two from `SEPARABLE3D_TWO_BLOCKS` (9 taps: 117 registers; 12
/// bytes spilled at three). More resident blocks hide more of a slice's chain of latencies:
/// H200, 512^3, 3 taps 0.426 ms at four blocks against 0.480 at two (host: `blocks_per_sm`).
const SEPARABLE3D_THREE_BLOCKS: u32 = 7;
const SEPARABLE3D_TWO_BLOCKS: u32 = 9;

/// Whether a `.visible .entry` line declares a kernel `{family}{taps}` of at least `least`
/// taps (`axis_ring_m`, `conv2d_separable_wide_pair_m`).
fn at_least(line: &str, family: &str, least: u32) -> bool {
    line.split(&format!(".entry {family}"))
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|taps| taps.parse::<u32>().ok())
        .is_some_and(|taps| taps >= least)
}
/// Blocks per SM for the 3D kernels: two (up to 128 registers), where their eight sums per
/// thread (sixteen registers in f64), the unrolled taps' loads and a batch of staged loads
/// spilled at 80. The 5 x 5 x 5 kernel of one channel staged by asynchronous copies fits two
/// with 2 elements of 4 rows a thread (`conv3d_thread_elements`; H100, 512^3: 0.904 ms,
/// against 1.098 at one block of threads of one element and 8 rows, 231 registers).
const CONV3D_BLOCKS: u32 = 2;
/// One block per SM for the `f64` 1 x 5 x 5 kernel staged through registers
/// (`conv3d_tiled_m1x5_f64`, 2D `f64` images at 5 x 5 before sm_90: 172 registers, where two
/// spilled 28 to 48 bytes at 4, 6 and 8 rows a thread) and the 5 x 5 x 5 kernel staged by
/// asynchronous copies with the channel count read at run time (`conv3d_tiled_async_m5`: 8
/// rows of one element a thread, 231 registers).
const CONV3D_ONE_BLOCK: u32 = 1;

fn bound_block_size(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut in_entry_header = false;
    let mut threads = 1024;
    let mut blocks_per_sm = None;
    for line in ptx.lines() {
        if line.starts_with(".visible .entry") {
            in_entry_header = true;
            // The register-tiled and separable 2D kernels launch 256-thread blocks
            // (WIDE_BLOCK, SEPARABLE_THREADS): bounding them so leaves up to 255 registers
            // for their accumulators and staged loads.
            let separable = line.contains("conv2d_separable");
            let general_separable = line.contains("conv2d_separable(");
            let register = line.contains("conv2d_register_tiled_");
            // The axis and 3D kernels launch 256-thread blocks (AXIS_THREADS, CONV3D_BLOCK).
            let nd = line.contains(".entry axis_") || line.contains(".entry conv3d_");
            threads = if register || separable || nd {
                256
            } else {
                1024
            };
            blocks_per_sm = if general_separable {
                Some(GENERAL_SEPARABLE_BLOCKS)
            } else if at_least(line, "conv2d_separable_wide_pair_m", PAIR_ONE_BLOCK) {
                Some(1)
            } else if separable {
                // Up to 128 registers. Left to itself, ptxas aims at three blocks (80
                // registers) and spills a few bytes.
                Some(2)
            } else if register {
                Some(register_blocks_per_sm(line))
            } else if nd {
                Some(if at_least(line, "axis_ring_m", AXIS_RING_ONE_BLOCK) {
                    1
                } else if line.contains(".entry axis_ring") {
                    AXIS_RING_BLOCKS
                } else if line.contains(".entry axis_") {
                    AXIS_BLOCKS
                } else if line.contains(".entry conv3d_separable_async_m") {
                    if at_least(line, "conv3d_separable_async_m", SEPARABLE3D_TWO_BLOCKS) {
                        2
                    } else if at_least(line, "conv3d_separable_async_m", SEPARABLE3D_THREE_BLOCKS) {
                        3
                    } else {
                        4
                    }
                } else if line.contains(".entry conv3d_tiled_m1x5_f64(")
                    || line.contains(".entry conv3d_tiled_async_m5(")
                {
                    CONV3D_ONE_BLOCK
                } else {
                    CONV3D_BLOCKS
                })
            } else {
                None
            };
        }
        if in_entry_header && line == "{" {
            out.push_str(&format!(".maxntid {threads}, 1, 1\n"));
            if let Some(blocks) = blocks_per_sm {
                out.push_str(&format!(".minnctapersm {blocks}\n"));
            }
            in_entry_header = false;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Blocks per SM for a register-tiled 2D kernel (`conv2d_register_tiled_stream_m{M}_c{C}`: three
/// for every size; `conv2d_register_tiled_stream16_m{M}_c{C}`: four, since their steps of 16 rows
/// leave each pass thread 16 sums; the tensor-copy ones, `conv2d_register_tiled_tma_m{M}_c{C}`:
/// two, as many as their 72-row ring of 78 to 97 KB allows, which leaves them up to 128
/// registers; `conv2d_register_tiled_wide_w{W}_c{C}`): the
/// most for which ptxas (sm_90) fits the kernel without spilling, and that their shared memory
/// allows (2 for those not listed; ptxas then takes 72 to 128 registers). Left to itself, ptxas
/// hoists loads and takes up to 255 registers, which leaves one block per SM. On an H200 the
/// streaming 5 x 5 kernel measured 0.167 ms with three blocks against 0.174 ms with two (steps
/// of 32 rows), and 0.145 ms with four against 0.149 ms with three (steps of 16 rows); the 7 x
/// 7 and 9 x 9 ones fit three since their pass runs in bands of 2 rows (0.206 and 0.282 ms
/// against 0.214 and 0.294 ms with two blocks and one band of 8 rows) (PERFORMANCE.md).
fn register_blocks_per_sm(entry: &str) -> u32 {
    const BUDGETS: [(&str, u32); 6] = [
        ("tma_", 2),
        ("stream16_", 4),
        ("stream_", 3),
        ("wide_w9_c1", 4),
        ("wide_w9_c3", 3),
        ("wide_w9_c4", 3),
    ];
    BUDGETS
        .iter()
        .find(|(shape, _)| entry.contains(&format!("conv2d_register_tiled_{shape}")))
        .map_or(2, |&(_, blocks)| blocks)
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
