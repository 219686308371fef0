//! 2D GPU tests of the designs staged by Hopper's tensor copies (`separable-tma`,
//! `register-tiled-tma`) on every mask size and channel count against the f64 CPU reference,
//! with `Auto`'s choice of them and the typed errors where they do not apply (on a GPU without
//! tensor copies, everywhere). They need a CUDA GPU and are ignored by a plain `cargo test`;
//! `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::image_design;
use common::images::{SEPARABLE_IMAGES, random_array3, random_mask, random_separable_mask};
use common::tensor_copy::{check_tensor_copies, has_tensor_copies};
use common::{gpu2d, rng, zero_border};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, Kernel};
use ndarray::{Array2, Axis};

/// On a GPU without tensor copies: whether naming the design `named` for `mask` over `image`
/// is a typed error after which the engine still works (it must be); `false` where the GPU
/// has them.
fn refused_without_tensor_copies(
    (image, mask): (&Array2<f32>, &Array2<f32>),
    named: &NdOptions,
) -> bool {
    if has_tensor_copies() {
        return false;
    }
    assert!(matches!(
        gpu2d(image.view(), mask.view(), named, false),
        Err(ConvError::InvalidLaunch { .. })
    ));
    common::assert_engine_works();
    eprintln!(
        "{}: not on this device; naming it is a typed error",
        named.kernel
    );
    true
}

/// The refusals every tensor-copy design shares, named by `named` on `mask` over `image` (the
/// Reflect and Constant(1.0) borders, an off-centre row anchor, a tile), and the design's own
/// (`others`): each a typed `InvalidLaunch`; and `Auto`, for the borders and anchor they do not
/// serve, takes the thread-staged design `fallback` instead.
fn check_refusals(
    (image, mask): (&Array2<f32>, &Array2<f32>),
    named: NdOptions,
    others: Vec<Result<Array2<f32>, ConvError>>,
    fallback: Kernel,
) {
    let shared = [
        NdOptions {
            mode: BoundaryMode::Reflect.into(),
            ..named.clone()
        },
        NdOptions {
            mode: BoundaryMode::Constant(1.0).into(),
            ..named.clone()
        },
        NdOptions {
            origin: [0, 1].into(),
            ..named.clone()
        },
        NdOptions {
            tile: Some((32, 8)),
            ..named.clone()
        },
    ]
    .map(|options| gpu2d(image.view(), mask.view(), &options, false));
    for (case, result) in shared.into_iter().chain(others).enumerate() {
        assert!(
            matches!(result, Err(ConvError::InvalidLaunch { .. })),
            "{} case {case}: {result:?}",
            named.kernel
        );
    }
    for options in [
        NdOptions {
            mode: BoundaryMode::Reflect.into(),
            ..zero_border()
        },
        NdOptions {
            origin: [0, 1].into(),
            ..zero_border()
        },
    ] {
        let plan = image_design(mask, (4096, 4096, 1), &options).unwrap();
        assert_eq!(plan.kernel, fallback, "{options:?}");
    }
}

/// The tensor-copy kernels on every mask size, against the reference, on images narrower and
/// wider than a strip, shorter and taller than a block, smaller than the mask; `Auto`'s choice
/// of them; and the typed errors where they do not apply (on a GPU without tensor copies,
/// everywhere), after which the engine still works.
#[test]
#[ignore = "needs a CUDA GPU"]
fn tensor_copy_kernels_match_the_reference() {
    let (mut rng, seed) = rng("tensor copies");
    let named = NdOptions {
        kernel: Kernel::SeparableTma,
        ..zero_border()
    };
    let mask = random_separable_mask(&mut rng, (31, 31));
    let image = random_array3(&mut rng, (300, 257, 1)).index_axis_move(Axis(2), 0);
    if refused_without_tensor_copies((&image, &mask), &named) {
        return;
    }
    let mut runs = 0;
    let images = SEPARABLE_IMAGES.iter().chain(&[(1500, 700)]);
    for m in (3..=31).step_by(2) {
        let mask = random_separable_mask(&mut rng, (m, m));
        // Auto: tensor copies for every size up to 4096^2, from 11 x 11 on beyond.
        for (side, copies) in [(4096, true), (4097, m >= 11)] {
            let auto = image_design(&mask, (side, side, 1), &zero_border()).unwrap();
            let expected = if copies {
                Kernel::SeparableTma
            } else {
                Kernel::Separable
            };
            assert_eq!(
                auto.kernel, expected,
                "Auto, rank-1 {m} x {m} mask, {side}^2"
            );
        }
        for &image in images.clone() {
            check_tensor_copies(&mut rng, &mask, (Kernel::SeparableTma, 1), image);
            runs += 1;
        }
    }
    // Several strips and block rows of many steps each.
    for m in [9, 31] {
        let mask = random_separable_mask(&mut rng, (m, m));
        check_tensor_copies(&mut rng, &mask, (Kernel::SeparableTma, 1), (2304, 2048));
        runs += 1;
    }
    // Where they do not apply: other borders, off-centre rows, channels, shapes, general
    // masks, tiles. Each a typed error, and Auto then takes the thread-staged kernel.
    let rgb = random_array3(&mut rng, (40, 50, 3));
    let mut general = mask.clone();
    general[[2, 3]] += 1e-3;
    let rectangular = random_separable_mask(&mut rng, (5, 7));
    let channels = gpu2d(rgb.view(), mask.view(), &named, false);
    let others = vec![
        gpu2d(image.view(), rectangular.view(), &named, false),
        gpu2d(image.view(), general.view(), &named, false),
        channels.map(|a| a.index_axis_move(Axis(2), 0)),
    ];
    check_refusals((&image, &mask), named, others, Kernel::Separable);
    common::assert_engine_works();
    eprintln!("tensor copies: {runs} runs matched the reference (seed {seed})");
}

