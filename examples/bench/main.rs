//! Benchmark of every kernel against the memory roofline, on the GPU.
//!
//! ```sh
//! cargo run --release --example bench                    # full run, results in bench-results/
//! cargo run --release --example bench -- --quick         # a short run
//! cargo run --release --example bench -- --targets       # the target cases, fast designs only
//! cargo run --release --example bench -- --auto          # Auto against every design, small to large
//! cargo run --release --example bench -- --host          # host -> host calls against the transfer floor
//! cargo run --release --example bench -- --host --only nd   # its N-D and threads cases alone
//! cargo run --release --example bench -- --multi         # one host call split over 1 to N GPUs
//! cargo run --release --example bench -- --nd            # volumes, batches, any axis, filters
//! cargo run --release --example bench -- --types         # every element type on device arrays
//! cargo run --release --example bench -- --plot-only bench-results/bench.csv
//! ```
//!
//! Method: for each case, fresh random inputs (uniform in [-1, 1), never zeros), an output
//! buffer poisoned with NaN, 3 warm-up runs and 20 timed runs of the kernel on the same device
//! buffers (CUDA events), the median reported; then the output is checked: every element
//! written, and 2,000 sampled positions against an f64 CPU computation. In the same run, the
//! device-to-device copy bandwidth (bytes read + written) gives the memory roofline, and
//! `2 x SMs x FP32 lanes per SM x clock` the FMA peak. Case names are stable across runs.
//!
//! Modules: `args` (the command line), `ceilings` (copy roofline and FMA peak), `sweep` (the
//! sizes, masks and tiles of a full, quick or targets run), `auto` (`--auto`), `host`
//! (`--host`: host -> host calls against the transfer floor; `nd_host`, its N-D and threads
//! cases), `multi` (`--multi`), `nd`
//! (`--nd`), `types` (`--types`), `cases` (one case measured), `timing`, `check` (the output checks), `report` (CSV and summary), `plot`.

mod args;
mod auto;
mod cases;
mod ceilings;
mod check;
mod host;
mod multi;
mod nd;
mod nd_host;
mod plot;
mod report;
mod sweep;
mod timing;
mod types;

use args::{Command, Plan};
use ceilings::{Ceilings, measure_ceilings};
use conv_host::Engine;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use report::Row;
use std::time::Instant;
use timing::{TIMED, WARMUP};

/// `--auto` lists the cases where `Auto` is more than this fraction slower than the fastest
/// design (the run-to-run spread of one kernel is a few percent).
const AUTO_TOLERANCE: f64 = 0.05;

/// One benchmark run: the device, its ceilings, what to run, the inputs' generator and the
/// rows measured so far.
struct Bench<'a> {
    engine: &'a Engine,
    ceilings: Ceilings,
    plan: Plan,
    rng: StdRng,
    rows: Vec<Row>,
}

/// `len` values uniform in [-1, 1).
fn random_vec(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn run() -> Result<(), String> {
    let (plan, only) = match args::parse(std::env::args().skip(1))? {
        Command::PlotOnly { csv, dir } => return plot::plot_csv(&csv, &dir),
        Command::Run { plan, only } => (plan, only),
    };
    std::fs::create_dir_all(&plan.out_dir).map_err(|e| e.to_string())?;
    let engine = Engine::new().map_err(|e| format!("the benchmark needs a GPU: {e}"))?;
    let ceilings = measure_ceilings(&engine)?;
    let seed: u64 = rand::rng().random();
    println!("input seed {seed}");
    let mut bench = Bench {
        engine: &engine,
        ceilings,
        plan,
        rng: StdRng::seed_from_u64(seed),
        rows: Vec::new(),
    };
    let started = Instant::now();
    if bench.plan.host {
        let lines = bench.bench_host(only.as_deref())?;
        let csv = bench.plan.out_dir.join("host.csv");
        let header = format!(
            "# device: {}\n# host -> host medians of {} calls; floor: pinned upload and download overlapped\n",
            engine.device().name,
            5
        );
        std::fs::write(&csv, header + &lines.join("\n") + "\n").map_err(|e| e.to_string())?;
        println!(
            "\nwritten to {} in {:.0} s",
            csv.display(),
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    if bench.plan.multi || bench.plan.nd || bench.plan.types {
        let (lines, name) = if bench.plan.nd {
            (bench.bench_nd()?, "nd.csv")
        } else if bench.plan.types {
            (bench.bench_types()?, "types.csv")
        } else {
            (bench.bench_multi()?, "multi.csv")
        };
        let csv = bench.plan.out_dir.join(name);
        std::fs::write(&csv, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
        println!("\nwritten to {}", csv.display());
        return Ok(());
    }
    let auto = bench.plan.auto;
    if only.as_deref() != Some("2d") {
        if auto {
            bench.auto_1d()?;
        } else {
            bench.bench_1d()?;
        }
    }
    if only.as_deref() != Some("1d") {
        if auto {
            bench.auto_2d()?;
        } else {
            bench.bench_2d()?;
        }
    }
    let Bench {
        ceilings,
        plan,
        rows,
        ..
    } = bench;
    let device = engine.device();
    let header = format!(
        "device: {}\ncopy_roofline_gbps: {:.1}\nsm_copy_gbps: {:.1}\nfma_peak_gflops: {:.1}\nseed: {seed}\nmode: {}\nruns: {WARMUP} warm-up + {TIMED} timed, median",
        device.name,
        ceilings.copy_gbps,
        ceilings.sm_copy_gbps,
        ceilings.fma_gflops,
        plan.mode()
    );
    let csv = plan.out_dir.join("bench.csv");
    report::write_csv(&rows, &csv, &header)?;
    if auto {
        auto::report(&rows, &plan.out_dir, AUTO_TOLERANCE)?;
    } else {
        report::summary(&rows);
    }
    let failures: Vec<&Row> = rows.iter().filter(|r| r.max_error > 1e-5).collect();
    println!(
        "\n{} cases in {:.0} s, written to {}",
        rows.len(),
        started.elapsed().as_secs_f64(),
        csv.display()
    );
    if let Err(e) = plot::plot_csv(&csv, &plan.out_dir) {
        println!("plots skipped: {e}");
    }
    if !failures.is_empty() {
        for row in &failures {
            println!(
                "CHECK FAILED: {} (max relative error {:.2e})",
                row.name, row.max_error
            );
        }
        return Err(format!("{} cases failed the spot check", failures.len()));
    }
    println!("all cases passed the spot check (relative error <= 1e-5)");
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}
