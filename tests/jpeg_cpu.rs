//! The blur example's JPEG encoding in strips: the joined file must decode to exactly the
//! pixels of one encoding of the whole image, for gray and RGB, strips that do and do not
//! divide the image, and widths and heights that are not multiples of an MCU.

#[path = "../examples/common/jpeg.rs"]
mod jpeg;

use image::ImageFormat;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// A smooth pattern plus noise, so that the DC predictions and the AC codes both vary.
fn photo(width: usize, height: usize, channels: usize, seed: u64) -> Vec<u8> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pixels = Vec::with_capacity(width * height * channels);
    for y in 0..height {
        for x in 0..width {
            for c in 0..channels {
                let wave = ((x as f32 * 0.05 + c as f32).sin() + (y as f32 * 0.03).cos()) * 60.0;
                let noise = rng.random_range(-20.0..20.0);
                pixels.push((128.0 + wave + noise).clamp(0.0, 255.0) as u8);
            }
        }
    }
    pixels
}

fn decode(file: &[u8]) -> Vec<u8> {
    image::load_from_memory_with_format(file, ImageFormat::Jpeg)
        .expect("the file decodes")
        .into_bytes()
}

#[test]
fn strips_decode_to_the_pixels_of_one_encoding() {
    for (width, height, channels) in [(200, 171, 3), (333, 517, 1), (16, 48, 3), (1, 9, 1)] {
        let pixels = photo(width, height, channels, (width * height) as u64);
        let size = (width as u16, height as u16);
        let whole = jpeg::encode_in_strips(&pixels, size, channels, 80, usize::MAX).unwrap();
        let reference = decode(&whole);
        assert_eq!(reference.len(), pixels.len());
        for strip_mcu_rows in [1, 2, 3, 7] {
            let joined =
                jpeg::encode_in_strips(&pixels, size, channels, 80, strip_mcu_rows).unwrap();
            let what =
                format!("{width} x {height} x {channels}, strips of {strip_mcu_rows} MCU rows");
            assert_eq!(decode(&joined), reference, "{what}");
            // Restart markers in the scan, numbered 0 to 7 in turn (decoders may not check).
            let scan = joined.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
            let restarts: Vec<u8> = joined[scan..]
                .windows(2)
                .filter(|w| w[0] == 0xFF && (0xD0..0xD8).contains(&w[1]))
                .map(|w| w[1])
                .collect();
            let mcu = if channels == 1 { 8 } else { 16 };
            let expected: Vec<u8> = (0..height.div_ceil(mcu * strip_mcu_rows) - 1)
                .map(|i| 0xD0 + (i % 8) as u8)
                .collect();
            assert_eq!(restarts, expected, "{what}");
        }
        let threaded = jpeg::encode(&pixels, size, channels, 80).unwrap();
        assert_eq!(
            decode(&threaded),
            reference,
            "{width} x {height} x {channels}, threaded"
        );
    }
}

#[test]
fn bad_buffers_are_errors() {
    let pixels = photo(20, 10, 3, 1);
    assert!(jpeg::encode(&pixels, (20, 11), 3, 80).is_err());
    assert!(jpeg::encode(&pixels, (20, 10), 4, 80).is_err());
}
