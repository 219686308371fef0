//! 1D GPU tests: every kernel against the f64 CPU reference. They need a CUDA GPU and are
//! ignored by a plain `cargo test`; `scripts/gpu-check` runs them with `--include-ignored`.

mod common;

use common::zero_border;
use common::{
    all_modes, assert_engine_works, engine, expected1d, gpu1d, random_origin, random_vec, rng,
};
use conv_host::ndimage::{NdOptions, Runs};
use conv_host::reference::correlate1d;
use conv_host::{BoundaryMode, Clamp, ConvError, Kernel, LaunchPlan, MASK_CAPACITY};
use ndarray::{Array1, ArrayView1, ArrayViewMut1, array, s};
use rand::Rng;

const TILES: [u32; 5] = [1, 32, 33, 256, 1024];

/// The design a correlation of a signal of `len` elements with a mask of `mask_len` taps runs
/// on (a 1D design's choice depends on the lengths only).
fn plan1d(len: usize, mask_len: usize, options: &NdOptions) -> LaunchPlan {
    let mask = Array1::<f32>::ones(mask_len);
    match engine().ndimage().plan_correlate(&[len], &mask, options) {
        Ok(Runs::Design(plan)) => plan,
        other => panic!("a signal of {len} with {mask_len} taps runs on a design: {other:?}"),
    }
}

