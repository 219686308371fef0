//! `--auto`: does `Kernel::Auto` pick the fastest design? Every design that applies is timed on
//! the same input, from small images and signals (where a launch's parallelism decides) to
//! large ones, with general and rank-1 masks, and each case's `Auto` time is compared with the
//! fastest named design's.

use crate::cases::{Case1d, Case2d};
use crate::cases::{design, image_mask, zero_border};
use crate::report::Row;
use crate::{Bench, random_vec};
use conv_host::Kernel;
use ndarray::{Array1, Array2, Array3};
use std::fmt::Write as _;
use std::path::Path;

/// Image sides (square images) and channel counts.
const IMAGES: &[(usize, usize)] = &[
    (128, 1),
    (256, 1),
    (384, 1),
    (512, 1),
    (768, 1),
    (1024, 1),
    (2048, 1),
    (4096, 1),
    (128, 3),
    (256, 3),
    (512, 3),
    (1024, 3),
    (2048, 3),
];

/// Mask shapes, each measured as a random general mask and as a random rank-1 one.
const MASKS: &[(usize, usize)] = &[
    (3, 3),
    (5, 5),
    (7, 7),
    (9, 9),
    (15, 15),
    (17, 17),
    (31, 31),
    (5, 11),
    (9, 11),
    (21, 7),
    (5, 7),
    (9, 7),
    (11, 5),
    (8, 8),
];

/// 1D signal lengths (powers of two) and mask lengths.
const SIGNALS: &[u32] = &[10, 12, 14, 16, 18, 20, 22];
const TAPS: &[usize] = &[3, 7, 11, 13, 15, 21, 31, 41, 63];

/// The tiled design's two textbook tiles, timed besides its default.
const TILED_TILES: [(u32, u32); 2] = [(32, 8), (16, 16)];

/// A case is a row's name without its requested design and tile: what `Auto` competes on.
fn case_key(row: &Row) -> (String, &str) {
    let mut parts = row.name.split('/');
    let dims = parts.next().unwrap_or_default();
    let requested = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.filter(|p| !p.starts_with('t')).collect();
    (format!("{dims}/{}", rest.join("/")), requested)
}

impl Bench<'_> {
    /// Times every design that applies on each 1D case.
    pub(crate) fn auto_1d(&mut self) -> Result<(), String> {
        for &log2 in SIGNALS {
            let n = 1usize << log2;
            let input = Array1::from(random_vec(&mut self.rng, n));
            for &taps in TAPS {
                let mask = Array1::from(random_vec(&mut self.rng, taps));
                for kernel in Kernel::EVERY {
                    let options = zero_border(kernel, None);
                    if design(self.engine, &[n], &mask, &options).is_err() {
                        continue;
                    }
                    let case = Case1d {
                        input: &input,
                        mask: &mask,
                        log2,
                        options,
                        cpu_ms: None,
                    };
                    let row = case.measure(self)?;
                    self.rows.push(row);
                }
            }
            eprintln!("auto 1d n = 2^{log2} done");
        }
        Ok(())
    }

    /// Times every design that applies on each 2D case, general and rank-1 masks.
    pub(crate) fn auto_2d(&mut self) -> Result<(), String> {
        for &(side, channels) in IMAGES {
            let shape = (side, side, channels);
            let image =
                Array3::from_shape_vec(shape, random_vec(&mut self.rng, side * side * channels))
                    .expect("shape");
            for &mask_shape in MASKS {
                let general = Array2::from_shape_vec(
                    mask_shape,
                    random_vec(&mut self.rng, mask_shape.0 * mask_shape.1),
                )
                .expect("shape");
                let column = random_vec(&mut self.rng, mask_shape.0);
                let row = random_vec(&mut self.rng, mask_shape.1);
                let rank_one = Array2::from_shape_fn(mask_shape, |(i, j)| column[i] * row[j]);
                let designs = Kernel::EVERY.iter().map(|&kernel| (kernel, None));
                let tiles = TILED_TILES.iter().map(|&t| (Kernel::Tiled, Some(t)));
                let designs: Vec<_> = designs.chain(tiles).collect();
                for (mask, family) in [(&general, "general"), (&rank_one, "rank1")] {
                    for &(kernel, tile) in &designs {
                        let options = zero_border(kernel, tile);
                        let weights = image_mask(mask);
                        if design(self.engine, image.shape(), &weights, &options).is_err() {
                            continue;
                        }
                        let case = Case2d {
                            image: &image,
                            mask,
                            options,
                            cpu_ms: None,
                        };
                        let mut row = case.measure(self)?;
                        row.name = format!("{}/{family}", row.name);
                        self.rows.push(row);
                    }
                }
            }
            eprintln!("auto 2d {side}x{side}x{channels} done");
        }
        Ok(())
    }
}

/// Writes `auto.csv` (per case: `Auto`'s design and time, the fastest named design and its
/// time) and prints the cases where `Auto` is more than `tolerance` slower than the fastest.
/// Returns how many such cases there are.
pub(crate) fn report(rows: &[Row], dir: &Path, tolerance: f64) -> Result<usize, String> {
    let mut cases: Vec<String> = Vec::new();
    for row in rows {
        let (key, _) = case_key(row);
        if !cases.contains(&key) {
            cases.push(key);
        }
    }
    let mut text = String::from(
        "case,auto_kernel,auto_entry_point,auto_ms,best_kernel,best_entry_point,best_ms,auto_over_best\n",
    );
    let mut slower = 0;
    println!(
        "\n{:<40} {:>10} {:>9} {:>10} {:>9} {:>6}",
        "Auto slower than the fastest design", "auto", "ms", "best", "ms", "ratio"
    );
    for key in &cases {
        let in_case = rows.iter().filter(|r| &case_key(r).0 == key);
        let (auto, named): (Vec<&Row>, Vec<&Row>) =
            in_case.partition(|r| case_key(r).1 == Kernel::Auto.name());
        let (Some(auto), Some(best)) = (
            auto.first(),
            named
                .iter()
                .min_by(|a, b| a.kernel_ms.total_cmp(&b.kernel_ms)),
        ) else {
            continue;
        };
        let ratio = auto.kernel_ms / best.kernel_ms;
        let _ = writeln!(
            text,
            "{key},{},{},{:.5},{},{},{:.5},{ratio:.3}",
            auto.kernel,
            auto.entry_point,
            auto.kernel_ms,
            best.kernel,
            best.entry_point,
            best.kernel_ms
        );
        if ratio > 1.0 + tolerance {
            slower += 1;
            println!(
                "{key:<40} {:>10} {:>9.4} {:>10} {:>9.4} {ratio:>6.2}",
                auto.kernel.name(),
                auto.kernel_ms,
                best.kernel.name(),
                best.kernel_ms
            );
        }
    }
    let path = dir.join("auto.csv");
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    println!(
        "{slower} of {} cases with Auto more than {:.0}% slower than the fastest design ({})",
        cases.len(),
        100.0 * tolerance,
        path.display()
    );
    Ok(slower)
}
