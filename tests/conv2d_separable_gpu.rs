//! 2D GPU tests of the separable design (`separable`: the wide kernels and the general one)
//! and the Gaussian filter against the f64 CPU reference, with `Auto`'s choice to factor a
//! mask and the typed errors where the design does not apply; the small cases also run
//! `separable-tma` where the GPU has tensor copies. They need a CUDA GPU and are ignored by a
//! plain `cargo test`; `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::images::{SEPARABLE_IMAGES, random_array3, random_separable_mask};
use common::tensor_copy::{check_tensor_copies, has_tensor_copies};
use common::{all_modes, assert_close, check_gpu2d, engine, expected2d, random_origin, rng};
use conv_host::{BoundaryMode, Clamp, Conv2dOptions, ConvError, Kernel};
use ndarray::{Array2, Axis, s};
use rand::Rng;
use rand::rngs::StdRng;

/// One separable configuration with a random mode, origin and operation, in a contiguous or
/// a strided image, against the reference.
fn check_separable(rng: &mut StdRng, mask: &Array2<f32>, channels: usize, (h, w): (usize, usize)) {
    let shape = mask.dim();
    let convolve = rng.random_bool(0.5);
    let options = Conv2dOptions {
        mode: all_modes()[rng.random_range(0..6)],
        origin: [
            random_origin(rng, shape.0, convolve),
            random_origin(rng, shape.1, convolve),
        ],
        kernel: Kernel::Separable,
        ..Default::default()
    };
    let what = format!("separable {shape:?} c{channels} {h}x{w} {options:?} convolve {convolve}");
    let big = random_array3(rng, (2 * h, w + 3, channels));
    let image = if rng.random_bool(0.25) {
        big.slice(s![..;2, 3.., ..])
    } else {
        big.slice(s![..h, ..w, ..])
    };
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
            let plan = engine()
                .plan2d(&mask, (4096, 4096, channels), &Conv2dOptions::default())
                .unwrap();
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
        let clamped = Conv2dOptions {
            clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
            mode: BoundaryMode::Wrap,
            kernel: Kernel::Separable,
            ..Default::default()
        };
        let what = format!("clamped separable {shape:?}");
        check_gpu2d(image.view(), mask.view(), &clamped, false, &what);
    }
    // Clamping, single-channel arrays and the Gaussian filter, which Auto runs as two passes.
    let image = random_array3(&mut rng, (513, 301, 1)).index_axis_move(Axis(2), 0);
    let mask = random_separable_mask(&mut rng, (11, 11));
    let clamped = Conv2dOptions {
        clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
        mode: BoundaryMode::Reflect,
        ..Default::default()
    };
    check_gpu2d(image.view(), mask.view(), &clamped, false, "clamped");
    let gaussian = engine()
        .gaussian_filter(&image, 3.0, 4.0, &Conv2dOptions::default())
        .unwrap();
    let reference =
        conv_host::reference::gaussian_filter(&image, 3.0, 4.0, &Conv2dOptions::default()).unwrap();
    let magnitude = conv_host::reference::gaussian_filter(
        &image.mapv(f32::abs),
        3.0,
        4.0,
        &Conv2dOptions::default(),
    )
    .unwrap();
    assert_close(
        gaussian.view(),
        reference.view(),
        magnitude.view(),
        "gaussian",
    );
    // A mask that is not rank 1: Auto does not factor it, and naming Separable is an error
    // that leaves the engine usable.
    let mut nearly = random_separable_mask(&mut rng, (5, 5));
    nearly[[2, 3]] += 1e-3;
    let auto = engine()
        .plan2d(&nearly, (64, 64, 1), &Conv2dOptions::default())
        .unwrap();
    assert_ne!(auto.kernel, Kernel::Separable);
    let named = Conv2dOptions {
        kernel: Kernel::Separable,
        ..Default::default()
    };
    assert!(matches!(
        engine().correlate2d(&image, &nearly, &named),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert!(matches!(
        engine().correlate2d(
            &image,
            &mask,
            &Conv2dOptions {
                tile: Some((32, 8)),
                ..named
            }
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
        let options = Conv2dOptions {
            mode,
            ..Default::default()
        };
        let expected = conv_host::reference::gaussian_filter(&image, sigma, 4.0, &options).unwrap();
        let got = engine()
            .gaussian_filter(&image, sigma, 4.0, &options)
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
        engine().gaussian_filter(&image, -1.0, 4.0, &Conv2dOptions::default()),
        Err(ConvError::InvalidParameter { .. })
    ));
}
