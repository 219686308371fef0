//! Element types: the types kernels add in ([`Real`]: `f32`, and `f64` for `f64` data) and the
//! types data is stored in ([`Element`]: those two, `u8`, `u16`, IEEE half precision as
//! [`Half`] and bfloat16 as [`Bf16`], each with the `Real` type it is added in).
//!
//! Each design is written once over `T: Real`. The streaming register-tiled kernels also read
//! and write the narrow types themselves (generic over `S: Element<Real = f32>`); the other
//! designs reach them through the conversion kernels of [`convert`](crate::convert), which
//! widen an input to `f32` and narrow an output from it.

use core::arch::asm;

/// A type the kernels accumulate in, read masks in and stage tiles in: `f32` or `f64`.
pub trait Real: Element<Real = Self> + PartialOrd + Default {
    /// Zero.
    const ZERO: Self;
    /// `a * b + c`, rounded once.
    fn fma(a: Self, b: Self, c: Self) -> Self;
    /// A launch parameter (the constant of `MODE_CONSTANT`, the clamp bounds), exactly.
    fn from_f32(value: f32) -> Self;
    /// Tap `j` of the mask in the constant-memory symbol `MASK`.
    ///
    /// # Safety
    /// The host uploaded at least `j + 1` taps of this type to `MASK`.
    unsafe fn constant_tap(j: u64) -> Self;
    /// Tap `j` of `MASK`, loaded where it is used (never hoisted out of a loop), so that a
    /// kernel with more taps than registers takes each from constant memory as an operand.
    ///
    /// # Safety
    /// As [`Real::constant_tap`].
    unsafe fn constant_operand(j: u64) -> Self;
    /// Reads the shared-window address `address`.
    ///
    /// # Safety
    /// The address lies in the block's reserved shared memory, aligned for `Self`, written
    /// before the last barrier.
    unsafe fn load_shared(address: u64) -> Self;
    /// Writes the shared-window address `address`.
    ///
    /// # Safety
    /// The address lies in the block's reserved shared memory, aligned for `Self`.
    unsafe fn store_shared(address: u64, value: Self);
    /// The square root, correctly rounded.
    fn sqrt(self) -> Self;
    /// The value, computed here: a move that LLVM keeps in place, so that the instructions
    /// computing the value stay before it instead of sinking into a branch that uses it (a
    /// sum stored under a condition was computed there, as one chain of dependent
    /// multiply-adds, apart from the other sums it could interleave with).
    fn settled(self) -> Self;

    /// `self` limited to `[lo, hi]`. Written as comparisons, which are false for NaN, so NaN
    /// passes through.
    #[inline(always)]
    fn clamp_to(self, lo: f32, hi: f32) -> Self {
        let (lo, hi) = (Self::from_f32(lo), Self::from_f32(hi));
        if self < lo {
            lo
        } else if self > hi {
            hi
        } else {
            self
        }
    }
}

/// Loads tap `$j` of `MASK` as `$t` (PTX type `$ptx`, register class `$class`, `$bytes`
/// bytes) with the inline-assembly options given.
///
/// Safety: the caller's `MASK` holds tap `$j`, and `MASK` is 8-byte aligned.
macro_rules! constant_load {
    ($t:ty, $ptx:literal, $class:ident, $bytes:literal, $j:expr, $($option:ident),+) => {{
        let value: $t;
        // SAFETY: `MASK` holds tap `$j` (the caller's contract) and is 8-byte aligned.
        unsafe {
            asm!(
                concat!(
                    "{{ .reg .u64 addr; mov.u64 addr, MASK; add.u64 addr, addr, {offset}; ",
                    "ld.const.", $ptx, " {value}, [addr]; }}"
                ),
                offset = in(reg64) $j * $bytes,
                value = out($class) value,
                options($($option),+),
            );
        }
        value
    }};
}

