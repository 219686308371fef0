//! Helpers shared by the integration tests: random data, the tolerance rule, the shared engine;
//! random 2D images and masks (`images`), the tensor-copy designs' checks (`tensor_copy`).
#![allow(dead_code)]

use approx::relative_eq;
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, ConvError, Engine, reference};
use ndarray::{Array, Array1, ArrayView, ArrayView1, ArrayView2, Dimension, Ix1, OwnedRepr};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub mod elements;
pub mod images;
pub mod sweeps;
pub mod tensor_copy;

/// Relative tolerance of f32 results against the f64 reference.
pub const TOLERANCE: f64 = 1e-5;

/// One engine for all tests of a binary (tests run on several threads: this also exercises
/// the engine's thread safety).
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| match Engine::new() {
        Ok(engine) => engine,
        Err(e) => panic!("GPU tests need a CUDA GPU: {e}"),
    })
}

/// Asserts that the shared engine still computes a small correlation exactly (integers are exact
/// in f32): the check after each bad call that the engine is still usable.
pub fn assert_engine_works() {
    let x = ndarray::array![1.0f32, 2.0, 3.0, 4.0];
    let w = ndarray::array![1.0f32, 0.0, -1.0];
    let got = engine().ndimage().correlate1d(&x, &w, 0, &zero_border());
    assert_eq!(
        got.expect("the engine still works"),
        ndarray::array![-2.0, -2.0, -2.0, 3.0]
    );
}

/// A generator with a fresh seed, printed so that a failure can be replayed.
pub fn rng(label: &str) -> (StdRng, u64) {
    let seed: u64 = rand::rng().random();
    eprintln!("{label}: seed {seed}");
    (StdRng::seed_from_u64(seed), seed)
}

/// Uniform values in [-1, 1): never all zeros, both signs.
pub fn random_vec(rng: &mut StdRng, len: usize) -> Array1<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// Asserts `actual` matches `expected` elementwise within `TOLERANCE`, relative to the sum of
/// the magnitudes of the products (`magnitude`), which bounds the rounding of an f32 sum even
/// where terms cancel. NaN must match NaN.
pub fn assert_close<D: Dimension>(
    actual: ArrayView<f32, D>,
    expected: ArrayView<f64, D>,
    magnitude: ArrayView<f64, D>,
    what: &str,
) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, ((&a, &e), &m)) in actual.iter().zip(&expected).zip(&magnitude).enumerate() {
        let a = f64::from(a);
        let ok = (a.is_nan() && e.is_nan())
            || relative_eq!(
                a,
                e,
                epsilon = TOLERANCE * m + f64::MIN_POSITIVE,
                max_relative = TOLERANCE
            );
        assert!(
            ok,
            "{what}: element {i} is {a}, expected {e} (magnitude {m})"
        );
    }
}

/// The f64 reference of one configuration, with the magnitudes that scale its tolerance:
/// the same operation over |input| and |mask| (and |cval|), which bounds the rounding of each
/// f32 sum even where its terms cancel. Computed once, checked against any number of GPU runs.
pub struct Expected<D: Dimension> {
    values: Array<f64, D>,
    magnitude: Array<f64, D>,
}

impl<D: Dimension> Expected<D> {
    /// Asserts `actual` matches within `TOLERANCE` (see [`assert_close`]).
    pub fn check(&self, actual: ArrayView<f32, D>, what: &str) {
        assert_close(actual, self.values.view(), self.magnitude.view(), what);
    }

    /// The magnitudes, to check another computation of the same operation.
    pub fn magnitude(&self) -> ArrayView<'_, f64, D> {
        self.magnitude.view()
    }
}

/// The mode with the absolute value of its constant, for the magnitude computation.
fn abs_mode(mode: BoundaryMode) -> BoundaryMode {
    match mode {
        BoundaryMode::Constant(c) => BoundaryMode::Constant(c.abs()),
        other => other,
    }
}

/// SciPy's defaults with the textbook's zero border (`Constant(0.0)`) in place of `reflect`.
pub fn zero_border() -> NdOptions {
    NdOptions {
        mode: BoundaryMode::Constant(0.0).into(),
        ..Default::default()
    }
}

/// A 2D mask for an image `H x W` (as it is) or `H x W x C` (with an axis of extent 1 for
/// the channels), in the image's dimension type.
pub fn image_mask<D: Dimension>(mask: ArrayView2<f32>, ndim: usize) -> Array<f32, D> {
    let mask = match ndim {
        3 => mask.insert_axis(ndarray::Axis(2)).into_dyn(),
        _ => mask.into_dyn(),
    };
    mask.to_owned()
        .into_dimensionality::<D>()
        .expect("an image of 2 or 3 dimensions")
}

