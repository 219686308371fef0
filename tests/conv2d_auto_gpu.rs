//! 2D GPU tests of `Auto`'s choices where a launch's parallelism decides: wide and rank-1
//! masks on small images run on the tiled design, the same masks on large images on the
//! register-tiled or separable design; the results match the f64 CPU reference in every mode.
//! They need a CUDA GPU and are ignored by a plain `cargo test`; `scripts/gpu-check` runs them
//! with `--include-ignored`.

mod common;

use common::image_design;
use common::images::{random_array3, random_mask, random_separable_mask};
use common::{all_modes, check_gpu2d, engine, random_origin, rng, zero_border};
use conv_host::Kernel;
use conv_host::ndimage::NdOptions;
use rand::Rng;

/// Small images leave the wide register-tiled kernel too few blocks, and the general separable
/// kernel too little work: `Auto` runs them on the tiled kernel (whose default block keeps a
/// whole tile of outputs for every halo) and the same masks on large images on the wide or
/// separable kernel. The results match the reference in every mode.
#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_runs_wide_masks_on_small_images_with_the_tiled_kernel() {
    let (mut rng, seed) = rng("small images");
    let sms = engine().device().multiprocessor_count as usize;
    // Rank-1 masks no wide separable kernel covers, on images under and over the line of
    // `general_separable_pays_off` (30,000 multiply-adds of the tiled kernel per SM).
    for (rows, cols) in [(5, 7), (9, 11), (21, 7)] {
        for channels in [1, 3] {
            let mask = random_separable_mask(&mut rng, (rows, cols));
            let side_for = |work: usize| ((work / (rows * cols * channels)) as f64).sqrt() as usize;
            let under = side_for(30_000 * sms) - 2;
            let over = side_for(30_000 * sms) + 2;
            let plan = |side: usize| {
                image_design(&mask, (side, side, channels), &zero_border())
                    .unwrap()
                    .kernel
            };
            assert_eq!(
                plan(over),
                Kernel::Separable,
                "{rows}x{cols}x{channels}, {over}^2"
            );
            assert_eq!(
                plan(under),
                Kernel::Tiled,
                "{rows}x{cols}x{channels}, {under}^2"
            );
            let image = random_array3(&mut rng, (under, under, channels));
            for mode in all_modes() {
                let options = NdOptions {
                    mode: mode.into(),
                    ..zero_border()
                };
                let what = format!(
                    "Auto, rank-1 {rows}x{cols} mask, {under}^2 x {channels}, {mode:?}, seed {seed}"
                );
                check_gpu2d(image.view(), mask.view(), &options, false, &what);
            }
        }
    }
    for (rows, cols) in [(15, 15), (31, 31), (5, 11), (21, 9)] {
        for channels in [1, 3, 4] {
            let mask = random_mask(&mut rng, (rows, cols));
            let large = image_design(&mask, (4096, 4096, channels), &zero_border()).unwrap();
            assert_eq!(
                large.kernel,
                Kernel::RegisterTiled,
                "{rows}x{cols}x{channels}"
            );
            // At most one block per five SMs: a strip of the wide kernel's output tile across
            // and as many tile rows as that leaves.
            let (tile_w, tile_h) = (large.output_tile.0 as usize, large.output_tile.1 as usize);
            let strips = (64 * channels).div_ceil(tile_w);
            let height = (sms / 5 / strips).max(1) * tile_h - 3;
            let small = image_design(&mask, (height, 64, channels), &zero_border()).unwrap();
            assert_eq!(
                small.kernel,
                Kernel::Tiled,
                "{rows}x{cols}x{channels} on {height}x64"
            );
            let image = random_array3(&mut rng, (height, 64, channels));
            for mode in all_modes() {
                let convolve = rng.random_bool(0.5);
                let options = NdOptions {
                    mode: mode.into(),
                    origin: [
                        random_origin(&mut rng, rows, convolve),
                        random_origin(&mut rng, cols, convolve),
                    ]
                    .into(),
                    ..zero_border()
                };
                let what = format!(
                    "Auto, {rows}x{cols} mask, {height}x64x{channels}, {options:?}, seed {seed}"
                );
                check_gpu2d(image.view(), mask.view(), &options, convolve, &what);
            }
        }
    }
}
