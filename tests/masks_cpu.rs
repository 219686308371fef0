//! Mask builders and the Gaussian filter against SciPy 1.17.1 (`_gaussian_kernel1d`,
//! `gaussian_filter`), on the CPU.

mod common;

use approx::assert_relative_eq;
use common::zero_border;
use conv_host::masks::{
    box2d, gaussian_kernel1d, gaussian_radius, gaussian1d, gaussian2d, sharpen,
};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, reference};
use ndarray::Array2;

#[test]
fn gaussian_taps_match_scipy() {
    // scipy.ndimage._filters._gaussian_kernel1d(1.5, 0, int(4 * 1.5 + 0.5) = 6)
    let scipy = [
        8.922106863539231e-05,
        0.001028196578138909,
        0.007597402196596929,
        0.03599434807370883,
        0.1093411749545305,
        0.212967528547854,
        0.2659642571610709,
        0.212967528547854,
        0.1093411749545305,
        0.03599434807370883,
        0.007597402196596929,
        0.001028196578138909,
        8.922106863539231e-05,
    ];
    let taps = gaussian1d(1.5, 4.0).unwrap();
    assert_eq!(taps.len(), scipy.len());
    for (&tap, &expected) in taps.iter().zip(&scipy) {
        assert_relative_eq!(f64::from(tap), expected, max_relative = 1e-6);
    }
    assert_eq!(gaussian_radius(2.0, 4.0).unwrap(), 8);
    assert_eq!(gaussian_radius(0.7, 2.0).unwrap(), 1); // int(1.4 + 0.5)
    assert_eq!(gaussian1d(0.0, 4.0).unwrap().to_vec(), vec![1.0]);
    let g2 = gaussian2d(1.0, 3.0).unwrap();
    assert_eq!(g2.dim(), (7, 7));
    assert_relative_eq!(g2.sum(), 1.0, max_relative = 1e-5);
}

#[test]
fn gaussian_filter_matches_scipy() {
    let image = Array2::from_shape_fn((4, 5), |(y, x)| ((y * 5 + x) as f32).powf(1.5));
    // scipy.ndimage.gaussian_filter(x, 0.8, mode='reflect')
    let reflect = [
        [
            4.05505675,
            5.485944877,
            7.802137241,
            10.5621123,
            12.823098352,
        ],
        [
            15.070326908,
            17.542522999,
            21.114841468,
            24.990495376,
            28.025789192,
        ],
        [
            34.279290639,
            37.784326974,
            42.651557403,
            47.724728575,
            51.609397235,
        ],
        [
            52.056922163,
            56.173942552,
            61.834602506,
            67.666904078,
            72.099933276,
        ],
    ];
    // scipy.ndimage.gaussian_filter(x, 0.8, mode='constant', truncate=2)
    let constant = [
        [
            2.829366257,
            4.757764172,
            6.664608638,
            8.573186878,
            7.798597604,
        ],
        [
            11.440939442,
            17.181632142,
            21.027948376,
            24.220311715,
            20.660854167,
        ],
        [
            24.954716504,
            35.693385576,
            41.130777916,
            44.950108805,
            37.104157719,
        ],
        [
            28.464070253,
            39.938116281,
            44.93602962,
            48.082833331,
            39.157108117,
        ],
    ];
    for (mode, truncate, expected) in [
        (BoundaryMode::Reflect, 4.0, reflect),
        (BoundaryMode::Constant(0.0), 2.0, constant),
    ] {
        let options = NdOptions {
            mode: mode.into(),
            truncate: f64::from(truncate),
            ..zero_border()
        };
        let separable = reference::gaussian_filter(&image, [0.8, 0.8], 0, &options).unwrap();
        let direct =
            reference::correlate(&image, &gaussian2d(0.8, truncate).unwrap(), &options).unwrap();
        for ((&s, &d), &e) in separable.iter().zip(&direct).zip(expected.iter().flatten()) {
            // The direct mask's taps are f32, as on the GPU: agreement to f32 precision.
            assert_relative_eq!(s, e, max_relative = 2e-6);
            assert_relative_eq!(d, e, max_relative = 2e-6);
        }
    }
}

