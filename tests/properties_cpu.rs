//! Properties of the CPU reference, checked with proptest on random inputs (CI runs these).
//! Each compares two independent computations, so a bug in one shows as a counterexample.

mod common;

use common::{any_mode, zero_border};
use conv_host::BoundaryMode;
use conv_host::masks::gaussian2d;
use conv_host::ndimage::NdOptions;
use conv_host::reference::{correlate, correlate1d, gaussian_filter};
use ndarray::{Array1, Array2};
use proptest::prelude::*;

fn values(len: impl Into<proptest::collection::SizeRange>) -> impl Strategy<Value = Vec<f32>> {
    proptest::collection::vec(-1.0f32..1.0, len)
}

/// The signal padded by `before` and `after` elements the way `mode` extends it, built by
/// concatenating mirrored or repeated copies (NumPy's `pad` modes: symmetric = Reflect,
/// reflect = Mirror, edge = Nearest, wrap = Wrap), not by folding indices.
fn padded(x: &[f32], before: usize, after: usize, mode: BoundaryMode) -> Vec<f32> {
    let n = x.len();
    let period: Vec<f32> = match mode {
        BoundaryMode::Reflect => x.iter().chain(x.iter().rev()).copied().collect(),
        BoundaryMode::Mirror if n > 1 => {
            x.iter().chain(x[1..n - 1].iter().rev()).copied().collect()
        }
        BoundaryMode::Mirror | BoundaryMode::Wrap => x.to_vec(),
        BoundaryMode::Nearest | BoundaryMode::Constant(_) => {
            let fill = match mode {
                BoundaryMode::Constant(c) => [c, c],
                _ => [x[0], x[n - 1]],
            };
            let mut out = vec![fill[0]; before];
            out.extend_from_slice(x);
            out.extend(std::iter::repeat_n(fill[1], after));
            return out;
        }
    };
    // The periodic extension, starting `before` elements left of x[0].
    let p = period.len();
    (0..before + n + after)
        .map(|k| period[((k as i64 - before as i64).rem_euclid(p as i64)) as usize])
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_mode_equals_zero_padding_an_explicitly_padded_signal(
        x in values(1..40), w in values(1..30), mode in any_mode(2.0), origin_pick in 0.0f64..1.0,
    ) {
        let half = (w.len() / 2) as isize;
        let origin = -half + (origin_pick * w.len() as f64) as isize;
        let origin = origin.min((w.len() as isize - 1) / 2);
        let left = (half + origin) as usize;
        let right = w.len() - 1 - left;
        let options = NdOptions { mode: mode.into(), origin: origin.into(), ..zero_border() };
        let got = correlate1d(&Array1::from(x.clone()), &Array1::from(w.clone()), 0, &options).unwrap();
        let ext = padded(&x, left, right, mode);
        for i in 0..x.len() {
            let expected: f64 = w.iter().enumerate().map(|(j, &t)| f64::from(t) * f64::from(ext[i + j])).sum();
            prop_assert!((got[i] - expected).abs() <= 1e-12 * (1.0 + expected.abs()), "i {}: {} vs {}", i, got[i], expected);
        }
    }

    #[test]
    fn wrap_mode_commutes_with_rotation(x in values(1..60), w in values(1..20), shift in 0usize..60) {
        let options = NdOptions { mode: BoundaryMode::Wrap.into(), ..zero_border() };
        let n = x.len();
        let rotated: Array1<f32> = (0..n).map(|i| x[(i + shift) % n]).collect();
        let w = Array1::from(w);
        let out = correlate1d(&Array1::from(x), &w, 0, &options).unwrap();
        let out_rotated = correlate1d(&rotated, &w, 0, &options).unwrap();
        for i in 0..n {
            prop_assert!((out_rotated[i] - out[(i + shift) % n]).abs() < 1e-12);
        }
    }

    #[test]
    fn a_one_row_image_matches_the_1d_operation(x in values(1..50), w in values(1..15), mode in any_mode(2.0)) {
        // The 1D call runs an axis pass, the 2D one the direct 2D reference.
        let options = NdOptions { mode: mode.into(), ..zero_border() };
        let one = correlate1d(&Array1::from(x.clone()), &Array1::from(w.clone()), 0, &options).unwrap();
        let image = Array2::from_shape_vec((1, x.len()), x).unwrap();
        let mask = Array2::from_shape_vec((1, w.len()), w).unwrap();
        let two = correlate(&image, &mask, &options).unwrap();
        prop_assert_eq!(one.as_slice().unwrap(), two.as_slice().unwrap());
    }

    #[test]
    fn correlation_is_linear(x in values(30), y in values(30), w in values(1..9), a in -3.0f32..3.0, mode in any_mode(2.0)) {
        let mode = match mode { BoundaryMode::Constant(_) => BoundaryMode::Constant(0.0), m => m };
        let options = NdOptions { mode: mode.into(), ..zero_border() };
        let w = Array1::from(w);
        let (x, y) = (Array1::from(x), Array1::from(y));
        let combined = correlate1d(&(&x * a + &y), &w, 0, &options).unwrap();
        let separate = correlate1d(&x, &w, 0, &options).unwrap() * f64::from(a) + correlate1d(&y, &w, 0, &options).unwrap();
        for (c, s) in combined.iter().zip(&separate) {
            prop_assert!((c - s).abs() <= 1e-5 * (1.0 + s.abs()));
        }
    }

    #[test]
    fn separable_gaussian_equals_the_direct_2d_correlation(
        h in 1usize..20, w in 1usize..20, sigma in 0.1f32..3.0, mode in any_mode(2.0), seed in any::<u64>(),
    ) {
        let image = Array2::from_shape_fn((h, w), |(y, x)| ((seed >> ((y * 7 + x) % 60)) & 0xff) as f32 / 255.0);
        let options = NdOptions { mode: mode.into(), truncate: 3.0, ..zero_border() };
        let sigma64 = f64::from(sigma);
        let separable = gaussian_filter(&image, [sigma64, sigma64], 0, &options).unwrap();
        let direct = correlate(&image, &gaussian2d(sigma, 3.0).unwrap(), &options).unwrap();
        for (s, d) in separable.iter().zip(&direct) {
            prop_assert!((s - d).abs() <= 1e-6 * (1.0 + d.abs()), "{} vs {}", s, d);
        }
    }
}
