//! Host calls on page-locked arrays (`PinnedArray`): the pipeline copies them in place, no
//! packing or unpacking. Against the f64 reference in every boundary mode, whole and in bands
//! (the rows past the image's ends then come from the far side or the constant, copied or set
//! on the device), with the input, the output or both page-locked, and views that are not
//! row-major falling back to packing.

mod common;

use common::images::{random_array3, random_mask};
use common::{all_modes, band_cap, expected1d, expected2d, random_vec, rng};
use conv_host::{Conv1dOptions, Conv2dOptions, Engine, Kernel, PinnedArray};
use ndarray::{Array1, Array3, Ix1, Ix3, s};
use rand::Rng;

fn pinned_copy3(engine: &Engine, array: &Array3<f32>) -> PinnedArray<f32, Ix3> {
    let mut pinned = engine
        .alloc_pinned::<f32, _>(array.raw_dim())
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
                let options = Conv2dOptions {
                    mode,
                    kernel,
                    ..Default::default()
                };
                let expected = expected2d(image.view(), mask.view(), &options, false);
                let which = [(true, true), (true, false), (false, true)][runs % 3];
                let input = pinned_copy3(&engine, &image);
                let mut output = engine.alloc_pinned::<f32, _>(image.raw_dim()).expect("out");
                output.view_mut().fill(f32::NAN);
                let mut plain = Array3::from_elem(image.raw_dim(), f32::NAN);
                engine.set_device_memory_limit(
                    band_rows.map(|b| band_cap(b, width * channels, shape)),
                );
                let result = match which {
                    (true, true) => {
                        engine.correlate2d_into(&input.view(), &mask, &options, output.view_mut())
                    }
                    (true, false) => {
                        engine.correlate2d_into(&input.view(), &mask, &options, plain.view_mut())
                    }
                    _ => engine.correlate2d_into(&image, &mask, &options, output.view_mut()),
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
            let options = Conv1dOptions {
                mode,
                ..Default::default()
            };
            let mut input = engine.alloc_pinned::<f32, _>(Ix1(len)).expect("pinned");
            input.view_mut().assign(&signal);
            let mut output = engine.alloc_pinned::<f32, _>(Ix1(len)).expect("pinned");
            output.view_mut().fill(f32::NAN);
            engine.set_device_memory_limit(chunk.map(|c| 2 * 4 * (c + taps) + 4 * taps));
            let result = engine.correlate1d_into(&input.view(), &mask, &options, output.view_mut());
            engine.set_device_memory_limit(None);
            let what = format!("{mode:?} {taps} taps over {len}, chunks {chunk:?}");
            result.unwrap_or_else(|e| panic!("{what}: {e}"));
            let times = engine.last_host_times().expect("host times");
            assert_eq!(times.in_place, (true, true), "{what}: {times}");
            expected1d(signal.view(), mask.view(), &options, false).check(output.view(), &what);
            // Every other element: not row-major, so packed and unpacked.
            let strided = input.view().slice_move(s![..;2]);
            let got: Array1<f32> = engine
                .correlate1d(&strided, &mask, &options)
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
