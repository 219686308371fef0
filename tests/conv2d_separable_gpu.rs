//! 2D GPU tests of the separable design (`separable`: the wide kernels and the general one)
//! and the Gaussian filter against the f64 CPU reference, with `Auto`'s choice to factor a
//! mask and the typed errors where the design does not apply; the small cases also run
//! `separable-tma` where the GPU has tensor copies. They need a CUDA GPU and are ignored by a
//! plain `cargo test`; `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::images::{SEPARABLE_IMAGES, random_array3, random_separable_mask};
use common::tensor_copy::{check_tensor_copies, has_tensor_copies};
use common::{
    all_modes, assert_close, check_gpu2d, engine, expected2d, gpu2d, random_origin, rng,
    zero_border,
};
use common::{image_design, image_runs};
use conv_host::ndimage::{NdOptions, Runs};
use conv_host::{BoundaryMode, Clamp, ConvError, Kernel, reference};
use ndarray::{Array2, Axis, s};
use rand::Rng;
use rand::rngs::StdRng;

/// Interleaved channels the designs take: an `H x W x C` image of more runs on the 3D kernel,
/// which takes `Kernel::Auto` and no tile (naming a design or a tile is `InvalidDesign`).
const MAX_DESIGN_CHANNELS: usize = 4;

/// `options` with this `truncate`.
fn gaussian_options(options: &NdOptions, truncate: f64) -> NdOptions {
    NdOptions {
        truncate,
        ..options.clone()
    }
}

/// One separable configuration with a random mode, origin and operation, in a contiguous or
/// a strided image, against the reference.
fn check_separable(rng: &mut StdRng, mask: &Array2<f32>, channels: usize, (h, w): (usize, usize)) {
    let shape = mask.dim();
    let convolve = rng.random_bool(0.5);
    let mut options = NdOptions {
        mode: all_modes()[rng.random_range(0..6)].into(),
        origin: [
            random_origin(rng, shape.0, convolve),
            random_origin(rng, shape.1, convolve),
        ]
        .into(),
        kernel: Kernel::Separable,
        ..zero_border()
    };
    let what = format!("separable {shape:?} c{channels} {h}x{w} {options:?} convolve {convolve}");
    let big = random_array3(rng, (2 * h, w + 3, channels));
    let image = if rng.random_bool(0.25) {
        big.slice(s![..;2, 3.., ..])
    } else {
        big.slice(s![..h, ..w, ..])
    };
    // Past the designs' channels the image runs on the 3D kernel: naming the design is
    // refused, and the image is checked there (`Auto`).
    if channels > MAX_DESIGN_CHANNELS {
        let refused = gpu2d(image.view(), mask.view(), &options, convolve);
        assert!(
            matches!(refused, Err(ConvError::InvalidDesign { .. })),
            "{what}: past {MAX_DESIGN_CHANNELS} channels a named design must be refused, got {:?}",
            refused.map(|_| "an output")
        );
        options.kernel = Kernel::Auto;
    }
    check_gpu2d(image, mask.view(), &options, convolve, &what);
}

