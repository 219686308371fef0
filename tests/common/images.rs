//! Random images and masks for the 2D tests.

use ndarray::{Array2, Array3};
use rand::Rng;
use rand::rngs::StdRng;

/// Images for the separable and tensor-copy kernels: narrower and wider than one strip (128
/// elements for the general separable kernel, 256 for the wide ones), shorter and taller than
/// one block, smaller than the masks.
pub const SEPARABLE_IMAGES: [(usize, usize); 6] =
    [(1, 1), (67, 1), (37, 53), (300, 257), (600, 41), (5, 700)];

/// An `h x w x c` image of values uniform in [-1, 1).
pub fn random_array3(rng: &mut StdRng, shape: (usize, usize, usize)) -> Array3<f32> {
    Array3::from_shape_simple_fn(shape, || rng.random_range(-1.0f32..1.0))
}

/// A general mask of values uniform in [-1, 1).
pub fn random_mask(rng: &mut StdRng, shape: (usize, usize)) -> Array2<f32> {
    Array2::from_shape_simple_fn(shape, || rng.random_range(-1.0f32..1.0))
}

/// A random rank-1 mask, `column[i] * row[j]`, rounded to `f32` as users build them.
pub fn random_separable_mask(rng: &mut StdRng, (rows, cols): (usize, usize)) -> Array2<f32> {
    let column: Vec<f32> = (0..rows).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let row: Vec<f32> = (0..cols).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    Array2::from_shape_fn((rows, cols), |(i, j)| column[i] * row[j])
}
