//! Element types in the tests: random values of each, and the check of an output of any type
//! against the f64 reference sums.

use conv_host::{Element, bf16, f16};
use ndarray::{Array, Array3, ArrayView, Dimension, ShapeBuilder};
use rand::Rng;
use rand::rngs::StdRng;

/// A random value of an element type, over its range (integers) or [-2, 2) (floats).
pub trait Random: Element {
    fn random(rng: &mut StdRng) -> Self;
}

impl Random for u8 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random()
    }
}

impl Random for u16 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random()
    }
}

impl Random for f16 {
    fn random(rng: &mut StdRng) -> Self {
        f16::from_f32(rng.random_range(-2.0..2.0))
    }
}

impl Random for bf16 {
    fn random(rng: &mut StdRng) -> Self {
        bf16::from_f32(rng.random_range(-2.0..2.0))
    }
}

impl Random for f32 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-2.0..2.0)
    }
}

impl Random for f64 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-2.0..2.0)
    }
}

/// An image of random values of `T`.
pub fn random_image<T: Random>(rng: &mut StdRng, shape: (usize, usize, usize)) -> Array3<T> {
    Array3::from_shape_simple_fn(shape, || T::random(rng))
}

/// An array of random values of `T`, of any shape.
pub fn random_array<T: Random, Sh: ShapeBuilder>(rng: &mut StdRng, shape: Sh) -> Array<T, Sh::Dim> {
    Array::from_shape_simple_fn(shape, || T::random(rng))
}

/// Asserts that `got` is what an output of type `O` should hold for the reference sums:
/// integers rounded to nearest and saturated, exactly, but for outputs whose f32 sum (within
/// `scale * 1e-6` of the exact one) lies on the other side of a rounding boundary; `f16` and
/// `bf16` within half an ulp of it (of a subnormal where it is one) plus the f32 rounding; `f32` within `scale * 1e-5`; `f64` within
/// `scale * 1e-12`.
pub fn check<O: Element, D: Dimension>(
    got: ArrayView<'_, O, D>,
    reference: ArrayView<'_, f64, D>,
    scale: f64,
    what: &str,
) {
    let tolerance = scale * if O::NAME == "f64" { 1e-12 } else { 1e-5 };
    let mut mismatches = 0;
    let mut first = None;
    got.iter()
        .zip(reference.iter())
        .enumerate()
        .for_each(|(index, (&g, &r))| {
            let value = g.to_f64();
            let ok = match O::NAME {
                "u8" | "u16" => {
                    let sum_error = scale * 1e-6;
                    let (lo, hi) = (O::from_f64(r - sum_error), O::from_f64(r + sum_error));
                    lo.to_f64() <= value && value <= hi.to_f64()
                }
                "f16" | "bf16" => {
                    // Half an ulp: 11 and 8 bits of significand (an f16 subnormal's below 2^-14).
                    let (bits, smallest) = if O::NAME == "f16" {
                        (11, -25)
                    } else {
                        (8, -134)
                    };
                    let expected = O::from_f64(r).to_f64();
                    let half_ulp = (r.abs() * 2f64.powi(-bits)).max(2f64.powi(smallest));
                    (value - r).abs() <= (expected - r).abs() + half_ulp + tolerance
                }
                _ => (value - r).abs() <= tolerance,
            };
            if !ok {
                mismatches += 1;
                first.get_or_insert((index, value, r));
            }
        });
    assert_eq!(
        mismatches, 0,
        "{what}: first mismatch (row-major index, got, reference sum) {first:?}"
    );
}
