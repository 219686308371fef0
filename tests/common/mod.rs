//! Helpers shared by the integration tests: random data, the tolerance rule, the shared engine.
#![allow(dead_code)]

use approx::relative_eq;
use conv_host::{BoundaryMode, Conv1dOptions, Engine, reference};
use ndarray::{Array, Array1, ArrayView, ArrayView1, Dimension};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::OnceLock;

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

/// The reference magnitude for the tolerance: the same correlation over |input| and |mask|.
pub fn magnitude(
    input: ArrayView1<f32>,
    mask: ArrayView1<f32>,
    options: &Conv1dOptions,
    convolve: bool,
) -> Array1<f64> {
    let abs_options = Conv1dOptions {
        mode: match options.mode {
            BoundaryMode::Constant(c) => BoundaryMode::Constant(c.abs()),
            other => other,
        },
        clamp: None,
        ..*options
    };
    let (input, mask) = (input.mapv(f32::abs), mask.mapv(f32::abs));
    let result = if convolve {
        reference::convolve1d(&input, &mask, &abs_options)
    } else {
        reference::correlate1d(&input, &mask, &abs_options)
    };
    result.expect("valid options")
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

/// The 2D reference magnitude: the same correlation over |image| and |mask|.
pub fn magnitude2d<D: conv_host::ImageDim>(
    image: ArrayView<f32, D>,
    mask: ndarray::ArrayView2<f32>,
    options: &conv_host::Conv2dOptions,
    convolve: bool,
) -> Array<f64, D> {
    let abs_options = conv_host::Conv2dOptions {
        mode: match options.mode {
            BoundaryMode::Constant(c) => BoundaryMode::Constant(c.abs()),
            other => other,
        },
        clamp: None,
        ..*options
    };
    let (image, mask) = (image.mapv(f32::abs), mask.mapv(f32::abs));
    let result = if convolve {
        reference::convolve2d(&image, &mask, &abs_options)
    } else {
        reference::correlate2d(&image, &mask, &abs_options)
    };
    result.expect("valid options")
}
