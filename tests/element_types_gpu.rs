//! Element types on the GPU against the f64 reference: `u8`, `u16`, `f16` and `bf16` images
//! (widened to `f32` on the device, filtered by every design, narrowed back), their `f32`
//! outputs, and `f64` images filtered in `f64` by the textbook and register-tiled designs; the
//! streaming kernels that read and write narrow types themselves, host -> host, banded and on
//! device arrays; banded runs whose constant ghost rows the input type cannot hold; typed
//! errors for designs without an `f64` kernel.

mod common;

use common::elements::{Random, check, random_image};
use common::tensor_copy::has_tensor_copies;
use common::{
    all_modes, engine, image_correlate_into, image_options, random_origin, rng, zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::{
    BoundaryMode, Clamp, ConvError, DeviceArray, Element, Engine, Kernel, bf16, f16, reference,
};
use ndarray::{Array2, Array3, Axis, Ix3};
use rand::Rng;
use rand::rngs::StdRng;

/// Interleaved channels the 2D designs take; an `H x W x C` image of more runs on the 3D
/// kernels, which take `Kernel::Auto` only.
const MAX_DESIGN_CHANNELS: usize = 4;

/// A 2D mask as the N-D API takes it for an `H x W x C` image: `[h, w, 1]`.
fn channel_mask<R: Clone>(mask: &Array2<R>) -> Array3<R> {
    mask.view().insert_axis(Axis(2)).to_owned()
}

/// The 2D correlation (or convolution) of an `H x W x C` image with a 2D mask on `engine`.
fn filter2d<T: Element>(
    engine: &Engine,
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    options: &NdOptions,
    convolve: bool,
) -> conv_host::Result<Array3<T>> {
    let (mask, options) = (channel_mask(mask), image_options(options, 3));
    let nd = engine.ndimage();
    if convolve {
        nd.convolve(image, &mask, &options)
    } else {
        nd.correlate(image, &mask, &options)
    }
}

/// [`filter2d`]'s correlation.
fn correlate2d<T: Element>(
    engine: &Engine,
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    options: &NdOptions,
) -> conv_host::Result<Array3<T>> {
    filter2d(engine, image, mask, options, false)
}

/// [`correlate2d`] from one device array into another.
fn correlate2d_device<T: Element, O: Element<Real = T::Real>>(
    engine: &Engine,
    input: &DeviceArray<Ix3, T>,
    mask: &Array2<T::Real>,
    options: &NdOptions,
    output: &mut DeviceArray<Ix3, O>,
) -> conv_host::Result<()> {
    let (mask, options) = (channel_mask(mask), image_options(options, 3));
    engine
        .ndimage()
        .correlate_into(input, &mask, &options, output)
}

/// The f64 reference of [`filter2d`].
fn reference2d<T: Element>(
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    options: &NdOptions,
    convolve: bool,
) -> conv_host::Result<Array3<f64>> {
    let (mask, options) = (channel_mask(mask), image_options(options, 3));
    if convolve {
        reference::convolve(image, &mask, &options)
    } else {
        reference::correlate(image, &mask, &options)
    }
}

/// Sum of the mask's magnitudes times the image's largest magnitude: bounds every output.
fn scale<T: Element>(image: &Array3<T>, mask: &Array2<T::Real>) -> f64 {
    let image_max = image.iter().fold(1.0f64, |m, v| m.max(v.to_f64().abs()));
    let mask_sum: f64 = mask.iter().map(|v| v.to_f64().abs()).sum();
    image_max * mask_sum.max(1.0)
}

/// The mask a design takes: square 3 x 3 or 5 x 5 for the register-tiled designs, rank-1 for
/// the separable ones, any shape up to 9 x 9 otherwise; taps in [-1, 1).
fn mask_for(rng: &mut StdRng, kernel: Kernel) -> Array2<f32> {
    match kernel {
        Kernel::RegisterTiled | Kernel::RegisterTiledTma => {
            let n = [3, 5][rng.random_range(0..2)];
            Array2::from_shape_simple_fn((n, n), || rng.random_range(-1.0..1.0))
        }
        Kernel::Separable | Kernel::SeparableTma => {
            let (rows, cols) = (rng.random_range(2..10), rng.random_range(2..10));
            let column: Vec<f32> = (0..rows).map(|_| rng.random_range(-1.0..1.0)).collect();
            let row: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0..1.0)).collect();
            Array2::from_shape_fn((rows, cols), |(i, j)| column[i] * row[j])
        }
        _ => {
            let shape = (rng.random_range(1..10), rng.random_range(1..10));
            Array2::from_shape_simple_fn(shape, || rng.random_range(-1.0..1.0))
        }
    }
}