/// What a correlation of an image `h x w x c` (`h x w` for one channel) with a 2D `mask`
/// runs on, or the error it would return.
pub fn image_runs(
    mask: &ndarray::Array2<f32>,
    (h, w, c): (usize, usize, usize),
    options: &NdOptions,
) -> conv_host::Result<conv_host::ndimage::Runs> {
    let nd = engine().ndimage();
    if c == 1 {
        nd.plan_correlate(&[h, w], mask, options)
    } else {
        let mask = image_mask::<ndarray::Ix3>(mask.view(), 3);
        nd.plan_correlate(&[h, w, c], &mask, &image_options(options, 3))
    }
}

/// The design a correlation of an image `h x w x c` with a 2D `mask` runs on (see
/// [`image_runs`]), or the error it would return; panics where no design of the seeds runs it.
pub fn image_design(
    mask: &ndarray::Array2<f32>,
    shape: (usize, usize, usize),
    options: &NdOptions,
) -> conv_host::Result<conv_host::LaunchPlan> {
    match image_runs(mask, shape, options)? {
        conv_host::ndimage::Runs::Design(plan) => Ok(plan),
        other => panic!("a 2D image runs on one of the designs, not {other:?}"),
    }
}

/// The correlation of an `H x W x C` image with a 2D mask (as `[h, w, 1]`) into `output`.
pub fn image_correlate_into<S, O>(
    engine: &conv_host::Engine,
    image: &ndarray::ArrayBase<S, ndarray::Ix3>,
    mask: &ndarray::Array2<<S::Elem as conv_host::Element>::Real>,
    options: &NdOptions,
    output: ndarray::ArrayViewMut3<'_, O>,
) -> conv_host::Result<()>
where
    S: ndarray::Data<Elem: conv_host::Element>,
    O: conv_host::Element<Real = <S::Elem as conv_host::Element>::Real>,
{
    let mask = mask.view().insert_axis(ndarray::Axis(2));
    engine
        .ndimage()
        .correlate_into(image, &mask, &image_options(options, 3), output)
}

/// `options` of a 2D mask for an image of `ndim` dimensions: per-axis origins and modes of
/// an `H x W x C` image gain the channel axis (origin 0, the columns' mode).
pub fn image_options(options: &NdOptions, ndim: usize) -> NdOptions {
    use conv_host::ndimage::PerAxis;
    let mut options = options.clone();
    if ndim == 3 {
        if let PerAxis::Each(origins) = &mut options.origin
            && origins.len() == 2
        {
            origins.push(0);
        }
        if let PerAxis::Each(modes) = &mut options.mode
            && modes.len() == 2
        {
            modes.push(modes[1]);
        }
    }
    options
}

/// The options with the absolute value of the constant and no clamp, for the magnitudes.
fn abs_options(options: &NdOptions) -> NdOptions {
    let mode = match &options.mode {
        conv_host::ndimage::PerAxis::All(mode) => abs_mode(*mode).into(),
        conv_host::ndimage::PerAxis::Each(modes) => modes
            .iter()
            .map(|&m| abs_mode(m))
            .collect::<Vec<_>>()
            .into(),
    };
    NdOptions {
        mode,
        clamp: None,
        ..options.clone()
    }
}

/// The values of one reference operation, `run(input, mask, options)`, and its magnitudes: the
/// same operation over |input| and |mask| under [`abs_options`].
fn expected<D: Dimension, M: Dimension>(
    input: ArrayView<f32, D>,
    mask: ArrayView<f32, M>,
    options: &NdOptions,
    run: impl Fn(&Array<f32, D>, &Array<f32, M>, &NdOptions) -> Result<Array<f64, D>, ConvError>,
) -> Expected<D> {
    let run = |input: &Array<f32, D>, mask: &Array<f32, M>, options: &NdOptions| {
        run(input, mask, options).expect("valid options")
    };
    Expected {
        values: run(&input.to_owned(), &mask.to_owned(), options),
        magnitude: run(
            &input.mapv(f32::abs),
            &mask.mapv(f32::abs),
            &abs_options(options),
        ),
    }
}

/// The reference 1D correlation (or convolution) of a signal with `mask`.
pub fn expected1d(
    input: ArrayView1<f32>,
    mask: ArrayView1<f32>,
    options: &NdOptions,
    convolve: bool,
) -> Expected<Ix1> {
    let run = if convolve {
        reference::convolve1d::<OwnedRepr<f32>, OwnedRepr<f32>, Ix1>
    } else {
        reference::correlate1d
    };
    expected(input, mask, options, |input, mask, options| {
        run(input, mask, 0, options)
    })
}