/// One PTX instruction `$opcode output, input`, the output a `$t`, both in registers of class
/// `$class`, with the inline-assembly options given; no memory.
macro_rules! register_op {
    ($t:ty, $class:ident, [$($opcode:literal),+], $input:expr, $($option:ident),+) => {{
        let output: $t;
        // SAFETY: one instruction on registers; it touches no memory.
        unsafe {
            asm!(
                concat!($($opcode,)+ " {output}, {input};"),
                output = out($class) output,
                input = in($class) $input,
                options($($option),+),
            );
        }
        output
    }};
}

/// The square root by the hardware's approximation (`sqrt.approx.ftz.f32`, one instruction;
/// a subnormal argument or result flushes to zero), where [`Real::sqrt`], correctly rounded,
/// takes a dozen and a branch.
#[inline(always)]
pub fn approximate_sqrt(value: f32) -> f32 {
    register_op!(
        f32,
        reg32,
        ["sqrt.approx.ftz.f32"],
        value,
        pure,
        nomem,
        nostack
    )
}

/// Implements [`Real`] for a float type: its PTX type name, register class and size.
macro_rules! real {
    ($t:ty, $ptx:literal, $class:ident, $bytes:literal, $fma:path) => {
        impl Real for $t {
            const ZERO: Self = 0.0;

            #[inline(always)]
            fn fma(a: Self, b: Self, c: Self) -> Self {
                $fma(a, b, c)
            }

            #[inline(always)]
            fn from_f32(value: f32) -> Self {
                value as $t
            }

            #[inline(always)]
            fn sqrt(self) -> Self {
                register_op!($t, $class, ["sqrt.rn.", $ptx], self, pure, nomem, nostack)
            }

            #[inline(always)]
            fn settled(self) -> Self {
                // Not `pure`: LLVM neither moves nor drops the move.
                register_op!($t, $class, ["mov.", $ptx], self, nomem, nostack)
            }

            #[inline(always)]
            unsafe fn constant_tap(j: u64) -> Self {
                // The symbol is not written while a kernel runs, so the load is pure and may
                // be hoisted.
                constant_load!($t, $ptx, $class, $bytes, j, pure, nomem, nostack)
            }

            #[inline(always)]
            unsafe fn constant_operand(j: u64) -> Self {
                // Not `pure`: the load stays at its use, where ptxas makes it an operand of the
                // instruction that reads it.
                constant_load!($t, $ptx, $class, $bytes, j, nomem, nostack)
            }

            #[inline(always)]
            unsafe fn load_shared(address: u64) -> Self {
                let value: $t;
                // SAFETY: in bounds and aligned (caller); `readonly` keeps it after the barrier.
                unsafe {
                    asm!(
                        concat!("ld.shared.", $ptx, " {value}, [{addr}];"),
                        addr = in(reg64) address,
                        value = out($class) value,
                        options(pure, readonly, nostack),
                    );
                }
                value
            }

            #[inline(always)]
            unsafe fn store_shared(address: u64, value: Self) {
                // SAFETY: in bounds and aligned (caller); touches only this block's tile.
                unsafe {
                    asm!(
                        concat!("st.shared.", $ptx, " [{addr}], {value};"),
                        addr = in(reg64) address,
                        value = in($class) value,
                        options(nostack),
                    );
                }
            }
        }
    };
}

real!(f32, "f32", reg32, 4, core::intrinsics::fmaf32);
real!(f64, "f64", reg64, 8, core::intrinsics::fmaf64);

/// IEEE 754 half precision, as its 16 bits (the host's `half::f16`).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Half(pub u16);

/// bfloat16 (the upper half of an `f32`), as its 16 bits (the host's `half::bf16`).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Bf16(pub u16);

