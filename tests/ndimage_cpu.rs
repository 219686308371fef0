//! The N-D CPU twins against SciPy's results (values from `scipy.ndimage` 1.17) and against
//! the independent 2D references; their parameter errors. No GPU needed.

mod common;

use conv_host::masks::gaussian2d;
use conv_host::ndimage::{NdOptions, PerAxis};
use conv_host::reference as cpu;
use conv_host::{BoundaryMode, ConvError};
use ndarray::{Array2, Array3, ArrayD, Axis, IxDyn, array};

/// `np.arange(12).reshape(3, 4) ** 1.5`.
fn ramp() -> Array2<f64> {
    Array2::from_shape_fn((3, 4), |(i, j)| ((i * 4 + j) as f64).powf(1.5))
}

fn assert_near(got: &Array2<f64>, expected: &[[f64; 4]; 3], what: &str) {
    for (g, e) in got.iter().zip(expected.iter().flatten()) {
        assert!(
            (g - e).abs() < 1e-9,
            "{what}: {got:?} against SciPy's {expected:?}"
        );
    }
}

/// One mode for every axis, or one per axis.
fn modes(list: &[BoundaryMode]) -> NdOptions {
    NdOptions {
        mode: match list {
            [one] => PerAxis::All(*one),
            each => each.into(),
        },
        ..Default::default()
    }
}

#[test]
fn the_twins_give_scipys_results() {
    let x = ramp();
    let mirror = modes(&[BoundaryMode::Mirror]);
    assert_near(
        &cpu::gaussian_filter1d(&x, 1.0, 0, 1, &mirror).unwrap(),
        &[
            [0.0; 4],
            [
                5.174344059612,
                5.945572380709,
                6.584572652714,
                7.154517689517,
            ],
            [0.0; 4],
        ],
        "gaussian_filter1d order 1",
    );
    let per_axis = modes(&[BoundaryMode::Wrap, BoundaryMode::Nearest]);
    assert_near(
        &cpu::gaussian_gradient_magnitude(&x, [0.8, 1.2], &per_axis).unwrap(),
        &[
            [
                4.743389167014,
                4.92840963538,
                5.095584971315,
                4.923620756899,
            ],
            [
                7.83730102523,
                8.109090582872,
                8.413240946829,
                8.157233728924,
            ],
            [
                3.663165222359,
                4.482914510405,
                4.664019831433,
                3.890308873464,
            ],
        ],
        "gaussian_gradient_magnitude, a mode per axis",
    );
    let shifted = NdOptions {
        mode: BoundaryMode::Constant(-1.0).into(),
        origin: PerAxis::All(1),
        ..Default::default()
    };
    assert_near(
        &cpu::uniform_filter1d(&x, 3, 1, &shifted).unwrap(),
        &[
            [-0.666666666667, 0.0, 1.276142374915, 3.008193182484],
            [2.0, 6.060113295833, 11.292426114733, 14.799179173883],
            [
                6.87580566599,
                16.209138999323,
                27.083397866551,
                31.701883098531,
            ],
        ],
        "uniform_filter1d with an origin and a constant",
    );
    let even = NdOptions {
        origin: PerAxis::All(-1),
        ..Default::default()
    };
    assert_near(
        &cpu::convolve1d(&x, &array![1.0, 2.0, 0.5, -1.0], -1, &even).unwrap(),
        &[
            [0.0, 4.828427124746, 11.353006672199, 16.002670830493],
            [20.0, 33.057618231697, 45.5043060346, 51.728906873207],
            [
                56.568542494924,
                74.309068102699,
                90.601008899307,
                98.26000638257,
            ],
        ],
        "convolve1d, an even mask with an origin",
    );
    assert_near(
        &cpu::gaussian_laplace(&x, 1.0, &modes(&[BoundaryMode::Nearest])).unwrap(),
        &[
            [
                5.679650046596,
                5.885593611492,
                5.433158767739,
                4.938610854057,
            ],
            [
                2.633981860493,
                1.971182290552,
                0.52361249753,
                -0.55666172151,
            ],
            [
                -2.974516431172,
                -4.232366121668,
                -6.410183230639,
                -7.930956422642,
            ],
        ],
        "gaussian_laplace",
    );
    let radius = NdOptions {
        radius: Some(vec![2, 1].into()),
        ..Default::default()
    };
    assert_near(
        &cpu::gaussian_filter(&x, [1.0, 0.5], [0, 2], &radius).unwrap(),
        &[
            [
                0.201614404185,
                -2.398959814031,
                -4.120674651429,
                -10.194343402053,
            ],
            [
                -2.218127063768,
                -7.028261076498,
                -9.136919111665,
                -16.5063887502,
            ],
            [
                -5.17672658791,
                -11.950455984283,
                -14.44253136964,
                -23.048085237837,
            ],
        ],
        "gaussian_filter with orders and radii per axis",
    );
}

