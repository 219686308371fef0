//! Host calls on page-locked arrays (`PinnedArray`): the pipeline copies them in place, no
//! packing or unpacking. Against the f64 reference in every boundary mode, whole and in bands
//! (the rows past the image's ends then come from the far side or the constant, copied or set
//! on the device), with the input, the output or both page-locked, and views that are not
//! row-major falling back to packing; every element type against the same call on ordinary
//! arrays.

mod common;

use common::images::{random_array3, random_mask};
use common::{
    all_modes, band_cap, expected1d, expected2d, image_correlate_into, image_options, random_vec,
    rng, zero_border,
};
use conv_host::ndimage::NdOptions;
use conv_host::{BoundaryMode, Element, Engine, Kernel, PinnedArray, bf16, f16};
use ndarray::{Array1, Array2, Array3, ArrayBase, Axis, Data, Dimension, s};
use rand::Rng;
use rand::rngs::StdRng;

/// [`image_correlate_into`] into a new array.
fn correlate2d<T: Element>(
    engine: &Engine,
    image: &Array3<T>,
    mask: &Array2<T::Real>,
    options: &NdOptions,
) -> conv_host::Result<Array3<T>> {
    let mask = mask.view().insert_axis(Axis(2));
    engine
        .ndimage()
        .correlate(image, &mask, &image_options(options, 3))
}

/// A page-locked copy of `array`.
fn pinned_copy<T: Element, S: Data<Elem = T>, D: Dimension>(
    engine: &Engine,
    array: &ArrayBase<S, D>,
) -> PinnedArray<T, D> {
    let mut pinned = engine
        .alloc_pinned::<T, _>(array.raw_dim())
        .expect("pinned");
    pinned.view_mut().assign(array);
    pinned
}

/// Images, each mode, whole and in bands of 3 and 11 rows, masks shorter and taller than a
/// band; page-locked input, output or both.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_images_match_the_reference() {
    let (mut rng, seed) = rng("pinned 2d");
    let engine = Engine::new().expect("GPU");
    let mut runs = 0;
    for mode in all_modes() {
        for band_rows in [None, Some(3), Some(11)] {
            for (shape, kernel) in [((5, 5), Kernel::Auto), ((17, 3), Kernel::Tiled)] {
                let (rows, width, channels) = (
                    rng.random_range(20..70),
                    rng.random_range(1..80),
                    [1, 3][runs % 2],
                );
                let image = random_array3(&mut rng, (rows, width, channels));
                let mask = random_mask(&mut rng, shape);
                let options = NdOptions {
                    mode: mode.into(),
                    kernel,
                    ..zero_border()
                };
                let expected = expected2d(image.view(), mask.view(), &options, false);
                let which = [(true, true), (true, false), (false, true)][runs % 3];
                let input = pinned_copy(&engine, &image);
                let poison = Array3::from_elem(image.raw_dim(), f32::NAN);
                let mut output = pinned_copy(&engine, &poison);
                let mut plain = Array3::from_elem(image.raw_dim(), f32::NAN);
                engine.set_device_memory_limit(
                    band_rows.map(|b| band_cap(b, width * channels, shape)),
                );
                let result = match which {
                    (true, true) => image_correlate_into(
                        &engine,
                        &input.view(),
                        &mask,
                        &options,
                        output.view_mut(),
                    ),
                    (true, false) => image_correlate_into(
                        &engine,
                        &input.view(),
                        &mask,
                        &options,
                        plain.view_mut(),
                    ),
                    _ => image_correlate_into(&engine, &image, &mask, &options, output.view_mut()),
                };
                engine.set_device_memory_limit(None);
                let what = format!(
                    "{mode:?} {shape:?} {kernel} over {rows}x{width}x{channels}, bands {band_rows:?}, \
                     pinned (input, output) {which:?}"
                );
                result.unwrap_or_else(|e| panic!("{what}: {e}"));
                let times = engine.last_host_times().expect("host times");
                assert_eq!(times.in_place, which, "{what}: {times}");
                let got = if which.1 {
                    output.view().to_owned()
                } else {
                    plain
                };
                expected.check(got.view(), &what);
                runs += 1;
            }
        }
    }
    eprintln!("pinned 2d: {runs} runs matched the reference (seed {seed})");
}

