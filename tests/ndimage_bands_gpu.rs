//! The N-D operations on host arrays in bands of the first axis (an engine capped so that an
//! array splits into several), ordinary and page-locked, against their f64 CPU twins: every
//! separable filter and the 3D correlation, every mode, halos taller than a band, element types
//! converted on the device; filters that bands cannot reproduce still run, on the whole array.

mod common;

use common::elements::{Random, check, random_array};
use common::{all_modes, rng};
use conv_host::ndimage::{NdOptions, PerAxis};
use conv_host::reference as cpu;
use conv_host::{BoundaryMode, Element, Engine, PinnedArray};
use ndarray::{ArrayD, IxDyn};
use rand::Rng;
use rand::rngs::StdRng;

/// The largest magnitude of `input` (at least 1).
fn scale<T: Element>(input: &ArrayD<T>) -> f64 {
    input.iter().fold(1.0f64, |m, v| m.max(v.to_f64().abs()))
}

/// One filter call from an input view into an output view.
type Filter<'a, T> = Box<
    dyn Fn(&ndarray::ArrayViewD<'_, T>, ndarray::ArrayViewMutD<'_, T>) -> conv_host::Result<()>
        + 'a,
>;

/// An engine whose host calls may hold `cap` bytes of device memory.
fn capped(cap: usize) -> Engine {
    let engine = Engine::new().expect("GPU tests need a CUDA GPU");
    engine.set_device_memory_limit(Some(cap));
    engine
}

/// Every filter of `T` arrays on `engine` against the twin, `pinned` arrays in and out where
/// asked; returns the most bands one call took.
fn filters<T: Random>(rng: &mut StdRng, engine: &Engine, shape: &[usize], pinned: bool) -> usize {
    let nd = engine.ndimage();
    let input: ArrayD<T> = random_array(rng, IxDyn(shape));
    let ndim = shape.len();
    let mut most_bands = 0;
    for mode in all_modes() {
        let options = NdOptions {
            mode: mode.into(),
            ..Default::default()
        };
        let sigma = [0.8, 2.0, 5.0][rng.random_range(0..3)];
        let axis = rng.random_range(0..ndim) as isize;
        let odd = [3, 5, 9][rng.random_range(0..3)];
        let shifted = NdOptions {
            origin: PerAxis::Each(
                (0..ndim)
                    .map(|_| rng.random_range(-(odd as i64 / 2)..=odd as i64 / 2) as isize)
                    .collect(),
            ),
            ..options.clone()
        };
        // A 4D array holds channels last: the mask leaves them alone.
        let mut cube_shape = vec![3; ndim];
        if ndim == 4 {
            cube_shape[3] = 1;
        }
        let cube = ArrayD::from_shape_fn(IxDyn(&cube_shape), |_| rng.random_range(-1.0..1.0));
        let taps = ndarray::array![0.5, -1.0, 2.0, 0.25];
        let names = [
            "gaussian_filter",
            "sobel",
            "uniform_filter (origin)",
            "laplace",
            "gaussian_gradient_magnitude",
            "correlate1d axis 0",
            "correlate (3^n)",
        ];
        for name in names {
            let (run, expected): (Filter<'_, T>, _) = match name {
                "gaussian_filter" => (
                    Box::new(|x: &_, out| nd.gaussian_filter_into(x, sigma, 0, &options, out)),
                    cpu::gaussian_filter(&input, sigma, 0, &options),
                ),
                "sobel" => (
                    Box::new(|x: &_, out| nd.sobel_into(x, axis, &options, out)),
                    cpu::sobel(&input, axis, &options),
                ),
                "uniform_filter (origin)" => (
                    Box::new(|x: &_, out| nd.uniform_filter_into(x, odd, &shifted, out)),
                    cpu::uniform_filter(&input, odd, &shifted),
                ),
                "laplace" => (
                    Box::new(|x: &_, out| nd.laplace_into(x, &options, out)),
                    cpu::laplace(&input, &options),
                ),
                "gaussian_gradient_magnitude" => (
                    Box::new(|x: &_, out| {
                        nd.gaussian_gradient_magnitude_into(x, 1.5, &options, out)
                    }),
                    cpu::gaussian_gradient_magnitude(&input, 1.5, &options),
                ),
                "correlate1d axis 0" => (
                    Box::new(|x: &_, out| nd.correlate1d_into(x, &taps, 0, &options, out)),
                    cpu::correlate1d(&input, &taps, 0, &options),
                ),
                _ => (
                    Box::new(|x: &_, out| nd.correlate_into(x, &cube, &options, out)),
                    cpu::correlate(&input, &cube, &options),
                ),
            };
            let expected = expected.unwrap();
            let got: ArrayD<T> = if pinned {
                let mut source: PinnedArray<T, IxDyn> = engine.alloc_pinned(IxDyn(shape)).unwrap();
                source.view_mut().assign(&input);
                let mut target: PinnedArray<T, IxDyn> = engine.alloc_pinned(IxDyn(shape)).unwrap();
                target.view_mut().fill(T::from_f64(7.0));
                run(&source.view(), target.view_mut()).unwrap();
                target.view().to_owned()
            } else {
                let mut got = ArrayD::from_elem(IxDyn(shape), T::from_f64(7.0));
                run(&input.view(), got.view_mut()).unwrap();
                got
            };
            let times = engine.last_host_times().expect("a host call's times");
            most_bands = most_bands.max(times.bands);
            let what = format!(
                "{name} of {} {shape:?} (pinned {pinned}, {} bands, in place {:?}): sigma {sigma}, \
                 axis {axis}, box {odd} at {:?}, {mode:?}",
                T::NAME,
                times.bands,
                times.in_place,
                shifted.origin
            );
            check(got.view(), expected.view(), scale(&input) * 16.0, &what);
        }
    }
    most_bands
}

