//! The N-D operations of a backend (an engine's GPU or the CPU) against their f64 CPU twins:
//! correlation along every axis of 1D to 4D arrays (masks longer than the tile and than the
//! axis), the separable filter family with per-axis sigmas, orders and modes, 3D volumes,
//! batches and volumes with channels, in every element type.

use super::all_modes;
use super::elements::{Random, check, random_array};
use super::random_origin;
use conv_host::ndimage::{NdOptions, Ndimage, PerAxis};
use conv_host::reference as cpu;
use conv_host::{BoundaryMode, Clamp, Element, bf16, f16};
use ndarray::{Array1, ArrayD, IxDyn};
use rand::Rng;
use rand::rngs::StdRng;

/// Shapes of 1 to 4 dimensions, with axes shorter and longer than a tile (64 positions for 32
/// lines and more, 2048 for one line, a block of the column kernel) and lines that do not fill
/// a tile across.
const SHAPES: [&[usize]; 9] = [
    &[3000],
    &[37, 300],
    // Longer than a ring tile along axis 0, a partial tile of lines.
    &[2100, 33],
    // Lines a strip and more abreast (the column kernel): axis 0 taller than a block, two
    // strips, the second partial; axis 1 of a batch of images.
    &[700, 292],
    &[3, 150, 260],
    &[130, 5],
    &[5, 33, 70],
    &[3, 4, 5, 40],
    &[2, 1, 70, 1],
];

/// The largest magnitude of `input` (at least 1): with the taps' magnitudes, it bounds every
/// sum and its rounding (the clamped outputs do not: a sum of 15,000-magnitude terms may be
/// clamped to 2).
fn scale<T: Element>(input: &ArrayD<T>) -> f64 {
    input.iter().fold(1.0f64, |m, v| m.max(v.to_f64().abs()))
}

/// Random options: a random mode per axis (or one for all), a random clamp now and then.
fn random_options(rng: &mut StdRng, ndim: usize) -> NdOptions {
    let modes = all_modes();
    let mode = if rng.random_bool(0.5) {
        PerAxis::All(modes[rng.random_range(0..modes.len())])
    } else {
        PerAxis::Each(
            (0..ndim)
                .map(|_| modes[rng.random_range(0..modes.len())])
                .collect(),
        )
    };
    let clamp = rng.random_bool(0.2).then_some(Clamp { lo: -0.5, hi: 0.75 });
    NdOptions {
        mode,
        clamp,
        ..Default::default()
    }
}

/// `correlate1d` and `convolve1d` along every axis of `T` arrays into `O`, against the twin.
fn axis_passes<T: Random, O: Element<Real = T::Real>>(
    nd: Ndimage<'_>,
    rng: &mut StdRng,
    mask_lens: &[usize],
) {
    for shape in SHAPES {
        let input: ArrayD<T> = random_array(rng, IxDyn(shape));
        for axis in -(shape.len() as isize)..shape.len() as isize {
            for &len in mask_lens {
                let weights: Array1<f64> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
                let mut options = random_options(rng, shape.len());
                let flip = rng.random_bool(0.5);
                options.origin = PerAxis::All(random_origin(rng, len, flip));
                let mut got = ArrayD::<O>::from_elem(IxDyn(shape), O::from_f64(7.0));
                let (result, expected) = if flip {
                    (
                        nd.convolve1d_into(&input, &weights, axis, &options, got.view_mut()),
                        cpu::convolve1d(&input, &weights, axis, &options),
                    )
                } else {
                    (
                        nd.correlate1d_into(&input, &weights, axis, &options, got.view_mut()),
                        cpu::correlate1d(&input, &weights, axis, &options),
                    )
                };
                result.unwrap();
                let expected = expected.unwrap();
                let what = format!(
                    "{} into {}: {shape:?} axis {axis}, {len} taps, flip {flip}, {options:?}",
                    T::NAME,
                    O::NAME
                );
                let magnitude = weights.iter().map(|w| w.abs()).sum::<f64>().max(1.0);
                check(
                    got.view(),
                    expected.view(),
                    scale(&input) * magnitude,
                    &what,
                );
            }
        }
    }
}

