//! 2D GPU tests of the four textbook designs (`basic`, `constant-mask`, `tiled`, `tiled-l2`):
//! known answers in every mode and tile, random images, masks, channels and memory layouts
//! against the f64 CPU reference, masks beyond constant memory, clamps, output views and typed
//! errors. They need a CUDA GPU and are ignored by a plain `cargo test`; `scripts/gpu-check`
//! runs them with `--include-ignored`.

mod common;

use common::image_design;
use common::images::{random_array3, random_mask};
use common::{
    all_modes, engine, expected2d, gpu2d, image_mask, image_options, random_origin, rng,
    zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Clamp, ConvError, Kernel, MASK_CAPACITY, reference};
use ndarray::{Array2, Array3, ArrayView, ArrayView2, Axis, Dimension, Ix3, array, s};
use rand::Rng;
use rand::rngs::StdRng;

const TILES: [(u32, u32); 5] = [(8, 8), (16, 16), (32, 8), (32, 32), (7, 5)];

/// Interleaved channels the designs take: an `H x W x C` image of more runs on the 3D kernel,
/// which takes `Kernel::Auto` and no tile (naming a design or a tile is `InvalidDesign`).
const MAX_DESIGN_CHANNELS: usize = 4;

/// Runs one configuration on every kernel and tile and compares with the reference. Past
/// [`MAX_DESIGN_CHANNELS`], each kernel and tile must be refused, and the image is checked
/// once on the 3D kernel (`Auto`).
fn check<D: Dimension>(
    image: ArrayView<f32, D>,
    mask: ArrayView2<f32>,
    options: NdOptions,
    convolve: bool,
    tiles: &[(u32, u32)],
) -> usize {
    let expected = expected2d(image.view(), mask, &options, convolve);
    let designed = image.ndim() < 3 || image.len_of(Axis(2)) <= MAX_DESIGN_CHANNELS;
    let describe = |options: &NdOptions| {
        format!(
            "{} image {:?} strides {:?} mask {:?} convolve {convolve} {options:?}",
            options.kernel,
            image.shape(),
            image.strides(),
            mask.shape()
        )
    };
    let mut runs = 0;
    for &tile in tiles {
        for kernel in Kernel::TEXTBOOK {
            let options = NdOptions {
                kernel,
                tile: Some(tile),
                ..options.clone()
            };
            let what = describe(&options);
            let got = gpu2d(image.view(), mask, &options, convolve);
            if !designed {
                assert!(
                    matches!(got, Err(ConvError::InvalidDesign { .. })),
                    "{what}: past {MAX_DESIGN_CHANNELS} channels a named design must be refused, \
                     got {:?}",
                    got.map(|_| "an output")
                );
                continue;
            }
            let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
            expected.check(got.view(), &what);
            runs += 1;
        }
    }
    if !designed {
        let options = NdOptions {
            kernel: Kernel::Auto,
            tile: None,
            ..options
        };
        let what = describe(&options);
        let got =
            gpu2d(image.view(), mask, &options, convolve).unwrap_or_else(|e| panic!("{what}: {e}"));
        expected.check(got.view(), &what);
        runs += 1;
    }
    runs
}

/// Draws an image of `h x w x c` and checks it in one of several memory layouts: contiguous,
/// a strided sub-view of a larger array, reversed axes, and (one channel) a transposed view.
fn check_in_layout(
    rng: &mut StdRng,
    (h, w, c): (usize, usize, usize),
    mask: ArrayView2<f32>,
    options: NdOptions,
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
    options: NdOptions,
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
            let options = NdOptions {
                kernel,
                tile: Some(tile),
                ..zero_border()
            };
            assert_eq!(
                gpu2d(image.view(), w.view(), &options, false).unwrap(),
                expected,
                "{kernel} {tile:?}"
            );
            // Small integers are exact in f32: each mode must equal the reference exactly.
            for mode in all_modes() {
                let options = NdOptions {
                    mode: mode.into(),
                    ..options.clone()
                };
                let reference = reference::correlate(&image, &w, &options).unwrap();
                let got = gpu2d(image.view(), w.view(), &options, false).unwrap();
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
                    let options = NdOptions {
                        mode: mode.into(),
                        origin: origin.into(),
                        ..zero_border()
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
                let options = NdOptions {
                    mode: mode.into(),
                    ..zero_border()
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
            zero_border(),
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
    let plan = image_design(&mask, (37, 53, 3), &zero_border()).unwrap();
    assert!(!plan.mask_in_constant_memory);
    for mode in [BoundaryMode::Constant(0.25), BoundaryMode::Mirror] {
        let options = NdOptions {
            mode: mode.into(),
            ..zero_border()
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
        let options = NdOptions {
            kernel,
            clamp,
            mode: BoundaryMode::Wrap.into(),
            ..zero_border()
        };
        let expected = expected2d(image.view(), mask.view(), &options, false);
        // Into a channel-reversed, strided view of a larger array.
        let mut target = Array3::from_elem((19, 46, 4), f32::NAN);
        let slots = target.slice_mut(s![.., 1..;2, ..;-1]);
        let mask3 = image_mask::<Ix3>(mask.view(), 3);
        engine()
            .ndimage()
            .correlate_into(&image, &mask3, &image_options(&options, 3), slots)
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
    let ones = Array2::<f32>::ones((3, 3));
    let reference = gpu2d(small.view(), ones.view(), &zero_border(), false).unwrap();
    for (kernel, tile, mask_shape) in [
        (Kernel::Basic, (0, 8), (3, 3)),
        (Kernel::ConstantMask, (64, 32), (3, 3)),
        (Kernel::TiledL2, (2048, 1), (3, 3)),
        (Kernel::Tiled, (32, 32), (300, 300)),
    ] {
        let options = NdOptions {
            kernel,
            tile: Some(tile),
            ..zero_border()
        };
        let result = gpu2d(
            small.view(),
            Array2::<f32>::ones(mask_shape).view(),
            &options,
            false,
        );
        assert!(
            matches!(result, Err(ConvError::InvalidLaunch { .. })),
            "{kernel} {tile:?}: {result:?}"
        );
        assert_eq!(
            gpu2d(small.view(), ones.view(), &zero_border(), false).unwrap(),
            reference
        );
    }
    let mut wrong = Array2::<f32>::zeros((5, 4));
    let result = engine()
        .ndimage()
        .correlate_into(&small, &ones, &zero_border(), wrong.view_mut());
    assert!(matches!(result, Err(ConvError::ShapeMismatch { .. })));
}
