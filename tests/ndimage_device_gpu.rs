//! The N-D operations on device arrays (the same `_into` calls as on host arrays, with device
//! operands) against their f64 CPU twins: arrays of 1 to 4 dimensions, contiguous (`IxDyn`)
//! and of padded rows (`Ix2`, `Ix3`), every mode, element types converted on the device,
//! chained without the host, and the errors of mismatched operands.

mod common;

use common::elements::{Random, check, random_array};
use common::{all_modes, rng};
use conv_host::ndimage::{NdOptions, PerAxis};
use conv_host::reference as cpu;
use conv_host::{ConvError, DeviceArray, DeviceDim, Element, Engine};
use ndarray::{Array, ArrayD, Dimension, IxDyn};
use rand::Rng;
use rand::rngs::StdRng;

/// One filter call between device arrays.
type DeviceFilter<'a, T, D> =
    Box<dyn Fn(&DeviceArray<D, T>, &mut DeviceArray<D, T>) -> conv_host::Result<()> + 'a>;

/// The largest magnitude of `input` (at least 1).
fn scale<T: Element, D: Dimension>(input: &Array<T, D>) -> f64 {
    input.iter().fold(1.0f64, |m, v| m.max(v.to_f64().abs()))
}

/// Every filter of `T` device arrays of `input`'s shape and dimension type against the twin,
/// the output poisoned before each call.
fn filters<T: Random, D: DeviceDim>(rng: &mut StdRng, engine: &Engine, input: &Array<T, D>) {
    let nd = engine.ndimage();
    let ndim = input.ndim();
    let source = engine.upload(input).unwrap();
    let poison = Array::from_elem(input.raw_dim(), T::from_f64(7.0));
    for mode in all_modes() {
        let options = NdOptions {
            mode: mode.into(),
            ..Default::default()
        };
        let axis = rng.random_range(0..ndim) as isize;
        let sigma = [0.8, 2.0][rng.random_range(0..2)];
        let shifted = NdOptions {
            origin: PerAxis::Each(
                (0..ndim)
                    .map(|_| rng.random_range(-1i64..=1) as isize)
                    .collect(),
            ),
            ..options.clone()
        };
        let mut cube_shape = vec![3; ndim];
        if ndim == 4 {
            cube_shape[3] = 1;
        }
        let cube = ArrayD::from_shape_fn(IxDyn(&cube_shape), |_| rng.random_range(-1.0..1.0));
        let cube = cube.into_dimensionality::<D>().unwrap();
        let taps = ndarray::array![0.5, -1.0, 2.0, 0.25];
        let cases: [(&str, DeviceFilter<'_, T, D>, _); 6] = [
            (
                "gaussian_filter",
                Box::new(|x, out| nd.gaussian_filter_into(x, sigma, 0, &options, out)),
                cpu::gaussian_filter(input, sigma, 0, &options),
            ),
            (
                "sobel",
                Box::new(|x, out| nd.sobel_into(x, axis, &options, out)),
                cpu::sobel(input, axis, &options),
            ),
            (
                "uniform_filter (origin)",
                Box::new(|x, out| nd.uniform_filter_into(x, 3, &shifted, out)),
                cpu::uniform_filter(input, 3, &shifted),
            ),
            (
                "gaussian_gradient_magnitude",
                Box::new(|x, out| nd.gaussian_gradient_magnitude_into(x, 1.5, &options, out)),
                cpu::gaussian_gradient_magnitude(input, 1.5, &options),
            ),
            (
                "correlate1d",
                Box::new(|x, out| nd.correlate1d_into(x, &taps, axis, &options, out)),
                cpu::correlate1d(input, &taps, axis, &options),
            ),
            (
                "correlate (3^n)",
                Box::new(|x, out| nd.correlate_into(x, &cube, &options, out)),
                cpu::correlate(input, &cube, &options),
            ),
        ];
        for (name, run, expected) in cases {
            let what = format!(
                "{name} of device {} {:?} ({}D type), axis {axis}, {mode:?}",
                T::NAME,
                input.shape(),
                D::NDIM.map_or("dyn".into(), |n| n.to_string())
            );
            let mut target = engine.upload(&poison).unwrap();
            run(&source, &mut target).unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = engine
                .download(&target)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            check(
                got.view(),
                expected.unwrap().view(),
                scale(input) * 16.0,
                &what,
            );
        }
    }
}

/// Contiguous arrays of any rank and arrays of padded rows, in `f32`, `u8` (converted on the
/// device) and `f64`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_arrays_match_the_reference() {
    let (mut rng, _) = rng("nd device");
    let engine = Engine::new().expect("GPU tests need a CUDA GPU");
    for shape in [&[1000][..], &[45, 67], &[9, 31, 37], &[5, 6, 7, 8]] {
        let input: ArrayD<f32> = random_array(&mut rng, IxDyn(shape));
        filters(&mut rng, &engine, &input);
    }
    let image: ndarray::Array2<f32> = random_array(&mut rng, (45, 67));
    filters(&mut rng, &engine, &image);
    let volume: ndarray::Array3<u8> = random_array(&mut rng, (9, 31, 37));
    filters(&mut rng, &engine, &volume);
    let doubles: ArrayD<f64> = random_array(&mut rng, IxDyn(&[17, 40, 3]));
    filters(&mut rng, &engine, &doubles);
}

