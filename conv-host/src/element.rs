//! Element types of images, signals and masks: `u8`, `u16`, [`half::f16`], [`half::bf16`],
//! `f32` and `f64`.
//!
//! Every type but `f64` is filtered in `f32`: masks are `f32`, sums are `f32`, and inputs of
//! `u8`, `u16`, `f16` and `bf16` are widened to `f32` on the GPU after their upload, outputs
//! narrowed from `f32` on the GPU before their download, so transfers move only the type's own
//! bytes.
//! `f64` data is filtered in `f64` with `f64` masks, by the textbook designs.
//!
//! Integer outputs are rounded to nearest (ties to even) and saturated to the type's range,
//! NaN giving 0, as NPP and OpenCV do; SciPy instead truncates toward zero and wraps around.

use crate::registry::{Family, KernelId, Shape, Storage};
use cudarc::driver::DeviceRepr;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// An element type of the data the library filters.
///
/// The output of a filter may be of another type than its input when both compute in the
/// same [`Real`] type: a `u8` image filters into `u8`, `u16`, `f16` or `f32`, an `f64` one only
/// into `f64`. Other combinations do not compile.
pub trait Element:
    sealed::Sealed + Copy + Default + PartialEq + std::fmt::Debug + Send + Sync + DeviceRepr + 'static
{
    /// The type the GPU adds in and masks are given in: `f32`, or `f64` for `f64`.
    type Real: Real;
    /// The type's name in PTX entry points and messages: `u8`, `u16`, `f16`, `bf16`, `f32`,
    /// `f64`.
    const NAME: &'static str;
    /// The type as the kernel registry names it.
    #[doc(hidden)]
    const STORAGE: Storage;
    /// The value as `f64` (exact for every type).
    fn to_f64(self) -> f64;
    /// `value` in this type: integers rounded to nearest (ties to even) and saturated to the
    /// type's range, NaN to 0; floats rounded to nearest.
    fn from_f64(value: f64) -> Self;
    /// The elements as their `Real` type, where they are of it (`f32`, `f64`): the CPU
    /// backend then reads them in place.
    #[doc(hidden)]
    fn as_real(_values: &[Self]) -> Option<&[Self::Real]> {
        None
    }
    /// [`Element::as_real`] for an output the CPU backend writes in place.
    #[doc(hidden)]
    fn as_real_mut(_values: &mut [Self]) -> Option<&mut [Self::Real]> {
        None
    }
}

/// A type the GPU computes in: `f32` or `f64`.
pub trait Real:
    Element<Real = Self> + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + PartialOrd
{
    /// `self * a + b` rounded once (the CPU backend's fused multiply-add).
    #[doc(hidden)]
    fn mul_add(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }
}

impl Real for f64 {
    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }
}

/// Implements [`Element`] for an unsigned integer type.
macro_rules! unsigned {
    ($($t:ty: $storage:ident),+) => {$(
        impl Element for $t {
            type Real = f32;
            const NAME: &'static str = stringify!($t);
            const STORAGE: Storage = Storage::$storage;

            fn to_f64(self) -> f64 {
                f64::from(self)
            }

            fn from_f64(value: f64) -> Self {
                // `as` saturates and maps NaN to 0.
                value.round_ties_even() as $t
            }
        }
    )+};
}

unsigned!(u8: U8, u16: U16);

/// Implements [`Element`] for a 16-bit float type of the `half` crate.
macro_rules! half_float {
    ($($t:ident: $storage:ident),+) => {$(
        impl Element for half::$t {
            type Real = f32;
            const NAME: &'static str = stringify!($t);
            const STORAGE: Storage = Storage::$storage;

            fn to_f64(self) -> f64 {
                f64::from(self)
            }

            fn from_f64(value: f64) -> Self {
                half::$t::from_f64(value)
            }
        }
    )+};
}

half_float!(f16: F16, bf16: Bf16);

impl Element for f32 {
    type Real = f32;
    const NAME: &'static str = "f32";
    const STORAGE: Storage = Storage::F32;

    fn as_real(values: &[Self]) -> Option<&[Self]> {
        Some(values)
    }

    fn as_real_mut(values: &mut [Self]) -> Option<&mut [Self]> {
        Some(values)
    }

    fn to_f64(self) -> f64 {
        f64::from(self)
    }

    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl Element for f64 {
    type Real = f64;
    const NAME: &'static str = "f64";
    const STORAGE: Storage = Storage::F64;

    fn as_real(values: &[Self]) -> Option<&[Self]> {
        Some(values)
    }

    fn as_real_mut(values: &mut [Self]) -> Option<&mut [Self]> {
        Some(values)
    }

    fn to_f64(self) -> f64 {
        self
    }

    fn from_f64(value: f64) -> Self {
        value
    }
}

/// Whether `T` is one of the narrow types, which kernels widen to `f32` after their upload
/// and narrow from `f32` before their download.
fn is_narrow<T: Element>() -> bool {
    Storage::NARROW.contains(&T::STORAGE)
}

/// The device-side conversion of `T` to `f32` after its upload (`None`: the kernels read `T`).
pub(crate) fn widening<T: Element>() -> Option<KernelId> {
    is_narrow::<T>().then(|| KernelId::new(Family::Widen, Shape::Any, None, T::STORAGE))
}

/// The device-side conversion of `f32` to `T` before its download (`None`: the kernels write
/// `T`).
pub(crate) fn narrowing<T: Element>() -> Option<KernelId> {
    is_narrow::<T>().then(|| KernelId::new(Family::Narrow, Shape::Any, None, T::STORAGE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    /// Integers round to nearest, ties to even, and saturate; NaN gives 0; halves round.
    #[test]
    fn narrowing_rounds_and_saturates() {
        let cases = [
            (-3.7, 0),
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (254.5, 254),
            (255.49, 255),
            (300.0, 255),
        ];
        for (value, expected) in cases {
            assert_eq!(u8::from_f64(value), expected, "{value}");
        }
        assert_eq!(u8::from_f64(f64::NAN), 0);
        assert_eq!(u16::from_f64(65535.6), 65535);
        assert_eq!(u16::from_f64(1e9), 65535);
        assert_eq!(
            f16::from_f64(1.0 / 3.0).to_f64(),
            f64::from(f16::from_f32(1.0 / 3.0))
        );
        assert!(f16::from_f64(1e6).to_f64().is_infinite());
        // bfloat16 keeps 8 bits of significand: 1 + 2^-8 is a tie, to even (1), and so is
        // 1 + 3 x 2^-8 (to 1 + 2^-6); values past its largest (about 3.39e38) overflow.
        assert_eq!(half::bf16::from_f64(1.0 + 1.0 / 256.0).to_f64(), 1.0);
        assert_eq!(
            half::bf16::from_f64(1.0 + 3.0 / 256.0).to_f64(),
            1.0 + 1.0 / 64.0
        );
        assert!(half::bf16::from_f64(1e39).to_f64().is_infinite());
        let name = |id: Option<KernelId>| id.map(KernelId::entry_point);
        assert_eq!(name(narrowing::<half::bf16>()), Some("convert_f32_bf16"));
        assert_eq!(name(widening::<u8>()), Some("convert_u8_f32"));
        assert_eq!((widening::<f32>(), narrowing::<f64>()), (None, None));
    }
}
