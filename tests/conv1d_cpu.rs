//! The 1D CPU reference: known answers from the textbook, a blog post and SciPy, and option
//! errors.
//! SciPy values were produced with scipy.ndimage 1.17.1 (`correlate1d` / `convolve1d`).

mod common;

use common::zero_border;
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Clamp, ConvError, reference};
use ndarray::{Array1, ArrayBase, Data, Ix1, array, s};

/// The reference 1D correlation of a signal (along its only axis).
fn correlate1d<S: Data<Elem = f32>, M: Data<Elem = f32>>(
    input: &ArrayBase<S, Ix1>,
    weights: &ArrayBase<M, Ix1>,
    options: &NdOptions,
) -> conv_host::Result<Array1<f64>> {
    reference::correlate1d(input, weights, 0, options)
}

/// The reference 1D convolution of a signal (along its only axis).
fn convolve1d<S: Data<Elem = f32>, M: Data<Elem = f32>>(
    input: &ArrayBase<S, Ix1>,
    weights: &ArrayBase<M, Ix1>,
    options: &NdOptions,
) -> conv_host::Result<Array1<f64>> {
    reference::convolve1d(input, weights, 0, options)
}

fn with_mode(mode: BoundaryMode) -> NdOptions {
    NdOptions {
        mode: mode.into(),
        ..zero_border()
    }
}