/// Runs one configuration on every kernel and compares with the reference.
fn check_all_kernels(
    x: ArrayView1<f32>,
    w: ArrayView1<f32>,
    options: NdOptions,
    convolve: bool,
) -> usize {
    let expected = expected1d(x, w, &options, convolve);
    for kernel in Kernel::TEXTBOOK {
        let options = NdOptions {
            kernel,
            ..options.clone()
        };
        let what = format!(
            "{kernel} len {} mask {} convolve {convolve} {options:?}",
            x.len(),
            w.len()
        );
        let got = gpu1d(x, w, &options, convolve).unwrap_or_else(|e| panic!("{what}: {e}"));
        expected.check(got.view(), &what);
    }
    Kernel::TEXTBOOK.len()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn known_answers_on_every_kernel_and_tile() {
    let blog_input = array![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
    let blog_mask = array![3.0f32, 4.0, 5.0, 4.0, 3.0];
    let exercise_input = array![4.0f32, 1.0, 3.0, 2.0, 3.0];
    let exercise_mask = array![2.0f32, 1.0, 4.0];
    for kernel in Kernel::TEXTBOOK {
        for tile in [1, 2, 3, 32, 1024] {
            let options = NdOptions {
                kernel,
                tile: Some((tile, 1)),
                ..zero_border()
            };
            let blog = engine()
                .ndimage()
                .correlate1d(&blog_input, &blog_mask, 0, &options)
                .unwrap();
            assert_eq!(
                blog,
                array![22.0, 38.0, 57.0, 76.0, 95.0, 90.0, 74.0],
                "{kernel} tile {tile}"
            );
            let exercise = engine()
                .ndimage()
                .correlate1d(&exercise_input, &exercise_mask, 0, &options)
                .unwrap();
            assert_eq!(
                exercise,
                array![8.0, 21.0, 13.0, 20.0, 7.0],
                "{kernel} tile {tile}"
            );
            // Small integers are exact in f32: each mode must equal the reference exactly.
            for mode in all_modes() {
                let options = NdOptions {
                    mode: mode.into(),
                    ..options.clone()
                };
                for mask in [
                    exercise_mask.view(),
                    blog_mask.view(),
                    Array1::ones(11).view(),
                ] {
                    let expected = correlate1d(&exercise_input, &mask, 0, &options).unwrap();
                    let got = engine()
                        .ndimage()
                        .correlate1d(&exercise_input, &mask, 0, &options)
                        .unwrap();
                    assert_eq!(
                        got.mapv(f64::from),
                        expected,
                        "{kernel} tile {tile} {mode:?}"
                    );
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn randomized_kernels_modes_tiles_lengths_masks() {
    let (mut rng, seed) = rng("conv1d matrix");
    let mut runs = 0;
    for mode in all_modes() {
        for tile in TILES {
            let t = tile as usize;
            let mut lengths = vec![1, t.saturating_sub(1), t, t + 1, 7919, 104_729];
            lengths.retain(|&n| n > 0);
            lengths.dedup();
            for len in lengths {
                let mut masks = vec![1, 2, 3, 7, 31, t + 1];
                if len <= 4096 {
                    masks.push(len + 1); // wider than the input
                }
                masks.sort_unstable();
                masks.dedup();
                for mask_len in masks {
                    let convolve = rng.random_bool(0.5);
                    let origin = random_origin(&mut rng, mask_len, convolve);
                    let options = NdOptions {
                        mode: mode.into(),
                        origin: origin.into(),
                        tile: Some((tile, 1)),
                        ..zero_border()
                    };
                    let x = random_vec(&mut rng, len);
                    let w = random_vec(&mut rng, mask_len);
                    runs += check_all_kernels(x.view(), w.view(), options, convolve);
                }
            }
        }
    }
    // Ten million elements: many blocks, every tile width.
    let x = random_vec(&mut rng, 10_000_000);
    for mode in all_modes() {
        for mask_len in [3, 31] {
            let w = random_vec(&mut rng, mask_len);
            for tile in [1, 33, 256, 1024] {
                let options = NdOptions {
                    mode: mode.into(),
                    tile: Some((tile, 1)),
                    ..zero_border()
                };
                runs += check_all_kernels(x.view(), w.view(), options, false);
            }
        }
    }
    eprintln!("conv1d matrix: {runs} kernel runs matched the reference (seed {seed})");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn masks_beyond_constant_memory_use_global_memory_kernels() {
    let (mut rng, _) = rng("long masks");
    for mask_len in [MASK_CAPACITY, MASK_CAPACITY + 1, 5000] {
        let plan = plan1d(7919, mask_len, &zero_border());
        assert_eq!(plan.mask_in_constant_memory, mask_len <= MASK_CAPACITY);
        let x = random_vec(&mut rng, 7919);
        let w = random_vec(&mut rng, mask_len);
        for mode in [
            BoundaryMode::Constant(0.5),
            BoundaryMode::Reflect,
            BoundaryMode::Wrap,
        ] {
            check_all_kernels(
                x.view(),
                w.view(),
                NdOptions {
                    mode: mode.into(),
                    ..zero_border()
                },
                true,
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn strided_inputs_and_outputs() {
    let (mut rng, _) = rng("strides");
    let base = random_vec(&mut rng, 3001);
    let w = random_vec(&mut rng, 9);
    for view in [
        base.slice(s![1..;3]),
        base.slice(s![..;-1]),
        base.slice(s![..;-7]),
    ] {
        for kernel in Kernel::TEXTBOOK {
            let options = NdOptions {
                kernel,
                mode: BoundaryMode::Mirror.into(),
                tile: Some((64, 1)),
                ..zero_border()
            };
            let expected = expected1d(view, w.view(), &options, false);
            expected.check(
                gpu1d(view, w.view(), &options, false).unwrap().view(),
                "view",
            );
            // Into every other element of a larger, reversed buffer.
            let mut target = Array1::from_elem(2 * view.len(), f32::NAN);
            let mut slots = target.slice_mut(s![..;-2]);
            engine()
                .ndimage()
                .correlate1d_into(&view, &w, 0, &options, slots.view_mut())
                .unwrap();
            expected.check(slots.view(), "into a strided view");
            assert!(target.slice(s![..;-2]).iter().all(|v| v.is_finite()));
            assert!(
                target.slice(s![..;2]).iter().all(|v| v.is_nan()),
                "wrote outside the view"
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn clamp_and_nan_propagation() {
    let x = array![-2.0f32, 0.25, 2.0, 0.5, f32::NAN, 0.5, 0.5];
    let w = array![1.0f32];
    for kernel in Kernel::TEXTBOOK {
        let options = NdOptions {
            kernel,
            clamp: Some(Clamp { lo: 0.0, hi: 1.0 }),
            ..zero_border()
        };
        let got = engine().ndimage().correlate1d(&x, &w, 0, &options).unwrap();
        assert_eq!(got.slice(s![..4]), array![0.0, 0.25, 1.0, 0.5]);
        assert!(got[4].is_nan());
        // A NaN tap poisons every output it touches (IEEE propagation), and only those.
        let spread = engine()
            .ndimage()
            .correlate1d(
                &x,
                &array![1.0f32, 1.0, 1.0],
                0,
                &NdOptions {
                    kernel,
                    ..zero_border()
                },
            )
            .unwrap();
        let nan_at: Vec<bool> = spread.iter().map(|v| v.is_nan()).collect();
        assert_eq!(nan_at, [false, false, false, true, true, true, false]);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_launches_are_typed_errors_and_the_engine_recovers() {
    let x = array![1.0f32, 2.0, 3.0];
    let w = array![1.0f32, 1.0, 1.0];
    let max_threads = engine().device().max_threads_per_block;
    for (kernel, tile, mask_len) in [
        (Kernel::Basic, 0, 3),
        (Kernel::ConstantMask, max_threads + 1, 3),
        (Kernel::Tiled, 1024, 200_000), // (1024 + 199_999) * 4 bytes of shared memory
    ] {
        let options = NdOptions {
            kernel,
            tile: Some((tile, 1)),
            ..zero_border()
        };
        let long_mask = Array1::<f32>::ones(mask_len);
        let result = engine().ndimage().correlate1d(&x, &long_mask, 0, &options);
        assert!(
            matches!(result, Err(ConvError::InvalidLaunch { .. })),
            "{kernel} tile {tile}: {result:?}"
        );
        assert_engine_works();
    }
    let mut short = Array1::<f32>::zeros(2);
    let result = engine()
        .ndimage()
        .correlate1d_into(&x, &w, 0, &zero_border(), short.view_mut());
    assert!(matches!(result, Err(ConvError::ShapeMismatch { .. })));
    // Overlap cannot be built in safe Rust; build it as a caller with raw pointers might.
    let mut buffer = array![1.0f32, 2.0, 3.0, 4.0];
    let pointer = buffer.as_mut_ptr();
    // SAFETY: both views stay within `buffer`, which outlives them; the library must refuse the
    // call before touching either view, so no aliased access happens.
    let (input, output) = unsafe {
        (
            ArrayView1::from_shape_ptr(3, pointer),
            ArrayViewMut1::from_shape_ptr(3, pointer.add(1)),
        )
    };
    let result = engine()
        .ndimage()
        .correlate1d_into(&input, &w, 0, &zero_border(), output);
    assert!(
        matches!(result, Err(ConvError::OverlappingOutput)),
        "{result:?}"
    );
    assert_engine_works();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn lengths_past_two_to_the_31_index_correctly() {
    // 2^31 + 777 elements (8 GiB): 64-bit indices, and with one-thread tiles more blocks than
    // one grid holds, so the launch is split. Spot-checked at both ends and around 2^31.
    let len = (1usize << 31) + 777;
    let required = 2 * len * size_of::<f32>() + (1 << 30);
    if engine().device().total_memory < required {
        panic!(
            "device has {} bytes, this test needs {required}",
            engine().device().total_memory
        );
    }
    let (mut rng, _) = rng("2^31");
    let salt: u64 = rng.random();
    let value = |i: usize| {
        ((i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f32 / (1u64 << 24) as f32
            - 0.5
    };
    let x: Array1<f32> = (0..len).map(value).collect();
    let w = array![0.5f32, -1.0, 2.0, 0.25, 1.5];
    let probes: Vec<usize> = (0..64)
        .chain((1 << 31) - 64..(1 << 31) + 64)
        .chain(len - 64..len)
        .collect();
    for (kernel, tile) in [
        (Kernel::Basic, 1),
        (Kernel::ConstantMask, 256),
        (Kernel::Tiled, 1024),
        (Kernel::TiledL2, 128),
    ] {
        let options = NdOptions {
            kernel,
            tile: Some((tile, 1)),
            mode: BoundaryMode::Wrap.into(),
            ..zero_border()
        };
        let got = engine().ndimage().correlate1d(&x, &w, 0, &options).unwrap();
        for &i in &probes {
            let (mut sum, mut magnitude) = (0.0f64, 0.0f64);
            for (j, &tap) in w.iter().enumerate() {
                let k = (i + len + j - 2) % len;
                sum += f64::from(tap) * f64::from(x[k]);
                magnitude += (f64::from(tap) * f64::from(x[k])).abs();
            }
            let error = (f64::from(got[i]) - sum).abs();
            assert!(
                error <= 1e-5 * magnitude,
                "{kernel} tile {tile}: element {i} is {}, expected {sum}",
                got[i]
            );
        }
    }
}

/// Masks without a register-tiled kernel, and signals too short for it: `Auto` runs the tiled
/// kernel from 10 taps on (its global-mask form beyond constant memory), the constant-mask
/// kernel below, and the basic one where the tiled kernel's span would not fit in shared
/// memory; each result matches the reference in every mode.
#[test]
#[ignore = "needs a CUDA GPU"]
fn auto_without_a_register_kernel_matches_the_reference() {
    let (mut rng, seed) = rng("1d auto");
    let shared_limit = engine().device().max_shared_memory_per_block as usize / 4;
    let cases = [
        (2, Kernel::ConstantMask),
        (8, Kernel::ConstantMask),
        (10, Kernel::Tiled),
        (11, Kernel::Tiled),
        (21, Kernel::Tiled),
        (63, Kernel::Tiled),
        (MASK_CAPACITY + 1, Kernel::Tiled),
        (shared_limit, Kernel::Basic),
    ];
    // Signals too short to give the register-tiled kernel a block per two SMs run on the
    // textbook design Auto would take without it.
    let sms = engine().device().multiprocessor_count as usize;
    for (taps, textbook_kernel) in [(3, Kernel::ConstantMask), (31, Kernel::Tiled)] {
        let long = plan1d(1 << 24, taps, &zero_border());
        assert_eq!(long.kernel, Kernel::RegisterTiled, "{taps} taps, 2^24");
        let len = (sms / 2).saturating_sub(1).max(1) * long.output_tile.0 as usize;
        let short = plan1d(len, taps, &zero_border());
        assert_eq!(short.kernel, textbook_kernel, "{taps} taps, {len} elements");
    }
    for (taps, kernel) in cases {
        let plan = plan1d(100_003, taps, &zero_border());
        assert_eq!(plan.kernel, kernel, "Auto for {taps} taps");
        let w = Array1::from(random_vec(&mut rng, taps));
        // Long signals for the short masks only: the reference's time grows with both.
        let long = if taps <= 63 { 100_003 } else { 5_000 };
        for len in [1, 700, long] {
            let x = Array1::from(random_vec(&mut rng, len));
            for mode in all_modes() {
                let convolve = rng.random_bool(0.5);
                let options = NdOptions {
                    mode: mode.into(),
                    origin: random_origin(&mut rng, taps, convolve).into(),
                    ..zero_border()
                };
                let what = format!("Auto, {taps} taps, len {len}, {options:?}, seed {seed}");
                let got = gpu1d(x.view(), w.view(), &options, convolve)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                expected1d(x.view(), w.view(), &options, convolve).check(got.view(), &what);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn register_tiled_kernels_match_the_reference() {
    let (mut rng, seed) = rng("1d register-tiled");
    let mut runs = 0;
    for m in [3, 5, 7, 9, 15, 31] {
        let plan = plan1d(1 << 20, m, &zero_border());
        assert_eq!(
            plan.kernel,
            Kernel::RegisterTiled,
            "Auto picks the register-tiled design"
        );
        for len in [1, 3, 1023, 1024, 1025, 4099, 100_003, (1 << 20) + 5] {
            for mode in all_modes() {
                let convolve = rng.random_bool(0.5);
                let origin = random_origin(&mut rng, m, convolve);
                let options = NdOptions {
                    mode: mode.into(),
                    origin: origin.into(),
                    kernel: Kernel::RegisterTiled,
                    ..zero_border()
                };
                let x = random_vec(&mut rng, len);
                let w = random_vec(&mut rng, m);
                let what = format!("register m{m} len {len} {options:?} convolve {convolve}");
                let got = gpu1d(x.view(), w.view(), &options, convolve).unwrap();
                expected1d(x.view(), w.view(), &options, convolve).check(got.view(), &what);
                runs += 1;
            }
        }
    }
    // A length without a specialised kernel runs on the any-length one.
    let any_length = NdOptions {
        kernel: Kernel::RegisterTiled,
        ..zero_border()
    };
    let x = random_vec(&mut rng, 100);
    let w = random_vec(&mut rng, 4);
    let got = gpu1d(x.view(), w.view(), &any_length, false).unwrap();
    expected1d(x.view(), w.view(), &any_length, false).check(got.view(), "4 taps, named");
    let wrong_tile = NdOptions {
        kernel: Kernel::RegisterTiled,
        tile: Some((128, 1)),
        ..zero_border()
    };
    assert!(matches!(
        engine()
            .ndimage()
            .correlate1d(&x, &random_vec(&mut rng, 5), 0, &wrong_tile),
        Err(ConvError::InvalidLaunch { .. })
    ));
    eprintln!("1d register-tiled: {runs} runs matched the reference (seed {seed})");
}

/// The any-length register-tiled kernel (`f32`, `f64`): masks of one tap to several chunks
/// (with and without a partial step), wider than the signal, signals shorter and longer than a
/// block, every mode, origins, correlation and convolution; `Auto` takes it for long masks on
/// signals that fill the device.
#[test]
#[ignore = "needs a CUDA GPU"]
fn any_length_register_kernel_matches_the_reference() {
    let (mut rng, seed) = rng("1d any-length register-tiled");
    // Auto: the tiled design below 17 taps, the any-length kernel from there.
    assert_eq!(plan1d(1 << 24, 11, &zero_border()).kernel, Kernel::Tiled);
    for taps in [17, 255] {
        let plan = plan1d(1 << 24, taps, &zero_border());
        assert_eq!(plan.kernel, Kernel::RegisterTiled, "{taps} taps");
    }
    assert_eq!(
        plan1d(1 << 24, 8191, &zero_border()).kernel,
        Kernel::RegisterTiled
    );
    let options = NdOptions {
        kernel: Kernel::RegisterTiled,
        ..zero_border()
    };
    let mut runs = 0;
    for taps in [1, 2, 17, 33, 64, 255, 1023, 1024, 1025, 2063, 4095, 8191] {
        let lengths: &[usize] = if taps <= 255 {
            &[1, 700, 4095, 4096, 4097, 12_293, 100_003]
        } else {
            &[1, 700, 4097, 20_011]
        };
        for (&len, mode) in lengths.iter().flat_map(|l| all_modes().map(|m| (l, m))) {
            let convolve = rng.random_bool(0.5);
            let options = NdOptions {
                mode: mode.into(),
                origin: random_origin(&mut rng, taps, convolve).into(),
                ..options.clone()
            };
            let x = random_vec(&mut rng, len);
            let w = random_vec(&mut rng, taps);
            let what = format!("{taps} taps, len {len}, {options:?}, convolve {convolve}");
            let got = gpu1d(x.view(), w.view(), &options, convolve)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let expected = expected1d(x.view(), w.view(), &options, convolve);
            expected.check(got.view(), &what);
            let (x64, w64) = (x.mapv(f64::from), w.mapv(f64::from));
            let nd = engine().ndimage();
            let got64 = if convolve {
                nd.convolve1d(&x64, &w64, 0, &options)
            } else {
                nd.correlate1d(&x64, &w64, 0, &options)
            }
            .unwrap_or_else(|e| panic!("f64, {what}: {e}"));
            let reference = if convolve {
                conv_host::reference::convolve1d(&x64, &w64, 0, &options)
            } else {
                correlate1d(&x64, &w64, 0, &options)
            }
            .unwrap();
            for (i, (&g, &r)) in got64.iter().zip(&reference).enumerate() {
                let bound = 1e-12 * (taps as f64) * expected.magnitude()[i] + f64::MIN_POSITIVE;
                assert!(
                    (g - r).abs() <= bound,
                    "f64, {what}: element {i} is {g}, not {r}"
                );
            }
            runs += 2;
        }
    }
    eprintln!("1d any-length register-tiled: {runs} runs matched the reference (seed {seed})");
}

/// An infinity in the signal reaches only the outputs whose window holds it: the any-length
/// kernel's partial last step skips the taps past the mask rather than multiplying by zero.
#[test]
#[ignore = "needs a CUDA GPU"]
fn any_length_kernel_keeps_infinities_in_their_reach() {
    let (mut rng, _) = rng("1d any-length infinity");
    let options = NdOptions {
        kernel: Kernel::RegisterTiled,
        ..zero_border()
    };
    for taps in [33, 1025] {
        let mut x = random_vec(&mut rng, 3 * 4096 + 77);
        let w = random_vec(&mut rng, taps);
        let at = 4096 + 1000;
        x[at] = f32::INFINITY;
        let got = gpu1d(x.view(), w.view(), &options, false).unwrap();
        let left = taps / 2;
        for (i, &value) in got.iter().enumerate() {
            // Output `i` reads inputs `i - left ..= i - left + taps - 1`.
            let reaches = i + taps > at + left && i <= at + left;
            assert_eq!(
                value.is_finite(),
                !reaches,
                "{taps} taps, element {i} is {value}"
            );
        }
    }
}
