//! 2D GPU tests of the four textbook designs (`basic`, `constant-mask`, `tiled`, `tiled-l2`):
//! known answers in every mode and tile, random images, masks, channels and memory layouts
//! against the f64 CPU reference, masks beyond constant memory, clamps, output views and typed
//! errors. They need a CUDA GPU and are ignored by a plain `cargo test`; `scripts/gpu-check`
//! runs them with `--include-ignored`.

mod common;

use common::images::{random_array3, random_mask};
use common::{all_modes, engine, expected2d, gpu2d, random_origin, rng};
use conv_host::reference::correlate2d;
use conv_host::{BoundaryMode, Clamp, Conv2dOptions, ConvError, ImageDim, Kernel, MASK_CAPACITY};
use ndarray::{Array2, Array3, ArrayView, ArrayView2, Axis, array, s};
use rand::Rng;
use rand::rngs::StdRng;

const TILES: [(u32, u32); 5] = [(8, 8), (16, 16), (32, 8), (32, 32), (7, 5)];

/// Runs one configuration on every kernel and tile and compares with the reference.
fn check<D: ImageDim>(
    image: ArrayView<f32, D>,
    mask: ArrayView2<f32>,
    options: Conv2dOptions,
    convolve: bool,
    tiles: &[(u32, u32)],
) -> usize {
    let expected = expected2d(image.view(), mask, &options, convolve);
    let mut runs = 0;
    for &tile in tiles {
        for kernel in Kernel::TEXTBOOK {
            let options = Conv2dOptions {
                kernel,
                tile: Some(tile),
                ..options
            };
            let what = format!(
                "{kernel} image {:?} strides {:?} mask {:?} convolve {convolve} {options:?}",
                image.shape(),
                image.strides(),
                mask.shape()
            );
            let got = gpu2d(image.view(), mask, &options, convolve)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            expected.check(got.view(), &what);
            runs += 1;
        }
    }
    runs
}

/// Draws an image of `h x w x c` and checks it in one of several memory layouts: contiguous,
/// a strided sub-view of a larger array, reversed axes, and (one channel) a transposed view.
fn check_in_layout(
    rng: &mut StdRng,
    (h, w, c): (usize, usize, usize),
    mask: ArrayView2<f32>,
    options: Conv2dOptions,
    convolve: bool,
    tiles: &[(u32, u32)],
) -> usize {
    match rng.random_range(0..4) {
        0 => {
            let image = random_array3(rng, (h, w, c));
            check_channels(image.view(), mask, options, convolve, tiles)
        }
        1 => {
            let big = random_array3(rng, (2 * h, 2 * w + 1, c));
            check_channels(
                big.slice(s![..;2, 1..;2, ..]),
                mask,
                options,
                convolve,
                tiles,
            )
        }
        2 => {
            let image = random_array3(rng, (h, w, c));
            check_channels(
                image.slice(s![..;-1, ..;-1, ..]),
                mask,
                options,
                convolve,
                tiles,
            )
        }
        _ => {
            let transposed = random_array3(rng, (w, h, c));
            let image = transposed.view().permuted_axes([1, 0, 2]);
            check_channels(image, mask, options, convolve, tiles)
        }
    }
}

