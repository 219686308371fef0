//! Values of the input beyond its ends ("ghost cells") under SciPy's boundary modes.

use crate::abi::{MODE_MIRROR, MODE_NEAREST, MODE_REFLECT, MODE_WRAP};

/// `index mod period` in `[0, period)`, for `period >= 1`, without the checks of `rem_euclid`
/// (division by zero and overflow cannot happen here, and the checks cost branches in every kernel).
#[inline(always)]
fn modulo(index: i64, period: i64) -> i64 {
    // SAFETY: `period >= 1`, so the divisor is neither zero nor -1.
    let rem = unsafe { core::intrinsics::unchecked_rem(index, period) };
    if rem < 0 { rem + period } else { rem }
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

/// A 1D input line in global memory with its boundary rule.
#[derive(Clone, Copy)]
pub struct Line {
    data: *const f32,
    len: u64,
    mode: u32,
    cval: f32,
}

impl Line {
    /// # Safety
    /// `data` points to `len >= 1` readable `f32` for the kernel's lifetime.
    #[inline(always)]
    pub unsafe fn new(data: *const f32, len: u64, mode: u32, cval: f32) -> Self {
        Self {
            data,
            len,
            mode,
            cval,
        }
    }

    /// Element `index` of the extended line; `index` may lie anywhere.
    #[inline(always)]
    pub fn at(self, index: i64) -> f32 {
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
