//! The CPU backend's one design: the correlation of a row-major array `[depth, height, width,
//! channels]` with a mask of up to three axes (`depth x height x width`; the channels are
//! filtered each on its own), summed in the array's `Real` type on the rayon pool. Every
//! operation runs on it: an axis pass is a mask one row high or one column wide, a 2D mask one
//! slice deep.
//!
//! Mapping: a task computes a segment of one output row (a `(z, y)` pair). The mask's
//! `depth x height` source rows are found by the boundary mode (the rows a constant mode puts
//! outside add `cval` times their taps); each row's reach along the width is read in place, or
//! gathered with its ghost pixels where the segment meets the row's ends. Blocks of [`BLOCK`]
//! outputs add every source row's taps in registers and meet the output once (store, add,
//! square, root; clamp). Bound: one load of a source vector per vector multiply-add, from L1
//! or L2, for masks of many taps; the host's memory bandwidth for masks of a few.

use crate::axis::Combine;
use crate::conv1d::reference::{fold, ghost_value};
use crate::conv3d::VolumeShape;
use crate::element::Real;
use crate::options::BoundaryMode;
use rayon::prelude::*;

/// Outputs a block adds in registers: four 256-bit vectors of `f32`.
const BLOCK: usize = 32;

/// Outputs of a segment at most: its sources stay in the core's L1 and L2 caches.
const SEGMENT: usize = 2048;

/// Elements a task's gathered source rows hold at most: bounds the segments of masks of many
/// rows.
const GATHERED: usize = 1 << 16;

/// A mask in correlation order: `taps` row-major over `dims` (`depth x height x width`), the
/// output at `anchors` of it, ghost cells by `mode`.
pub(crate) struct Stencil<'a, R> {
    pub(crate) taps: &'a [R],
    pub(crate) dims: [usize; 3],
    pub(crate) anchors: [usize; 3],
    pub(crate) mode: BoundaryMode,
}

/// How a sum meets the output: combined by `combine`, then clamped to `[lo, hi]`.
#[derive(Clone, Copy)]
struct Finish<R> {
    combine: Combine,
    lo: R,
    hi: R,
}

impl<R: Real> Finish<R> {
    /// Combines `sums` into `output`: the combination chosen once, outside the loop, so that
    /// each loop is a vector one.
    #[inline(always)]
    fn apply(self, output: &mut [R], sums: &[R]) {
        match self.combine {
            Combine::Store => self.each(output, sums, |_, sum| sum),
            Combine::Add => self.each(output, sums, |held, sum| held + sum),
            Combine::AddSquare => self.each(output, sums, |held, sum| held + sum * sum),
            Combine::AddSquareRoot => self.each(output, sums, |held, sum| {
                R::from_f64((held + sum * sum).to_f64().sqrt())
            }),
        }
    }

    /// `output[i] = clamp(combine(output[i], sums[i]))`.
    #[inline(always)]
    fn each(self, output: &mut [R], sums: &[R], combine: impl Fn(R, R) -> R) {
        for (slot, &sum) in output.iter_mut().zip(sums) {
            let value = combine(*slot, sum);
            // Comparisons, so that NaN passes through, as on the GPU.
            *slot = if value < self.lo {
                self.lo
            } else if value > self.hi {
                self.hi
            } else {
                value
            };
        }
    }
}

/// Correlates `input` (row-major, of `shape`) with `stencil` and combines the sums into
/// `output` (as many elements) by `combine`, clamped to `clamp`.
pub(crate) fn correlate<R: Real>(
    shape: VolumeShape,
    stencil: &Stencil<'_, R>,
    (combine, clamp): (Combine, (f32, f32)),
    input: &[R],
    output: &mut [R],
) {
    let [_, _, width, channels] = shape;
    let row_len = width * channels;
    if row_len == 0 || output.is_empty() {
        return;
    }
    let [depth_taps, height_taps, width_taps] = stencil.dims;
    let reach = (width_taps - 1) * channels;
    let longest = (GATHERED / (depth_taps * height_taps)).saturating_sub(reach);
    let segment = (longest.clamp(BLOCK, SEGMENT) / channels).max(1) * channels;
    let finish = Finish {
        combine,
        lo: R::from_f64(f64::from(clamp.0)),
        hi: R::from_f64(f64::from(clamp.1)),
    };
    let fused = fused_multiply_add();
    output
        .par_chunks_mut(row_len)
        .enumerate()
        .for_each(|(row, out_row)| {
            out_row.par_chunks_mut(segment).enumerate().for_each_init(
                Vec::new,
                |gathered, (index, out)| {
                    let at = (row, index * segment / channels);
                    let task = Task {
                        shape,
                        stencil,
                        input,
                    };
                    task.run(at, gathered, out, (finish, fused));
                },
            );
        });
}

/// Where a source row's values lie: in the input from an offset, or among the gathered ones.
#[derive(Clone, Copy)]
enum Source {
    Input(usize),
    Gathered(usize),
}

/// What every task of one correlation reads.
struct Task<'a, R> {
    shape: VolumeShape,
    stencil: &'a Stencil<'a, R>,
    input: &'a [R],
}