/// A few small separable cases (the wide kernels at 5 x 5 and 17 x 17, the general one at
/// 4 x 6; random modes), for the sanitizers.
#[test]
#[ignore = "needs a CUDA GPU"]
fn separable_small_cases() {
    let (mut rng, _) = rng("separable small");
    for shape in [(5, 5), (17, 17), (4, 6)] {
        let mask = random_separable_mask(&mut rng, shape);
        for channels in [1, 3] {
            for image in [(37, 53), (20, 150)] {
                check_separable(&mut rng, &mask, channels, image);
            }
        }
        if shape.0 == shape.1 && has_tensor_copies() {
            for image in [(37, 53), (20, 150)] {
                check_tensor_copies(&mut rng, &mask, (Kernel::SeparableTma, 1), image);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn separable_kernels_match_the_reference() {
    let (mut rng, seed) = rng("separable");
    let mut runs = 0;
    // The wide kernels' square sizes, general ones (rectangular, beyond 31, a single row or
    // column) and masks larger than the image; images narrower and wider than one strip
    // (128 elements for the general kernel, 256 for the wide ones), shorter and taller than one
    // block, every channel count.
    let masks = [
        (3, 3),
        (5, 5),
        (7, 7),
        (9, 9),
        (11, 11),
        (13, 13),
        (15, 15),
        (17, 17),
        (19, 19),
        (21, 21),
        (23, 23),
        (25, 25),
        (27, 27),
        (29, 29),
        (31, 31),
        (4, 6),
        (5, 11),
        (9, 11),
        (45, 31),
        (9, 2),
        (1, 7),
        (6, 1),
        (40, 40),
    ];
    for &shape in &masks {
        for channels in [1, 2, 3, 4, 5] {
            let mask = random_separable_mask(&mut rng, shape);
            let runs_on = image_runs(&mask, (4096, 4096, channels), &zero_border()).unwrap();
            // Past the designs' channels, Auto runs the image on the 3D kernel.
            if channels > MAX_DESIGN_CHANNELS {
                assert_eq!(
                    runs_on,
                    Runs::Volume,
                    "Auto for a separable {shape:?} mask, {channels} channels"
                );
                for image in SEPARABLE_IMAGES {
                    check_separable(&mut rng, &mask, channels, image);
                    runs += 1;
                }
                continue;
            }
            let Runs::Design(plan) = runs_on else {
                panic!("a 2D image of {channels} channels runs on a design, not {runs_on:?}");
            };
            // Auto factors 2D masks with a wide separable kernel (square, odd, 3 to 31 taps:
            // SEPARABLE_MASKS; 1, 3 or 4 channels), large ones, and those no register-tiled
            // kernel was compiled for (square up to 9 x 9, or 9 to 31 wide, odd).
            let standard_channels = [1, 3, 4].contains(&channels);
            let wide_separable = shape.0 == shape.1
                && shape.0 % 2 == 1
                && (3..=31).contains(&shape.0)
                && standard_channels;
            let register = (shape.0 == shape.1 && [3, 5, 7, 9].contains(&shape.0)
                || shape.1 == 1
                || (9..=31).step_by(2).any(|w| w == shape.1))
                && standard_channels;
            // The general separable kernel against the register-tiled one: see
            // `general_separable_wins`.
            let large = shape.0 * shape.1 > 50;
            let factored = shape.0 > 1 && shape.1 > 1 && (wide_separable || large || !register);
            assert_eq!(
                matches!(plan.kernel, Kernel::Separable | Kernel::SeparableTma),
                factored,
                "Auto's design for a separable {shape:?} mask, {channels} channels"
            );
            // Tensor copies for one channel at 4096^2 (the default zero border, centred).
            let tensor_copies = has_tensor_copies() && wide_separable && channels == 1;
            assert_eq!(
                plan.kernel == Kernel::SeparableTma,
                tensor_copies,
                "{shape:?}"
            );
            for image in SEPARABLE_IMAGES {
                check_separable(&mut rng, &mask, channels, image);
                runs += 1;
            }
        }
    }
    // An image large enough for full-height (256-row) blocks, with several block rows.
    for shape in [(5, 5), (4, 6)] {
        let mask = random_separable_mask(&mut rng, shape);
        check_separable(&mut rng, &mask, 1, (2304, 8192));
        runs += 1;
    }
    // The wide kernels over several strips and block rows of several steps each (blocks of
    // `32 k - (M - 1)` rows), clamped or not.
    for shape in [(9, 9), (15, 15), (17, 17), (31, 31)] {
        let mask = random_separable_mask(&mut rng, shape);
        for channels in [1, 3, 4] {
            check_separable(&mut rng, &mask, channels, (1500, 700 / channels));
            runs += 1;
        }
        let image = random_array3(&mut rng, (777, 530, 1));
        let clamped = NdOptions {
            clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
            mode: BoundaryMode::Wrap.into(),
            kernel: Kernel::Separable,
            ..zero_border()
        };
        let what = format!("clamped separable {shape:?}");
        check_gpu2d(image.view(), mask.view(), &clamped, false, &what);
    }
    // Clamping, single-channel arrays and the Gaussian filter, which Auto runs as two passes.
    let image = random_array3(&mut rng, (513, 301, 1)).index_axis_move(Axis(2), 0);
    let mask = random_separable_mask(&mut rng, (11, 11));
    let clamped = NdOptions {
        clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
        mode: BoundaryMode::Reflect.into(),
        ..zero_border()
    };
    check_gpu2d(image.view(), mask.view(), &clamped, false, "clamped");
    // An `H x W` image: sigma 3 on both axes, truncate 4, the zero border.
    let gaussian_opts = gaussian_options(&zero_border(), 4.0);
    let gaussian = engine()
        .ndimage()
        .gaussian_filter(&image, [3.0, 3.0], 0, &gaussian_opts)
        .unwrap();
    let expected = reference::gaussian_filter(&image, [3.0, 3.0], 0, &gaussian_opts).unwrap();
    let magnitude =
        reference::gaussian_filter(&image.mapv(f32::abs), [3.0, 3.0], 0, &gaussian_opts).unwrap();
    assert_close(
        gaussian.view(),
        expected.view(),
        magnitude.view(),
        "gaussian",
    );
    // A mask that is not rank 1: Auto does not factor it, and naming Separable is an error
    // that leaves the engine usable.
    let mut nearly = random_separable_mask(&mut rng, (5, 5));
    nearly[[2, 3]] += 1e-3;
    let auto = image_design(&nearly, (64, 64, 1), &zero_border()).unwrap();
    assert_ne!(auto.kernel, Kernel::Separable);
    let named = NdOptions {
        kernel: Kernel::Separable,
        ..zero_border()
    };
    assert!(matches!(
        gpu2d(image.view(), nearly.view(), &named, false),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert!(matches!(
        gpu2d(
            image.view(),
            mask.view(),
            &NdOptions {
                tile: Some((32, 8)),
                ..named.clone()
            },
            false
        ),
        Err(ConvError::InvalidLaunch { .. })
    ));
    common::assert_engine_works();
    eprintln!("separable: {runs} runs matched the reference (seed {seed})");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gaussian_filter_matches_the_separable_reference() {
    let (mut rng, _) = rng("gaussian");
    let image = random_array3(&mut rng, (101, 77, 3));
    for (sigma, mode) in [
        (0.8, BoundaryMode::Reflect),
        (2.5, BoundaryMode::Constant(0.3)),
        (4.0, BoundaryMode::Wrap),
    ] {
        let options = NdOptions {
            mode: mode.into(),
            ..zero_border()
        };
        // An `H x W x C` image: sigma 0 along the channels leaves them alone.
        let sigmas = [f64::from(sigma), f64::from(sigma), 0.0];
        let gaussian_opts = gaussian_options(&options, 4.0);
        let expected = reference::gaussian_filter(&image, sigmas, 0, &gaussian_opts).unwrap();
        let got = engine()
            .ndimage()
            .gaussian_filter(&image, sigmas, 0, &gaussian_opts)
            .unwrap();
        let mask = conv_host::masks::gaussian2d(sigma, 4.0).unwrap();
        let direct = expected2d(image.view(), mask.view(), &options, false);
        assert_close(
            got.view(),
            expected.view(),
            direct.magnitude(),
            "gaussian_filter",
        );
    }
    assert!(matches!(
        engine().ndimage().gaussian_filter(
            &image,
            [-1.0, -1.0, 0.0],
            0,
            &gaussian_options(&zero_border(), 4.0)
        ),
        Err(ConvError::InvalidParameter { .. })
    ));
}