/// The streaming kernels staged by tensor copies on every mask size and channel count, against
/// the reference, on images narrower and wider than a strip, shorter and taller than a block,
/// smaller than the mask; `Auto`'s choice of them; and the typed errors where they do not
/// apply (on a GPU without tensor copies, everywhere), after which the engine still works.
#[test]
#[ignore = "needs a CUDA GPU"]
fn streaming_tensor_copy_kernels_match_the_reference() {
    let (mut rng, seed) = rng("streaming tensor copies");
    let named = NdOptions {
        kernel: Kernel::RegisterTiledTma,
        ..zero_border()
    };
    let mask = random_mask(&mut rng, (9, 9));
    let image = random_array3(&mut rng, (300, 257, 1)).index_axis_move(Axis(2), 0);
    if refused_without_tensor_copies((&image, &mask), &named) {
        return;
    }
    let mut runs = 0;
    for m in [3, 5, 7, 9] {
        for channels in [1, 3, 4] {
            let mask = random_mask(&mut rng, (m, m));
            // Auto: tensor copies from 7 x 7 on, and for 5 x 5 over several channels or on
            // images smaller than 1024^2 pixels.
            for side in [1023, 1024, 8192] {
                let auto = image_design(&mask, (side, side, channels), &zero_border()).unwrap();
                let copies = m >= 7 || (m == 5 && (channels > 1 || side < 1024));
                let expected = if copies {
                    Kernel::RegisterTiledTma
                } else {
                    Kernel::RegisterTiled
                };
                assert_eq!(
                    auto.kernel, expected,
                    "Auto, {m} x {m}, {side}^2 x {channels}"
                );
            }
            let tall = (1500, 700 / channels);
            for &image in SEPARABLE_IMAGES.iter().chain([&tall]) {
                check_tensor_copies(&mut rng, &mask, (Kernel::RegisterTiledTma, channels), image);
                runs += 1;
            }
        }
    }
    // Several strips and block rows of many steps each.
    for (m, channels, image) in [(9, 1, (2304, 2048)), (5, 3, (1100, 1000))] {
        let mask = random_mask(&mut rng, (m, m));
        check_tensor_copies(&mut rng, &mask, (Kernel::RegisterTiledTma, channels), image);
        runs += 1;
    }
    // Where they do not apply: other borders, off-centre rows, tiles, other shapes, 2
    // channels. Each a typed error, and Auto then takes the thread-staged kernel.
    let mut others: Vec<_> = [(11, 11), (5, 7)]
        .iter()
        .map(|&shape| {
            gpu2d(
                image.view(),
                random_mask(&mut rng, shape).view(),
                &named,
                false,
            )
        })
        .collect();
    let two = random_array3(&mut rng, (40, 50, 2));
    let two_channels = gpu2d(two.view(), mask.view(), &named, false);
    others.push(two_channels.map(|a| a.index_axis_move(Axis(2), 0)));
    check_refusals((&image, &mask), named, others, Kernel::RegisterTiled);
    common::assert_engine_works();
    eprintln!("streaming tensor copies: {runs} runs matched the reference (seed {seed})");
}