impl<R: Real> Task<'_, R> {
    /// Computes the outputs `out` of output row `row` from pixel `first` on.
    fn run(
        &self,
        (row, first): (usize, usize),
        gathered: &mut Vec<R>,
        out: &mut [R],
        (finish, fused): (Finish<R>, bool),
    ) {
        let [depth, height, width, channels] = self.shape;
        let [depth_taps, height_taps, width_taps] = self.stencil.dims;
        let [front, top, left] = self.stencil.anchors.map(|a| a as i64);
        let mode = self.stencil.mode;
        let (z, y) = ((row / height) as i64, (row % height) as i64);
        let start = first as i64 - left;
        let span = out.len() / channels + width_taps - 1;
        let inside = start >= 0 && start as usize + span <= width;
        let cval = R::from_f64(ghost_value(mode));
        let mut constant = R::from_f64(0.0);
        let mut rows = Vec::with_capacity(depth_taps * height_taps);
        gathered.clear();
        for i in 0..depth_taps {
            let source_z = fold(z + i as i64 - front, depth, mode);
            for j in 0..height_taps {
                let taps = &self.stencil.taps[(i * height_taps + j) * width_taps..][..width_taps];
                let Some(line) = source_z
                    .zip(fold(y + j as i64 - top, height, mode))
                    .map(|(sz, sy)| (sz * height + sy) * width * channels)
                else {
                    constant = taps.iter().fold(constant, |c, &w| c + w * cval);
                    continue;
                };
                let source = if inside {
                    Source::Input(line + start as usize * channels)
                } else {
                    let offset = gathered.len();
                    let line = &self.input[line..][..width * channels];
                    gather(line, (start, span), (width, channels), mode, gathered);
                    Source::Gathered(offset)
                };
                rows.push((source, taps));
            }
        }
        let sources: Vec<(&[R], &[R])> = rows
            .into_iter()
            .map(|(source, taps)| {
                let values = match source {
                    Source::Input(offset) => &self.input[offset..],
                    Source::Gathered(offset) => &gathered[offset..],
                };
                (&values[..span * channels], taps)
            })
            .collect();
        let sums = Sums {
            sources: &sources,
            channels,
            constant,
        };
        sums.accumulate(out, finish, fused);
    }
}

/// The `span` pixels of `line` (`width` pixels of `channels` values) from pixel `start` on,
/// ghost pixels by `mode`, appended to `into`.
fn gather<R: Real>(
    line: &[R],
    (start, span): (i64, usize),
    (width, channels): (usize, usize),
    mode: BoundaryMode,
    into: &mut Vec<R>,
) {
    let cval = R::from_f64(ghost_value(mode));
    let end = start + span as i64;
    let mut pixel = start;
    while pixel < end {
        if (0..width as i64).contains(&pixel) {
            let run_end = end.min(width as i64);
            into.extend_from_slice(&line[pixel as usize * channels..run_end as usize * channels]);
            pixel = run_end;
        } else {
            match fold(pixel, width, mode) {
                Some(p) => into.extend_from_slice(&line[p * channels..(p + 1) * channels]),
                None => into.extend(std::iter::repeat_n(cval, channels)),
            }
            pixel += 1;
        }
    }
}

/// The sums of one segment: each source row's values (from the segment's first source pixel)
/// times its taps, one tap every `channels` values, plus `constant`.
struct Sums<'a, R> {
    sources: &'a [(&'a [R], &'a [R])],
    channels: usize,
    constant: R,
}

impl<R: Real> Sums<'_, R> {
    /// Computes the sums into `out` through `finish`, with fused multiply-adds where `fused`
    /// (this CPU has them).
    fn accumulate(&self, out: &mut [R], finish: Finish<R>, fused: bool) {
        #[cfg(target_arch = "x86_64")]
        if fused {
            // SAFETY: `fused` is true only where the CPU reports AVX2 and FMA
            // (`fused_multiply_add`).
            return unsafe { self.accumulate_avx2(out, finish) };
        }
        #[cfg(target_arch = "aarch64")]
        if fused {
            return self.blocks::<true>(out, finish);
        }
        self.blocks::<false>(out, finish);
    }

    /// [`Sums::blocks`] compiled for AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn accumulate_avx2(&self, out: &mut [R], finish: Finish<R>) {
        self.blocks::<true>(out, finish);
    }

    /// Every output of `out` by blocks of [`BLOCK`], then of 8, then one by one.
    #[inline(always)]
    fn blocks<const FUSED: bool>(&self, out: &mut [R], finish: Finish<R>) {
        let mut x = 0;
        while x + BLOCK <= out.len() {
            finish.apply(&mut out[x..x + BLOCK], &self.block::<BLOCK, FUSED>(x));
            x += BLOCK;
        }
        while x + 8 <= out.len() {
            finish.apply(&mut out[x..x + 8], &self.block::<8, FUSED>(x));
            x += 8;
        }
        while x < out.len() {
            finish.apply(&mut out[x..x + 1], &self.block::<1, FUSED>(x));
            x += 1;
        }
    }

    /// The `B` sums from output `x` on, held in registers over every source row and tap.
    #[inline(always)]
    fn block<const B: usize, const FUSED: bool>(&self, x: usize) -> [R; B] {
        let mut sums = [self.constant; B];
        for &(values, taps) in self.sources {
            for (k, &w) in taps.iter().enumerate() {
                let values = &values[x + k * self.channels..][..B];
                for (sum, &v) in sums.iter_mut().zip(values) {
                    *sum = if FUSED {
                        w.mul_add(v, *sum)
                    } else {
                        *sum + w * v
                    };
                }
            }
        }
        sums
    }
}

/// Whether the blocks run with fused multiply-adds: on x86-64 CPUs with AVX2 and FMA, on every
/// 64-bit ARM one.
pub(crate) fn fused_multiply_add() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma");
    #[cfg(target_arch = "aarch64")]
    return true;
    #[allow(unreachable_code)]
    false
}
