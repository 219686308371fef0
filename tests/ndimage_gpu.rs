//! The N-D operations on the GPU against their f64 CPU twins (the sweeps of
//! `common/sweeps.rs`: every axis, the filter family, volumes, batches and channels, every
//! element type), and typed errors.

mod common;

use common::{engine, rng, sweeps};
use conv_host::BoundaryMode;
use conv_host::ConvError;
use conv_host::ndimage::NdOptions;
use ndarray::{Array1, ArrayD, IxDyn};

/// One test per sweep of [`sweeps`], on the GPU.
macro_rules! gpu_sweeps {
    ($($name:ident),+) => {$(
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn $name() {
            let (mut rng, _) = rng(stringify!($name));
            sweeps::$name(engine().ndimage(), &mut rng);
        }
    )+};
}

gpu_sweeps!(
    correlation_along_every_axis_matches_the_reference,
    the_filter_family_matches_the_reference,
    volumes_batches_and_channels_match_the_reference,
    fused_filters_of_images_and_volumes_match_the_reference,
    a_batch_filters_each_image_on_its_own
);

#[test]
#[ignore = "needs a CUDA GPU"]
fn bad_input_gives_typed_errors_and_the_engine_stays_usable() {
    let nd = engine().ndimage();
    let volume = ArrayD::<f32>::ones(IxDyn(&[4, 5, 6]));
    let options = NdOptions::default();
    let invalid = |result: Result<ArrayD<f32>, ConvError>, name: &str| match result {
        Err(ConvError::InvalidParameter { name: got, .. }) => assert_eq!(got, name),
        other => panic!("{name}: expected InvalidParameter, got {other:?}"),
    };
    for axis in [3, -4] {
        assert!(matches!(
            nd.sobel(&volume, axis, &options),
            Err(ConvError::InvalidAxis { axis: a, ndim: 3, .. }) if a == axis
        ));
    }
    invalid(nd.gaussian_filter(&volume, -1.0, 0, &options), "sigma");
    invalid(nd.gaussian_filter(&volume, 1.0, 3, &options), "order");
    invalid(
        nd.gaussian_filter(&volume, [1.0, 2.0], 0, &options),
        "sigma",
    );
    invalid(nd.uniform_filter(&volume, 0, &options), "size");
    let two_modes = NdOptions {
        mode: vec![BoundaryMode::Wrap, BoundaryMode::Nearest].into(),
        ..Default::default()
    };
    invalid(nd.laplace(&volume, &two_modes), "mode");
    let per_axis = NdOptions {
        mode: vec![
            BoundaryMode::Wrap,
            BoundaryMode::Nearest,
            BoundaryMode::Wrap,
        ]
        .into(),
        ..Default::default()
    };
    let mask = ArrayD::<f32>::ones(IxDyn(&[3, 3, 3]));
    invalid(nd.correlate(&volume, &mask, &per_axis), "mode");
    assert!(matches!(
        nd.correlate(&volume, &ArrayD::<f32>::ones(IxDyn(&[3, 3])), &options),
        Err(ConvError::InvalidRank {
            array: "weights",
            ndim: 2,
            ..
        })
    ));
    let with_channels = ArrayD::<f32>::ones(IxDyn(&[3, 4, 5, 3]));
    invalid(
        nd.correlate(
            &with_channels,
            &ArrayD::<f32>::ones(IxDyn(&[3, 3, 3, 2])),
            &options,
        ),
        "weights.shape[3]",
    );
    assert!(matches!(
        nd.correlate(
            &ArrayD::<f32>::ones(IxDyn(&[2; 5])),
            &ArrayD::<f32>::ones(IxDyn(&[1; 5])),
            &options,
        ),
        Err(ConvError::InvalidRank {
            array: "input",
            ndim: 5,
            ..
        })
    ));
    let huge = ArrayD::<f32>::ones(IxDyn(&[1, 300, 300]));
    assert!(matches!(
        nd.correlate(&volume, &huge, &options),
        Err(ConvError::InvalidLaunch { .. })
    ));
    assert!(matches!(
        nd.correlate1d(&volume, &Array1::<f32>::zeros(0), 0, &options),
        Err(ConvError::EmptyMask)
    ));
    let mut small = ArrayD::<f32>::zeros(IxDyn(&[4, 5]));
    assert!(matches!(
        nd.sobel_into(&volume, 0, &options, small.view_mut()),
        Err(ConvError::ShapeMismatch { .. })
    ));
    common::assert_engine_works();
    // And the N-D path itself still works: the Laplacian of a constant is zero.
    assert!(
        nd.laplace(&volume, &options)
            .unwrap()
            .iter()
            .all(|&v| v == 0.0)
    );
}