/// The reference 2D correlation (or convolution) of an image `H x W` or `H x W x C` with
/// `mask`.
pub fn expected2d<D: Dimension>(
    image: ArrayView<f32, D>,
    mask: ArrayView2<f32>,
    options: &NdOptions,
    convolve: bool,
) -> Expected<D> {
    let mask = image_mask::<D>(mask, image.ndim());
    let options = &image_options(options, image.ndim());
    let run = if convolve {
        reference::convolve::<OwnedRepr<f32>, OwnedRepr<f32>, D>
    } else {
        reference::correlate
    };
    expected(image, mask.view(), options, run)
}

/// The GPU's 1D correlation (or convolution) of a signal, through the public API.
pub fn gpu1d(
    input: ArrayView1<f32>,
    mask: ArrayView1<f32>,
    options: &NdOptions,
    convolve: bool,
) -> Result<Array1<f32>, ConvError> {
    let nd = engine().ndimage();
    if convolve {
        nd.convolve1d(&input, &mask, 0, options)
    } else {
        nd.correlate1d(&input, &mask, 0, options)
    }
}

/// The GPU's 2D correlation (or convolution) of an image `H x W` or `H x W x C`, through the
/// public API.
pub fn gpu2d<D: Dimension>(
    image: ArrayView<f32, D>,
    mask: ArrayView2<f32>,
    options: &NdOptions,
    convolve: bool,
) -> Result<Array<f32, D>, ConvError> {
    let mask = image_mask::<D>(mask, image.ndim());
    let options = &image_options(options, image.ndim());
    let nd = engine().ndimage();
    if convolve {
        nd.convolve(&image, &mask, options)
    } else {
        nd.correlate(&image, &mask, options)
    }
}

/// Runs the GPU's 2D correlation (or convolution) and checks it against the reference, naming
/// the case `what` in a failure.
pub fn check_gpu2d<D: Dimension>(
    image: ArrayView<f32, D>,
    mask: ArrayView2<f32>,
    options: &NdOptions,
    convolve: bool,
    what: &str,
) {
    let got =
        gpu2d(image.clone(), mask, options, convolve).unwrap_or_else(|e| panic!("{what}: {e}"));
    expected2d(image, mask, options, convolve).check(got.view(), what);
}

/// The valid origins for a mask axis of `len` taps, as SciPy defines them (convolution flips
/// the axis and moves even lengths by one): `(min, max)`.
pub fn origin_range(len: usize, convolve: bool) -> (isize, isize) {
    let half = (len / 2) as isize;
    let upper = (len as isize - 1) / 2;
    let even = isize::from(len.is_multiple_of(2));
    if convolve {
        (-upper - even, half - even)
    } else {
        (-half, upper)
    }
}

/// A valid origin for a mask axis of `len` taps, drawn uniformly.
pub fn random_origin(rng: &mut StdRng, len: usize, convolve: bool) -> isize {
    let (min, max) = origin_range(len, convolve);
    rng.random_range(min as i64..=max as i64) as isize
}

/// A proptest strategy over every boundary mode, constants drawn from `(-cval_bound, cval_bound)`.
pub fn any_mode(cval_bound: f32) -> impl proptest::strategy::Strategy<Value = BoundaryMode> {
    use proptest::prelude::*;
    prop_oneof![
        (-cval_bound..cval_bound).prop_map(BoundaryMode::Constant),
        Just(BoundaryMode::Nearest),
        Just(BoundaryMode::Reflect),
        Just(BoundaryMode::Mirror),
        Just(BoundaryMode::Wrap),
    ]
}

/// A device-memory cap that gives one slot bands of about `band_rows` output rows of an image
/// `row_elements` wide with a mask of `mask_rows x mask_cols` taps (rows are padded to 32
/// elements on the device; the cap counts the input and output buffers, and the mask, which
/// the basic kernel reads from device memory).
pub fn band_cap(
    band_rows: usize,
    row_elements: usize,
    (mask_rows, mask_cols): (usize, usize),
) -> usize {
    2 * 4 * (row_elements + 32) * (band_rows + mask_rows - 1) + 4 * mask_rows * mask_cols
}

/// Every boundary mode, with a non-zero constant.
pub fn all_modes() -> [BoundaryMode; 6] {
    [
        BoundaryMode::Constant(0.0),
        BoundaryMode::Constant(-0.75),
        BoundaryMode::Nearest,
        BoundaryMode::Reflect,
        BoundaryMode::Mirror,
        BoundaryMode::Wrap,
    ]
}

/// The example binary `name` beside this test's directory: `target/<profile>/examples/NAME`
/// for `target/<profile>/deps/<test>`, and `gpu-stage/examples/NAME` for
/// `gpu-stage/tests/<test>`.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let root = exe
        .parent()
        .and_then(Path::parent)
        .expect("test binary inside a directory");
    let binary = root
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: build the examples (cargo test builds them)",
        binary.display()
    );
    binary
}
