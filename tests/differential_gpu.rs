//! Long randomized differential testing of the GPU against the f64 CPU reference, with
//! proptest: operation (1D, 2D single and multi-channel), mode, origin, kernel, tile, shape,
//! mask and memory layout are all drawn at random; a failure shrinks to a minimal reproducer.
//! `GPU_PROPTEST_CASES` sets the number of configurations (default 10,000).

mod common;

use common::{any_mode, expected1d, expected2d, gpu1d, gpu2d, origin_range, zero_border};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, Kernel};
use ndarray::{Array1, Array3, Axis, s};
use proptest::prelude::*;

/// Interleaved channels the designs take: an `H x W x C` image of more runs on the 3D kernel,
/// which takes `Kernel::Auto` and no tile (naming a design or a tile is `InvalidDesign`).
const MAX_DESIGN_CHANNELS: usize = 4;

fn kernel() -> impl Strategy<Value = Kernel> {
    prop::sample::select(Kernel::TEXTBOOK.to_vec())
}

/// A valid origin for a mask axis of `len`, from a pick in [0, 1).
fn origin(len: usize, pick: f64, convolve: bool) -> isize {
    let (min, max) = origin_range(len, convolve);
    (min + (pick * (max - min + 1) as f64) as isize).min(max)
}

#[derive(Debug, Clone)]
struct Case1d {
    data: Vec<f32>,
    step: usize,
    reversed: bool,
    mask: Vec<f32>,
    mode: BoundaryMode,
    origin_pick: f64,
    kernel: Kernel,
    tile: u32,
    convolve: bool,
}

prop_compose! {
    fn case1d()(step in 1usize..4, len in 1usize..3000)(
        data in proptest::collection::vec(-1.0f32..1.0, len * step),
        step in Just(step),
        reversed in any::<bool>(),
        mask in proptest::collection::vec(-1.0f32..1.0, 1..80),
        mode in any_mode(1.0),
        origin_pick in 0.0f64..1.0,
        kernel in kernel(),
        tile in prop::sample::select(vec![1u32, 7, 32, 33, 128, 256, 1024]),
        convolve in any::<bool>(),
    ) -> Case1d {
        Case1d { data, step, reversed, mask, mode, origin_pick, kernel, tile, convolve }
    }
}

#[derive(Debug, Clone)]
struct Case2d {
    shape: (usize, usize, usize),
    data: Vec<f32>,
    layout: u8,
    mask_shape: (usize, usize),
    mask: Vec<f32>,
    mode: BoundaryMode,
    origin_pick: (f64, f64),
    kernel: Kernel,
    tile: (u32, u32),
    convolve: bool,
}

prop_compose! {
    fn case2d()(
        shape in (1usize..70, 1usize..70, 1usize..6),
        mask_shape in (1usize..14, 1usize..14),
    )(
        shape in Just(shape),
        data in proptest::collection::vec(-1.0f32..1.0, backing_len(shape)),
        layout in 0u8..4,
        mask_shape in Just(mask_shape),
        mask in proptest::collection::vec(-1.0f32..1.0, mask_shape.0 * mask_shape.1),
        mode in any_mode(1.0),
        origin_pick in (0.0f64..1.0, 0.0f64..1.0),
        kernel in kernel(),
        tile in prop::sample::select(vec![
            (8u32, 8u32), (16, 16), (32, 8), (32, 32), (7, 5), (1, 1), (64, 4),
        ]),
        convolve in any::<bool>(),
    ) -> Case2d {
        Case2d {
            shape, data, layout, mask_shape, mask, mode, origin_pick, kernel, tile, convolve,
        }
    }
}

