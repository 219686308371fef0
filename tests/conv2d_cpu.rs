//! The 2D CPU reference: hand-checked and SciPy known answers, channels, layouts, errors.
//! SciPy values were produced with scipy.ndimage 1.17.1 (`correlate` / `convolve`).

mod common;

use common::{image_mask, image_options, zero_border};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, reference};
use ndarray::{Array, Array2, Array3, ArrayBase, Axis, Data, Dimension, array, s};

/// The reference 2D correlation of an image `H x W` or `H x W x C` with a 2D mask (given the
/// channel axis of extent 1 for `H x W x C`).
fn correlate2d<S: Data<Elem = f32>, D: Dimension>(
    image: &ArrayBase<S, D>,
    mask: &Array2<f32>,
    options: &NdOptions,
) -> conv_host::Result<Array<f64, D>> {
    let ndim = image.ndim();
    let mask = image_mask::<D>(mask.view(), ndim);
    reference::correlate(image, &mask, &image_options(options, ndim))
}

/// The reference 2D convolution of an image `H x W` or `H x W x C` with a 2D mask.
fn convolve2d<S: Data<Elem = f32>, D: Dimension>(
    image: &ArrayBase<S, D>,
    mask: &Array2<f32>,
    options: &NdOptions,
) -> conv_host::Result<Array<f64, D>> {
    let ndim = image.ndim();
    let mask = image_mask::<D>(mask.view(), ndim);
    reference::convolve(image, &mask, &image_options(options, ndim))
}

fn with_mode(mode: BoundaryMode) -> NdOptions {
    NdOptions {
        mode: mode.into(),
        ..zero_border()
    }
}

fn image_3x4() -> Array2<f32> {
    Array2::from_shape_fn((3, 4), |(y, x)| (y * 4 + x + 1) as f32)
}

#[test]
fn rectangular_even_mask_in_every_mode() {
    // x = 1..12 as 3 x 4, w = [[1, 2, 0], [0, 1, -1]] (2 x 3: anchor row 1, column 1).
    // Constant out[0,0]: row -1 is ghost (0); row 0 gives 1*x[0,0] - 1*x[0,1] = 1 - 2 = -1.
    let w = array![[1.0f32, 2.0, 0.0], [0.0, 1.0, -1.0]];
    type Grid = [[f64; 4]; 3];
    let cases: [(BoundaryMode, Grid, Grid); 6] = [
        (
            BoundaryMode::Constant(0.0),
            [[-1., -1., -1., 4.], [1., 4., 7., 19.], [9., 16., 19., 35.]],
            [[17., 20., 23., 17.], [33., 32., 35., 25.], [9., 1., 1., 1.]],
        ),
        (
            BoundaryMode::Constant(2.0),
            [[5., 5., 5., 8.], [3., 4., 7., 17.], [11., 16., 19., 33.]],
            [[0.; 4]; 3], // not checked
        ),
        (
            BoundaryMode::Nearest,
            [[2., 4., 7., 11.], [2., 4., 7., 11.], [14., 16., 19., 23.]],
            [
                [16., 20., 23., 25.],
                [28., 32., 35., 37.],
                [28., 32., 35., 37.],
            ],
        ),
        (
            BoundaryMode::Reflect,
            [[2., 4., 7., 11.], [2., 4., 7., 11.], [14., 16., 19., 23.]],
            [
                [16., 20., 23., 25.],
                [28., 32., 35., 37.],
                [28., 32., 35., 37.],
            ],
        ),
        (
            BoundaryMode::Mirror,
            [
                [15., 16., 19., 24.],
                [3., 4., 7., 12.],
                [15., 16., 19., 24.],
            ],
            [
                [15., 20., 23., 24.],
                [27., 32., 35., 36.],
                [15., 20., 23., 24.],
            ],
        ),
        (
            BoundaryMode::Wrap,
            [
                [29., 28., 31., 38.],
                [5., 4., 7., 14.],
                [17., 16., 19., 26.],
            ],
            [
                [13., 20., 23., 22.],
                [25., 32., 35., 34.],
                [1., 8., 11., 10.],
            ],
        ),
    ];
    for (mode, correlated, convolved) in cases {
        let got = correlate2d(&image_3x4(), &w, &with_mode(mode)).unwrap();
        assert_eq!(got, Array2::from(correlated.to_vec()), "{mode:?}");
        if mode != BoundaryMode::Constant(2.0) {
            let got = convolve2d(&image_3x4(), &w, &with_mode(mode)).unwrap();
            assert_eq!(got, Array2::from(convolved.to_vec()), "convolve {mode:?}");
        }
    }
    let shifted = NdOptions {
        mode: BoundaryMode::Reflect.into(),
        origin: [-1, 1].into(),
        ..zero_border()
    };
    let expected = array![[4., 2., 4., 7.], [16., 14., 16., 19.], [28., 26., 28., 31.]];
    assert_eq!(correlate2d(&image_3x4(), &w, &shifted).unwrap(), expected);
}