#[test]
fn the_twins_agree_with_the_2d_references() {
    let image = Array2::from_shape_fn((23, 31), |(i, j)| ((i * 31 + j) as f64 * 0.37).sin());
    for mode in [
        BoundaryMode::Constant(0.0),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ] {
        let nd = NdOptions {
            mode: mode.into(),
            ..Default::default()
        };
        // `correlate` of a 2D image with a 2D mask runs the direct 2D reference, not passes.
        let sobel_rows =
            Array2::from_shape_fn((3, 3), |(i, j)| [-1.0, 0.0, 1.0][i] * [1.0, 2.0, 1.0][j]);
        let laplace = array![[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]];
        let pairs = [
            (
                cpu::sobel(&image, 0, &nd).unwrap(),
                cpu::correlate(&image, &sobel_rows, &nd).unwrap(),
            ),
            (
                cpu::laplace(&image, &nd).unwrap(),
                cpu::correlate(&image, &laplace, &nd).unwrap(),
            ),
            (
                cpu::gaussian_filter(&image, 1.5, 0, &nd).unwrap(),
                cpu::correlate(
                    &image.mapv(|v| v as f32),
                    &gaussian2d(1.5, 4.0).unwrap(),
                    &nd,
                )
                .unwrap(),
            ),
        ];
        for (i, (separable, direct)) in pairs.iter().enumerate() {
            for (a, b) in separable.iter().zip(direct) {
                // The 2D Gaussian mask (and this image) are rounded to f32.
                assert!((a - b).abs() < 1e-6, "case {i}, {mode:?}: {a} against {b}");
            }
        }
    }
}

#[test]
fn a_mask_one_slice_deep_filters_each_image_on_its_own() {
    let stack = Array3::from_shape_fn((4, 9, 11), |(n, i, j)| ((n * 99 + i * 11 + j) as f64).cos());
    let mask = Array3::from_shape_fn((1, 3, 5), |(_, i, j)| (i * 5 + j) as f64 - 7.0);
    let options = NdOptions {
        mode: BoundaryMode::Mirror.into(),
        origin: vec![0, 1, -1].into(),
        ..Default::default()
    };
    let batch = cpu::correlate(&stack, &mask, &options).unwrap();
    let flat = NdOptions {
        mode: BoundaryMode::Mirror.into(),
        origin: [1, -1].into(),
        ..Default::default()
    };
    let mask2d = mask.index_axis(Axis(0), 0);
    for n in 0..4 {
        let alone = cpu::correlate(&stack.index_axis(Axis(0), n), &mask2d, &flat).unwrap();
        let row = batch.index_axis(Axis(0), n);
        for (a, b) in alone.iter().zip(row) {
            assert!(
                (a - b).abs() < 1e-12,
                "image {n}: {a} alone, {b} in the batch"
            );
        }
    }
}

#[test]
fn bad_parameters_are_typed_errors() {
    let x = ramp();
    let options = NdOptions::default();
    let name = |result: Result<Array2<f64>, ConvError>| match result {
        Err(ConvError::InvalidParameter { name, .. }) => name,
        other => panic!("expected InvalidParameter, got {other:?}"),
    };
    assert!(matches!(
        cpu::sobel(&x, 2, &options),
        Err(ConvError::InvalidAxis {
            axis: 2,
            ndim: 2,
            ..
        })
    ));
    let twice = NdOptions {
        axes: Some(vec![1, -1]),
        ..Default::default()
    };
    assert!(matches!(
        cpu::gaussian_filter(&x, 1.0, 0, &twice),
        Err(ConvError::InvalidAxis {
            axis: 1,
            ndim: 2,
            ..
        })
    ));
    assert_eq!(
        name(cpu::gaussian_filter(&x, f64::NAN, 0, &options)),
        "sigma"
    );
    assert_eq!(
        name(cpu::gaussian_filter(&x, 1.0, [0, 3], &options)),
        "order"
    );
    assert_eq!(name(cpu::uniform_filter(&x, [3, 3, 3], &options)), "size");
    let truncate = NdOptions {
        truncate: -1.0,
        ..Default::default()
    };
    assert_eq!(name(cpu::gaussian_laplace(&x, 1.0, &truncate)), "truncate");
    // Ranks: a mask of other dimensions, an input of more than 4 or of none.
    let rank = |result: Result<ArrayD<f64>, ConvError>| match result {
        Err(ConvError::InvalidRank { array, ndim, .. }) => (array, ndim),
        other => panic!("expected InvalidRank, got {other:?}"),
    };
    let volume = ArrayD::<f64>::ones(IxDyn(&[3, 4, 5]));
    let flat = ArrayD::<f64>::ones(IxDyn(&[3, 3]));
    assert_eq!(
        rank(cpu::correlate(&volume, &flat, &options)),
        ("weights", 2)
    );
    let five = ArrayD::<f64>::ones(IxDyn(&[2; 5]));
    let ones = ArrayD::<f64>::ones(IxDyn(&[1; 5]));
    assert_eq!(rank(cpu::convolve(&five, &ones, &options)), ("input", 5));
    let scalar = ArrayD::<f64>::ones(IxDyn(&[]));
    assert_eq!(rank(cpu::laplace(&scalar, &options)), ("input", 0));
    assert_eq!(
        rank(cpu::correlate(&scalar, &scalar, &options)),
        ("input", 0)
    );
    let scalar_axes = NdOptions {
        axes: Some(vec![]),
        ..Default::default()
    };
    assert_eq!(
        rank(cpu::convolve(&scalar, &scalar, &scalar_axes)),
        ("input", 0)
    );
    let message = cpu::correlate(&volume, &flat, &options)
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "weights has 2 dimensions: a mask has as many dimensions as the input"
    );
    assert!(matches!(
        cpu::correlate1d(
            &x,
            &array![1.0, 2.0, 3.0],
            0,
            &NdOptions {
                origin: 2.into(),
                ..Default::default()
            }
        ),
        Err(ConvError::InvalidOrigin { .. })
    ));
}