/// SciPy's derivative kernels, `scipy.ndimage._filters._gaussian_kernel1d(1.5, order, 6)`, and
/// order 0 equal to `gaussian1d`.
#[test]
fn gaussian_derivative_kernels_match_scipy() {
    let first = [
        0.00023792284969438,
        0.00228488128475313,
        0.0135064927939501,
        0.04799246409827844,
        0.09719215551513821,
        0.09465223491015733,
        0.0,
        -0.09465223491015733,
        -0.09719215551513821,
        -0.04799246409827844,
        -0.0135064927939501,
        -0.00228488128475313,
        -0.00023792284969438,
    ];
    let second = [
        0.00059480712423595,
        0.00462053770916744,
        0.02063491954631265,
        0.04799246409827844,
        0.03779694936699819,
        -0.05258457495008741,
        -0.11820633651603152,
        -0.05258457495008741,
        0.03779694936699819,
        0.04799246409827844,
        0.02063491954631265,
        0.00462053770916744,
        0.00059480712423595,
    ];
    // Radius int(4.0 * 1.5 + 0.5) = 6, as SciPy's default truncate gives.
    for (order, expected) in [(1, first), (2, second)] {
        let got = gaussian_kernel1d(1.5, order, 4.0).unwrap();
        assert_eq!(got.len(), 13);
        for (g, e) in got.iter().zip(expected) {
            assert_relative_eq!(f64::from(*g), e, max_relative = 1e-6, epsilon = 1e-9);
        }
    }
    assert_eq!(
        gaussian_kernel1d(1.5, 0, 4.0).unwrap(),
        gaussian1d(1.5, 4.0).unwrap()
    );
    assert_eq!(gaussian_kernel1d(0.0, 1, 4.0).unwrap().to_vec(), [0.0]);
    assert!(matches!(
        gaussian_kernel1d(1.0, 3, 4.0),
        Err(ConvError::InvalidParameter { name: "order", .. })
    ));
}

#[test]
fn invalid_mask_parameters_are_typed_errors() {
    for sigma in [-1.0, f32::NAN, f32::INFINITY] {
        assert!(matches!(
            gaussian1d(sigma, 4.0),
            Err(ConvError::InvalidParameter { name: "sigma", .. })
        ));
    }
    assert!(matches!(
        gaussian2d(1.0, -2.0),
        Err(ConvError::InvalidParameter {
            name: "truncate",
            ..
        })
    ));
    assert!(matches!(
        box2d(0, 3),
        Err(ConvError::InvalidParameter { .. })
    ));
    let image = Array2::<f32>::ones((3, 3));
    assert!(reference::gaussian_filter(&image, f64::NAN, 0, &zero_border()).is_err());
    // Masks too large for any memory are refused before anything is allocated: a sigma of 1e9
    // would ask for 8e9 taps (64 GB in f64), its square for 6.4e19.
    assert!(matches!(
        gaussian1d(1e9, 4.0),
        Err(ConvError::InvalidParameter { name: "sigma", .. })
    ));
    assert_eq!(gaussian_radius(2e6, 4.0).unwrap(), 8_000_000);
    assert!(gaussian_radius(2.1e6, 4.0).is_err());
    assert!(matches!(
        gaussian2d(2000.0, 4.0),
        Err(ConvError::InvalidParameter { name: "sigma", .. })
    ));
    assert!(matches!(
        box2d(10_000, 10_000),
        Err(ConvError::InvalidParameter { .. })
    ));
    assert!(reference::gaussian_filter(&image, 1e9, 0, &zero_border()).is_err());
}

#[test]
fn box_and_sharpen_keep_flat_regions() {
    let flat = Array2::from_elem((6, 7), 0.25f32);
    let nearest = NdOptions {
        mode: BoundaryMode::Nearest.into(),
        ..zero_border()
    };
    for mask in [box2d(3, 5).unwrap(), sharpen()] {
        let out = reference::correlate(&flat, &mask, &nearest).unwrap();
        assert!(out.iter().all(|&v| (v - 0.25).abs() < 1e-7), "{mask}");
    }
}
