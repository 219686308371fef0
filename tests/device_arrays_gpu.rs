//! Device arrays: uploads and downloads of every shape and layout, chains of operations that
//! stay on the GPU (against the host path, which runs the same kernels, and the f64
//! reference), every kernel family through the `_device` operations, and their errors.

mod common;

use common::images::{random_array3, random_mask, random_separable_mask};
use common::tensor_copy::has_tensor_copies;
use common::{
    assert_engine_works, engine, expected1d, expected2d, image_mask, random_vec, rng, zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, Kernel, masks};
use ndarray::{Array1, Array2, Array3, Axis, Ix3, s};
use rand::Rng;

/// Uploads and downloads return the array exactly: signals and images, contiguous and strided,
/// widths that are not multiples of the row alignment, and sizes that take several bands.
#[test]
#[ignore = "needs a CUDA GPU"]
fn uploads_and_downloads_round_trip() {
    let (mut rng, seed) = rng("round trip");
    for len in [1, 1000, 9 << 20] {
        let signal = random_vec(&mut rng, len);
        let device = engine().upload(&signal).unwrap();
        assert_eq!(device.shape(), &[len]);
        assert_eq!(engine().download(&device).unwrap(), signal, "{len}");
    }
    let reversed = random_vec(&mut rng, 777);
    let device = engine().upload(&reversed.slice(s![..;-1])).unwrap();
    assert_eq!(
        engine().download(&device).unwrap(),
        reversed.slice(s![..;-1])
    );
    for shape in [(1, 1, 1), (37, 53, 3), (3100, 2900, 1), (5, 700, 4)] {
        let image = random_array3(&mut rng, shape);
        let device = engine().upload(&image).unwrap();
        assert_eq!(engine().download(&device).unwrap(), image, "{shape:?}");
        let grey = image.index_axis(Axis(2), 0);
        let device = engine().upload(&grey.t()).unwrap();
        let mut back = Array2::zeros(grey.t().raw_dim());
        engine().download_into(&device, back.view_mut()).unwrap();
        assert_eq!(back, grey.t(), "{shape:?} transposed");
    }
    let zeros = engine()
        .alloc_device::<f32, _>(ndarray::Ix3(4, 5, 3))
        .unwrap();
    assert_eq!(
        engine().download(&zeros).unwrap(),
        Array3::<f32>::zeros((4, 5, 3))
    );
    eprintln!("round trip: exact (seed {seed})");
}

/// Three operations chained on the GPU equal the same three through the host path (the same
/// kernels on the same data), and the first equals the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn chained_operations_stay_on_the_gpu() {
    let (mut rng, seed) = rng("chain");
    for (shape, mode) in [
        ((300, 257, 1), BoundaryMode::Reflect),
        ((123, 77, 3), BoundaryMode::Wrap),
        ((64, 1000, 4), BoundaryMode::Constant(0.0)),
    ] {
        let image = random_array3(&mut rng, shape);
        let general = random_mask(&mut rng, (5, 7));
        let rank_one = random_separable_mask(&mut rng, (9, 9));
        let options = NdOptions {
            mode: mode.into(),
            truncate: f64::from(masks::DEFAULT_TRUNCATE),
            ..zero_border()
        };
        // The Gaussian blurs the two image axes, not the channels.
        let sigma = [1.5, 1.5, 0.0];
        let (general3, rank_one3) = (
            image_mask::<Ix3>(general.view(), 3),
            image_mask::<Ix3>(rank_one.view(), 3),
        );
        let nd = engine().ndimage();
        let input = engine().upload(&image).unwrap();
        let mut a = engine().alloc_device::<f32, _>(image.raw_dim()).unwrap();
        let mut b = engine().alloc_device::<f32, _>(image.raw_dim()).unwrap();
        nd.correlate_into(&input, &general3, &options, &mut a)
            .unwrap();
        nd.gaussian_filter_into(&a, sigma, 0, &options, &mut b)
            .unwrap();
        nd.convolve_into(&b, &rank_one3, &options, &mut a).unwrap();
        engine().synchronize().unwrap();
        let chained = engine().download(&a).unwrap();
        let first = nd.correlate(&image, &general3, &options).unwrap();
        let second = nd.gaussian_filter(&first, sigma, 0, &options).unwrap();
        let third = nd.convolve(&second, &rank_one3, &options).unwrap();
        assert_eq!(chained, third, "{shape:?} {mode:?}");
        expected2d(image.view(), general.view(), &options, false)
            .check(first.view(), &format!("{shape:?} {mode:?} first step"));
    }
    let signal = random_vec(&mut rng, 100_003);
    let mask = random_vec(&mut rng, 7);
    let options = NdOptions {
        mode: BoundaryMode::Mirror.into(),
        ..zero_border()
    };
    let nd = engine().ndimage();
    let input = engine().upload(&signal).unwrap();
    let mut a = engine().alloc_device::<f32, _>(input.raw_dim()).unwrap();
    let mut b = engine().alloc_device::<f32, _>(input.raw_dim()).unwrap();
    nd.correlate1d_into(&input, &mask, 0, &options, &mut a)
        .unwrap();
    nd.convolve1d_into(&a, &mask, 0, &options, &mut b).unwrap();
    let chained = engine().download(&b).unwrap();
    let first = nd.correlate1d(&signal, &mask, 0, &options).unwrap();
    assert_eq!(chained, nd.convolve1d(&first, &mask, 0, &options).unwrap());
    expected1d(signal.view(), mask.view(), &options, false).check(first.view(), "1d first step");
    eprintln!("chain: equal to the host path (seed {seed})");
}

