//! Values of the input beyond its ends ("ghost cells") under SciPy's boundary modes.

use crate::abi::{MODE_MIRROR, MODE_NEAREST, MODE_REFLECT, MODE_WRAP};
use crate::element::{Element, Real};

/// `index mod period` in `[0, period)`, for `period >= 1`, without the checks of `rem_euclid`
/// (division by zero and overflow cannot happen here, and the checks cost branches in every kernel).
#[inline(always)]
fn modulo(index: i64, period: i64) -> i64 {
    // SAFETY: `period >= 1`, so the divisor is neither zero nor -1.
    let rem = unsafe { core::intrinsics::unchecked_rem(index, period) };
    if rem < 0 { rem + period } else { rem }
}

/// `index / divisor` rounded down, for `divisor >= 1`, without `div_euclid`'s checks.
#[inline(always)]
fn floor_div(index: i64, divisor: i64) -> i64 {
    // SAFETY: `divisor >= 1`, so the division neither divides by zero nor overflows.
    let quotient = unsafe { core::intrinsics::unchecked_div(index, divisor) };
    if quotient * divisor > index {
        quotient - 1
    } else {
        quotient
    }
}

/// Maps an index outside `[0, len)` to the input element that stands there, or `None` where the
/// mode supplies the constant. `len >= 1`. Reflect and mirror are periodic (periods `2 len` and
/// `2 len - 2`), so indices any distance away, as masks longer than the input need, fold back.
#[inline(always)]
pub fn fold_index(index: i64, len: i64, mode: u32) -> Option<i64> {
    match mode {
        MODE_NEAREST => Some(if index < 0 { 0 } else { len - 1 }),
        MODE_WRAP => Some(modulo(index, len)),
        MODE_REFLECT => {
            let period = 2 * len;
            let folded = modulo(index, period);
            Some(if folded >= len {
                period - 1 - folded
            } else {
                folded
            })
        }
        MODE_MIRROR if len == 1 => Some(0),
        MODE_MIRROR => {
            let period = 2 * len - 2;
            let folded = modulo(index, period);
            Some(if folded >= len {
                period - folded
            } else {
                folded
            })
        }
        // MODE_CONSTANT: the caller substitutes `cval`.
        _ => None,
    }
}

/// A 1D input line of `T` in global memory with its boundary rule.
#[derive(Clone, Copy)]
pub struct Line<T = f32> {
    data: *const T,
    len: u64,
    mode: u32,
    cval: T,
}

impl<T: Real> Line<T> {
    /// # Safety
    /// `data` points to `len >= 1` readable `T` for the kernel's lifetime.
    #[inline(always)]
    pub unsafe fn new(data: *const T, len: u64, mode: u32, cval: f32) -> Self {
        Self {
            data,
            len,
            mode,
            cval: T::from_f32(cval),
        }
    }

    /// Element `index` of the extended line; `index` may lie anywhere.
    #[inline(always)]
    pub fn at(self, index: i64) -> T {
        // A negative index wraps to a huge u64, so one comparison tests both ends.
        let inside = (index as u64) < self.len;
        let source = if inside {
            Some(index)
        } else {
            fold_index(index, self.len as i64, self.mode)
        };
        match source {
            // SAFETY: `fold_index` returns indices in `[0, len)`.
            Some(k) => unsafe { *self.data.add(k as usize) },
            None => self.cval,
        }
    }
}

/// Folds one coordinate into `[0, len)`, or `None` where the mode supplies the constant.
#[inline(always)]
fn fold_axis(index: i64, len: u64, mode: u32) -> Option<i64> {
    if (index as u64) < len {
        Some(index)
    } else {
        fold_index(index, len as i64, mode)
    }
}

/// A pitched, interleaved image of `T` in global memory with its boundary rule, read as
/// `T::Real` (the constant of `MODE_CONSTANT` too, so that any constant works whatever `T`
/// holds).
#[derive(Clone, Copy)]
pub struct Plane<T: Element = f32> {
    data: *const T,
    pitch: u64,
    height: u64,
    width: u64,
    channels: u64,
    mode: u32,
    cval: T::Real,
}

impl<T: Element> Plane<T> {
    /// # Safety
    /// `data` points to `height` rows of `pitch >= width * channels` readable `T`, with
    /// `height, width, channels >= 1`, for the kernel's lifetime.
    #[inline(always)]
    pub unsafe fn new(data: *const T, p: &crate::abi::Conv2dParams) -> Self {
        Self {
            data,
            pitch: p.pitch,
            height: u64::from(p.height),
            width: u64::from(p.width),
            channels: u64::from(p.channels),
            mode: p.mode,
            cval: T::Real::from_f32(p.cval),
        }
    }

    /// Offset of row `y` of the extended image, or `None` for a row of constant ghost cells.
    #[inline(always)]
    pub fn row(self, y: i64) -> Option<u64> {
        fold_axis(y, self.height, self.mode).map(|y| y as u64 * self.pitch)
    }