/// Operations chain on the device, and mismatched operands are errors that leave the engine
/// usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_calls_chain_and_refuse_mismatched_operands() {
    let (mut rng, _) = rng("nd device chain");
    let engine = Engine::new().expect("GPU tests need a CUDA GPU");
    let nd = engine.ndimage();
    let input: ArrayD<f32> = random_array(&mut rng, IxDyn(&[33, 64, 20]));
    let options = NdOptions::default();
    let a = engine.upload(&input).unwrap();
    let mut b = engine.alloc_device::<f32, _>(a.raw_dim()).unwrap();
    let mut c = engine.alloc_device::<f32, _>(a.raw_dim()).unwrap();
    nd.gaussian_filter_into(&a, 1.5, 0, &options, &mut b)
        .unwrap();
    nd.laplace_into(&b, &options, &mut c).unwrap();
    let got = engine.download(&c).unwrap();
    let smooth = cpu::gaussian_filter(&input, 1.5, 0, &options).unwrap();
    let expected = cpu::laplace(&smooth, &options).unwrap();
    check(got.view(), expected.view(), 64.0, "gaussian then laplace");
    let mut wrong = engine.alloc_device::<f32, _>(IxDyn(&[33, 64, 21])).unwrap();
    let error = nd.sobel_into(&a, 0, &options, &mut wrong).unwrap_err();
    assert!(matches!(error, ConvError::ShapeMismatch { .. }), "{error}");
    let error = nd
        .gaussian_filter_into(&a, -1.0, 0, &options, &mut b)
        .unwrap_err();
    assert!(
        matches!(error, ConvError::InvalidParameter { name: "sigma", .. }),
        "{error}"
    );
    nd.sobel_into(&a, 0, &options, &mut b).unwrap();
    let got = engine.download(&b).unwrap();
    let expected = cpu::sobel(&input, 0, &options).unwrap();
    check(got.view(), expected.view(), 16.0, "sobel after the errors");
}

/// Images with channels last, filtered along their two image axes (a sigma of 0, or `axes`,
/// leaving the channels alone: the fused separable kernel over interleaved channels, for
/// narrow types on device arrays the one that reads and writes them), on the host and on the
/// device, in `f32`, `u8` and `u16`.
#[test]
#[ignore = "needs a CUDA GPU"]
fn channels_last_images_match_the_reference() {
    let (mut rng, _) = rng("nd channels last");
    let engine = Engine::new().expect("GPU tests need a CUDA GPU");
    let nd = engine.ndimage();
    fn both<T: Random>(rng: &mut StdRng, engine: &Engine, shape: &[usize]) {
        let nd = engine.ndimage();
        let input: ArrayD<T> = random_array(rng, IxDyn(shape));
        let n = shape.len() as isize;
        let sigmas = [vec![2.0, 1.5], vec![2.0, 2.0]];
        for (mode, sigma) in all_modes().into_iter().zip(sigmas.iter().cycle()) {
            let image_axes = NdOptions {
                mode: mode.into(),
                axes: Some(vec![n - 3, n - 2]),
                ..Default::default()
            };
            let sigma = PerAxis::Each(sigma.clone());
            let expected = cpu::gaussian_filter(&input, sigma.clone(), 0, &image_axes).unwrap();
            let host = nd
                .gaussian_filter(&input, sigma.clone(), 0, &image_axes)
                .unwrap();
            let what = format!("{} {shape:?} {mode:?}, sigma {sigma:?}", T::NAME);
            check(
                host.view(),
                expected.view(),
                scale(&input) * 16.0,
                &format!("host {what}"),
            );
            let source = engine.upload(&input).unwrap();
            let mut target = engine.alloc_device::<T, _>(source.raw_dim()).unwrap();
            nd.gaussian_filter_into(&source, sigma, 0, &image_axes, &mut target)
                .unwrap();
            let device = engine.download(&target).unwrap();
            check(
                device.view(),
                expected.view(),
                scale(&input) * 16.0,
                &format!("device {what}"),
            );
        }
    }
    both::<f32>(&mut rng, &engine, &[123, 200, 3]);
    both::<u8>(&mut rng, &engine, &[64, 81, 4]);
    // Rows of a multiple of 32 elements: the kernels that read and write `u8`, `u16` run.
    both::<u8>(&mut rng, &engine, &[64, 96, 4]);
    both::<u16>(&mut rng, &engine, &[40, 32, 3]);
    both::<f32>(&mut rng, &engine, &[3, 40, 52, 3]);
    // A sigma of 0 on the channels is the same filter.
    let input: ArrayD<f32> = random_array(&mut rng, IxDyn(&[50, 60, 3]));
    let options = NdOptions::default();
    let zero = nd
        .gaussian_filter(&input, [2.0, 2.0, 0.0], 0, &options)
        .unwrap();
    let expected = cpu::gaussian_filter(&input, [2.0, 2.0, 0.0], 0, &options).unwrap();
    check(zero.view(), expected.view(), 16.0, "sigma (2, 2, 0)");
}
