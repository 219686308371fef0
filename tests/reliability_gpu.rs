//! The bad-input catalogue on the GPU, and concurrency: every bad input gets a typed error or a
//! defined result, and the engine works normally afterwards.

mod common;

use common::{assert_engine_works, engine, image_mask, zero_border};
use conv_host::ndimage::NdOptions;
use conv_host::reference::{correlate, correlate1d};
use conv_host::{BoundaryMode, ConvError, Engine, Kernel};
use ndarray::{Array1, Array2, Array3, ArrayView1, Ix3, array};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_inputs_get_typed_errors_or_defined_results() {
    let x = array![1.0f32, 2.0, 3.0];
    // Empty input: empty output, for every kernel.
    for kernel in Kernel::TEXTBOOK {
        let options = NdOptions {
            kernel,
            ..zero_border()
        };
        assert_eq!(
            engine()
                .ndimage()
                .correlate1d(&Array1::<f32>::zeros(0), &x, 0, &options)
                .unwrap()
                .len(),
            0
        );
        let empty_image = Array3::<f32>::zeros((0, 5, 3));
        let options2 = NdOptions {
            kernel,
            ..zero_border()
        };
        // A 2D mask of an `H x W x C` image: `[3, 3, 1]`.
        let mask3x3 = image_mask::<Ix3>(Array2::ones((3, 3)).view(), 3);
        assert_eq!(
            engine()
                .ndimage()
                .correlate(&empty_image, &mask3x3, &options2)
                .unwrap()
                .len(),
            0
        );
        // Zero channels: a defined, empty result.
        let no_channels = Array3::<f32>::zeros((4, 5, 0));
        assert_eq!(
            engine()
                .ndimage()
                .correlate(&no_channels, &mask3x3, &options2)
                .unwrap()
                .dim(),
            (4, 5, 0)
        );
    }
    assert_engine_works();
    // Empty masks.
    assert!(matches!(
        engine()
            .ndimage()
            .correlate1d(&x, &Array1::<f32>::zeros(0), 0, &zero_border()),
        Err(ConvError::EmptyMask)
    ));
    let image = Array2::<f32>::ones((4, 4));
    assert!(matches!(
        engine()
            .ndimage()
            .correlate(&image, &Array2::<f32>::zeros((3, 0)), &zero_border()),
        Err(ConvError::EmptyMask)
    ));
    assert_engine_works();
    // NaN and infinity in the mask propagate as IEEE arithmetic says, as in the f64 reference.
    let signal: Array1<f32> = (0..40).map(|i| (i as f32 * 0.3).sin()).collect();
    for mask in [
        array![1.0f32, f32::NAN, 1.0],
        array![0.5f32, f32::INFINITY, -1.0],
        array![f32::NEG_INFINITY, 0.0, 2.0],
    ] {
        for kernel in Kernel::TEXTBOOK {
            let options = NdOptions {
                kernel,
                mode: BoundaryMode::Constant(0.0).into(),
                ..zero_border()
            };
            let got = engine()
                .ndimage()
                .correlate1d(&signal, &mask, 0, &options)
                .unwrap();
            let expected = correlate1d(&signal, &mask, 0, &options).unwrap();
            for (g, e) in got.iter().zip(&expected) {
                let g = f64::from(*g);
                let same = if e.is_nan() {
                    g.is_nan()
                } else if e.is_infinite() {
                    g == *e
                } else {
                    (g - e).abs() <= 1e-5 * (1.0 + e.abs())
                };
                assert!(same, "{kernel} {mask}: {g} vs {e}");
            }
        }
    }
    assert_engine_works();
    // A device that does not exist.
    assert!(matches!(
        Engine::with_device(4096),
        Err(ConvError::NoDevice { ordinal: 4096, .. })
    ));
    assert_engine_works();
    // A device-memory cap that leaves no room for one output element and the mask's halo:
    // OutOfMemory naming the bytes, and the engine works once the cap is lifted (an engine of
    // its own: the other tests share theirs).
    let long_mask = Array1::<f32>::ones(31);
    let signal = Array1::<f32>::ones(1000);
    let capped = Engine::new().expect("engine");
    capped.set_device_memory_limit(Some(100));
    assert_eq!(capped.device_memory_limit(), Some(100));
    match capped
        .ndimage()
        .correlate1d(&signal, &long_mask, 0, &zero_border())
    {
        Err(error @ ConvError::OutOfMemory { requested, .. }) => {
            assert!(
                error.to_string().contains(&requested.to_string()),
                "{error}"
            );
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
    capped.set_device_memory_limit(None);
    let expected = correlate1d(&signal, &long_mask, 0, &zero_border()).unwrap();
    let got = capped
        .ndimage()
        .correlate1d(&signal, &long_mask, 0, &zero_border())
        .unwrap();
    assert!(
        got.iter()
            .zip(&expected)
            .all(|(g, e)| (f64::from(*g) - e).abs() < 1e-4)
    );
    assert_engine_works();
    // An output larger than any host allocation (a broadcast input of 2^45 elements, 128 TiB,
    // needs no memory; its owned output would): HostOutOfMemory, not an abort.
    let one = array![1.0f32];
    let huge: ArrayView1<f32> = one.broadcast(1usize << 45).expect("broadcast");
    match engine().ndimage().correlate1d(&huge, &x, 0, &zero_border()) {
        Err(ConvError::HostOutOfMemory { requested }) => assert_eq!(requested, 4 << 45),
        other => panic!("expected HostOutOfMemory, got {other:?}"),
    }
    assert_engine_works();
    // A Gaussian whose mask would not fit any memory: a typed error before any allocation.
    let gaussian = NdOptions {
        truncate: 4.0,
        ..zero_border()
    };
    assert!(matches!(
        engine()
            .ndimage()
            .gaussian_filter(&image, [1e9, 1e9], 0, &gaussian),
        Err(ConvError::InvalidParameter { name: "sigma", .. })
    ));
    // Invalid Gaussian parameters.
    for sigma in [-1.0, f64::NAN] {
        assert!(matches!(
            engine()
                .ndimage()
                .gaussian_filter(&image, [sigma, sigma], 0, &gaussian),
            Err(ConvError::InvalidParameter { .. })
        ));
    }
    assert_engine_works();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn threads_sharing_one_engine_get_exact_results() {
    // Integer data and masks: every sum is exact in f32, so results must equal the f64
    // reference exactly. Each thread has its own mask, so a mask uploaded to constant memory by
    // one thread while another thread's kernel still read it would show up as a wrong result.
    const THREADS: usize = 8;
    const CALLS: usize = 1000;
    let seed: u64 = rand::rng().random();
    eprintln!("concurrency seed {seed}");
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ t as u64);
                let mut integer = |n: usize| -> Array1<f32> {
                    (0..n).map(|_| rng.random_range(-8..=8) as f32).collect()
                };
                let mask1 = integer(3 + 2 * t);
                let mask2 =
                    Array2::from_shape_vec((3, 1 + t % 4), integer(3 * (1 + t % 4)).to_vec())
                        .unwrap();
                for call in 0..CALLS {
                    let kernel = Kernel::TEXTBOOK[call % 4];
                    if call % 2 == 0 {
                        let x = integer(1000 + call);
                        let options = NdOptions {
                            kernel,
                            mode: BoundaryMode::Wrap.into(),
                            ..zero_border()
                        };
                        let got = engine()
                            .ndimage()
                            .correlate1d(&x, &mask1, 0, &options)
                            .unwrap();
                        assert_eq!(
                            got.mapv(f64::from),
                            correlate1d(&x, &mask1, 0, &options).unwrap(),
                            "thread {t} call {call}"
                        );
                    } else {
                        let image =
                            Array2::from_shape_vec((17, 29), integer(17 * 29).to_vec()).unwrap();
                        let options = NdOptions {
                            kernel,
                            mode: BoundaryMode::Reflect.into(),
                            ..zero_border()
                        };
                        let got = engine()
                            .ndimage()
                            .correlate(&image, &mask2, &options)
                            .unwrap();
                        assert_eq!(
                            got.mapv(f64::from),
                            correlate(&image, &mask2, &options).unwrap(),
                            "thread {t} call {call}"
                        );
                    }
                }
            });
        }
    });
}
