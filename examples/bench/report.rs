//! The results: one CSV row per case, the CSV file, and the summary printed after a run.

use conv_host::Kernel;
use std::fmt::Write as _;
use std::path::Path;

/// One measured case: a CSV row.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub dims: u8,
    pub kernel: Kernel,
    pub entry_point: &'static str,
    pub elements: usize,
    pub taps: usize,
    pub mask: String,
    pub tile: String,
    pub kernel_ms: f64,
    pub gbps: f64,
    pub roofline_pct: f64,
    pub gflops: f64,
    pub fma_pct: f64,
    pub end_to_end_ms: f64,
    pub cpu_ms: Option<f64>,
    pub reduction: Option<f64>,
    pub max_error: f64,
}

impl Row {
    const HEADER: &'static str = "name,dims,kernel,entry_point,elements,taps,mask,tile,kernel_ms,gbps,roofline_pct,gflops,fma_pct,end_to_end_ms,cpu_ms,speedup_kernel,speedup_end_to_end,predicted_reduction,max_rel_error";

    fn csv(&self) -> String {
        let optional = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
        format!(
            "{},{},{},{},{},{},{},{},{:.5},{:.1},{:.1},{:.1},{:.1},{:.4},{},{},{},{},{:.2e}",
            self.name,
            self.dims,
            self.kernel,
            self.entry_point,
            self.elements,
            self.taps,
            self.mask,
            self.tile,
            self.kernel_ms,
            self.gbps,
            self.roofline_pct,
            self.gflops,
            self.fma_pct,
            self.end_to_end_ms,
            optional(self.cpu_ms),
            optional(self.cpu_ms.map(|c| c / self.kernel_ms)),
            optional(self.cpu_ms.map(|c| c / self.end_to_end_ms)),
            optional(self.reduction),
            self.max_error,
        )
    }
}

/// Writes `rows` to `path`, after `header_comment`'s lines as `#` comments.
pub(crate) fn write_csv(rows: &[Row], path: &Path, header_comment: &str) -> Result<(), String> {
    let mut text = String::new();
    for line in header_comment.lines() {
        let _ = writeln!(text, "# {line}");
    }
    let _ = writeln!(text, "{}", Row::HEADER);
    for row in rows {
        let _ = writeln!(text, "{}", row.csv());
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The channel count in a 2D case name (`2d/kernel/HxWxC/...`).
fn image_channels(name: &str) -> Option<&str> {
    name.split('/').nth(2)?.rsplit('x').next()
}

/// Prints the fastest tile of each design and mask at the largest sizes measured.
pub(crate) fn summary(rows: &[Row]) {
    println!(
        "\n{:<44} {:>9} {:>8} {:>6} {:>9} {:>6}",
        "best tile per case (largest sizes)", "ms", "GB/s", "%roof", "GFLOP/s", "%FMA"
    );
    let largest_1d = rows
        .iter()
        .filter(|r| r.dims == 1)
        .map(|r| r.elements)
        .max();
    let largest_2d = rows
        .iter()
        .filter(|r| r.dims == 2 && image_channels(&r.name) == Some("1"))
        .map(|r| r.elements)
        .max();
    let rgb = rows
        .iter()
        .find(|r| r.dims == 2 && image_channels(&r.name) == Some("3"))
        .map(|r| r.elements);
    for (dims, elements) in [(1, largest_1d), (2, largest_2d), (2, rgb)] {
        let Some(elements) = elements else { continue };
        let mut keys: Vec<(String, String)> = rows
            .iter()
            .filter(|r| r.dims == dims && r.elements == elements)
            .map(|r| (r.kernel.to_string(), r.mask.clone()))
            .collect();
        keys.dedup();
        for (kernel, mask) in keys {
            let best = rows
                .iter()
                .filter(|r| {
                    r.dims == dims
                        && r.elements == elements
                        && r.kernel.to_string() == kernel
                        && r.mask == mask
                })
                .min_by(|a, b| a.kernel_ms.total_cmp(&b.kernel_ms))
                .expect("at least one row");
            let label = best
                .name
                .rsplit_once('/')
                .map_or(best.name.as_str(), |(head, _)| head);
            println!(
                "{label:<44} {:>9.4} {:>8.0} {:>6.1} {:>9.0} {:>6.1}",
                best.kernel_ms, best.gbps, best.roofline_pct, best.gflops, best.fma_pct
            );
        }
    }
}
