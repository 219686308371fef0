//! The banded host pipeline against the f64 reference: an engine capped to a little device
//! memory runs small inputs in many bands, so every band edge, the halo rows folded on the host
//! (far side of the image for `Wrap`, `Reflect`, `Mirror`) and masks taller than a band are
//! exercised, for every boundary mode and kernel family.

mod common;

use common::images::{random_array3, random_mask, random_separable_mask};
use common::tensor_copy::has_tensor_copies;
use common::{
    all_modes, band_cap, expected1d, expected2d, image_mask, image_options, random_origin,
    random_vec, rng, zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Engine, Kernel};
use ndarray::{Array2, Ix3};
use rand::Rng;
use rand::rngs::StdRng;

/// Rows of the test images: several bands of each cap below.
const ROWS: usize = 67;

/// One capped 2D run against the reference.
fn check_capped2d(
    engine: &Engine,
    rng: &mut StdRng,
    mask: &Array2<f32>,
    (kernel, mode, channels): (Kernel, BoundaryMode, usize),
    band_rows: usize,
) {
    let width = rng.random_range(1..80);
    let image = random_array3(rng, (ROWS, width, channels));
    let convolve = rng.random_bool(0.5);
    let centred = matches!(kernel, Kernel::SeparableTma | Kernel::RegisterTiledTma);
    let options = NdOptions {
        mode: mode.into(),
        kernel,
        origin: [
            random_origin(rng, mask.nrows(), convolve),
            if centred {
                0
            } else {
                random_origin(rng, mask.ncols(), convolve)
            },
        ]
        .into(),
        ..zero_border()
    };
    // The image's mask and options: a channel axis of extent 1 and origin 0.
    let (mask3, options3) = (
        image_mask::<Ix3>(mask.view(), 3),
        image_options(&options, 3),
    );
    let nd = engine.ndimage();
    engine.set_device_memory_limit(Some(band_cap(band_rows, width * channels, mask.dim())));
    let got = if convolve {
        nd.convolve(&image, &mask3, &options3)
    } else {
        nd.correlate(&image, &mask3, &options3)
    };
    engine.set_device_memory_limit(None);
    let what = format!(
        "{kernel} {mode:?} {}x{} mask over {ROWS}x{width}x{channels}, bands of {band_rows} rows, \
         convolve {convolve}",
        mask.nrows(),
        mask.ncols()
    );
    let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
    expected2d(image.view(), mask.view(), &options, convolve).check(got.view(), &what);
}

/// Every 2D kernel family and boundary mode, masks shorter and taller than a band.
#[test]
#[ignore = "needs a CUDA GPU"]
fn images_in_bands_match_the_reference() {
    let (mut rng, seed) = rng("bands 2d");
    let engine = Engine::new().expect("GPU");
    let hopper = has_tensor_copies();
    let mut runs = 0;
    for mode in all_modes() {
        for band_rows in [3, 11] {
            // The textbook designs and Auto, general masks up to 31 rows.
            for kernel in [Kernel::Auto].into_iter().chain(Kernel::TEXTBOOK) {
                for shape in [(3, 3), (5, 7), (31, 9)] {
                    let mask = random_mask(&mut rng, shape);
                    let channels = [1, 3][runs % 2];
                    check_capped2d(
                        &engine,
                        &mut rng,
                        &mask,
                        (kernel, mode, channels),
                        band_rows,
                    );
                    runs += 1;
                }
            }
            // Register-tiled: streaming (square 3..9) and wide (9..31 wide, any height).
            for (shape, channels) in [((5, 5), 1), ((9, 9), 3), ((17, 9), 4), ((7, 31), 1)] {
                let mask = random_mask(&mut rng, shape);
                let family = (Kernel::RegisterTiled, mode, channels);
                check_capped2d(&engine, &mut rng, &mask, family, band_rows);
                runs += 1;
            }
            // Separable: the wide kernels (square) and the general one.
            for (shape, channels) in [((5, 5), 1), ((17, 17), 3), ((9, 4), 1), ((25, 3), 4)] {
                let mask = random_separable_mask(&mut rng, shape);
                let family = (Kernel::Separable, mode, channels);
                check_capped2d(&engine, &mut rng, &mask, family, band_rows);
                runs += 1;
            }
            // The tensor-copy designs serve the zero border only.
            if hopper && mode == BoundaryMode::Constant(0.0) {
                let mask = random_separable_mask(&mut rng, (15, 15));
                let family = (Kernel::SeparableTma, mode, 1);
                check_capped2d(&engine, &mut rng, &mask, family, band_rows);
                for (size, channels) in [(5, 3), (9, 1)] {
                    let mask = random_mask(&mut rng, (size, size));
                    let family = (Kernel::RegisterTiledTma, mode, channels);
                    check_capped2d(&engine, &mut rng, &mask, family, band_rows);
                }
                runs += 3;
            }
        }
    }
    eprintln!("bands 2d: {runs} runs matched the reference (seed {seed})");
}

/// 1D signals in chunks: every mode, the textbook designs and the register-tiled one, masks
/// shorter and longer than a chunk.
#[test]
#[ignore = "needs a CUDA GPU"]
fn signals_in_chunks_match_the_reference() {
    let (mut rng, seed) = rng("bands 1d");
    let engine = Engine::new().expect("GPU");
    let mut runs = 0;
    for mode in all_modes() {
        for (taps, chunk) in [(3, 40), (7, 5), (31, 100), (31, 9), (15, 1)] {
            for kernel in [Kernel::Auto, Kernel::RegisterTiled]
                .into_iter()
                .chain(Kernel::TEXTBOOK)
            {
                let len = rng.random_range(200..3000);
                let input = random_vec(&mut rng, len);
                let mask = random_vec(&mut rng, taps);
                let convolve = rng.random_bool(0.5);
                let options = NdOptions {
                    mode: mode.into(),
                    kernel,
                    origin: random_origin(&mut rng, taps, convolve).into(),
                    ..zero_border()
                };
                let nd = engine.ndimage();
                engine.set_device_memory_limit(Some(2 * 4 * (chunk + taps - 1) + 4 * taps));
                let got = if convolve {
                    nd.convolve1d(&input, &mask, 0, &options)
                } else {
                    nd.correlate1d(&input, &mask, 0, &options)
                };
                engine.set_device_memory_limit(None);
                let what = format!(
                    "{kernel} {mode:?} {taps} taps over {len}, chunks of {chunk}, convolve {convolve}"
                );
                let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                expected1d(input.view(), mask.view(), &options, convolve).check(got.view(), &what);
                runs += 1;
            }
        }
    }
    eprintln!("bands 1d: {runs} runs matched the reference (seed {seed})");
}
