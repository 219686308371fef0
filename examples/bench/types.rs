//! `--types`: the element-type cases (`u8`, `u16`, `f16`, `bf16`, `f32`, `f64`), each filtered from one device array into another of its
//! type, so that the device moves only the type's bytes. Device time: CUDA events around each
//! call on the engine's stream, the median of `RUNS` after `WARMUP`; the roofline: the copy
//! bandwidth of the same run, for the type's bytes read and written once; the output array is
//! poisoned before the runs and checked at sampled positions against an f64 sum, rounded and
//! saturated as the type stores it.

use crate::Bench;
use crate::timing::median;
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Element, Engine, bf16, f16};
use ndarray::{Array2, Array3};
use rand::Rng;
use rand::rngs::StdRng;

const WARMUP: usize = 3;
const RUNS: usize = 20;
/// Output positions checked against an f64 sum.
const SAMPLES: usize = 2000;

/// One case: an image of `shape`, a general `mask` of this side, or a Gaussian of sigma 2.
struct TypeCase {
    shape: (usize, usize, usize),
    mask: Option<usize>,
}

/// The zero-border correlation of `image` with `mask` at `(y, x, c)`, in f64.
fn sum_at<T: Element>(
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    (y, x, c): (usize, usize, usize),
) -> f64 {
    let (rows, cols) = mask.dim();
    let (height, width, _) = image.dim();
    let mut sum = 0.0;
    for ((i, j), &w) in mask.indexed_iter() {
        let (sy, sx) = (
            y as i64 + i as i64 - (rows / 2) as i64,
            x as i64 + j as i64 - (cols / 2) as i64,
        );
        if (0..height as i64).contains(&sy) && (0..width as i64).contains(&sx) {
            sum += w.to_f64() * image[(sy as usize, sx as usize, c)].to_f64();
        }
    }
    sum
}

/// Largest error at sampled positions, in units of the type's spacing at the sum (integers: of
/// 1; floats: relative to the sum of the magnitudes of the products).
fn sampled_error<T: Element>(
    rng: &mut StdRng,
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    output: &Array3<T>,
) -> f64 {
    let magnitude_mask = mask.mapv(|w| <T::Real as Element>::from_f64(w.to_f64().abs()));
    let image_magnitude = image.mapv(|v| T::from_f64(v.to_f64().abs()));
    let integer = T::from_f64(0.5).to_f64() != 0.5;
    let (height, width, channels) = image.dim();
    (0..SAMPLES)
        .map(|_| {
            let at = (
                rng.random_range(0..height),
                rng.random_range(0..width),
                rng.random_range(0..channels),
            );
            let expected = T::from_f64(sum_at(image, mask, at)).to_f64();
            let got = output[at].to_f64();
            let error = if integer {
                (got - expected).abs()
            } else {
                (got - expected).abs() / sum_at(&image_magnitude, &magnitude_mask, at).max(1e-30)
            };
            if error.is_nan() { f64::INFINITY } else { error }
        })
        .fold(0.0, f64::max)
}

/// Random values across the type's range: [0, 255] for `u8`, [0, 65535] for `u16`, [-1, 1)
/// for the floats.
fn random_image<T: Element>(rng: &mut StdRng, shape: (usize, usize, usize)) -> Array3<T> {
    let top = T::from_f64(1e9).to_f64().min(1.0e6);
    let integer = T::from_f64(0.5).to_f64() != 0.5;
    Array3::from_shape_simple_fn(shape, || {
        let unit: f64 = rng.random_range(0.0..1.0);
        T::from_f64(if integer {
            (unit * (top + 1.0)).floor()
        } else {
            2.0 * unit - 1.0
        })
    })
}

