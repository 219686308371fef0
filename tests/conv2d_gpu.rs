//! 2D GPU tests: every kernel against the f64 CPU reference. They need a CUDA GPU and are
//! ignored by a plain `cargo test`; `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::{all_modes, assert_close, check_gpu2d, engine, expected2d, gpu2d, random_origin, rng};
use conv_host::reference::correlate2d;
use conv_host::{BoundaryMode, Clamp, Conv2dOptions, ConvError, ImageDim, Kernel, MASK_CAPACITY};
use ndarray::{Array2, Array3, ArrayView, ArrayView2, Axis, array, s};
use rand::Rng;
use rand::rngs::StdRng;

const TILES: [(u32, u32); 5] = [(8, 8), (16, 16), (32, 8), (32, 32), (7, 5)];

fn random_array3(rng: &mut StdRng, shape: (usize, usize, usize)) -> Array3<f32> {
    Array3::from_shape_simple_fn(shape, || rng.random_range(-1.0f32..1.0))
}

fn random_mask(rng: &mut StdRng, shape: (usize, usize)) -> Array2<f32> {
    Array2::from_shape_simple_fn(shape, || rng.random_range(-1.0f32..1.0))
}

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
        for kernel in Kernel::ALL {
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
    for kernel in Kernel::ALL {
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
    for kernel in Kernel::ALL {
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
    let mut wrong = Array2::zeros((5, 4));
    let result = engine().correlate2d_into(&small, &ones, &Default::default(), wrong.view_mut());
    assert!(matches!(result, Err(ConvError::ShapeMismatch { .. })));
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

/// Small images through every register-tiled family (the streaming design, the wide design at
/// one and several blocks per row, every channel count): the case list the sanitizers run.
#[test]
#[ignore = "needs a CUDA GPU"]
fn small_register_tiled_cases() {
    let (mut rng, seed) = rng("small-register-tiled");
    let mut runs = 0;
    for shape in [
        (3, 3),
        (5, 5),
        (7, 7),
        (9, 9),
        (5, 11),
        (15, 15),
        (31, 31),
        (7, 1),
    ] {
        for channels in [1, 3, 4] {
            // 70 x 260: several block rows, strips at both sides.
            for (h, w) in [(1, 1), (37, 53), (20, 90), (70, 260)] {
                let options = Conv2dOptions {
                    mode: all_modes()[rng.random_range(0..6)],
                    kernel: Kernel::RegisterTiled,
                    ..Default::default()
                };
                let mask = random_mask(&mut rng, shape);
                let image = random_array3(&mut rng, (h, w, channels));
                let what = format!("small register {shape:?} c{channels} {h}x{w} {options:?}");
                check_gpu2d(image.view(), mask.view(), &options, false, &what);
                runs += 1;
            }
        }
    }
    if has_tensor_copies() {
        for m in [3, 5, 7, 9] {
            for channels in [1, 3, 4] {
                let mask = random_mask(&mut rng, (m, m));
                for image in [(1, 1), (37, 53), (20, 300)] {
                    let design = (Kernel::RegisterTiledTma, channels);
                    check_tensor_copies(&mut rng, &mask, design, image);
                    runs += 1;
                }
            }
        }
    }
    eprintln!("small register-tiled: {runs} runs matched the reference (seed {seed})");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn register_tiled_kernels_match_the_reference() {
    let (mut rng, seed) = rng("register-tiled");
    let mut runs = 0;
    // The streaming design's square sizes, then the wide design's widths (9 wide but not
    // square, 15, 31) at heights from one row to more than the width; a 31 x 31 mask is wider
    // than the small images.
    let masks = [
        (3, 3),
        (5, 5),
        (7, 7),
        (9, 9),
        (6, 9),
        (31, 1),
        (11, 11),
        (1, 15),
        (21, 13),
        (15, 15),
        (17, 17),
        (25, 25),
        (31, 31),
        (45, 31),
    ];
    for (rows, cols) in masks {
        for channels in [1, 3, 4] {
            let plan = engine()
                .plan2d(
                    &random_mask(&mut rng, (rows, cols)),
                    (4096, 4096, channels),
                    &Conv2dOptions::default(),
                )
                .unwrap();
            // On Hopper, the streaming sizes from 7 x 7 on and 5 x 5 over several channels
            // run staged by tensor copies (`streaming_tensor_copy_kernels_match_the_reference`).
            let copies = has_tensor_copies()
                && rows == cols
                && ((7..=9).contains(&rows) || rows == 5 && channels > 1);
            let expected = if copies {
                Kernel::RegisterTiledTma
            } else {
                Kernel::RegisterTiled
            };
            assert_eq!(
                plan.kernel, expected,
                "Auto's design for a general {rows}x{cols} mask on a 4096^2 image"
            );
            // Tall and wide images give blocks and steps inside the image next to those at the
            // borders; widths around multiples of 128, 256 and 512 elements move the border
            // across warps and blocks (1031 elements leave a last strip of 7, 3093 one of 21).
            for (h, w) in [
                (1, 1),
                (67, 1),
                (37, 53),
                (130, 70),
                (300, 257),
                (290, 515),
                (45, 1031),
            ] {
                let mode = all_modes()[rng.random_range(0..6)];
                let convolve = rng.random_bool(0.5);
                let origin = [
                    random_origin(&mut rng, rows, convolve),
                    random_origin(&mut rng, cols, convolve),
                ];
                let options = Conv2dOptions {
                    mode,
                    origin,
                    kernel: Kernel::RegisterTiled,
                    ..Default::default()
                };
                let mask = random_mask(&mut rng, (rows, cols));
                let image = random_array3(&mut rng, (h, w, channels));
                let what = format!(
                    "register {rows}x{cols} c{channels} {h}x{w} {options:?} convolve {convolve}"
                );
                check_gpu2d(image.view(), mask.view(), &options, convolve, &what);
                runs += 1;
            }
        }
    }
    // Images large enough for full blocks (small ones get fewer rows of threads) of several
    // steps each, which wrap their rings.
    for (mode, mask_shape) in [
        (BoundaryMode::Nearest, (3, 3)),
        (BoundaryMode::Constant(0.5), (5, 5)),
        (BoundaryMode::Reflect, (5, 5)),
        (BoundaryMode::Mirror, (5, 5)),
        (BoundaryMode::Nearest, (7, 7)),
        (BoundaryMode::Mirror, (9, 9)),
        (BoundaryMode::Wrap, (15, 15)),
    ] {
        let options = Conv2dOptions {
            mode,
            kernel: Kernel::RegisterTiled,
            ..Default::default()
        };
        let (mask, image) = (
            random_mask(&mut rng, mask_shape),
            random_array3(&mut rng, (2050, 4100, 1)),
        );
        let what = format!("register {mask_shape:?} 2050x4100");
        check_gpu2d(image.view(), mask.view(), &options, false, &what);
        runs += 1;
    }
    // Clamped outputs, in both designs.
    let clamped = Conv2dOptions {
        clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
        kernel: Kernel::RegisterTiled,
        ..Default::default()
    };
    for shape in [(5, 5), (9, 9)] {
        let (mask, image) = (
            random_mask(&mut rng, shape),
            random_array3(&mut rng, (300, 257, 1)),
        );
        let what = format!("register {shape:?} clamped");
        check_gpu2d(image.view(), mask.view(), &clamped, false, &what);
        runs += 1;
    }
    // Where no register-tiled kernel was compiled, or the mask outgrows constant memory: a typed
    // error, and Auto picks another design.
    let odd = Conv2dOptions {
        kernel: Kernel::RegisterTiled,
        ..Default::default()
    };
    for shape in [(16, 16), (31, 30), (9, 33), (140, 31)] {
        let mask = random_mask(&mut rng, shape);
        assert!(matches!(
            engine().plan2d(&mask, (64, 64, 1), &odd),
            Err(ConvError::InvalidLaunch { .. })
        ));
        let auto = engine().plan2d(&mask, (64, 64, 1), &Conv2dOptions::default());
        assert_eq!(
            auto.unwrap().kernel,
            Kernel::Tiled,
            "Auto for a general {shape:?} mask"
        );
    }
    let image = random_array3(&mut rng, (20, 20, 2));
    assert!(matches!(
        engine().correlate2d(&image, &random_mask(&mut rng, (5, 5)), &odd),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert!(matches!(
        engine().correlate2d(&image, &random_mask(&mut rng, (4, 6)), &odd),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert_ne!(
        engine()
            .plan2d(
                &random_mask(&mut rng, (4, 6)),
                (64, 64, 1),
                &Conv2dOptions::default(),
            )
            .unwrap()
            .kernel,
        Kernel::RegisterTiled
    );
    let one_d = conv_host::Conv1dOptions {
        kernel: Kernel::RegisterTiled,
        ..Default::default()
    };
    let signal = ndarray::Array1::<f32>::ones(10);
    assert!(matches!(
        engine().correlate1d(&signal, &signal, &one_d),
        Err(ConvError::InvalidLaunch { .. })
    ));
    // The 3 x 3 and 5 x 5 streaming kernels walk steps of 16 rows on GPUs whose memory is fast
    // for their SMs (an H200), of 32 elsewhere (an H100): each device tests its own set, and
    // the project's GPU checks run on both.
    let forced = Conv2dOptions {
        kernel: Kernel::RegisterTiled,
        ..Default::default()
    };
    let streaming = engine()
        .plan2d(&random_mask(&mut rng, (5, 5)), (64, 64, 1), &forced)
        .unwrap()
        .entry_point;
    let device = engine().device();
    eprintln!(
        "register-tiled: {runs} runs matched the reference (seed {seed}; 5 x 5 streaming kernel \
         {streaming} on a device of {:.2e} bytes/s peak memory bandwidth)",
        device.peak_memory_bandwidth()
    );
}

/// A random rank-1 mask, `column[i] * row[j]`, rounded to `f32` as users build them.
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
                engine()
                    .plan2d(&mask, (side, side, channels), &Conv2dOptions::default())
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
                let options = Conv2dOptions {
                    mode,
                    ..Default::default()
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
            let large = engine()
                .plan2d(&mask, (4096, 4096, channels), &Conv2dOptions::default())
                .unwrap();
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
            let small = engine()
                .plan2d(&mask, (height, 64, channels), &Conv2dOptions::default())
                .unwrap();
            assert_eq!(
                small.kernel,
                Kernel::Tiled,
                "{rows}x{cols}x{channels} on {height}x64"
            );
            let image = random_array3(&mut rng, (height, 64, channels));
            for mode in all_modes() {
                let convolve = rng.random_bool(0.5);
                let options = Conv2dOptions {
                    mode,
                    origin: [
                        random_origin(&mut rng, rows, convolve),
                        random_origin(&mut rng, cols, convolve),
                    ],
                    ..Default::default()
                };
                let what = format!(
                    "Auto, {rows}x{cols} mask, {height}x64x{channels}, {options:?}, seed {seed}"
                );
                check_gpu2d(image.view(), mask.view(), &options, convolve, &what);
            }
        }
    }
}

/// Images for the separable kernels: narrower and wider than one strip (128 elements for the
/// general kernel, 256 for the wide ones), shorter and taller than one block, smaller than
/// the masks.
const SEPARABLE_IMAGES: [(usize, usize); 6] =
    [(1, 1), (67, 1), (37, 53), (300, 257), (600, 41), (5, 700)];

fn random_separable_mask(rng: &mut StdRng, (rows, cols): (usize, usize)) -> Array2<f32> {
    let column: Vec<f32> = (0..rows).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let row: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    Array2::from_shape_fn((rows, cols), |(i, j)| column[i] * row[j])
}

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

/// Whether the device has Hopper's tensor copies (`Kernel::SeparableTma`).
fn has_tensor_copies() -> bool {
    engine().device().compute_capability.0 >= 9
}

/// One tensor-copy configuration of `kernel` (zero border, mask centred along the rows, a
/// random anchor down the columns, correlation or convolution, contiguous or strided, clamped
/// or not) over `channels` channels against the reference.
fn check_tensor_copies(
    rng: &mut StdRng,
    mask: &Array2<f32>,
    (kernel, channels): (Kernel, usize),
    (h, w): (usize, usize),
) {
    let convolve = rng.random_bool(0.5);
    let options = Conv2dOptions {
        origin: [random_origin(rng, mask.nrows(), convolve), 0],
        kernel,
        clamp: rng.random_bool(0.25).then_some(Clamp { lo: -0.1, hi: 0.2 }),
        ..Default::default()
    };
    let what = format!(
        "tensor copies {kernel} {:?} c{channels} {h}x{w} {options:?} convolve {convolve}",
        mask.dim()
    );
    let big = random_array3(rng, (2 * h, w + 3, channels));
    let image = if rng.random_bool(0.25) {
        big.slice(s![..;2, 3.., ..])
    } else {
        big.slice(s![..h, ..w, ..])
    };
    if channels == 1 {
        check_gpu2d(
            image.index_axis_move(Axis(2), 0),
            mask.view(),
            &options,
            convolve,
            &what,
        );
    } else {
        check_gpu2d(image, mask.view(), &options, convolve, &what);
    }
}

/// On a GPU without tensor copies: whether naming the design `named` for `mask` over `image`
/// is a typed error after which the engine still works (it must be); `false` where the GPU
/// has them.
fn refused_without_tensor_copies(
    (image, mask): (&Array2<f32>, &Array2<f32>),
    named: &Conv2dOptions,
) -> bool {
    if has_tensor_copies() {
        return false;
    }
    assert!(matches!(
        engine().correlate2d(image, mask, named),
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
    named: Conv2dOptions,
    others: Vec<Result<Array2<f32>, ConvError>>,
    fallback: Kernel,
) {
    let shared = [
        Conv2dOptions {
            mode: BoundaryMode::Reflect,
            ..named
        },
        Conv2dOptions {
            mode: BoundaryMode::Constant(1.0),
            ..named
        },
        Conv2dOptions {
            origin: [0, 1],
            ..named
        },
        Conv2dOptions {
            tile: Some((32, 8)),
            ..named
        },
    ]
    .map(|options| engine().correlate2d(image, mask, &options));
    for (case, result) in shared.into_iter().chain(others).enumerate() {
        assert!(
            matches!(result, Err(ConvError::InvalidLaunch { .. })),
            "{} case {case}: {result:?}",
            named.kernel
        );
    }
    for options in [
        Conv2dOptions {
            mode: BoundaryMode::Reflect,
            ..Default::default()
        },
        Conv2dOptions {
            origin: [0, 1],
            ..Default::default()
        },
    ] {
        let plan = engine().plan2d(mask, (4096, 4096, 1), &options).unwrap();
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
    let named = Conv2dOptions {
        kernel: Kernel::SeparableTma,
        ..Default::default()
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
            let auto = engine()
                .plan2d(&mask, (side, side, 1), &Conv2dOptions::default())
                .unwrap();
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
    let channels = engine().correlate2d(&rgb, &mask, &named);
    let others = vec![
        engine().correlate2d(&image, &rectangular, &named),
        engine().correlate2d(&image, &general, &named),
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
    let named = Conv2dOptions {
        kernel: Kernel::RegisterTiledTma,
        ..Default::default()
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
                let auto = engine()
                    .plan2d(&mask, (side, side, channels), &Conv2dOptions::default())
                    .unwrap();
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
        .map(|&shape| engine().correlate2d(&image, &random_mask(&mut rng, shape), &named))
        .collect();
    let two = random_array3(&mut rng, (40, 50, 2));
    let two_channels = engine().correlate2d(&two, &mask, &named);
    others.push(two_channels.map(|a| a.index_axis_move(Axis(2), 0)));
    check_refusals((&image, &mask), named, others, Kernel::RegisterTiled);
    common::assert_engine_works();
    eprintln!("streaming tensor copies: {runs} runs matched the reference (seed {seed})");
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