#[test]
fn textbook_figure_7_3_and_blog_example() {
    // N = 1..7, M = 3,4,5,4,3, zero ghost cells. Fig. 7.3: P[1] = 0*3 + 1*4 + 2*5 + 3*4 + 4*3 = 38.
    // The blog post's full output O = [22, 38, 57, 76, 95, 90, 74].
    let n = array![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
    let m = array![3.0f32, 4.0, 5.0, 4.0, 3.0];
    let p = correlate1d(&n, &m, &zero_border()).unwrap();
    assert_eq!(p[1], 38.0);
    assert_eq!(p, array![22.0, 38.0, 57.0, 76.0, 95.0, 90.0, 74.0]);
}

#[test]
fn textbook_exercise_2() {
    // N = {4,1,3,2,3}, M = {2,1,4}, zero ghost cells, P[i] = 2 N[i-1] + 1 N[i] + 4 N[i+1]:
    // P[0] = 2*0 + 1*4 + 4*1 = 8
    // P[1] = 2*4 + 1*1 + 4*3 = 21
    // P[2] = 2*1 + 1*3 + 4*2 = 13
    // P[3] = 2*3 + 1*2 + 4*3 = 20
    // P[4] = 2*2 + 1*3 + 4*0 = 7
    let n = array![4.0f32, 1.0, 3.0, 2.0, 3.0];
    let m = array![2.0f32, 1.0, 4.0];
    assert_eq!(
        correlate1d(&n, &m, &zero_border()).unwrap(),
        array![8.0, 21.0, 13.0, 20.0, 7.0]
    );
}

#[test]
fn each_mode_on_a_hand_checked_case() {
    // x = [1,2,3,4], w = [1,2,3]: out[i] = x[i-1] + 2 x[i] + 3 x[i+1]; only the ends differ.
    // Left ghost x[-1] and right ghost x[4] per mode: constant 0,0; nearest 1,4; reflect 1,4;
    // mirror 2,3; wrap 4,1. E.g. mirror out[0] = 2 + 2*1 + 3*2 = 10, out[3] = 3 + 8 + 3*3 = 20.
    let x = array![1.0f32, 2.0, 3.0, 4.0];
    let w = array![1.0f32, 2.0, 3.0];
    let cases = [
        (
            BoundaryMode::Constant(0.0),
            [8.0, 14.0, 20.0, 11.0],
            [4.0, 10.0, 16.0, 17.0],
        ),
        (
            BoundaryMode::Constant(-1.0),
            [7.0, 14.0, 20.0, 8.0],
            [1.0, 10.0, 16.0, 16.0],
        ),
        (
            BoundaryMode::Nearest,
            [9.0, 14.0, 20.0, 23.0],
            [7.0, 10.0, 16.0, 21.0],
        ),
        (
            BoundaryMode::Reflect,
            [9.0, 14.0, 20.0, 23.0],
            [7.0, 10.0, 16.0, 21.0],
        ),
        (
            BoundaryMode::Mirror,
            [10.0, 14.0, 20.0, 20.0],
            [10.0, 10.0, 16.0, 20.0],
        ),
        (
            BoundaryMode::Wrap,
            [12.0, 14.0, 20.0, 14.0],
            [16.0, 10.0, 16.0, 18.0],
        ),
    ];
    for (mode, correlated, convolved) in cases {
        assert_eq!(
            correlate1d(&x, &w, &with_mode(mode)).unwrap(),
            Array1::from(correlated.to_vec()),
            "{mode:?}"
        );
        assert_eq!(
            convolve1d(&x, &w, &with_mode(mode)).unwrap(),
            Array1::from(convolved.to_vec()),
            "{mode:?}"
        );
    }
}

#[test]
fn mask_longer_than_input_folds_repeatedly() {
    // x = [1,2,3], w = 1..7 (SciPy values). Reflect extends x as ... 3 2 1 | 1 2 3 | 3 2 1 ...:
    // out[0] sees x[-3..=3] = 3,2,1,1,2,3,3 -> 3+4+3+4+10+18+21 = 63.
    let x = array![1.0f32, 2.0, 3.0];
    let w: Array1<f32> = (1..=7).map(|v| v as f32).collect();
    let cases = [
        (BoundaryMode::Constant(0.0), [32.0, 26.0, 20.0]),
        (BoundaryMode::Nearest, [59.0, 68.0, 75.0]),
        (BoundaryMode::Reflect, [63.0, 62.0, 55.0]),
        (BoundaryMode::Mirror, [60.0, 52.0, 52.0]),
        (BoundaryMode::Wrap, [53.0, 54.0, 61.0]),
    ];
    for (mode, expected) in cases {
        assert_eq!(
            correlate1d(&x, &w, &with_mode(mode)).unwrap(),
            Array1::from(expected.to_vec()),
            "{mode:?}"
        );
    }
    // A single element under mirror repeats itself: 5 * (1 + ... + 7) = 140.
    assert_eq!(
        correlate1d(&array![5.0f32], &w, &with_mode(BoundaryMode::Mirror)).unwrap()[0],
        140.0
    );
}

#[test]
fn origins_and_even_masks_follow_scipy() {
    let x = array![1.0f32, 2.0, 3.0, 4.0, 5.0];
    let w = array![1.0f32, 2.0, 3.0, 4.0];
    let correlated = [
        (-2, [30.0, 40.0, 46.0, 45.0, 39.0]),
        (-1, [21.0, 30.0, 40.0, 46.0, 45.0]),
        (0, [15.0, 21.0, 30.0, 40.0, 46.0]),
        (1, [14.0, 15.0, 21.0, 30.0, 40.0]),
    ];
    let convolved = [
        (-2, [21.0, 15.0, 14.0, 20.0, 30.0]),
        (-1, [15.0, 14.0, 20.0, 30.0, 39.0]),
        (0, [14.0, 20.0, 30.0, 39.0, 45.0]),
        (1, [20.0, 30.0, 39.0, 45.0, 46.0]),
    ];
    for (origin, expected) in correlated {
        let options = NdOptions {
            origin: origin.into(),
            mode: BoundaryMode::Reflect.into(),
            ..zero_border()
        };
        assert_eq!(
            correlate1d(&x, &w, &options).unwrap(),
            Array1::from(expected.to_vec()),
            "origin {origin}"
        );
    }
    for (origin, expected) in convolved {
        let options = NdOptions {
            origin: origin.into(),
            mode: BoundaryMode::Reflect.into(),
            ..zero_border()
        };
        assert_eq!(
            convolve1d(&x, &w, &options).unwrap(),
            Array1::from(expected.to_vec()),
            "origin {origin}"
        );
    }
}

#[test]
fn invalid_origins_are_typed_errors() {
    let x = array![1.0f32, 2.0, 3.0];
    let w = array![1.0f32, 2.0, 3.0, 4.0];
    let at = |origin: isize| NdOptions {
        origin: origin.into(),
        ..zero_border()
    };
    assert!(matches!(
        correlate1d(&x, &w, &at(2)),
        Err(ConvError::InvalidOrigin {
            origin: 2,
            mask_len: 4,
            min: -2,
            max: 1
        })
    ));
    assert!(matches!(
        correlate1d(&x, &w, &at(-3)),
        Err(ConvError::InvalidOrigin { .. })
    ));
    assert!(matches!(
        convolve1d(&x, &w, &at(2)),
        Err(ConvError::InvalidOrigin {
            min: -2,
            max: 1,
            ..
        })
    ));
    assert!(matches!(
        convolve1d(&x, &w, &at(-3)),
        Err(ConvError::InvalidOrigin { .. })
    ));
}

#[test]
fn empty_mask_and_bad_clamp_are_errors_empty_input_is_empty() {
    let x = array![1.0f32, 2.0];
    assert!(matches!(
        correlate1d(&x, &Array1::<f32>::zeros(0), &zero_border()),
        Err(ConvError::EmptyMask)
    ));
    let clamp = NdOptions {
        clamp: Some(Clamp { lo: 1.0, hi: 0.0 }),
        ..zero_border()
    };
    assert!(matches!(
        correlate1d(&x, &array![1.0f32], &clamp),
        Err(ConvError::InvalidClamp { .. })
    ));
    let nan_clamp = NdOptions {
        clamp: Some(Clamp {
            lo: f32::NAN,
            hi: 0.0,
        }),
        ..zero_border()
    };
    assert!(matches!(
        correlate1d(&x, &array![1.0f32], &nan_clamp),
        Err(ConvError::InvalidClamp { .. })
    ));
    assert_eq!(
        correlate1d(&Array1::<f32>::zeros(0), &array![1.0f32], &zero_border())
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn clamp_limits_the_output_and_keeps_nan() {
    let x = array![-2.0f32, 0.5, 2.0, f32::NAN];
    let clamp = NdOptions {
        clamp: Some(Clamp { lo: 0.0, hi: 1.0 }),
        ..zero_border()
    };
    let out = correlate1d(&x, &array![1.0f32], &clamp).unwrap();
    assert_eq!(out.slice(s![..3]), array![0.0, 0.5, 1.0]);
    assert!(out[3].is_nan());
}

#[test]
fn strided_and_reversed_views_match_contiguous_copies() {
    let data: Array1<f32> = (0..40).map(|v| (v as f32 * 0.37).sin()).collect();
    let w = array![0.25f32, -1.0, 0.5, 2.0, 1.0];
    for view in [
        data.slice(s![3..37;3]),
        data.slice(s![..;-2]),
        data.slice(s![5..6]),
    ] {
        let copy = view.to_owned();
        for mode in common::all_modes() {
            assert_eq!(
                correlate1d(&view, &w, &with_mode(mode)).unwrap(),
                correlate1d(&copy, &w, &with_mode(mode)).unwrap()
            );
        }
    }
}

#[test]
fn engine_without_a_driver_says_so() {
    // On a machine without libcuda this must be NoDriver; where a driver exists, NoDriver would
    // be wrong. Either way, no panic.
    match conv_host::Engine::new() {
        Err(ConvError::NoDriver) => assert!(!std::path::Path::new("/dev/nvidiactl").exists()),
        Err(ConvError::NoDevice { .. }) | Ok(_) => {}
        Err(other) => panic!("unexpected error creating an engine: {other}"),
    }
}
