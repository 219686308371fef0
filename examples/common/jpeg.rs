//! Baseline JPEG encoding on every core.
//!
//! The image is cut into strips of whole MCU rows, `jpeg-encoder` encodes each strip on its own
//! thread, and the strips' entropy-coded data are joined with restart markers into one file.
//! A restart marker resets the DC predictions as the start of a strip's own encoding does, and
//! no MCU spans two strips, so the file decodes to exactly the pixels of one encoding of the
//! whole image (the tests check this).

use jpeg_encoder::{ColorType, Encoder, SamplingFactor};
use rayon::prelude::*;

/// JPEG markers this module reads or writes (the byte after `0xFF`).
const START_OF_FRAME: u8 = 0xC0;
const START_OF_SCAN: u8 = 0xDA;
const RESTART_INTERVAL: u8 = 0xDD;
const FIRST_RESTART: u8 = 0xD0;
const END_OF_IMAGE: u8 = 0xD9;

/// Strips per thread, so that uneven strips still keep every thread busy.
const STRIPS_PER_THREAD: usize = 2;

/// Encodes `pixels`, rows of `width` pixels of `channels` bytes each (1: gray, 3: RGB), at
/// `quality` (1 to 100; colour is subsampled 2 x 2), in strips spread over rayon's threads.
pub fn encode(
    pixels: &[u8],
    (width, height): (u16, u16),
    channels: usize,
    quality: u8,
) -> Result<Vec<u8>, String> {
    let mcu_rows = usize::from(height).div_ceil(mcu_side(channels));
    let strips = rayon::current_num_threads() * STRIPS_PER_THREAD;
    encode_in_strips(
        pixels,
        (width, height),
        channels,
        quality,
        mcu_rows.div_ceil(strips).max(1),
    )
}

/// [`encode`] with strips of `strip_mcu_rows` MCU rows (the last one may be shorter).
pub fn encode_in_strips(
    pixels: &[u8],
    (width, height): (u16, u16),
    channels: usize,
    quality: u8,
    strip_mcu_rows: usize,
) -> Result<Vec<u8>, String> {
    let side = mcu_side(channels);
    let color = match channels {
        1 => ColorType::Luma,
        3 => ColorType::Rgb,
        _ => return Err(format!("JPEG takes 1 or 3 channels, not {channels}")),
    };
    let row_bytes = usize::from(width) * channels;
    if pixels.len() != row_bytes * usize::from(height) {
        return Err("pixel buffer does not match the image size".into());
    }
    // A restart interval counts MCUs in 16 bits.
    let mcu_columns = usize::from(width).div_ceil(side).max(1);
    let strip_mcu_rows = strip_mcu_rows.clamp(1, usize::from(u16::MAX) / mcu_columns);
    let strip_rows = strip_mcu_rows * side;
    let strips: Vec<Vec<u8>> = pixels
        .par_chunks(strip_rows * row_bytes)
        .map(|strip| {
            let mut encoded = Vec::with_capacity(strip.len() / 4);
            let mut encoder = Encoder::new(&mut encoded, quality);
            encoder.set_sampling_factor(SamplingFactor::F_2_2);
            let rows = u16::try_from(strip.len() / row_bytes).unwrap_or(u16::MAX);
            encoder
                .encode(strip, width, rows, color)
                .map_err(|e| format!("JPEG encoding failed: {e}"))?;
            Ok(encoded)
        })
        .collect::<Result<_, String>>()?;
    if strips.len() == 1 {
        return Ok(strips.into_iter().next().unwrap_or_default());
    }
    join(&strips, height, (mcu_columns * strip_mcu_rows) as u16)
}

/// Pixels on a side of a minimal coded unit: 16 with subsampled colour, 8 for gray.
fn mcu_side(channels: usize) -> usize {
    if channels == 1 { 8 } else { 16 }
}

/// One file from separately encoded strips: the first strip's headers with the whole image's
/// height and a restart interval of one strip, then every strip's scan data, with a restart
/// marker between each two.
fn join(strips: &[Vec<u8>], height: u16, interval: u16) -> Result<Vec<u8>, String> {
    let first = split(&strips[0])?;
    let mut file = Vec::with_capacity(strips.iter().map(Vec::len).sum::<usize>() + 16);
    file.extend_from_slice(first.headers);
    set_height(&mut file, height)?;
    file.extend_from_slice(&[0xFF, RESTART_INTERVAL, 0, 4]);
    file.extend_from_slice(&interval.to_be_bytes());
    file.extend_from_slice(first.scan_header);
    for (index, strip) in strips.iter().enumerate() {
        if index > 0 {
            file.extend_from_slice(&[0xFF, FIRST_RESTART + (index - 1) as u8 % 8]);
        }
        file.extend_from_slice(split(strip)?.data);
    }
    file.extend_from_slice(&[0xFF, END_OF_IMAGE]);
    Ok(file)
}

/// The parts of a baseline JPEG that [`join`] takes apart.
struct Parts<'a> {
    /// Everything before the scan.
    headers: &'a [u8],
    /// The scan's header.
    scan_header: &'a [u8],
    /// The entropy-coded data, up to the end-of-image marker.
    data: &'a [u8],
}

/// `jpeg` in its [`Parts`].
fn split(jpeg: &[u8]) -> Result<Parts<'_>, String> {
    let malformed = || "the JPEG encoder wrote an unexpected stream".to_string();
    let mut at = 2;
    while at + 4 <= jpeg.len() && jpeg[at] == 0xFF {
        let end = at + 2 + usize::from(u16::from_be_bytes([jpeg[at + 2], jpeg[at + 3]]));
        if jpeg[at + 1] == START_OF_SCAN {
            let data = jpeg
                .get(end..jpeg.len().checked_sub(2).ok_or_else(malformed)?)
                .ok_or_else(malformed)?;
            return Ok(Parts {
                headers: &jpeg[..at],
                scan_header: &jpeg[at..end],
                data,
            });
        }
        at = end;
    }
    Err(malformed())
}

/// Writes `height` into the start-of-frame header of `headers`.
fn set_height(headers: &mut [u8], height: u16) -> Result<(), String> {
    let mut at = 2;
    while at + 9 <= headers.len() && headers[at] == 0xFF {
        if headers[at + 1] == START_OF_FRAME {
            headers[at + 5..at + 7].copy_from_slice(&height.to_be_bytes());
            return Ok(());
        }
        at += 2 + usize::from(u16::from_be_bytes([headers[at + 2], headers[at + 3]]));
    }
    Err("the JPEG encoder wrote no baseline frame header".into())
}