fn check1d(case: &Case1d) -> Result<(), TestCaseError> {
    let data = Array1::from(case.data.clone());
    let strided = data.slice(s![..;case.step as isize]);
    let input = if case.reversed {
        strided.slice_move(s![..;-1])
    } else {
        strided
    };
    let mask = Array1::from(case.mask.clone());
    let options = NdOptions {
        mode: case.mode.into(),
        origin: origin(mask.len(), case.origin_pick, case.convolve).into(),
        kernel: case.kernel,
        // A signal's blocks are one row.
        tile: Some((case.tile, 1)),
        clamp: None,
        ..zero_border()
    };
    let got = gpu1d(input, mask.view(), &options, case.convolve)
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    // proptest turns the panic of a failed comparison into a failure, and shrinks it.
    expected1d(input, mask.view(), &options, case.convolve).check(got.view(), "1d");
    Ok(())
}

/// A backing array large enough for every layout of an `h x w x c` image: square, so that the
/// transposed layout fits too.
fn backing_shape((h, w, c): (usize, usize, usize)) -> (usize, usize, usize) {
    let side = h.max(w);
    (2 * side, 2 * side + 1, c)
}

fn backing_len(shape: (usize, usize, usize)) -> usize {
    let (a, b, c) = backing_shape(shape);
    a * b * c
}

fn check2d(case: &Case2d) -> Result<(), TestCaseError> {
    let (h, w, c) = case.shape;
    let big = Array3::from_shape_vec(backing_shape(case.shape), case.data.clone()).expect("shape");
    let image = match case.layout {
        0 => big.slice(s![..h, ..w, ..]),
        1 => big.slice(s![..2 * h;2, 1..2 * w + 1;2, ..]),
        2 => big.slice(s![..h;-1, ..w;-1, ..]),
        _ => big.slice(s![..w, ..h, ..]).permuted_axes([1, 0, 2]),
    };
    let mask = ndarray::Array2::from_shape_vec(case.mask_shape, case.mask.clone()).expect("shape");
    let options = NdOptions {
        mode: case.mode.into(),
        origin: [
            origin(case.mask_shape.0, case.origin_pick.0, case.convolve),
            origin(case.mask_shape.1, case.origin_pick.1, case.convolve),
        ]
        .into(),
        kernel: case.kernel,
        tile: Some(case.tile),
        clamp: None,
        ..zero_border()
    };
    let what = format!("2d {case:?}");
    if c == 1 {
        compare2d(
            image.index_axis(Axis(2), 0),
            &mask,
            &options,
            case.convolve,
            &what,
        )
    } else {
        compare2d(image, &mask, &options, case.convolve, &what)
    }
}

fn compare2d<D: ndarray::Dimension>(
    image: ndarray::ArrayView<f32, D>,
    mask: &ndarray::Array2<f32>,
    options: &NdOptions,
    convolve: bool,
    what: &str,
) -> Result<(), TestCaseError> {
    let got = gpu2d(image.view(), mask.view(), options, convolve);
    // Past the designs' channels the image runs on the 3D kernel: the named design and tile
    // are refused, and the image is checked there (`Auto`, no tile).
    let designed = image.ndim() < 3 || image.len_of(Axis(2)) <= MAX_DESIGN_CHANNELS;
    let got = if designed {
        got
    } else {
        prop_assert!(
            matches!(got, Err(ConvError::InvalidDesign { .. })),
            "{}: past {} channels a named design must be refused, got {:?}",
            what,
            MAX_DESIGN_CHANNELS,
            got.map(|_| "an output")
        );
        let auto = NdOptions {
            kernel: Kernel::Auto,
            tile: None,
            ..options.clone()
        };
        gpu2d(image.view(), mask.view(), &auto, convolve)
    }
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    expected2d(image, mask.view(), options, convolve).check(got.view(), what);
    Ok(())
}

#[derive(Debug, Clone)]
enum Case {
    One(Case1d),
    Two(Case2d),
}

fn cases() -> u32 {
    std::env::var("GPU_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn gpu_matches_reference_on_random_configurations(case in prop_oneof![case1d().prop_map(Case::One), case2d().prop_map(Case::Two)]) {
        match &case {
            Case::One(case) => check1d(case)?,
            Case::Two(case) => check2d(case)?,
        }
    }
}