/// Every separable operation on `T` arrays of 1 to 3 dimensions, against the twin.
fn filters<T: Random>(nd: Ndimage<'_>, rng: &mut StdRng) {
    for shape in [&[500][..], &[41, 67], &[9, 20, 35]] {
        let input: ArrayD<T> = random_array(rng, IxDyn(shape));
        let ndim = shape.len();
        let axis = rng.random_range(0..ndim) as isize;
        let sigmas: Vec<f64> = (0..ndim)
            .map(|_| [0.0, 0.7, 1.5, 3.0][rng.random_range(0..4)])
            .collect();
        let orders: Vec<u32> = (0..ndim).map(|_| rng.random_range(0..3)).collect();
        let sizes: Vec<usize> = (0..ndim).map(|_| rng.random_range(1..8)).collect();
        let options = random_options(rng, ndim);
        let mut radius_options = options.clone();
        radius_options.radius = Some(PerAxis::All(rng.random_range(0..6)));
        let mut cases: Vec<(&str, ArrayD<T>, ArrayD<f64>)> = vec![
            (
                "gaussian_filter",
                nd.gaussian_filter(&input, sigmas.clone(), orders.clone(), &options)
                    .unwrap(),
                cpu::gaussian_filter(&input, sigmas.clone(), orders.clone(), &options).unwrap(),
            ),
            (
                "gaussian_filter1d (radius)",
                nd.gaussian_filter1d(&input, 1.3, axis, orders[0], &radius_options)
                    .unwrap(),
                cpu::gaussian_filter1d(&input, 1.3, axis, orders[0], &radius_options).unwrap(),
            ),
            (
                "uniform_filter",
                nd.uniform_filter(&input, sizes.clone(), &options).unwrap(),
                cpu::uniform_filter(&input, sizes.clone(), &options).unwrap(),
            ),
            (
                "uniform_filter1d",
                nd.uniform_filter1d(&input, 4, axis, &options).unwrap(),
                cpu::uniform_filter1d(&input, 4, axis, &options).unwrap(),
            ),
            (
                "sobel",
                nd.sobel(&input, axis, &options).unwrap(),
                cpu::sobel(&input, axis, &options).unwrap(),
            ),
            (
                "prewitt",
                nd.prewitt(&input, -1, &options).unwrap(),
                cpu::prewitt(&input, -1, &options).unwrap(),
            ),
            (
                "laplace",
                nd.laplace(&input, &options).unwrap(),
                cpu::laplace(&input, &options).unwrap(),
            ),
            (
                "gaussian_laplace",
                nd.gaussian_laplace(&input, sigmas.clone(), &options)
                    .unwrap(),
                cpu::gaussian_laplace(&input, sigmas.clone(), &options).unwrap(),
            ),
            (
                "gaussian_gradient_magnitude",
                nd.gaussian_gradient_magnitude(&input, 1.5, &options)
                    .unwrap(),
                cpu::gaussian_gradient_magnitude(&input, 1.5, &options).unwrap(),
            ),
        ];
        // Into an output holding other values: the terms after the first add to what the
        // first stored.
        let mut poisoned = ArrayD::<T>::from_elem(IxDyn(shape), T::from_f64(7.0));
        nd.gaussian_gradient_magnitude_into(&input, 1.5, &options, poisoned.view_mut())
            .unwrap();
        cases.push((
            "gaussian_gradient_magnitude_into",
            poisoned,
            cpu::gaussian_gradient_magnitude(&input, 1.5, &options).unwrap(),
        ));
        for (name, got, expected) in cases {
            let what = format!(
                "{name} of {} {shape:?}: sigmas {sigmas:?}, orders {orders:?}, sizes {sizes:?}, {options:?}",
                T::NAME
            );
            // Up to four passes of up to 25 taps: the f32 rounding of each pass compounds.
            check(got.view(), expected.view(), scale(&input) * 8.0, &what);
        }
    }
}

/// `correlate1d` and `convolve1d` of every element type, masks from 1 tap to longer than a
/// tile (70: a halo longer than a 32-line tile) and than the GPU stages (2500: its direct
/// design).
pub fn correlation_along_every_axis_matches_the_reference(nd: Ndimage<'_>, rng: &mut StdRng) {
    let lens = [1, 3, 8, 17, 31, 70, 2500];
    axis_passes::<f32, f32>(nd, rng, &lens);
    axis_passes::<f64, f64>(nd, rng, &lens);
    axis_passes::<u8, f32>(nd, rng, &[3, 31]);
    axis_passes::<u16, u16>(nd, rng, &[5, 70]);
    axis_passes::<f16, f16>(nd, rng, &[4, 31]);
}

