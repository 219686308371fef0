//! 2D GPU tests of the register-tiled design (`register-tiled`: the streaming kernels and the
//! wide ones, every channel count) against the f64 CPU reference, with `Auto`'s choice of it
//! and the typed errors where no register-tiled kernel applies; the small cases also run
//! `register-tiled-tma` where the GPU has tensor copies. They need a CUDA GPU and are ignored by
//! a plain `cargo test`; `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::image_design;
use common::images::{random_array3, random_mask};
use common::tensor_copy::{check_tensor_copies, has_tensor_copies};
use common::{all_modes, check_gpu2d, engine, gpu1d, gpu2d, random_origin, rng, zero_border};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Clamp, ConvError, Kernel};
use rand::Rng;

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
                let options = NdOptions {
                    mode: all_modes()[rng.random_range(0..6)].into(),
                    kernel: Kernel::RegisterTiled,
                    ..zero_border()
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
            let plan = image_design(
                &random_mask(&mut rng, (rows, cols)),
                (4096, 4096, channels),
                &zero_border(),
            )
            .unwrap();
            // On Hopper, the streaming sizes from 7 x 7 on and 5 x 5 over several channels
            // run staged by tensor copies (`register-tiled-tma`: `conv2d_tensor_copy_gpu`'s
            // `streaming_tensor_copy_kernels_match_the_reference`).
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
                let options = NdOptions {
                    mode: mode.into(),
                    origin: origin.into(),
                    kernel: Kernel::RegisterTiled,
                    ..zero_border()
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
        let options = NdOptions {
            mode: mode.into(),
            kernel: Kernel::RegisterTiled,
            ..zero_border()
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
    let clamped = NdOptions {
        clamp: Some(Clamp { lo: -0.1, hi: 0.2 }),
        kernel: Kernel::RegisterTiled,
        ..zero_border()
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
    let odd = NdOptions {
        kernel: Kernel::RegisterTiled,
        ..zero_border()
    };
    for shape in [(16, 16), (31, 30), (9, 33), (140, 31)] {
        let mask = random_mask(&mut rng, shape);
        assert!(matches!(
            image_design(&mask, (64, 64, 1), &odd),
            Err(ConvError::InvalidLaunch { .. })
        ));
        let auto = image_design(&mask, (64, 64, 1), &zero_border());
        assert_eq!(
            auto.unwrap().kernel,
            Kernel::Tiled,
            "Auto for a general {shape:?} mask"
        );
    }
    let image = random_array3(&mut rng, (20, 20, 2));
    assert!(matches!(
        gpu2d(
            image.view(),
            random_mask(&mut rng, (5, 5)).view(),
            &odd,
            false
        ),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert!(matches!(
        gpu2d(
            image.view(),
            random_mask(&mut rng, (4, 6)).view(),
            &odd,
            false
        ),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert_ne!(
        image_design(&random_mask(&mut rng, (4, 6)), (64, 64, 1), &zero_border())
            .unwrap()
            .kernel,
        Kernel::RegisterTiled
    );
    // A 1D signal with a mask length no specialised 1D kernel was compiled for runs on the
    // any-length one, which takes 256 threads a block and no other tile.
    let signal = ndarray::Array1::<f32>::ones(10);
    let ones = gpu1d(signal.view(), signal.view(), &odd, false).unwrap();
    assert_eq!(
        ones,
        ndarray::array![5., 6., 7., 8., 9., 10., 9., 8., 7., 6.]
    );
    let odd_tile = NdOptions {
        tile: Some((128, 1)),
        ..odd.clone()
    };
    assert!(matches!(
        gpu1d(signal.view(), signal.view(), &odd_tile, false),
        Err(ConvError::InvalidLaunch { .. })
    ));
    // The 3 x 3 and 5 x 5 streaming kernels walk steps of 16 rows on GPUs whose memory is fast
    // for their SMs (an H200), of 32 elsewhere (an H100): each device tests its own set, and
    // the project's GPU checks run on both.
    let forced = NdOptions {
        kernel: Kernel::RegisterTiled,
        ..zero_border()
    };
    let streaming = image_design(&random_mask(&mut rng, (5, 5)), (64, 64, 1), &forced)
        .unwrap()
        .entry;
    let device = engine().device();
    eprintln!(
        "register-tiled: {runs} runs matched the reference (seed {seed}; 5 x 5 streaming kernel \
         {streaming} on a device of {:.2e} bytes/s peak memory bandwidth)",
        device.peak_memory_bandwidth()
    );
}
