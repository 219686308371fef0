//! Element conversions between the caller's type and the `Real` type, on the rayon pool, in
//! vector instructions (AVX2 where the CPU has it: rounding to integers is one instruction
//! there, a library call per element on baseline x86-64).

use super::stencil::fused_multiply_add;
use crate::element::Element;
use rayon::prelude::*;

/// Elements of one task.
const TASK: usize = 1 << 16;

/// `source` converted into `target` (as many elements): rounded to nearest and saturated as
/// [`Element::from_f64`] says.
pub(super) fn slices<A: Element, B: Element>(source: &[A], target: &mut [B]) {
    let vectors = fused_multiply_add();
    target
        .par_chunks_mut(TASK)
        .zip(source.par_chunks(TASK))
        .for_each(|(target, source)| {
            #[cfg(target_arch = "x86_64")]
            if vectors {
                // SAFETY: `fused_multiply_add` found AVX2 and FMA on this CPU.
                return unsafe { convert_avx2(source, target) };
            }
            let _ = vectors;
            convert(source, target);
        });
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn convert_avx2<A: Element, B: Element>(source: &[A], target: &mut [B]) {
    convert(source, target);
}

#[inline(always)]
fn convert<A: Element, B: Element>(source: &[A], target: &mut [B]) {
    for (t, &s) in target.iter_mut().zip(source) {
        *t = B::from_f64(s.to_f64());
    }
}