/// [`filters`] of every element type, three times.
pub fn the_filter_family_matches_the_reference(nd: Ndimage<'_>, rng: &mut StdRng) {
    for _ in 0..3 {
        filters::<f32>(nd, rng);
        filters::<f64>(nd, rng);
        filters::<u8>(nd, rng);
        filters::<u16>(nd, rng);
        filters::<f16>(nd, rng);
    }
}

/// [`volumes`] of every element type.
pub fn volumes_batches_and_channels_match_the_reference(nd: Ndimage<'_>, rng: &mut StdRng) {
    volumes::<f32>(nd, rng);
    volumes::<f64>(nd, rng);
    volumes::<u8>(nd, rng);
    volumes::<f16>(nd, rng);
    volumes::<bf16>(nd, rng);
}

/// Separable filters of `f32` arrays with one mode for every axis: where rows hold a multiple
/// of 4 elements, the passes along the last two axes run as one 2D separable kernel over
/// each image (except under a constant other than zero), then the other axes' passes; 2D
/// filters of two such terms combine them in one more kernel; on sm_90, volumes' passes of 3
/// to 7 taps run as one 3D kernel; others run as axis passes; masks from 3 taps to wider than
/// the image, anchors moved along every axis.
pub fn fused_filters_of_images_and_volumes_match_the_reference(nd: Ndimage<'_>, rng: &mut StdRng) {
    let modes = [
        BoundaryMode::Constant(0.0),
        BoundaryMode::Constant(1.5),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ];
    for shape in [
        &[70, 96][..],
        &[300, 520],
        &[9, 20],
        &[45, 30],
        &[5, 21, 36],
        &[2, 3, 9, 20],
        // Tiles inside the volume staged by 16-byte words, and partial tiles at its edges.
        &[40, 72, 100],
        &[19, 45, 67],
    ] {
        let input: ArrayD<f32> = random_array(rng, IxDyn(shape));
        for mode in modes {
            let options = NdOptions {
                mode: mode.into(),
                clamp: rng.random_bool(0.3).then_some(Clamp { lo: -0.5, hi: 0.5 }),
                ..Default::default()
            };
            let sigma = [0.6, 1.0, 2.0, 3.7][rng.random_range(0..4)];
            let order = rng.random_range(0..3);
            let size = rng.random_range(2..9);
            // An odd box with the anchor moved along every axis (SciPy's origin).
            let odd = [3, 5, 7, 9][rng.random_range(0..4)];
            let shifted = NdOptions {
                origin: PerAxis::Each(
                    (0..shape.len())
                        .map(|_| rng.random_range(-(odd as i64 / 2)..=odd as i64 / 2) as isize)
                        .collect(),
                ),
                ..options.clone()
            };
            let cases: [(&str, ArrayD<f32>, ArrayD<f64>); 6] = [
                (
                    "gaussian_filter",
                    nd.gaussian_filter(&input, sigma, order, &options).unwrap(),
                    cpu::gaussian_filter(&input, sigma, order, &options).unwrap(),
                ),
                (
                    "sobel",
                    nd.sobel(&input, 0, &options).unwrap(),
                    cpu::sobel(&input, 0, &options).unwrap(),
                ),
                (
                    "uniform_filter",
                    nd.uniform_filter(&input, size, &options).unwrap(),
                    cpu::uniform_filter(&input, size, &options).unwrap(),
                ),
                (
                    "uniform_filter (origin)",
                    nd.uniform_filter(&input, odd, &shifted).unwrap(),
                    cpu::uniform_filter(&input, odd, &shifted).unwrap(),
                ),
                // Two such terms, each fused, then summed or taken as a root of squares.
                (
                    "gaussian_laplace",
                    nd.gaussian_laplace(&input, sigma, &options).unwrap(),
                    cpu::gaussian_laplace(&input, sigma, &options).unwrap(),
                ),
                (
                    "gaussian_gradient_magnitude",
                    nd.gaussian_gradient_magnitude(&input, sigma, &options)
                        .unwrap(),
                    cpu::gaussian_gradient_magnitude(&input, sigma, &options).unwrap(),
                ),
            ];
            for (name, got, expected) in cases {
                let what = format!(
                    "{name} of {shape:?}: sigma {sigma}, order {order}, size {size} ({odd} \
                     shifted by {:?}), {options:?}",
                    shifted.origin
                );
                check(got.view(), expected.view(), scale(&input) * 8.0, &what);
            }
        }
    }
}