impl Bench<'_> {
    /// One type's case: device time, roofline and check, printed and as a CSV line.
    fn type_case<T: Element>(&mut self, case: &TypeCase, tolerance: f64) -> Result<String, String> {
        let engine: &Engine = self.engine;
        let image = random_image::<T>(&mut self.rng, case.shape);
        let options = NdOptions {
            mode: BoundaryMode::Constant(0.0).into(),
            ..Default::default()
        };
        let (name, mask) = match case.mask {
            Some(side) => {
                let taps = Array2::from_shape_simple_fn((side, side), || {
                    <T::Real as Element>::from_f64(self.rng.random_range(-1.0..1.0) / side as f64)
                });
                (
                    format!(
                        "{}_{}x{}x{}_{side}x{side}",
                        T::NAME,
                        case.shape.0,
                        case.shape.1,
                        case.shape.2
                    ),
                    taps,
                )
            }
            None => (
                format!(
                    "{}_{}x{}x{}_gaussian_sigma2",
                    T::NAME,
                    case.shape.0,
                    case.shape.1,
                    case.shape.2
                ),
                conv_host::masks::gaussian2d(2.0, 4.0)
                    .map_err(|e| e.to_string())?
                    .mapv(|w| <T::Real as Element>::from_f64(f64::from(w))),
            ),
        };
        let failed = |e: conv_host::ConvError| format!("{name}: {e}");
        let input = engine.upload(&image).map_err(failed)?;
        let poison = Array3::from_elem(case.shape, T::from_f64(77.0));
        let mut output = engine.upload(&poison).map_err(failed)?;
        let (nd, weights) = (engine.ndimage(), mask.clone().insert_axis(ndarray::Axis(2)));
        let mut call = || nd.correlate_into(&input, &weights, &options, &mut output);
        engine
            .time_device_calls(WARMUP, &mut call)
            .map_err(failed)?;
        let times = engine.time_device_calls(RUNS, &mut call).map_err(failed)?;
        let ms = median(times);
        let result = engine.download(&output).map_err(failed)?;
        let error = sampled_error(&mut self.rng, &image, &mask, &result);
        let bytes = 2 * size_of::<T>() * image.len();
        let roofline_ms = bytes as f64 / self.ceilings.copy_gbps / 1e6;
        let check = if error <= tolerance {
            "ok"
        } else {
            "CHECK FAILED"
        };
        println!(
            "{name:<36} {ms:8.4} ms  roofline {roofline_ms:7.4} ms ({:5.1}%)  max error {error:.2e} {check}",
            100.0 * roofline_ms / ms
        );
        if error > tolerance {
            return Err(format!(
                "{name}: sampled error {error:.2e} above {tolerance:.0e}"
            ));
        }
        Ok(format!(
            "{name},{ms:.4},{roofline_ms:.4},{:.3},{error:.2e}",
            roofline_ms / ms
        ))
    }

    /// Measures the element-type cases; returns the CSV lines.
    pub(crate) fn bench_types(&mut self) -> Result<Vec<String>, String> {
        let mut lines =
            vec!["case,device_ms,roofline_ms,fraction_of_roofline,max_error".to_string()];
        println!("\nElement types, device array to device array, device time");
        let rgb = (8192, 8192, 3);
        let gray = (8192, 8192, 1);
        let general = |shape| TypeCase {
            shape,
            mask: Some(5),
        };
        // Integers: at most 1 off (an f32 sum within its rounding of a half); floats: their
        // precision relative to the products' magnitudes.
        lines.push(self.type_case::<u8>(&general(rgb), 1.0)?);
        lines.push(self.type_case::<u8>(
            &TypeCase {
                shape: rgb,
                mask: None,
            },
            1.0,
        )?);
        lines.push(self.type_case::<u16>(&general(gray), 1.0)?);
        lines.push(self.type_case::<f16>(&general(gray), 2e-3)?);
        lines.push(self.type_case::<bf16>(&general(gray), 1e-2)?);
        lines.push(self.type_case::<f32>(&general(gray), 1e-5)?);
        lines.push(self.type_case::<f64>(&general(gray), 1e-12)?);
        Ok(lines)
    }
}
