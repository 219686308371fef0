//! One engine hammered from 16 threads: mixed shapes, element types, modes and operations
//! (1D and 2D host calls, N-D filters in bands, page-locked arrays, device-array chains), each
//! result against the f64 reference; the calls run on lanes of their own at the same time.

mod common;

use common::elements::{check, random_array};
use common::{all_modes, image_mask, random_vec, rng};
use conv_host::Engine;
use conv_host::ndimage::NdOptions;
use conv_host::reference as cpu;
use ndarray::{Array2, Array3, ArrayD, Ix3, IxDyn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const THREADS: usize = 16;
const CALLS: usize = 12;

/// One random call on `engine`, checked against the reference.
fn one_call(engine: &Engine, rng: &mut StdRng, what: &str) {
    let mode = all_modes()[rng.random_range(0..6)];
    let nd = engine.ndimage();
    // This call's mode, the defaults otherwise.
    let options = NdOptions {
        mode: mode.into(),
        ..Default::default()
    };
    match rng.random_range(0..5) {
        0 => {
            let len = rng.random_range(1..20_000);
            let x = random_vec(rng, len);
            let taps_len = [3, 7, 31][rng.random_range(0..3)];
            let taps = random_vec(rng, taps_len);
            let got = nd.correlate1d(&x, &taps, 0, &options).unwrap();
            let expected = cpu::correlate1d(&x, &taps, 0, &options).unwrap();
            check(
                got.view(),
                expected.view(),
                32.0,
                &format!("{what}: 1d {len} {mode:?}"),
            );
        }
        1 => {
            let shape = (
                rng.random_range(1..300),
                rng.random_range(1..300),
                [1, 3][rng.random_range(0..2)],
            );
            let image: Array3<u8> = random_array(rng, shape);
            let side = [3, 5, 9][rng.random_range(0..3)];
            let mask = Array2::from_shape_vec((side, side), random_vec(rng, side * side).to_vec())
                .unwrap();
            let mask = image_mask::<Ix3>(mask.view(), 3);
            let got = nd.correlate(&image, &mask, &options).unwrap();
            let expected = cpu::correlate(&image, &mask, &options).unwrap();
            check(
                got.view(),
                expected.view(),
                255.0 * 81.0,
                &format!("{what}: u8 {shape:?} {side}x{side} {mode:?}"),
            );
        }
        2 => {
            let shape = [
                rng.random_range(1..40),
                rng.random_range(1..50),
                rng.random_range(1..60),
            ];
            let volume: ArrayD<f32> = random_array(rng, IxDyn(&shape));
            let sigma = [0.7, 1.5, 3.0][rng.random_range(0..3)];
            let got = nd.gaussian_filter(&volume, sigma, 0, &options).unwrap();
            let expected = cpu::gaussian_filter(&volume, sigma, 0, &options).unwrap();
            check(
                got.view(),
                expected.view(),
                16.0,
                &format!("{what}: gaussian {shape:?} {sigma} {mode:?}"),
            );
        }
        3 => {
            let shape = (rng.random_range(8..200), rng.random_range(8..200), 1);
            let image: Array3<f32> = random_array(rng, shape);
            let mut input = engine.alloc_pinned::<f32, _>(image.raw_dim()).unwrap();
            input.view_mut().assign(&image);
            let mut output = engine.alloc_pinned::<f32, _>(image.raw_dim()).unwrap();
            let mask = Array2::from_shape_vec((5, 5), random_vec(rng, 25).to_vec()).unwrap();
            let mask = image_mask::<Ix3>(mask.view(), 3);
            nd.correlate_into(&input.view(), &mask, &options, output.view_mut())
                .unwrap();
            let expected = cpu::correlate(&image, &mask, &options).unwrap();
            check(
                output.view(),
                expected.view(),
                64.0,
                &format!("{what}: pinned {shape:?} {mode:?}"),
            );
        }
        _ => {
            // Two filters chained on device arrays, read back once.
            let shape = (rng.random_range(8..200), rng.random_range(8..200));
            let image =
                Array2::from_shape_vec(shape, random_vec(rng, shape.0 * shape.1).to_vec()).unwrap();
            let mask = Array2::from_shape_vec((3, 3), random_vec(rng, 9).to_vec()).unwrap();
            let a = engine.upload(&image).unwrap();
            let mut b = engine.alloc_device::<f32, _>(image.raw_dim()).unwrap();
            let mut c = engine.alloc_device::<f32, _>(image.raw_dim()).unwrap();
            nd.correlate_into(&a, &mask, &options, &mut b).unwrap();
            nd.correlate_into(&b, &mask, &options, &mut c).unwrap();
            let got = engine.download(&c).unwrap();
            let once = cpu::correlate(&image, &mask, &options).unwrap();
            let expected = cpu::correlate(&once.mapv(|v| v as f32), &mask, &options).unwrap();
            check(
                got.view(),
                expected.view(),
                64.0,
                &format!("{what}: device chain {shape:?} {mode:?}"),
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sixteen_threads_on_one_engine_match_the_reference() {
    let (_, seed) = rng("threads");
    let engine = Engine::new().expect("GPU tests need a CUDA GPU");
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let engine = &engine;
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ thread as u64);
                for call in 0..CALLS {
                    one_call(engine, &mut rng, &format!("thread {thread} call {call}"));
                }
            });
        }
    });
    // Still usable from one thread after the storm.
    let mut rng = StdRng::seed_from_u64(seed);
    one_call(&engine, &mut rng, "after");
}