/// A type data is stored in: read as its `Real` type, written from it.
pub trait Element: Copy {
    /// The type the kernels add this type's values in.
    type Real: Real;
    /// The value as `Real` (exact for every type).
    fn widen(self) -> Self::Real;
    /// `value` in this type: integers rounded to nearest (ties to even) and saturated to the
    /// type's range, NaN to 0; `Half` and `Bf16` rounded to nearest (overflow to infinity).
    fn narrow(value: Self::Real) -> Self;
    /// Writes `quad`, narrowed, to the 4 consecutive elements from `target`, in one store that
    /// bypasses L1 and is marked as read once (`.cs`).
    ///
    /// # Safety
    /// `target` points to 4 writable elements of global memory, aligned to 4 elements.
    unsafe fn store4_streaming(target: *mut Self, quad: [Self::Real; 4]);
}

/// Implements [`Element`] for a [`Real`] type, stored as itself, its 4-element stores written
/// by `$store`.
macro_rules! stored_as_itself {
    ($($t:ty: $store:path),+) => {$(
        impl Element for $t {
            type Real = $t;

            #[inline(always)]
            fn widen(self) -> Self {
                self
            }

            #[inline(always)]
            fn narrow(value: Self) -> Self {
                value
            }

            #[inline(always)]
            unsafe fn store4_streaming(target: *mut Self, quad: [Self; 4]) {
                // SAFETY: forwarded contract.
                unsafe { $store(target, quad) }
            }
        }
    )+};
}

stored_as_itself!(f32: crate::gpu::store4_streaming, f64: store4_f64);

/// Writes `quad` to `target[0..4]` (no kernel stores `f64` quads on a hot path).
///
/// # Safety
/// `target` points to 4 writable `f64` of global memory.
#[inline(always)]
unsafe fn store4_f64(target: *mut f64, quad: [f64; 4]) {
    for (k, value) in quad.into_iter().enumerate() {
        // SAFETY: element `k < 4` (caller).
        unsafe { *target.add(k) = value };
    }
}

/// `value` rounded to the nearest integer (ties to even) and saturated to `[0, 2^BITS - 1]`
/// (`BITS` 8 or 16), NaN to 0, in the low bits of a `u32`: one conversion, as PTX
/// float-to-integer conversions saturate to their destination type.
#[inline(always)]
fn round_saturated<const BITS: u32>(value: f32) -> u32 {
    const { assert!(BITS == 8 || BITS == 16) };
    if BITS == 8 {
        register_op!(u32, reg32, ["cvt.rni.u8.f32"], value, pure, nomem, nostack)
    } else {
        register_op!(u32, reg32, ["cvt.rni.u16.f32"], value, pure, nomem, nostack)
    }
}

/// The bytes of `a` and `b` that `SELECTOR` picks (`prmt.b32`: nibble `k` of the selector
/// names result byte `k`, bytes 0-3 from `a` and 4-7 from `b`).
#[inline(always)]
fn permute<const SELECTOR: u32>(a: u32, b: u32) -> u32 {
    let picked: u32;
    // SAFETY: one instruction on registers.
    unsafe {
        asm!(
            "prmt.b32 {picked}, {a}, {b}, {selector};",
            picked = out(reg32) picked,
            a = in(reg32) a,
            b = in(reg32) b,
            selector = const SELECTOR,
            options(pure, nomem, nostack),
        );
    }
    picked
}

/// The low halves of `a` and `b`, `a`'s first.
#[inline(always)]
fn low_halves(a: u32, b: u32) -> u32 {
    permute::<0x5410>(a, b)
}

/// Four values below 256, packed into a word, the first in its low byte.
#[inline(always)]
fn pack_bytes([a, b, c, d]: [u32; 4]) -> u32 {
    low_halves(permute::<0x3340>(a, b), permute::<0x3340>(c, d))
}

/// Four values below 65,536, packed into a word, the first in its low half.
#[inline(always)]
fn pack_halves([a, b, c, d]: [u32; 4]) -> u64 {
    u64::from(low_halves(a, b)) | (u64::from(low_halves(c, d)) << 32)
}

