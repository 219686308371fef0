//! Several GPUs as one (`MultiEngine`): every part of a split call gives what one GPU gives,
//! element for element, in every boundary mode, for images, signals and element types; a part
//! that fails names its GPU and rows, and the engines stay usable. On a host with one GPU the
//! parts run on several engines of that GPU.

mod common;

use common::images::random_array3;
use common::{all_modes, engine, image_mask, random_vec, rng, zero_border};
use conv_host::ndimage::{NdOptions, Ndimage};
use conv_host::{ConvError, Element, Kernel, MultiEngine};
use ndarray::{Array2, Array3, Ix3};
use rand::Rng;

/// The correlation (or convolution) of an image `H x W x C` with a 2D mask on `nd`.
fn filter2d<T: Element>(
    nd: Ndimage<'_>,
    image: &Array3<T>,
    mask: &Array2<f32>,
    options: &NdOptions,
    convolve: bool,
) -> conv_host::Result<Array3<T>> {
    let mask = image_mask::<Ix3>(mask.view(), 3);
    if convolve {
        nd.convolve(image, &mask, options)
    } else {
        nd.correlate(image, &mask, options)
    }
}

/// Every GPU of the host, or three engines on GPU 0 where there is one.
fn gpus() -> MultiEngine {
    let all = MultiEngine::new().expect("a GPU");
    if all.engines().len() > 1 {
        all
    } else {
        MultiEngine::with_devices(&[0, 0, 0]).unwrap()
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn split_calls_give_what_one_gpu_gives() {
    let (mut rng, _) = rng("multi-GPU");
    let gpus = gpus();
    let (one_gpu, split_gpus) = (engine().ndimage(), gpus.ndimage());
    for (m, mode) in all_modes().into_iter().enumerate() {
        for kernel in [
            Kernel::Auto,
            Kernel::Tiled,
            Kernel::RegisterTiled,
            Kernel::Separable,
        ] {
            let shape = (
                rng.random_range(1..90),
                rng.random_range(1..70),
                [1, 3, 4][m % 3],
            );
            let image = random_array3(&mut rng, shape);
            let n = [3, 5][rng.random_range(0..2)];
            let mask = match kernel {
                Kernel::Separable => {
                    let (c, r) = (random_vec(&mut rng, n), random_vec(&mut rng, n));
                    Array2::from_shape_fn((n, n), |(i, j)| c[i] * r[j])
                }
                Kernel::RegisterTiled => {
                    Array2::from_shape_vec((n, n), random_vec(&mut rng, n * n).to_vec()).unwrap()
                }
                _ => Array2::from_shape_vec((n, n + 2), random_vec(&mut rng, n * (n + 2)).to_vec())
                    .unwrap(),
            };
            let options = NdOptions {
                mode: mode.into(),
                kernel,
                ..zero_border()
            };
            let what = format!("{kernel} {mode:?} {shape:?}");
            let one = filter2d(one_gpu, &image, &mask, &options, false).expect(&what);
            let split = filter2d(split_gpus, &image, &mask, &options, false).expect(&what);
            assert_eq!(split, one, "{what}");
            let convolved = filter2d(split_gpus, &image, &mask, &options, true).expect(&what);
            assert_eq!(
                convolved,
                filter2d(one_gpu, &image, &mask, &options, true).unwrap(),
                "{what}"
            );
        }
        // Bytes, and a signal.
        let bytes =
            Array3::from_shape_simple_fn((rng.random_range(1..90), 33, 3), || rng.random::<u8>());
        let mask = Array2::from_elem((5, 5), 0.04f32);
        let options = NdOptions {
            mode: mode.into(),
            ..zero_border()
        };
        assert_eq!(
            filter2d(split_gpus, &bytes, &mask, &options, false).unwrap(),
            filter2d(one_gpu, &bytes, &mask, &options, false).unwrap(),
            "u8 {mode:?}"
        );
        let len = rng.random_range(1..20_000);
        let signal = random_vec(&mut rng, len);
        let taps = random_vec(&mut rng, [7, 31, 40][m % 3]);
        assert_eq!(
            split_gpus.correlate1d(&signal, &taps, 0, &options).unwrap(),
            one_gpu.correlate1d(&signal, &taps, 0, &options).unwrap(),
            "1D {mode:?}"
        );
        assert_eq!(
            split_gpus.convolve1d(&signal, &taps, 0, &options).unwrap(),
            one_gpu.convolve1d(&signal, &taps, 0, &options).unwrap(),
            "1D {mode:?}"
        );
    }
}

/// A part that fails is a typed error naming its GPU and rows; lifting the cause makes the
/// same engines work again. A list without GPUs, or with one the host lacks, is an error.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_failing_part_names_its_gpu_and_rows() {
    let gpus = gpus();
    let image = Array3::<f32>::ones((300, 200, 1));
    let mask = Array2::from_elem((3, 3), 1.0f32);
    let last = gpus.engines().len() - 1;
    gpus.engines()[last].set_device_memory_limit(Some(1024));
    let error = filter2d(gpus.ndimage(), &image, &mask, &zero_border(), false).unwrap_err();
    match &error {
        ConvError::OnDevice {
            ordinal,
            start,
            end,
            source,
        } => {
            assert_eq!(*ordinal, gpus.engines()[last].device().ordinal);
            assert_eq!((*start, *end), (300 * last / (last + 1), 300));
            assert!(
                matches!(**source, ConvError::OutOfMemory { .. }),
                "{source}"
            );
        }
        other => panic!("expected OnDevice, got {other}"),
    }
    assert!(error.to_string().contains("part"), "{error}");
    gpus.engines()[last].set_device_memory_limit(None);
    let result = filter2d(gpus.ndimage(), &image, &mask, &zero_border(), false).unwrap();
    assert_eq!(result[[150, 100, 0]], 9.0);
    assert!(matches!(
        MultiEngine::with_devices(&[]),
        Err(ConvError::InvalidParameter { .. })
    ));
    assert!(matches!(
        MultiEngine::with_devices(&[0, 999]),
        Err(ConvError::NoDevice { .. })
    ));
}