/// Options valid for `kernel`: the tensor-copy designs take only the zero border and a mask
/// centred along the rows.
fn options_for(
    rng: &mut StdRng,
    kernel: Kernel,
    mode: BoundaryMode,
    mask: (usize, usize),
) -> NdOptions {
    let tensor_copies = matches!(kernel, Kernel::SeparableTma | Kernel::RegisterTiledTma);
    let rows = random_origin(rng, mask.0, false);
    let columns = if tensor_copies {
        0
    } else {
        random_origin(rng, mask.1, false)
    };
    NdOptions {
        mode: if tensor_copies {
            BoundaryMode::Constant(0.0)
        } else {
            mode
        }
        .into(),
        kernel,
        origin: [rows, columns].into(),
        ..zero_border()
    }
}

/// `T` images through every design, mode and channel count, into `T` and into `f32`.
fn narrow_type_everywhere<T: Random + Element<Real = f32>>(engine: &Engine, rng: &mut StdRng) {
    let kernels = Kernel::EVERY.into_iter().filter(|&k| {
        has_tensor_copies() || !matches!(k, Kernel::SeparableTma | Kernel::RegisterTiledTma)
    });
    for kernel in kernels {
        for (m, mode) in all_modes().into_iter().enumerate() {
            let channels = [1, 3, 4][m % 3];
            let shape = (rng.random_range(1..70), rng.random_range(1..90), channels);
            let image = random_image::<T>(rng, shape);
            let mask = mask_for(rng, kernel);
            let options = options_for(rng, kernel, mode, mask.dim());
            let what = format!(
                "{} {kernel} {:?} {shape:?} mask {:?}",
                T::NAME,
                options.mode,
                mask.dim()
            );
            let reference = reference2d(&image, &mask, &options, false).unwrap();
            let scale = scale(&image, &mask);
            let same = correlate2d(engine, &image, &mask, &options);
            let same = match same {
                // A design that does not take this configuration refuses it for f32 too.
                Err(ConvError::InvalidLaunch { .. }) => {
                    let f32_image = image.mapv(|v| v.to_f64() as f32);
                    assert!(
                        correlate2d(engine, &f32_image, &mask, &options).is_err(),
                        "{what}"
                    );
                    continue;
                }
                other => other.expect(&what),
            };
            check(same.view(), reference.view(), scale, &what);
            let mut wide = Array3::<f32>::from_elem(shape, f32::NAN);
            image_correlate_into(engine, &image, &mask, &options, wide.view_mut()).expect(&what);
            check(
                wide.view(),
                reference.view(),
                scale,
                &format!("{what} into f32"),
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn narrow_types_match_the_reference_in_every_design_and_mode() {
    let (mut rng, _) = rng("narrow types");
    narrow_type_everywhere::<u8>(engine(), &mut rng);
    narrow_type_everywhere::<u16>(engine(), &mut rng);
    narrow_type_everywhere::<f16>(engine(), &mut rng);
    narrow_type_everywhere::<bf16>(engine(), &mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn f64_images_match_the_reference_to_1e_12() {
    let (mut rng, _) = rng("f64");
    for kernel in [Kernel::Auto].into_iter().chain(Kernel::TEXTBOOK) {
        for (m, mode) in all_modes().into_iter().enumerate() {
            let channels = [1, 3, 4][m % 3];
            let shape = (rng.random_range(1..70), rng.random_range(1..90), channels);
            let image = random_image::<f64>(&mut rng, shape);
            let rows = [1, 3, 5, 11, 17, 33][m];
            let mask = Array2::from_shape_simple_fn((rows, rng.random_range(1..20)), || {
                rng.random_range(-1.0..1.0)
            });
            let options = options_for(&mut rng, kernel, mode, mask.dim());
            let what = format!("f64 {kernel} {mode:?} {shape:?} mask {:?}", mask.dim());
            let reference = reference2d(&image, &mask, &options, false).unwrap();
            let got = correlate2d(engine(), &image, &mask, &options).expect(&what);
            check(got.view(), reference.view(), scale(&image, &mask), &what);
        }
    }
    // A mask too large for constant memory as f64 (over 2048 taps) reads it from global memory.
    let image = random_image::<f64>(&mut rng, (40, 50, 1));
    let mask = Array2::from_shape_simple_fn((3, 700), || rng.random_range(-1.0..1.0));
    let options = NdOptions {
        mode: BoundaryMode::Wrap.into(),
        ..zero_border()
    };
    let reference = reference2d(&image, &mask, &options, false).unwrap();
    let got = correlate2d(engine(), &image, &mask, &options).unwrap();
    check(
        got.view(),
        reference.view(),
        scale(&image, &mask),
        "f64 3 x 700",
    );
}

/// `f64` images through the register-tiled design (the 3D kernels one slice deep, 8 or 4 rows
/// a thread): square masks of 3 and 5 taps named or chosen by `Auto`, every mode, 1 to 7
/// channels, images smaller than the mask and taller than several tiles, random origins,
/// convolution and the clamp; host -> host in one buffer and in bands (a device-memory cap),
/// and from one device array into another.
#[test]
#[ignore = "needs a CUDA GPU"]
fn f64_register_tiled_matches_the_reference() {
    let (mut rng, _) = rng("f64 register-tiled");
    let capped = Engine::new().expect("GPU");
    for (m, mode) in all_modes().into_iter().enumerate() {
        for (s, side) in [3, 5].into_iter().enumerate() {
            let channels = [1, 3, 4, 7][(m + s) % 4];
            let height = [2, 63, 64, 65, 150, 201][(m + 3 * s) % 6];
            let shape = (height, rng.random_range(1..100), channels);
            let image = random_image::<f64>(&mut rng, shape);
            let mask = Array2::from_shape_simple_fn((side, side), || rng.random_range(-1.0..1.0));
            let convolve = rng.random_bool(0.5);
            let mut options = NdOptions {
                mode: mode.into(),
                kernel: [Kernel::RegisterTiled, Kernel::Auto][s],
                origin: [
                    random_origin(&mut rng, side, convolve),
                    random_origin(&mut rng, side, convolve),
                ]
                .into(),
                clamp: (m == 2).then_some(Clamp { lo: -0.5, hi: 0.75 }),
                ..zero_border()
            };
            let what = format!("f64 {mode:?} {shape:?} {side}x{side} convolve {convolve}");
            let filter = |engine: &Engine, options: &NdOptions| {
                filter2d(engine, &image, &mask, options, convolve)
            };
            // Past the designs' channels the image runs on the 3D kernels: a named design is
            // refused, and the rest of the checks run there (`Auto`).
            let designed = channels <= MAX_DESIGN_CHANNELS;
            if !designed {
                if options.kernel != Kernel::Auto {
                    let refused = filter(engine(), &options);
                    assert!(
                        matches!(refused, Err(ConvError::InvalidDesign { .. })),
                        "{what}: {refused:?}"
                    );
                }
                options.kernel = Kernel::Auto;
            }
            let reference = reference2d(&image, &mask, &options, convolve).unwrap();
            let got = filter(engine(), &options).expect(&what);
            check(got.view(), reference.view(), scale(&image, &mask), &what);
            // Bands of about 24 rows: the cap counts input and output bands of the rows the
            // device holds (padded to 32 elements by the designs, unpadded by the 3D kernels).
            let row_elements = if designed {
                (shape.1 * channels).next_multiple_of(32)
            } else {
                shape.1 * channels
            };
            let row_bytes = 8 * row_elements;
            capped.set_device_memory_limit(Some(2 * row_bytes * (24 + side - 1)));
            let banded = filter(&capped, &options).expect(&what);
            let bands = capped.last_host_times().map_or(0, |t| t.bands);
            capped.set_device_memory_limit(None);
            assert!(height < 64 || bands > 1, "{what}: {bands} bands");
            check(
                banded.view(),
                reference.view(),
                scale(&image, &mask),
                &format!("{what}, banded"),
            );
            if !convolve {
                let input = engine().upload(&image).expect(&what);
                let mut output = engine().alloc_device::<f64, _>(image.raw_dim()).unwrap();
                correlate2d_device(engine(), &input, &mask, &options, &mut output).expect(&what);
                assert_eq!(
                    engine().download(&output).unwrap(),
                    got,
                    "{what}: device arrays"
                );
            }
        }
    }
}

/// `T` images through the kernels of `kernel` that read and write `T` (the streaming ones:
/// general masks of `sizes`; the wide separable ones: rank-1 masks), every channel count and
/// mode, on images of several strips and steps: host -> host in one buffer, host -> host in
/// bands (streaming; the constant, where `T` holds it, packed as `T`), and from one device
/// array into another.
fn native_kernels<T: Random + Element<Real = f32>>(
    rng: &mut StdRng,
    kernel: Kernel,
    sizes: &[usize],
) {
    let engine = Engine::new().unwrap();
    for (m, mode) in all_modes().into_iter().enumerate() {
        let channels = [1, 3, 4][m % 3];
        let size = sizes[m % sizes.len()];
        // At least 60 rows: the memory cap below leaves room for 45 rows of one channel in
        // one band, and fewer rows would run whole.
        let shape = (
            rng.random_range(60..140),
            rng.random_range(70..300),
            channels,
        );
        let image = random_image::<T>(rng, shape);
        let mask = if kernel == Kernel::Separable {
            let column: Vec<f32> = (0..size).map(|_| rng.random_range(-1.0..1.0)).collect();
            let row: Vec<f32> = (0..size).map(|_| rng.random_range(-1.0..1.0)).collect();
            Array2::from_shape_fn((size, size), |(i, j)| column[i] * row[j])
        } else {
            Array2::from_shape_simple_fn((size, size), || rng.random_range(-1.0..1.0f32))
        };
        let options = NdOptions {
            mode: mode.into(),
            kernel,
            origin: [
                random_origin(rng, size, false),
                random_origin(rng, size, false),
            ]
            .into(),
            ..zero_border()
        };
        let what = format!(
            "native {} {kernel} {mode:?} {shape:?} {size} x {size}",
            T::NAME
        );
        let reference = reference2d(&image, &mask, &options, false).unwrap();
        let scale = scale(&image, &mask);
        engine.set_device_memory_limit(None);
        let whole = correlate2d(&engine, &image, &mask, &options).expect(&what);
        check(whole.view(), reference.view(), scale, &what);
        // Three slots of three `f32` buffers of 4 output rows and the halo: at least 4 output
        // rows a band (7 or more in the native kernel's two buffers) for the streaming
        // kernels' 3 x 3 and 5 x 5 masks. (The separable kernels' banded path is the same
        // pipeline; their tall masks would need images of hundreds of rows to take bands.)
        if kernel == Kernel::RegisterTiled {
            let row_bytes = 4 * (shape.1 * channels + 32);
            engine.set_device_memory_limit(Some(3 * 3 * row_bytes * (size + 3)));
            let banded = correlate2d(&engine, &image, &mask, &options).expect(&what);
            assert!(
                engine.last_host_times().map_or(0, |t| t.bands) > 2,
                "{what}: banded"
            );
            check(
                banded.view(),
                reference.view(),
                scale,
                &format!("{what} banded"),
            );
        }
        engine.set_device_memory_limit(None);
        let input = engine.upload(&image).expect(&what);
        let mut output = engine.alloc_device::<T, _>(image.raw_dim()).expect(&what);
        correlate2d_device(&engine, &input, &mask, &options, &mut output).expect(&what);
        let on_device = engine.download(&output).expect(&what);
        check(
            on_device.view(),
            reference.view(),
            scale,
            &format!("{what} device"),
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn native_kernels_match_the_reference() {
    let (mut rng, _) = rng("native kernels");
    let streaming = (Kernel::RegisterTiled, [3, 5].as_slice());
    let separable = (Kernel::Separable, [3, 7, 17, 31].as_slice());
    native_kernels::<u8>(&mut rng, streaming.0, streaming.1);
    native_kernels::<u16>(&mut rng, streaming.0, streaming.1);
    native_kernels::<f16>(&mut rng, streaming.0, streaming.1);
    native_kernels::<bf16>(&mut rng, streaming.0, streaming.1);
    native_kernels::<u8>(&mut rng, separable.0, separable.1);
    native_kernels::<u16>(&mut rng, separable.0, separable.1);
}

/// An engine capped to a little device memory runs `u8` images in many bands: the rows past
/// the image's edges that the host packs as `u8` are set to the constant on the device.
#[test]
#[ignore = "needs a CUDA GPU"]
fn banded_narrow_types_keep_every_mode_and_constant() {
    let (mut rng, _) = rng("banded narrow types");
    let engine = Engine::new().unwrap();
    let (height, width, channels) = (67, 45, 3);
    for mode in all_modes() {
        let mask_rows = rng.random_range(3..30);
        // About 8 output rows per band: input, output and conversion buffers of f32.
        let band_bytes = 3 * 4 * (width * channels + 32) * (mask_rows + 8);
        engine.set_device_memory_limit(Some(band_bytes));
        let image = random_image::<u8>(&mut rng, (height, width, channels));
        let mask = Array2::from_shape_simple_fn((mask_rows, 5), || rng.random_range(-1.0..1.0f32));
        let options = NdOptions {
            mode: mode.into(),
            ..zero_border()
        };
        let what = format!("banded u8 {mode:?} mask {:?}", mask.dim());
        let reference = reference2d(&image, &mask, &options, false).unwrap();
        let mut wide = Array3::<f32>::from_elem(image.dim(), f32::NAN);
        image_correlate_into(&engine, &image, &mask, &options, wide.view_mut()).expect(&what);
        assert!(
            engine.last_host_times().map_or(0, |t| t.bands) > 2,
            "{what}: banded"
        );
        check(wide.view(), reference.view(), scale(&image, &mask), &what);
        let same = correlate2d(&engine, &image, &mask, &options).expect(&what);
        check(same.view(), reference.view(), scale(&image, &mask), &what);
    }
}

/// Integer outputs saturate (and clamp), NaN in a float input stays NaN in a float output and
/// gives 0 in an integer one.
#[test]
#[ignore = "needs a CUDA GPU"]
fn integer_outputs_saturate_and_nan_propagates() {
    let engine = engine();
    let image = Array3::<u8>::from_elem((20, 30, 1), 200);
    let boost = Array2::from_elem((3, 3), 1.0f32);
    let saturated = correlate2d(engine, &image, &boost, &zero_border()).unwrap();
    assert!(saturated.iter().all(|&v| v == 255));
    let negative = Array2::from_elem((1, 1), -1.0f32);
    let zeros = correlate2d(engine, &image, &negative, &zero_border()).unwrap();
    assert!(zeros.iter().all(|&v| v == 0));
    let clamped = NdOptions {
        clamp: Some(Clamp {
            lo: 10.0,
            hi: 100.4,
        }),
        ..zero_border()
    };
    let limited = correlate2d(engine, &image, &boost, &clamped).unwrap();
    assert!(limited.iter().all(|&v| v == 100));
    let mut halves = Array3::<f16>::from_elem((9, 9, 1), f16::ONE);
    halves[[4, 4, 0]] = f16::NAN;
    let identity = Array2::from_elem((1, 1), 1.0f32);
    let propagated = correlate2d(engine, &halves, &identity, &zero_border()).unwrap();
    assert!(propagated[[4, 4, 0]].is_nan() && propagated[[0, 0, 0]] == f16::ONE);
    let mut bytes = Array3::<u8>::zeros((9, 9, 1));
    image_correlate_into(engine, &halves, &identity, &zero_border(), bytes.view_mut()).unwrap();
    assert_eq!((bytes[[4, 4, 0]], bytes[[0, 0, 0]]), (0, 1));
}

/// A design without an `f64` kernel is a typed error, and the engine stays usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn designs_without_f64_kernels_are_typed_errors() {
    let image = Array3::<f64>::from_elem((16, 16, 1), 1.0);
    // Not square: no register-tiled `f64` kernel either.
    let mask = Array2::from_elem((3, 4), 1.0f64);
    for kernel in [
        Kernel::RegisterTiled,
        Kernel::Separable,
        Kernel::SeparableTma,
        Kernel::RegisterTiledTma,
    ] {
        let options = NdOptions {
            kernel,
            ..zero_border()
        };
        assert!(
            matches!(
                correlate2d(engine(), &image, &mask, &options),
                Err(ConvError::InvalidLaunch { .. })
            ),
            "{kernel}"
        );
    }
    let got = correlate2d(engine(), &image, &mask, &zero_border()).unwrap();
    assert_eq!(got[[8, 8, 0]], 12.0);
    common::assert_engine_works();
}

/// Asserts a 1D output against its reference sums, as [`check`] does.
fn check1d<O: Element>(
    got: &ndarray::Array1<O>,
    reference: &ndarray::Array1<f64>,
    scale: f64,
    what: &str,
) {
    let len = got.len();
    let got = got.view().into_shape_with_order((1, len, 1)).unwrap();
    let reference = reference.view().into_shape_with_order((1, len, 1)).unwrap();
    check(got, reference, scale, what);
}

/// `T` signals through every 1D design and mode, in one chunk and in many (a capped engine),
/// against the reference.
fn signals<T: Random>(rng: &mut StdRng, kernels: &[Kernel]) {
    let capped = Engine::new().unwrap();
    for &kernel in kernels {
        for mode in all_modes() {
            let len = rng.random_range(1..5000);
            let taps = [3, 5, 7, 9, 15, 31, rng.random_range(1..80)][rng.random_range(0..7)];
            let input = ndarray::Array1::from_shape_simple_fn(len, || T::random(rng));
            let mask = ndarray::Array1::from_shape_simple_fn(taps, || {
                <T::Real as Element>::from_f64(rng.random_range(-1.0..1.0))
            });
            let options = NdOptions {
                mode: mode.into(),
                kernel,
                origin: random_origin(rng, taps, false).into(),
                ..zero_border()
            };
            let what = format!("1D {} {kernel} {mode:?} {len} x {taps}", T::NAME);
            let reference = reference::correlate1d(&input, &mask, 0, &options).unwrap();
            let magnitude: f64 = mask.iter().map(|w| w.to_f64().abs()).sum();
            let scale =
                input.iter().fold(1.0f64, |m, v| m.max(v.to_f64().abs())) * magnitude.max(1.0);
            for engine in [engine(), &capped] {
                // About 100 elements per chunk: input, output and conversion buffers of 8 bytes.
                capped.set_device_memory_limit(Some(3 * 8 * (taps + 100)));
                let same = match engine.ndimage().correlate1d(&input, &mask, 0, &options) {
                    Err(ConvError::InvalidLaunch { .. }) if kernel == Kernel::RegisterTiled => {
                        continue;
                    }
                    other => other.expect(&what),
                };
                check1d(&same, &reference, scale, &what);
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn signals_of_every_type_match_the_reference() {
    let (mut rng, _) = rng("1D element types");
    // Every design that takes a 1D mask.
    let every: Vec<Kernel> = Kernel::EVERY
        .into_iter()
        .filter(|k| {
            !matches!(
                k,
                Kernel::Separable | Kernel::SeparableTma | Kernel::RegisterTiledTma
            )
        })
        .collect();
    signals::<u8>(&mut rng, &every);
    signals::<u16>(&mut rng, &every);
    signals::<f16>(&mut rng, &every);
    signals::<bf16>(&mut rng, &every);
    let textbook: Vec<Kernel> = [Kernel::Auto].into_iter().chain(Kernel::TEXTBOOK).collect();
    signals::<f64>(&mut rng, &textbook);
}

/// Device arrays carry their type: `u8`, `u16`, `f16`, `bf16` and `f64` images upload as their
/// own bytes, filter on the device into their type or (narrow types) into `f32`, and download the
/// same values the host calls give.
fn device_arrays_of<T: Random>(rng: &mut StdRng) {
    let engine = engine();
    for mode in all_modes() {
        let shape = (
            rng.random_range(1..60),
            rng.random_range(1..70),
            [1, 3][rng.random_range(0..2)],
        );
        let image = random_image::<T>(rng, shape);
        let mask =
            Array2::from_shape_simple_fn((rng.random_range(1..8), rng.random_range(1..8)), || {
                <T::Real as Element>::from_f64(rng.random_range(-1.0..1.0))
            });
        let options = NdOptions {
            mode: mode.into(),
            ..zero_border()
        };
        let what = format!(
            "device {} {mode:?} {shape:?} mask {:?}",
            T::NAME,
            mask.dim()
        );
        let input = engine.upload(&image).expect(&what);
        assert_eq!(
            engine.download(&input).unwrap(),
            image,
            "{what}: round trip"
        );
        let mut output = engine.alloc_device::<T, _>(image.raw_dim()).unwrap();
        correlate2d_device(engine, &input, &mask, &options, &mut output).expect(&what);
        let on_host = correlate2d(engine, &image, &mask, &options).unwrap();
        assert_eq!(engine.download(&output).unwrap(), on_host, "{what}");
        let reference = reference2d(&image, &mask, &options, false).unwrap();
        check(
            on_host.view(),
            reference.view(),
            scale(&image, &mask),
            &what,
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_arrays_carry_their_type() {
    let (mut rng, _) = rng("device arrays of every type");
    device_arrays_of::<u8>(&mut rng);
    device_arrays_of::<u16>(&mut rng);
    device_arrays_of::<f16>(&mut rng);
    device_arrays_of::<bf16>(&mut rng);
    device_arrays_of::<f64>(&mut rng);
    // A u8 image into an f32 device array, and a 1D u16 signal.
    let image = random_image::<u8>(&mut rng, (33, 47, 3));
    let mask = Array2::from_shape_simple_fn((5, 5), || rng.random_range(-1.0..1.0f32));
    let options = NdOptions {
        mode: BoundaryMode::Reflect.into(),
        ..zero_border()
    };
    let input = engine().upload(&image).unwrap();
    let mut wide = engine().alloc_device::<f32, _>(image.raw_dim()).unwrap();
    correlate2d_device(engine(), &input, &mask, &options, &mut wide).unwrap();
    let mut expected = Array3::<f32>::zeros(image.dim());
    image_correlate_into(engine(), &image, &mask, &options, expected.view_mut()).unwrap();
    assert_eq!(engine().download(&wide).unwrap(), expected);
    let signal = ndarray::Array1::from_shape_simple_fn(1000, || u16::random(&mut rng));
    let taps = ndarray::Array1::from_shape_simple_fn(9, || rng.random_range(-1.0..1.0f32));
    let options = NdOptions {
        mode: BoundaryMode::Wrap.into(),
        ..zero_border()
    };
    let input = engine().upload(&signal).unwrap();
    let mut output = engine().alloc_device::<u16, _>(signal.raw_dim()).unwrap();
    engine()
        .ndimage()
        .correlate1d_into(&input, &taps, 0, &options, &mut output)
        .unwrap();
    assert_eq!(
        engine().download(&output).unwrap(),
        engine()
            .ndimage()
            .correlate1d(&signal, &taps, 0, &options)
            .unwrap()
    );
}

/// Half-precision subnormals survive the widening and the narrowing: an identity mask returns
/// every input value (-0 becomes +0, as `0 + 1 x -0` is +0 in IEEE arithmetic), and products in
/// the subnormal range round as the f64 result does.
#[test]
#[ignore = "needs a CUDA GPU"]
fn half_precision_subnormals_round_trip() {
    let bits: Vec<u16> = (0u16..1024)
        .chain(0x8000..0x8400)
        .chain([0x0400, 0x3C00, 0x7BFF])
        .collect();
    let image = Array3::from_shape_vec(
        (1, bits.len(), 1),
        bits.iter().map(|&b| f16::from_bits(b)).collect(),
    )
    .unwrap();
    let identity = Array2::from_elem((1, 1), 1.0f32);
    let same = correlate2d(engine(), &image, &identity, &zero_border()).unwrap();
    let mismatched: Vec<(u16, u16)> = image
        .iter()
        .zip(same.iter())
        .filter(|(a, b)| a.to_bits() != b.to_bits() && !(a.to_f64() == 0.0 && b.to_bits() == 0))
        .map(|(a, b)| (a.to_bits(), b.to_bits()))
        .take(5)
        .collect();
    assert!(
        mismatched.is_empty(),
        "input bits -> output bits: {mismatched:?}"
    );
    let small = Array2::from_elem((1, 1), 0.001f32);
    let normals = Array3::from_shape_fn((1, 2000, 1), |(_, x, _)| {
        f16::from_f32(x as f32 / 2000.0 - 0.5)
    });
    let got = correlate2d(engine(), &normals, &small, &zero_border()).unwrap();
    let reference = reference2d(&normals, &small, &zero_border(), false).unwrap();
    check(
        got.view(),
        reference.view(),
        0.5,
        "f16 products in the subnormal range",
    );
}