/// One channel goes through the `H x W` API, several through the interleaved `H x W x C` one.
fn check_channels(
    image: ArrayView<f32, ndarray::Ix3>,
    mask: ArrayView2<f32>,
    options: Conv2dOptions,
    convolve: bool,
    tiles: &[(u32, u32)],
) -> usize {
    if image.len_of(Axis(2)) == 1 {
        check(image.index_axis(Axis(2), 0), mask, options, convolve, tiles)
    } else {
        check(image, mask, options, convolve, tiles)
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn known_answers_on_every_kernel_and_tile() {
    let image = Array2::from_shape_fn((3, 4), |(y, x)| (y * 4 + x + 1) as f32);
    let w = array![[1.0f32, 2.0, 0.0], [0.0, 1.0, -1.0]];
    let expected = array![
        [-1.0f32, -1., -1., 4.],
        [1., 4., 7., 19.],
        [9., 16., 19., 35.]
    ];
    for kernel in Kernel::TEXTBOOK {
        for tile in TILES.into_iter().chain([(1, 1), (2, 3)]) {
            let options = Conv2dOptions {
                kernel,
                tile: Some(tile),
                ..Default::default()
            };
            assert_eq!(
                engine().correlate2d(&image, &w, &options).unwrap(),
                expected,
                "{kernel} {tile:?}"
            );
            // Small integers are exact in f32: each mode must equal the reference exactly.
            for mode in all_modes() {
                let options = Conv2dOptions { mode, ..options };
                let reference = correlate2d(&image, &w, &options).unwrap();
                let got = engine().correlate2d(&image, &w, &options).unwrap();
                assert_eq!(got.mapv(f64::from), reference, "{kernel} {tile:?} {mode:?}");
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn randomized_kernels_modes_channels_tiles_images_masks() {
    let (mut rng, seed) = rng("conv2d matrix");
    let mut runs = 0;
    for (h, w) in [(1, 1), (1, 61), (67, 1), (37, 53)] {
        let masks = [
            (1, 1),
            (3, 3),
            (5, 5),
            (4, 6),
            (1, 9),
            (9, 1),
            (31, 31),
            (h + 2, w + 2),
        ];
        for mask_shape in masks {
            for channels in [1, 3, 4, 5] {
                for mode in all_modes() {
                    let convolve = rng.random_bool(0.5);
                    let origin = [
                        random_origin(&mut rng, mask_shape.0, convolve),
                        random_origin(&mut rng, mask_shape.1, convolve),
                    ];
                    let options = Conv2dOptions {
                        mode,
                        origin,
                        ..Default::default()
                    };
                    let mask = random_mask(&mut rng, mask_shape);
                    runs += check_in_layout(
                        &mut rng,
                        (h, w, channels),
                        mask.view(),
                        options,
                        convolve,
                        &TILES,
                    );
                }
            }
        }
    }
    // A large image: 4097 x 2049, one and three channels.
    for channels in [1, 3] {
        for mask_shape in [(3, 3), (5, 5)] {
            for mode in [BoundaryMode::Constant(0.0), BoundaryMode::Reflect] {
                let mask = random_mask(&mut rng, mask_shape);
                let options = Conv2dOptions {
                    mode,
                    ..Default::default()
                };
                let tiles = [(32, 8), (16, 16), (7, 5)];
                runs += check_in_layout(
                    &mut rng,
                    (4097, 2049, channels),
                    mask.view(),
                    options,
                    false,
                    &tiles,
                );
            }
        }
    }
    eprintln!("conv2d matrix: {runs} kernel runs matched the reference (seed {seed})");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn course_report_5x5_setting() {
    // The course report: 5 x 5 mask, square matrices 512 to 2048, blocks of 8, 16 and 32.
    let (mut rng, _) = rng("5x5");
    let mask = random_mask(&mut rng, (5, 5));
    for size in [512, 1024, 2048] {
        let image = random_array3(&mut rng, (size, size, 1));
        let image = image.index_axis(Axis(2), 0);
        check(
            image,
            mask.view(),
            Conv2dOptions::default(),
            false,
            &[(8, 8), (16, 16), (32, 32)],
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn masks_beyond_constant_memory_use_global_memory_kernels() {
    let (mut rng, _) = rng("long masks");
    let shape = (65, 65);
    assert!(shape.0 * shape.1 > MASK_CAPACITY);
    let mask = random_mask(&mut rng, shape);
    let plan = engine()
        .plan2d(&mask, (37, 53, 3), &Conv2dOptions::default())
        .unwrap();
    assert!(!plan.mask_in_constant_memory);
    for mode in [BoundaryMode::Constant(0.25), BoundaryMode::Mirror] {
        let options = Conv2dOptions {
            mode,
            ..Default::default()
        };
        check_in_layout(
            &mut rng,
            (37, 53, 3),
            mask.view(),
            options,
            true,
            &[(16, 16), (32, 8)],
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn clamp_into_views_and_errors() {
    let (mut rng, _) = rng("2d misc");
    let image = random_array3(&mut rng, (19, 23, 4));
    let mask = random_mask(&mut rng, (3, 5));
    let clamp = Some(Clamp { lo: -0.5, hi: 0.5 });
    for kernel in Kernel::TEXTBOOK {
        let options = Conv2dOptions {
            kernel,
            clamp,
            mode: BoundaryMode::Wrap,
            ..Default::default()
        };
        let expected = expected2d(image.view(), mask.view(), &options, false);
        // Into a channel-reversed, strided view of a larger array.
        let mut target = Array3::from_elem((19, 46, 4), f32::NAN);
        let slots = target.slice_mut(s![.., 1..;2, ..;-1]);
        engine()
            .correlate2d_into(&image, &mask, &options, slots)
            .unwrap();
        let got = target.slice(s![.., 1..;2, ..;-1]);
        expected.check(got, "into a strided view");
        assert!(
            target.slice(s![.., ..;2, ..]).iter().all(|v| v.is_nan()),
            "wrote outside the view"
        );
        assert!(got.iter().all(|&v| (-0.5..=0.5).contains(&v)));
    }
    // Typed errors, and the engine keeps working.
    let small = Array2::from_shape_fn((5, 5), |(y, x)| (y + x) as f32);
    let ones = Array2::ones((3, 3));
    let reference = engine()
        .correlate2d(&small, &ones, &Default::default())
        .unwrap();
    for (kernel, tile, mask_shape) in [
        (Kernel::Basic, (0, 8), (3, 3)),
        (Kernel::ConstantMask, (64, 32), (3, 3)),
        (Kernel::TiledL2, (2048, 1), (3, 3)),
        (Kernel::Tiled, (32, 32), (300, 300)),
    ] {
        let options = Conv2dOptions {
            kernel,
            tile: Some(tile),
            ..Default::default()
        };
        let result = engine().correlate2d(&small, &Array2::ones(mask_shape), &options);
        assert!(
            matches!(result, Err(ConvError::InvalidLaunch { .. })),
            "{kernel} {tile:?}: {result:?}"
        );
        assert_eq!(
            engine()
                .correlate2d(&small, &ones, &Default::default())
                .unwrap(),
            reference
        );
    }
    let mut wrong = Array2::<f32>::zeros((5, 4));
    let result = engine().correlate2d_into(&small, &ones, &Default::default(), wrong.view_mut());
    assert!(matches!(result, Err(ConvError::ShapeMismatch { .. })));
}