/// Arrays of 2 to 4 dimensions split into bands along their first axis, halos from 1 row to
/// taller than a band, in every element type (narrow ones converted on the device), ordinary
/// and page-locked.
#[test]
#[ignore = "needs a CUDA GPU"]
fn host_arrays_in_bands_match_the_reference() {
    let (mut rng, _) = rng("nd bands");
    // A row of 37 x 41 f32 elements takes 6 KiB a buffer; 2 MiB gives bands of a few rows.
    let engine = capped(2 << 20);
    let mut bands = Vec::new();
    for (shape, pinned) in [
        (&[90, 37, 41][..], false),
        (&[90, 37, 41], true),
        (&[400, 1300], false),
        (&[70, 7, 9, 40], false),
    ] {
        bands.push(filters::<f32>(&mut rng, &engine, shape, pinned));
    }
    bands.push(filters::<u8>(&mut rng, &engine, &[90, 37, 41], false));
    bands.push(filters::<u16>(&mut rng, &engine, &[90, 37, 41], true));
    bands.push(filters::<f64>(&mut rng, &engine, &[60, 37, 41], false));
    assert!(
        bands.iter().all(|&b| b > 2),
        "calls split into bands: {bands:?}"
    );
}

/// A filter whose passes along the first axis differ in mode (SciPy's per-term modes of
/// `gaussian_gradient_magnitude`) runs on the whole array, as does a nonzero constant read
/// after another axis's pass; both still match the twin.
#[test]
#[ignore = "needs a CUDA GPU"]
fn filters_bands_cannot_reproduce_run_whole() {
    let (mut rng, _) = rng("nd whole");
    let engine = capped(64 << 20);
    let nd = engine.ndimage();
    let input: ArrayD<f32> = random_array(&mut rng, IxDyn(&[50, 60, 70]));
    let per_term = NdOptions {
        mode: PerAxis::Each(vec![
            BoundaryMode::Reflect,
            BoundaryMode::Wrap,
            BoundaryMode::Nearest,
        ]),
        ..Default::default()
    };
    let got = nd
        .gaussian_gradient_magnitude(&input, 2.0, &per_term)
        .unwrap();
    let expected = cpu::gaussian_gradient_magnitude(&input, 2.0, &per_term).unwrap();
    check(got.view(), expected.view(), 16.0, "per-term modes");
    let constant = NdOptions {
        mode: BoundaryMode::Constant(1.5).into(),
        ..Default::default()
    };
    let got = nd.sobel(&input, 1, &constant).unwrap();
    let expected = cpu::sobel(&input, 1, &constant).unwrap();
    check(got.view(), expected.view(), 16.0, "sobel, constant 1.5");
}