/// Every kernel family through the `_device` operations against the f64 reference.
#[test]
#[ignore = "needs a CUDA GPU"]
fn every_design_runs_on_device_arrays() {
    let (mut rng, seed) = rng("device designs");
    let mut cases: Vec<(Kernel, Array2<f32>, usize)> = Kernel::TEXTBOOK
        .into_iter()
        .map(|k| (k, random_mask(&mut rng, (5, 5)), 3))
        .collect();
    cases.push((Kernel::RegisterTiled, random_mask(&mut rng, (5, 5)), 1));
    cases.push((Kernel::RegisterTiled, random_mask(&mut rng, (3, 13)), 4));
    cases.push((
        Kernel::Separable,
        random_separable_mask(&mut rng, (7, 7)),
        3,
    ));
    cases.push((
        Kernel::Separable,
        random_separable_mask(&mut rng, (5, 3)),
        1,
    ));
    if has_tensor_copies() {
        cases.push((
            Kernel::SeparableTma,
            random_separable_mask(&mut rng, (9, 9)),
            1,
        ));
        cases.push((Kernel::RegisterTiledTma, random_mask(&mut rng, (7, 7)), 3));
    }
    for (kernel, mask, channels) in cases {
        let shape = (rng.random_range(1..300), rng.random_range(1..300), channels);
        let image = random_array3(&mut rng, shape);
        let options = NdOptions {
            kernel,
            ..zero_border()
        };
        let input = engine().upload(&image).unwrap();
        let mut output = engine().alloc_device::<f32, _>(image.raw_dim()).unwrap();
        engine()
            .ndimage()
            .correlate_into(
                &input,
                &image_mask::<Ix3>(mask.view(), 3),
                &options,
                &mut output,
            )
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
        let got = engine().download(&output).unwrap();
        expected2d(image.view(), mask.view(), &options, false)
            .check(got.view(), &format!("{kernel} {shape:?}"));
    }
    for kernel in [Kernel::RegisterTiled, Kernel::Tiled] {
        let len = rng.random_range(1..50_000);
        let signal = random_vec(&mut rng, len);
        let mask = random_vec(&mut rng, 15);
        let options = NdOptions {
            kernel,
            mode: BoundaryMode::Nearest.into(),
            ..zero_border()
        };
        let input = engine().upload(&signal).unwrap();
        let mut output = engine().alloc_device::<f32, _>(input.raw_dim()).unwrap();
        engine()
            .ndimage()
            .convolve1d_into(&input, &mask, 0, &options, &mut output)
            .unwrap();
        let got = engine().download(&output).unwrap();
        expected1d(signal.view(), mask.view(), &options, true)
            .check(got.view(), &format!("1d {kernel}"));
    }
    eprintln!("device designs: matched the reference (seed {seed})");
}

/// Shape mismatches are typed errors, and the engine and the arrays stay usable.
#[test]
#[ignore = "needs a CUDA GPU"]
fn device_array_errors_are_typed() {
    let nd = engine().ndimage();
    let image = Array2::<f32>::ones((10, 20));
    let input = engine().upload(&image).unwrap();
    let mut wrong = engine()
        .alloc_device::<f32, _>(ndarray::Ix2(20, 10))
        .unwrap();
    assert!(matches!(
        nd.correlate_into(&input, &masks::sharpen(), &zero_border(), &mut wrong),
        Err(ConvError::ShapeMismatch { .. })
    ));
    let mut small = Array2::<f32>::zeros((10, 19));
    assert!(matches!(
        engine().download_into(&input, small.view_mut()),
        Err(ConvError::ShapeMismatch { .. })
    ));
    // A well-shaped output gets the mask's own error.
    let mut output = engine().alloc_device::<f32, _>(image.raw_dim()).unwrap();
    assert!(matches!(
        nd.correlate_into(
            &input,
            &Array2::<f32>::zeros((0, 3)),
            &zero_border(),
            &mut output
        ),
        Err(ConvError::EmptyMask)
    ));
    let sharpen = masks::sharpen();
    nd.correlate_into(&input, &sharpen, &zero_border(), &mut output)
        .unwrap();
    let host = nd.correlate(&image, &sharpen, &zero_border()).unwrap();
    assert_eq!(engine().download(&output).unwrap(), host);
    let empty = engine().upload(&Array1::<f32>::zeros(0)).unwrap();
    assert!(empty.is_empty());
    assert_eq!(engine().download(&empty).unwrap().len(), 0);
    assert_engine_works();
}
