//! The shared test helpers themselves, on the CPU: the GPU tests rely on them, so they must pick
//! the right operation, accept the reference, reject a wrong value, and agree with the library
//! on which origins are valid.

mod common;

use common::{
    expected1d, expected2d, image_mask, image_options, origin_range, random_vec, rng, zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::reference::{convolve1d, correlate1d};
use conv_host::{BoundaryMode, ConvError, reference};
use ndarray::{Array, Array1, Array2, Array3, ArrayBase, Data, Dimension};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The reference 2D correlation (or, with `convolve`, convolution) of an image `H x W` or
/// `H x W x C` with a 2D mask (given the channel axis of extent 1 for `H x W x C`).
fn filter2d<S: Data<Elem = f32>, D: Dimension>(
    image: &ArrayBase<S, D>,
    mask: &Array2<f32>,
    options: &NdOptions,
    convolve: bool,
) -> conv_host::Result<Array<f64, D>> {
    let ndim = image.ndim();
    let mask = image_mask::<D>(mask.view(), ndim);
    let options = image_options(options, ndim);
    if convolve {
        reference::convolve(image, &mask, &options)
    } else {
        reference::correlate(image, &mask, &options)
    }
}

#[test]
fn expected_values_follow_the_operation_and_the_check_can_fail() {
    let (mut rng, _) = rng("helpers");
    let (x, w) = (random_vec(&mut rng, 50), random_vec(&mut rng, 4));
    let options = NdOptions {
        mode: BoundaryMode::Constant(0.5).into(),
        origin: (-1).into(),
        ..zero_border()
    };
    for convolve in [false, true] {
        let reference = if convolve {
            convolve1d(&x, &w, 0, &options)
        } else {
            correlate1d(&x, &w, 0, &options)
        };
        let as_f32 = reference.unwrap().mapv(|v| v as f32);
        let expected = expected1d(x.view(), w.view(), &options, convolve);
        expected.check(as_f32.view(), "the reference itself");
        let mut wrong = as_f32.clone();
        wrong[17] += 1e-3;
        assert!(
            catch_unwind(AssertUnwindSafe(
                || expected.check(wrong.view(), "perturbed")
            ))
            .is_err()
        );
    }
    // Correlation and convolution differ for this mask, so a swapped flag would be caught.
    let correlated = correlate1d(&x, &w, 0, &options).unwrap().mapv(|v| v as f32);
    let convolution = expected1d(x.view(), w.view(), &options, true);
    assert!(
        catch_unwind(AssertUnwindSafe(
            || convolution.check(correlated.view(), "swapped")
        ))
        .is_err()
    );

    let image = Array3::from_shape_fn((9, 7, 3), |(y, x, c)| {
        ((y * 7 + x * 3 + c) % 11) as f32 - 5.0
    });
    let mask = ndarray::array![[1.0f32, -2.0, 0.5], [0.0, 1.0, 3.0]];
    let options = NdOptions {
        mode: BoundaryMode::Mirror.into(),
        ..zero_border()
    };
    for convolve in [false, true] {
        let reference = filter2d(&image, &mask, &options, convolve);
        let mut as_f32 = reference.unwrap().mapv(|v| v as f32);
        let expected = expected2d(image.view(), mask.view(), &options, convolve);
        expected.check(as_f32.view(), "the reference itself");
        as_f32[[4, 3, 1]] += 1e-2;
        assert!(
            catch_unwind(AssertUnwindSafe(
                || expected.check(as_f32.view(), "perturbed")
            ))
            .is_err()
        );
    }
}

#[test]
fn origin_range_agrees_with_the_library() {
    let x = Array1::from_elem(10, 1.0f32);
    for len in 1..9 {
        let mask = Array1::from_elem(len, 1.0f32);
        for convolve in [false, true] {
            let (min, max) = origin_range(len, convolve);
            let run = |origin: isize| {
                let options = NdOptions {
                    origin: origin.into(),
                    ..zero_border()
                };
                if convolve {
                    convolve1d(&x, &mask, 0, &options)
                } else {
                    correlate1d(&x, &mask, 0, &options)
                }
            };
            for origin in min..=max {
                assert!(
                    run(origin).is_ok(),
                    "len {len} convolve {convolve} origin {origin}"
                );
            }
            for origin in [min - 1, max + 1] {
                assert!(
                    matches!(run(origin), Err(ConvError::InvalidOrigin { .. })),
                    "len {len} origin {origin}"
                );
            }
        }
    }
}