/// `correlate` and `convolve` of `T` volumes, batches and volumes with channels, against the
/// twin.
fn volumes<T: Random>(nd: Ndimage<'_>, rng: &mut StdRng) {
    let cases: [(&[usize], &[usize]); 18] = [
        (&[13, 37, 45], &[3, 3, 3]),
        (&[70, 9, 35], &[3, 3, 3]),
        (&[11, 20, 70], &[5, 5, 5]),
        // Rows of a multiple of 4 elements, wide and tall enough for tiles whose halo lies
        // inside the slice: staged by 16-byte words on compute capability 9.0.
        (&[6, 70, 200], &[3, 3, 3]),
        (&[5, 72, 264], &[5, 5, 5]),
        (&[4, 70, 68, 3], &[3, 3, 3, 1]),
        (&[9, 17, 40], &[2, 4, 3]),
        // A batch: each image on its own; rows of a multiple of 4 elements and square masks
        // of 3 to 9 run on the 2D streaming kernel, one grid plane per image.
        (&[21, 19, 50], &[1, 5, 5]),
        (&[10, 33, 29], &[1, 3, 3]),
        (&[23, 37, 44], &[1, 5, 5]),
        (&[5, 70, 32, 3], &[1, 3, 3, 1]),
        (&[4, 150, 64], &[1, 9, 9]),
        (&[3, 5, 8], &[1, 9, 9]),
        // Deeper than one launch's ring of sums: one launch per 8 mask slices, each adding.
        (&[30, 9, 40], &[19, 2, 3]),
        // Deeper, taller and wider than the input.
        (&[4, 6, 7], &[9, 9, 17]),
        (&[7, 20, 33, 3], &[3, 3, 3, 1]),
        // More channels than a thread keeps the places of: the rest staged as they come.
        (&[6, 11, 9, 5], &[5, 5, 5, 1]),
        (&[17, 12, 30, 4], &[1, 7, 7, 1]),
    ];
    for (shape, mask_shape) in cases {
        let input: ArrayD<T> = random_array(rng, IxDyn(shape));
        let weights: ArrayD<f64> =
            ArrayD::from_shape_simple_fn(IxDyn(mask_shape), || rng.random_range(-1.0..1.0));
        for mode in all_modes() {
            let flip = rng.random_bool(0.5);
            let origin: Vec<isize> = mask_shape
                .iter()
                .map(|&n| random_origin(rng, n, flip))
                .collect();
            let options = NdOptions {
                mode: mode.into(),
                origin: origin.into(),
                clamp: rng.random_bool(0.2).then_some(Clamp { lo: -1.0, hi: 2.0 }),
                ..Default::default()
            };
            let (got, expected) = if flip {
                (
                    nd.convolve(&input, &weights, &options),
                    cpu::convolve(&input, &weights, &options),
                )
            } else {
                (
                    nd.correlate(&input, &weights, &options),
                    cpu::correlate(&input, &weights, &options),
                )
            };
            let (got, expected) = (got.unwrap(), expected.unwrap());
            let magnitude = weights.iter().map(|w| w.abs()).sum::<f64>();
            let what = format!(
                "{} {shape:?} with {mask_shape:?}, flip {flip}, {options:?}",
                T::NAME
            );
            check(
                got.view(),
                expected.view(),
                scale(&input) * magnitude,
                &what,
            );
        }
    }
}

/// A batch `N x H x W` with a mask `1 x h x w` filters each image as the 2D call would.
pub fn a_batch_filters_each_image_on_its_own(nd: Ndimage<'_>, rng: &mut StdRng) {
    // Rows of 50 elements take the 3D kernel, of 52 the 2D streaming kernel's grid planes.
    for width in [50, 52] {
        let stack: ArrayD<f32> = random_array(rng, IxDyn(&[6, 40, width]));
        let weights: ArrayD<f32> =
            ArrayD::from_shape_simple_fn(IxDyn(&[1, 5, 5]), || rng.random_range(-1.0..1.0));
        let options = NdOptions {
            mode: BoundaryMode::Wrap.into(),
            ..Default::default()
        };
        let whole = nd.correlate(&stack, &weights, &options).unwrap();
        let mask2d = weights.index_axis(ndarray::Axis(0), 0).to_owned();
        for (n, image) in stack.outer_iter().enumerate() {
            let alone = nd.correlate(&image, &mask2d, &options).unwrap();
            let row = whole.index_axis(ndarray::Axis(0), n);
            // The same sums: the batch's and the 2D designs agree to rounding.
            for (a, b) in alone.iter().zip(row.iter()) {
                assert!(
                    (a - b).abs() <= 1e-5,
                    "width {width}, image {n}: {a} alone, {b} in the batch"
                );
            }
        }
    }
}