/// Implements [`Element`] for an unsigned integer type of `$bits` bits, its 4-element stores
/// packed by `$pack` (conversions and byte permutes: no masks, shifts or 64-bit arithmetic).
macro_rules! unsigned {
    ($($t:ty: $bits:literal, $pack:path),+) => {$(
        impl Element for $t {
            type Real = f32;

            #[inline(always)]
            fn widen(self) -> f32 {
                self as f32
            }

            #[inline(always)]
            fn narrow(value: f32) -> Self {
                round_saturated::<$bits>(value) as $t
            }

            #[inline(always)]
            unsafe fn store4_streaming(target: *mut Self, quad: [f32; 4]) {
                let bits = $pack(quad.map(round_saturated::<$bits>));
                // SAFETY: 4 elements, aligned to 4 elements (caller): one aligned word.
                unsafe { crate::gpu::store_streaming(target.cast(), bits) }
            }
        }
    )+};
}

unsigned!(u8: 8, pack_bytes, u16: 16, pack_halves);

/// Stores 4 16-bit float values (`Half` or `Bf16` bits), narrowed by `narrow`, in one
/// aligned 8-byte streaming store.
///
/// # Safety
/// `target` points to 4 writable 16-bit elements of global memory, 8-byte aligned.
#[inline(always)]
unsafe fn store4_halves<T>(target: *mut T, quad: [f32; 4], narrow: impl Fn(f32) -> u16) {
    let [a, b, c, d] = quad.map(narrow);
    let bits = u64::from(join_halves(a, b)) | (u64::from(join_halves(c, d)) << 32);
    // SAFETY: forwarded contract: one aligned `u64`.
    unsafe { crate::gpu::store_streaming(target.cast::<u64>(), bits) }
}

/// `lo` and `hi` as one word (`mov.b32` of a 16-bit pair, which ptxas merges with the
/// conversions that produced them: one packing conversion per pair of `Half` values).
#[inline(always)]
fn join_halves(lo: u16, hi: u16) -> u32 {
    let word: u32;
    // SAFETY: one register move.
    unsafe {
        asm!(
            "mov.b32 {word}, {{{lo}, {hi}}};",
            word = out(reg32) word,
            lo = in(reg16) lo,
            hi = in(reg16) hi,
            options(pure, nomem, nostack),
        );
    }
    word
}

impl Element for Half {
    type Real = f32;

    #[inline(always)]
    fn widen(self) -> f32 {
        let value: f32;
        // SAFETY: a register conversion.
        unsafe {
            asm!(
                "cvt.f32.f16 {value}, {bits};",
                value = out(reg32) value,
                bits = in(reg16) self.0,
                options(pure, nomem, nostack),
            );
        }
        value
    }

    #[inline(always)]
    fn narrow(value: f32) -> Self {
        let bits: u16;
        // SAFETY: a register conversion.
        unsafe {
            asm!(
                "cvt.rn.f16.f32 {bits}, {value};",
                bits = out(reg16) bits,
                value = in(reg32) value,
                options(pure, nomem, nostack),
            );
        }
        Half(bits)
    }

    #[inline(always)]
    unsafe fn store4_streaming(target: *mut Self, quad: [f32; 4]) {
        // SAFETY: 4 elements, aligned to 4 elements (caller).
        unsafe { store4_halves(target, quad, |v| Self::narrow(v).0) }
    }
}

impl Element for Bf16 {
    type Real = f32;

    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from_bits(u32::from(self.0) << 16)
    }

    /// Rounds the upper half of `value`'s bits to nearest, ties to even, in integer arithmetic
    /// (PTX converts to `bf16` only from sm_80, the PTX targets sm_70); NaN stays a quiet NaN.
    #[inline(always)]
    fn narrow(value: f32) -> Self {
        let bits = value.to_bits();
        if value.is_nan() {
            return Bf16((bits >> 16) as u16 | 0x0040);
        }
        let tie_to_even = 0x7FFF + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(tie_to_even) >> 16) as u16)
    }

    #[inline(always)]
    unsafe fn store4_streaming(target: *mut Self, quad: [f32; 4]) {
        // SAFETY: 4 elements, aligned to 4 elements (caller).
        unsafe { store4_halves(target, quad, |v| Self::narrow(v).0) }
    }
}
