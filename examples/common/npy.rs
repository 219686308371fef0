//! `.npy` files of the element types the library filters: float64, float32, float16, uint8
//! and uint16 (float16 read and written as its bits, which `ndarray-npy` has no type for).

use conv_host::f16;
use ndarray::ArrayD;
use ndarray_npy::{ReadNpyExt, WriteNpyExt};

/// A dtype the library filters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dtype {
    F64,
    F32,
    F16,
    U8,
    U16,
}

impl Dtype {
    const ALL: [(Dtype, &'static str, &'static str); 5] = [
        (Dtype::F64, "float64", "<f8"),
        (Dtype::F32, "float32", "<f4"),
        (Dtype::F16, "float16", "<f2"),
        (Dtype::U8, "uint8", "|u1"),
        (Dtype::U16, "uint16", "<u2"),
    ];

    /// NumPy's name.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|d| d.0 == self).map_or("?", |d| d.1)
    }

    /// Bytes of one element.
    pub fn item_bytes(self) -> usize {
        match self {
            Dtype::F64 => 8,
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::U16 => 2,
            Dtype::U8 => 1,
        }
    }

    /// Parses NumPy's name (`float32`, ...).
    pub fn parse(name: &str) -> Result<Dtype, String> {
        Self::ALL
            .iter()
            .find(|d| d.1 == name)
            .map(|d| d.0)
            .ok_or_else(|| {
                format!("unknown dtype `{name}` (float64, float32, float16, uint8 or uint16)")
            })
    }
}

/// An array read from a `.npy` file.
pub enum Npy {
    F64(ArrayD<f64>),
    F32(ArrayD<f32>),
    F16(ArrayD<f16>),
    U8(ArrayD<u8>),
    U16(ArrayD<u16>),
}

impl Npy {
    pub fn dtype(&self) -> Dtype {
        match self {
            Npy::F64(_) => Dtype::F64,
            Npy::F32(_) => Dtype::F32,
            Npy::F16(_) => Dtype::F16,
            Npy::U8(_) => Dtype::U8,
            Npy::U16(_) => Dtype::U16,
        }
    }

    pub fn shape(&self) -> &[usize] {
        match self {
            Npy::F64(a) => a.shape(),
            Npy::F32(a) => a.shape(),
            Npy::F16(a) => a.shape(),
            Npy::U8(a) => a.shape(),
            Npy::U16(a) => a.shape(),
        }
    }

    /// The values as f64 (exact): masks, whatever their dtype.
    pub fn to_f64(&self) -> ArrayD<f64> {
        match self {
            Npy::F64(a) => a.clone(),
            Npy::F32(a) => a.mapv(f64::from),
            Npy::F16(a) => a.mapv(f64::from),
            Npy::U8(a) => a.mapv(f64::from),
            Npy::U16(a) => a.mapv(f64::from),
        }
    }
}

/// The header's `descr` (`<f4`, ...) and where it sits in the file.
fn descr(bytes: &[u8]) -> Option<(String, usize)> {
    if !bytes.starts_with(b"\x93NUMPY") || bytes.len() < 10 {
        return None;
    }
    let key = b"'descr': '";
    let header_end = bytes.len().min(4096);
    let start = bytes[..header_end]
        .windows(key.len())
        .position(|w| w == key)?
        + key.len();
    let len = bytes[start..header_end].iter().position(|&b| b == b'\'')?;
    Some((
        String::from_utf8_lossy(&bytes[start..start + len]).into_owned(),
        start,
    ))
}