#[test]
fn course_report_5x5_box_counts_neighbours() {
    // The course report's setting: a 5 x 5 mask. All ones over an all-ones 7 x 7 image with zero
    // ghost cells counts the in-image neighbours: 3 x 3 = 9 at a corner, 3 x 5 = 15 beside an
    // edge's middle, 5 x 5 = 25 inside.
    let out = correlate2d(
        &Array2::<f32>::ones((7, 7)),
        &Array2::<f32>::ones((5, 5)),
        &zero_border(),
    )
    .unwrap();
    assert_eq!(out[[0, 0]], 9.0);
    assert_eq!(out[[0, 3]], 15.0);
    assert_eq!(out[[1, 1]], 16.0);
    assert_eq!(out[[3, 3]], 25.0);
    // Each axis contributes a clipped window count of 3, 4, 5, 5, 5, 4, 3 (sum 29): total 29^2.
    assert_eq!(out.sum(), 841.0);
}

#[test]
fn each_channel_is_filtered_alone() {
    let rgb = Array3::from_shape_fn((5, 6, 3), |(y, x, c)| {
        ((y * 7 + x * 3 + c * 11) % 13) as f32 - 6.0
    });
    let w = array![[0.5f32, -1.0, 2.0], [1.0, 0.25, -0.5]];
    for mode in [
        BoundaryMode::Constant(1.5),
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ] {
        let all = correlate2d(&rgb, &w, &with_mode(mode)).unwrap();
        for c in 0..3 {
            let alone = correlate2d(&rgb.index_axis(Axis(2), c), &w, &with_mode(mode)).unwrap();
            assert_eq!(all.index_axis(Axis(2), c), alone, "channel {c} {mode:?}");
        }
    }
}

#[test]
fn strided_transposed_and_sub_views_match_copies() {
    let big = Array2::from_shape_fn((11, 13), |(y, x)| ((y * 31 + x * 17) % 23) as f32);
    let w = array![
        [1.0f32, 0.0, -1.0, 2.0],
        [0.5, 1.0, 1.0, -2.0],
        [0.0, 3.0, 1.0, 1.0]
    ];
    for view in [
        big.slice(s![2..9, 3..]),
        big.slice(s![..;2, ..;-3]),
        big.t(),
    ] {
        for mode in [
            BoundaryMode::Constant(0.0),
            BoundaryMode::Reflect,
            BoundaryMode::Nearest,
        ] {
            assert_eq!(
                correlate2d(&view, &w, &with_mode(mode)).unwrap(),
                correlate2d(&view.to_owned(), &w, &with_mode(mode)).unwrap()
            );
        }
    }
}

#[test]
fn mask_larger_than_image_and_degenerate_shapes() {
    // 1 x 1 image, 3 x 3 mask of ones, mirror: every tap reads the single pixel.
    let one = array![[2.0f32]];
    assert_eq!(
        correlate2d(
            &one,
            &Array2::ones((3, 3)),
            &with_mode(BoundaryMode::Mirror)
        )
        .unwrap()[[0, 0]],
        18.0
    );
    // Constant: only the centre tap lands inside.
    assert_eq!(
        correlate2d(&one, &Array2::ones((3, 3)), &zero_border()).unwrap()[[0, 0]],
        2.0
    );
    // Zero channels or zero rows: a defined, empty result.
    assert_eq!(
        correlate2d(
            &Array3::<f32>::zeros((4, 4, 0)),
            &Array2::ones((3, 3)),
            &zero_border()
        )
        .unwrap()
        .len(),
        0
    );
    assert_eq!(
        correlate2d(
            &Array2::<f32>::zeros((0, 4)),
            &Array2::ones((3, 3)),
            &zero_border()
        )
        .unwrap()
        .len(),
        0
    );
}

#[test]
fn option_errors() {
    let image = image_3x4();
    assert!(matches!(
        correlate2d(&image, &Array2::<f32>::zeros((0, 3)), &zero_border()),
        Err(ConvError::EmptyMask)
    ));
    let bad = NdOptions {
        origin: [0, 2].into(),
        ..zero_border()
    };
    assert!(matches!(
        correlate2d(&image, &Array2::<f32>::ones((3, 3)), &bad),
        Err(ConvError::InvalidOrigin {
            origin: 2,
            mask_len: 3,
            ..
        })
    ));
}