/// Signals, each mode, whole and in chunks, masks shorter and longer than a chunk; a strided
/// view of a page-locked signal is packed as any other.
#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_signals_match_the_reference() {
    let (mut rng, seed) = rng("pinned 1d");
    let engine = Engine::new().expect("GPU");
    let mut runs = 0;
    for mode in all_modes() {
        for (taps, chunk) in [(7, None), (3, Some(40)), (31, Some(9))] {
            let len = rng.random_range(200..3000);
            let signal = random_vec(&mut rng, len);
            let mask = random_vec(&mut rng, taps);
            let options = NdOptions {
                mode: mode.into(),
                ..zero_border()
            };
            let input = pinned_copy(&engine, &signal);
            let mut output = pinned_copy(&engine, &Array1::from_elem(len, f32::NAN));
            engine.set_device_memory_limit(chunk.map(|c| 2 * 4 * (c + taps) + 4 * taps));
            let result = engine.ndimage().correlate1d_into(
                &input.view(),
                &mask,
                0,
                &options,
                output.view_mut(),
            );
            engine.set_device_memory_limit(None);
            let what = format!("{mode:?} {taps} taps over {len}, chunks {chunk:?}");
            result.unwrap_or_else(|e| panic!("{what}: {e}"));
            let times = engine.last_host_times().expect("host times");
            assert_eq!(times.in_place, (true, true), "{what}: {times}");
            expected1d(signal.view(), mask.view(), &options, false).check(output.view(), &what);
            // Every other element: not row-major, so packed and unpacked.
            let strided = input.view().slice_move(s![..;2]);
            let got: Array1<f32> = engine
                .ndimage()
                .correlate1d(&strided, &mask, 0, &options)
                .unwrap_or_else(|e| panic!("{what}, strided: {e}"));
            let times = engine.last_host_times().expect("host times");
            assert_eq!(times.in_place, (false, false), "{what}, strided: {times}");
            let every_other = signal.slice(s![..;2]);
            expected1d(every_other, mask.view(), &options, false).check(got.view(), &what);
            runs += 1;
        }
    }
    eprintln!("pinned 1d: {runs} runs matched the reference (seed {seed})");
}

/// Every mode, 5x5 (the narrow types' own kernels) and 7x7 (converted on the device) masks,
/// whole and in bands: page-locked input and output give exactly the result of the same call
/// on ordinary arrays (which `element_types_gpu.rs` checks against the reference). The input is
/// copied in place unless `cuMemset` cannot write the mode's constant in its type (an `f64`
/// constant other than zero).
fn matches_ordinary_arrays<T: Element>(engine: &Engine, rng: &mut StdRng) -> usize {
    let mut runs = 0;
    for mode in all_modes() {
        for banded in [false, true] {
            for size in [5, 7] {
                let (rows, width, channels) = (
                    rng.random_range(60..120),
                    rng.random_range(1..70),
                    [1, 3][runs % 2],
                );
                let image = Array3::from_shape_simple_fn((rows, width, channels), || {
                    T::from_f64(rng.random_range(0.0..255.0))
                });
                let mask = Array2::from_shape_simple_fn((size, size), || {
                    T::Real::from_f64(rng.random_range(-0.3..0.3))
                });
                let options = NdOptions {
                    mode: mode.into(),
                    ..zero_border()
                };
                let what = format!(
                    "{} {mode:?} {size}x{size} over {rows}x{width}x{channels}, banded {banded}",
                    T::NAME
                );
                // A third of the image's rows at 16 bytes an element (device rows padded to 32
                // elements), and the mask: several bands for every type's buffers (8 to 16
                // bytes an element), each of a row or more.
                let pitch = (width * channels).div_ceil(32) * 32;
                let cap = rows / 3 * pitch * 16 + 512;
                engine.set_device_memory_limit(banded.then_some(cap));
                let expected = correlate2d(engine, &image, &mask, &options);
                let input = pinned_copy(engine, &image);
                let mut output = pinned_copy(engine, &image);
                let got =
                    image_correlate_into(engine, &input.view(), &mask, &options, output.view_mut());
                engine.set_device_memory_limit(None);
                let expected = expected.unwrap_or_else(|e| panic!("{what}, ordinary: {e}"));
                got.unwrap_or_else(|e| panic!("{what}, page-locked: {e}"));
                let times = engine.last_host_times().expect("host times");
                let settable =
                    size_of::<T>() < 8 || !matches!(mode, BoundaryMode::Constant(c) if c != 0.0);
                assert_eq!(times.in_place, (settable, true), "{what}: {times}");
                assert!(banded == (times.bands > 1), "{what}: {times}");
                assert!(output.view() == expected.view(), "{what}: results differ");
                runs += 1;
            }
        }
    }
    runs
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_element_types_match_ordinary_arrays() {
    let (mut rng, seed) = rng("pinned types");
    let engine = Engine::new().expect("GPU");
    let runs = matches_ordinary_arrays::<u8>(&engine, &mut rng)
        + matches_ordinary_arrays::<u16>(&engine, &mut rng)
        + matches_ordinary_arrays::<f16>(&engine, &mut rng)
        + matches_ordinary_arrays::<bf16>(&engine, &mut rng)
        + matches_ordinary_arrays::<f64>(&engine, &mut rng);
    eprintln!("pinned types: {runs} runs matched ordinary arrays (seed {seed})");
}