/// The header's shape and the length of its data, checked against the file: a shape whose
/// elements overflow, or need more bytes than the file holds past its header, is refused before
/// anything is allocated for it.
fn check_size(bytes: &[u8], item_bytes: usize) -> Result<(), String> {
    let (header_len, data_start): (usize, usize) = match bytes.get(6) {
        Some(1) if bytes.len() >= 10 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        Some(2 | 3) if bytes.len() >= 12 => {
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (len as usize, 12)
        }
        _ => return Err("unknown .npy format version".into()),
    };
    let header = bytes
        .get(data_start..data_start.saturating_add(header_len))
        .ok_or("header longer than the file")?;
    let header = String::from_utf8_lossy(header);
    let shape = header
        .split("'shape':")
        .nth(1)
        .and_then(|rest| rest.split_once('(')?.1.split_once(')'))
        .map(|(inside, _)| inside)
        .ok_or("header without a shape")?;
    let mut elements: usize = 1;
    for extent in shape.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let extent: usize = extent
            .trim_end_matches('L')
            .parse()
            .map_err(|_| format!("shape extent `{extent}` is not a size"))?;
        elements = elements
            .checked_mul(extent)
            .ok_or_else(|| format!("shape ({shape}) has more elements than memory can hold"))?;
    }
    let needed = elements.saturating_mul(item_bytes);
    let held = bytes.len() - data_start - header_len;
    if needed > held {
        return Err(format!(
            "shape ({shape}) needs {needed} bytes of data, the file holds {held}"
        ));
    }
    Ok(())
}

/// Reads `path`, of one of the dtypes the library filters.
///
/// # Errors
/// A one-line message naming the file and what it holds: unreadable, not `.npy`, another
/// dtype (complex, bool, object, other integers, big-endian), a Fortran-order or malformed
/// array, a shape the file's data does not cover.
pub fn read(path: &str) -> Result<Npy, String> {
    let mut bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let (descr, at) = descr(&bytes).ok_or_else(|| format!("{path}: not a .npy file"))?;
    let dtype = Dtype::ALL.iter().find(|d| d.2 == descr.as_str()).map(|d| d.0).ok_or_else(|| {
        format!("{path}: holds dtype '{descr}'; convolve reads float64, float32, float16, uint8 and uint16")
    })?;
    check_size(&bytes, dtype.item_bytes()).map_err(|e| format!("{path}: {e}"))?;
    let bad = |e: ndarray_npy::ReadNpyError| format!("{path}: {e}");
    Ok(match dtype {
        Dtype::F64 => Npy::F64(ArrayD::read_npy(&bytes[..]).map_err(bad)?),
        Dtype::F32 => Npy::F32(ArrayD::read_npy(&bytes[..]).map_err(bad)?),
        Dtype::U8 => Npy::U8(ArrayD::read_npy(&bytes[..]).map_err(bad)?),
        Dtype::U16 => Npy::U16(ArrayD::read_npy(&bytes[..]).map_err(bad)?),
        Dtype::F16 => {
            // The same header with the bits' dtype: same length, same layout.
            bytes[at..at + 3].copy_from_slice(b"<u2");
            let bits: ArrayD<u16> = ArrayD::read_npy(&bytes[..]).map_err(bad)?;
            Npy::F16(bits.mapv(f16::from_bits))
        }
    })
}

/// Writes `array` to `path` in its dtype.
///
/// # Errors
/// A one-line message naming the file.
pub fn write(path: &str, array: &Npy) -> Result<(), String> {
    let mut bytes = Vec::new();
    let bad = |e: ndarray_npy::WriteNpyError| format!("{path}: {e}");
    match array {
        Npy::F64(a) => a.write_npy(&mut bytes).map_err(bad)?,
        Npy::F32(a) => a.write_npy(&mut bytes).map_err(bad)?,
        Npy::U8(a) => a.write_npy(&mut bytes).map_err(bad)?,
        Npy::U16(a) => a.write_npy(&mut bytes).map_err(bad)?,
        Npy::F16(a) => {
            a.mapv(f16::to_bits).write_npy(&mut bytes).map_err(bad)?;
            let (_, at) = descr(&bytes).ok_or_else(|| format!("{path}: header not written"))?;
            bytes[at..at + 3].copy_from_slice(b"<f2");
        }
    }
    std::fs::write(path, bytes).map_err(|e| format!("{path}: {e}"))
}