    /// Channel `c` of pixel `x` (may lie outside) in a row from [`Plane::row`].
    #[inline(always)]
    pub fn in_row(self, row: Option<u64>, x: i64, c: u64) -> T::Real {
        match (row, fold_axis(x, self.width, self.mode)) {
            // SAFETY: the row and the column were folded into the image, and `c < channels`.
            (Some(row), Some(x)) => unsafe {
                (*self.data.add((row + x as u64 * self.channels + c) as usize)).widen()
            },
            _ => self.cval,
        }
    }

    /// Offset within a row of element `element` (= `x * channels + c`, may lie outside), or
    /// `None` for a constant ghost cell.
    #[inline(always)]
    pub fn column(self, element: i64) -> Option<u64> {
        let channels = self.channels as i64;
        let x = floor_div(element, channels);
        let c = (element - x * channels) as u64;
        fold_axis(x, self.width, self.mode).map(|x| x as u64 * self.channels + c)
    }

    /// The element at a row from [`Plane::row`] and a column from [`Plane::column`]. Ghost
    /// cells read element (0, 0) and discard it, so the load needs no branch and a warp's
    /// loads all go out before the first of them returns.
    #[inline(always)]
    pub fn at(self, row: Option<u64>, column: Option<u64>) -> T::Real {
        let inside = row.is_some() && column.is_some();
        let offset = row.unwrap_or(0) + column.unwrap_or(0);
        // SAFETY: the row and the column were folded into the image, or both are 0.
        let value = unsafe { *self.data.add(if inside { offset } else { 0 } as usize) };
        if inside { value.widen() } else { self.cval }
    }

    /// Element `element` (= `x * channels + c`, may lie outside) of a row from [`Plane::row`].
    #[inline(always)]
    pub fn element_in_row(self, row: Option<u64>, element: i64) -> T::Real {
        let channels = self.channels as i64;
        let x = floor_div(element, channels);
        self.in_row(row, x, (element - x * channels) as u64)
    }
}

/// A contiguous volume of `T` (`depth x height x width x channels`) in global memory with its
/// boundary rule.
#[derive(Clone, Copy)]
pub struct Volume<T = f32> {
    data: *const T,
    depth: u64,
    height: u64,
    width: u64,
    channels: u64,
    pitch: u64,
    mode: u32,
    cval: T,
}

impl<T: Real> Volume<T> {
    /// # Safety
    /// `data` points to `depth * height` rows of `width * channels` readable `T`, `pitch`
    /// apart, every dimension at least 1, for the kernel's lifetime.
    #[inline(always)]
    pub unsafe fn new(data: *const T, p: &crate::abi::Conv3dParams) -> Self {
        Self {
            data,
            depth: p.depth,
            height: p.height,
            width: p.width,
            channels: p.channels,
            pitch: p.pitch,
            mode: p.mode,
            cval: T::from_f32(p.cval),
        }
    }

    /// Offset of slice `z` of the extended volume (may lie outside), or `None` for a slice of
    /// constant ghost cells.
    #[inline(always)]
    pub fn slice(self, z: i64) -> Option<u64> {
        fold_axis(z, self.depth, self.mode).map(|z| z as u64 * self.height * self.pitch)
    }

    /// Offset within a slice of element `element` (= `x * channels + c`) of row `y` (either
    /// may lie outside), or `None` for a constant ghost cell.
    #[inline(always)]
    pub fn in_slice(self, y: i64, element: i64) -> Option<u64> {
        let y = fold_axis(y, self.height, self.mode)? as u64;
        let row_elements = self.width * self.channels;
        let element = if (element as u64) < row_elements {
            element as u64
        } else {
            let channels = self.channels as i64;
            let x = floor_div(element, channels);
            let c = (element - x * channels) as u64;
            fold_axis(x, self.width, self.mode)? as u64 * self.channels + c
        };
        Some(y * self.pitch + element)
    }

    /// The address of the element at a slice from [`Volume::slice`] and an offset from
    /// [`Volume::in_slice`], or `None` for a constant ghost cell.
    #[inline(always)]
    pub fn address(self, slice: Option<u64>, in_slice: Option<u64>) -> Option<*const T> {
        // SAFETY: both were folded into the volume: the element lies inside it.
        Some(unsafe { self.data.add((slice? + in_slice?) as usize) })
    }

    /// The element at a slice from [`Volume::slice`] and an offset from [`Volume::in_slice`].
    #[inline(always)]
    pub fn at(self, slice: Option<u64>, in_slice: Option<u64>) -> T {
        // SAFETY: an element of the volume (`address`).
        self.address(slice, in_slice)
            .map_or(self.cval, |element| unsafe { *element })
    }

    /// The constant of ghost cells outside the volume.
    #[inline(always)]
    pub fn cval(self) -> T {
        self.cval
    }
}
