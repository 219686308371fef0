//! The strip walk that the wide separable and the streaming kernels share.
//!
//! A block of 256 threads owns a strip of `STRIP` = 256 output elements (pixels x channels)
//! and `out_tile_h` output rows, and walks down them `K` input rows per step (`K` = `CHUNK` =
//! 32, or 16 for the streaming kernels of the memory-bound masks: see
//! [`stream_chunk_rows`](crate::abi::stream_chunk_rows)):
//!
//! - [`Strip::stage`] puts the step's `K` input rows, strip plus the mask's halo, in shared
//!   memory, warp by warp (every load of a warp's rows in flight before its stores); steps that
//!   reach past the image take each column's folded offset from a table that
//!   [`Strip::fold_columns`] fills once per block, and fold each row once;
//! - [`Strip::prefetch`] asks L2 for the next step's rows, so that its staging finds them
//!   there;
//! - [`Strip::pass`] runs down the columns: each thread owns 4 consecutive elements of `K / 4`
//!   consecutive output rows and streams the `K / 4 + M - 1` rows they need from a ring of `K +
//!   M - 1` rows (a step's rows and the `M - 1` before them) through 16-byte reads, then stores
//!   the rows that lie in the block.
//!
//! The block's outputs of step `s` are rows `K s - (M - 1) ..` of its strip: a step's first
//! `M - 1` rows complete outputs whose upper rows the previous step staged, so the first step
//! of a block completes `K - (M - 1)` rows and the host picks `out_tile_h + M - 1` a multiple
//! of `K`.

use crate::abi::{Conv2dParams, SEPARABLE_WIDE_CHUNK_ROWS, SEPARABLE_WIDE_STRIP, strip_row_words};
use crate::boundary::Plane;
use crate::conv2d::wide::{Plain, Staging, store_segment, with_finish};
use crate::element::Element;
use crate::gpu::{
    SharedTile, block_idx_x, block_idx_y, opaque, prefetch_l2, sync_threads, thread_idx_x,
};
use core::marker::PhantomData;

/// Input rows per step of the wide separable and tensor-copy kernels.
pub const CHUNK: u64 = SEPARABLE_WIDE_CHUNK_ROWS as u64;
/// Output elements of a block row.
pub const STRIP: u64 = SEPARABLE_WIDE_STRIP as u64;
/// Output rows of a pass thread in steps of `CHUNK` rows.
pub const PASS_ROWS: usize = 8;
/// The column table's entry for a constant ghost cell.
const NO_COLUMN: u32 = u32::MAX;

/// A pass thread's sums: 4 elements of each of a band's `R` output rows.
pub type PassSums<const R: usize> = [[f32; 4]; R];

/// The geometry of one block walking `K` input rows a step (16 or 32), from the launch
/// parameters.
#[derive(Clone, Copy)]
pub struct Strip<const K: u64 = CHUNK> {
    /// First element of the strip and first output row.
    pub e0: u64,
    pub y0: u64,
    /// Output rows of this block (fewer in the last block row).
    pub out_rows: u64,
    pub lane: u64,
    pub warp: u64,
    /// Rows of the ring the pass reads.
    pub ring_rows: u64,
    /// Elements of a staged row (strip plus halo) and their first image element.
    staged_w: u64,
    pub(crate) first_e: i64,
    /// The image row of the block's first staged row.
    pub(crate) first_y: i64,
    /// Whether every staged column lies inside the image.
    columns_inside: bool,
    /// First word of the column table.
    column_table: u64,
    /// The elements, from the first of a staged row inside the image, that this thread asks
    /// L2 for in each step's row it prefetches (`NO_PREFETCH`: none).
    prefetch_offsets: [u32; 2],
}

/// A prefetch offset of no line.
const NO_PREFETCH: u32 = u32::MAX;

impl<const K: u64> Strip<K> {
    /// Output rows of a pass thread: a step's `K x 256` outputs over 256 threads of 4
    /// elements.
    const THREAD_ROWS: usize = K as usize / 4;
    /// Threads that prefetch each row of a step.
    const PREFETCH_THREADS_PER_ROW: u64 = 256 / K;
    /// Starts the block's walk: its strip for a mask `M` taps a side over `C` channels, with a
    /// ring of `ring_rows` rows and the column table at word `column_table`, and the input
    /// image, once the column table is filled and the block has waited for it.
    ///
    /// # Safety
    /// `input` is a pitched image as `p` describes; the block has 256 threads.
    #[inline(always)]
    pub unsafe fn begin<const M: usize, const C: usize, S: Element<Real = f32>>(
        input: *const S,
        p: &Conv2dParams,
        ring_rows: u64,
        column_table: u64,
    ) -> (Self, Plane<S>) {
        // SAFETY: a block of 256 threads (caller).
        let strip = unsafe { Self::new::<M, C, S>(p, ring_rows, column_table) };
        // SAFETY: `input` is a pitched image as `p` describes (caller).
        let image = unsafe { Plane::new(input, p) };
        strip.fold_columns(image);
        (strip, image)
    }

    /// The block's strip (see [`Strip::begin`]).
    ///
    /// # Safety
    /// The block has 256 threads (`Strip::begin`'s contract).
    #[inline(always)]
    pub(crate) unsafe fn new<const M: usize, const C: usize, S: Element<Real = f32>>(
        p: &Conv2dParams,
        ring_rows: u64,
        column_table: u64,
    ) -> Self {
        let rows_per_block = u64::from(p.out_tile_h);
        let y0 = (u64::from(p.block_offset_y) + block_idx_y()) * rows_per_block;
        let e0 = block_idx_x() * STRIP;
        let staged_w = STRIP + (M as u64 - 1) * C as u64;
        let first_e = e0 as i64 - i64::from(p.left) * C as i64;
        let elements = u64::from(p.width) * C as u64;
        let thread = thread_idx_x();
        const { assert!(K == 16 || K == 32) };
        // SAFETY: 256 threads per block (caller). Knowing it, the compiler drops the staging's
        // checks that a warp's rows lie in the step (`warp + 8 n < 32`).
        unsafe { core::hint::assert_unchecked(thread < 256) };
        // The staged span of a row inside the image, and the lines this thread asks L2 for:
        // `t % n` and `t % n + n` (`n` threads a row) of the span's 128-byte steps from its
        // first element, the last clipped to the span's last element, so that every line the
        // span touches is asked for, whatever the row's alignment.
        let first = first_e.max(0);
        let span = (first_e + staged_w as i64).min(elements as i64) - first;
        let per_row = Self::PREFETCH_THREADS_PER_ROW;
        let line_elements = (128 / size_of::<S>()) as i64;
        let prefetch_offsets = [thread % per_row, thread % per_row + per_row].map(|line| {
            let offset = line as i64 * line_elements;
            if span > 0 && offset < span + line_elements - 1 {
                offset.min(span - 1) as u32
            } else {
                NO_PREFETCH
            }
        });
        Self {
            e0,
            y0,
            out_rows: rows_per_block.min(u64::from(p.height) - y0),
            lane: thread % 32,
            warp: thread / 32,
            ring_rows,
            staged_w,
            first_e,
            first_y: y0 as i64 - i64::from(p.top),
            columns_inside: first_e >= 0 && first_e as u64 + staged_w <= elements,
            column_table,
            prefetch_offsets,
        }
    }

    /// Steps of `K` input rows that the block's outputs and their `M - 1` halo rows take.
    #[inline(always)]
    pub fn steps<const M: usize>(self) -> u64 {
        (self.out_rows + M as u64 - 1).div_ceil(K)
    }

    /// `slot + rows` within the ring, for `slot < ring_rows` and `rows <= ring_rows`.
    #[inline(always)]
    pub fn advance(self, slot: u64, rows: u64) -> u64 {
        let next = slot + rows;
        if next >= self.ring_rows {
            next - self.ring_rows
        } else {
            next
        }
    }

    /// Fills the column table with the folded offset of every staged column (the border
    /// steps': every step of the strips at the image's sides, the first and last of the block
    /// rows at its top and bottom), and waits for the block.
    #[inline(always)]
    fn fold_columns<S: Element<Real = f32>>(self, image: Plane<S>) {
        // The thread index hidden from the optimiser: knowing its range here (from
        // `Strip::new`), ptxas spills registers in the 7 x 7 kernel over 3 channels.
        let mut x = opaque(thread_idx_x() as usize) as u64;
        while x < self.staged_w {
            // Strips inside the image need no fold (nor the fold's division by the channels).
            let column = if self.columns_inside {
                (self.first_e as u64 + x) as u32
            } else {
                image
                    .column(self.first_e + x as i64)
                    .map_or(NO_COLUMN, |c| c as u32)
            };
            // SAFETY: `x < staged_w`: an entry of the table; read after the barrier below.
            unsafe { SharedTile::store(self.column_table + x, f32::from_bits(column)) };
            x += 256;
        }
        sync_threads();
    }

    /// Stages step `step`'s `K` input rows, row `ry` of the step from word `row_word(ry)` on,
    /// from `input`, the pitched image `image` describes.
    ///
    /// # Safety
    /// `input` is the image `p` describes and `image` was made from; `row_word(ry)` starts a
    /// row of `strip_row_words` reserved words for `ry < K`; the column table is filled.
    #[inline(always)]
    pub unsafe fn stage<const M: usize, const C: usize, S: Element<Real = f32>>(
        self,
        (input, image, p): (*const S, Plane<S>, &Conv2dParams),
        step: u64,
        row_word: impl Fn(u64) -> u64,
    ) {
        let staging = Staging::<Plain> {
            rows: K,
            row_words: strip_row_words(M as u64, C as u64),
            lane: self.lane,
            warp: self.warp,
            warps: 8,
            layout: PhantomData,
        };
        let step_y = self.first_y + (step * K) as i64;
        // A warp's 4 rows of a 32-row step in flight together, its 2 rows of a 16-row one (the
        // border steps half as many).
        let short_steps = K < CHUNK;
        if self.columns_inside && step_y >= 0 && step_y as u64 + K <= u64::from(p.height) {
            let row = |ry| (step_y as u64 + ry) * p.pitch + self.first_e as u64 + self.lane;
            // SAFETY: the step's region lies inside the image.
            let value =
                |row, k: usize| unsafe { (*input.add((row + 32 * k as u64) as usize)).widen() };
            if short_steps {
                staging.interior_at::<M, C, 2, _>(row_word, row, value);
            } else {
                staging.interior_at::<M, C, 4, _>(row_word, row, value);
            }
        } else {
            // Border steps fold each staged row once and take each column's folded offset
            // from the table: the strips at the image's sides run every step this way, and a
            // fold per element would make them the kernel's slowest blocks.
            let row = |ry| image.row(step_y + ry as i64);
            let value = |row, k: usize| {
                let x = self.lane + 32 * k as u64;
                // SAFETY: `x < staged_w`: an entry of the table (caller).
                let column = unsafe { SharedTile::load(self.column_table + x) }.to_bits();
                image.at(row, (column != NO_COLUMN).then_some(u64::from(column)))
            };
            if short_steps {
                staging.interior_at::<M, C, 1, _>(row_word, row, value);
            } else {
                staging.interior_at::<M, C, 2, _>(row_word, row, value);
            }
        }
    }

    /// Stages step `step` as [`Strip::stage`] does, asks L2 for the next step's rows (see
    /// [`Strip::prefetch`]) and waits for the block: the step's rows are then in shared memory.
    ///
    /// # Safety
    /// As [`Strip::stage`].
    #[inline(always)]
    pub unsafe fn stage_step<const M: usize, const C: usize, S: Element<Real = f32>>(
        self,
        (input, image, p): (*const S, Plane<S>, &Conv2dParams),
        step: u64,
        row_word: impl Fn(u64) -> u64,
    ) {
        // SAFETY: forwarded contract; `input` is the image `p` describes.
        unsafe {
            self.stage::<M, C, S>((input, image, p), step, row_word);
            self.prefetch::<M, C, S>((input, p), step + 1);
        }
        sync_threads();
    }

    /// Asks L2 for the staged region of step `step` (if the block has that step) where it
    /// lies inside the image, so that the step's staging reads L2 instead of waiting on device
    /// memory: issued a step ahead, these fetches run during the pass, when the block has no
    /// loads of its own in flight. `n = 256 / K` threads take each row of the step, thread
    /// `t` row `t / n` and the 128-byte steps `t % n` and `t % n + n` of its span (`2n` lines:
    /// in steps of 32 rows, a span of up to 480 elements and its offset in the first line),
    /// their offsets found once per block (`Strip::new`), so that a step's prefetch is its row's
    /// address and two prefetches (26 instructions).
    ///
    /// # Safety
    /// `input` is the pitched image `p` describes.
    #[inline(always)]
    pub unsafe fn prefetch<const M: usize, const C: usize, S: Element<Real = f32>>(
        self,
        (input, p): (*const S, &Conv2dParams),
        step: u64,
    ) {
        let per_row = Self::PREFETCH_THREADS_PER_ROW;
        const {
            let lines = 2 * Self::PREFETCH_THREADS_PER_ROW as usize;
            assert!(SEPARABLE_WIDE_STRIP as usize + (M - 1) * C <= 32 * lines - 32)
        };
        // Thread `t` is lane `t % 32` of warp `t / 32`, and `per_row` divides 32.
        let row = self.warp * (32 / per_row) + self.lane / per_row;
        let y = self.first_y + (step * K + row) as i64;
        if step >= self.steps::<M>() || y < 0 || y >= i64::from(p.height) {
            return;
        }
        let start =
            input.wrapping_add((y as u64 * p.pitch) as usize + self.first_e.max(0) as usize);
        for offset in self.prefetch_offsets {
            if offset != NO_PREFETCH {
                // SAFETY: within the row's staged span inside the image (`Strip::new`).
                unsafe { prefetch_l2(start.wrapping_add(offset as usize).cast::<f32>()) };
            }
        }
    }

    /// The pass of step `step` down the columns, and the stores of the outputs it completes:
    /// thread `(c, g)`, `c = lane + 32 (warp % 2)`, `g = warp / 2`, owns elements `4c .. 4c +
    /// 4` of output rows `K step - (M - 1) + r g ..` (`r = K / 4` rows), which need the ring's
    /// rows from slot `pass_slot + r g` on. It takes them in bands of `R` rows: for each of a band's `R +
    /// M - 1` rows `i` it reads `quads <= Q` quads from element `4c` on (word `ring + slot *
    /// row_words + 4c`; the rest of the `Q` are zeros) and hands them to `apply(sums, i,
    /// quads)`, then stores the band's rows that lie in the block. A warp whose rows all lie
    /// outside the block skips the pass. With `ring_rows` a multiple of 8 (and `pass_slot`,
    /// then, one too), a band starts at a multiple of `R` and crosses the ring's end, if at
    /// all, between two of its groups of `R` rows: one compare and one select per group
    /// instead of per row (the 31 x 31 column pass: 5 instead of 38).
    ///
    /// Bands narrower than `r` rows run as a loop that is not unrolled, so that a large mask's
    /// pass fits the instruction cache (the 9 x 9 pass in one band, 2,700 instructions, waited
    /// on instruction fetch in a fifth of its stall samples) and holds fewer sums, for `M - 1`
    /// more ring rows read per band.
    ///
    /// # Safety
    /// The ring's rows were stored before the last barrier, `4c + 4 quads <= row_words` for
    /// every `c < 64`; `R` divides `K / 4`; `pass_slot` is a multiple of 8 where `ring_rows` is;
    /// `output` is a pitched image as `p` describes, `p.pitch` a multiple of 4 and the buffer
    /// 16-byte aligned.
    #[inline(always)]
    pub unsafe fn pass<const M: usize, const Q: usize, const R: usize, S: Element<Real = f32>>(
        self,
        (step, pass_slot): (u64, u64),
        (ring, row_words, quads): (u64, u64, usize),
        (output, p): (*mut S, &Conv2dParams),
        apply: impl Fn(&mut PassSums<R>, usize, &[[f32; 4]; Q]),
    ) {
        // SAFETY: forwarded contract; the quads of a row are consecutive.
        unsafe {
            self.pass_combining::<M, Q, R, S, PassSums<R>>(
                (step, pass_slot),
                (ring, row_words, (quads, 4)),
                (output, p),
                ([[0.0; 4]; R], apply, |sums| *sums),
            )
        }
    }

    /// [`Strip::pass`] with sums of any type `A`, from `zero`, and the stored rows
    /// `finish(sums)`; quad `q` of a row at word `4c + q * quad_words` (the pair kernels' second
    /// ring lies `quad_words` after the first).
    ///
    /// # Safety
    /// As [`Strip::pass`], with words `4c + (quads - 1) * quad_words + 4 <= row_words`, or
    /// within the later rings where `quad_words` reaches them.
    #[inline(always)]
    pub unsafe fn pass_combining<
        const M: usize,
        const Q: usize,
        const R: usize,
        S: Element<Real = f32>,
        A: Copy,
    >(
        self,
        (step, pass_slot): (u64, u64),
        (ring, row_words, (quads, quad_words)): (u64, u64, (usize, u64)),
        (output, p): (*mut S, &Conv2dParams),
        (zero, apply, finish): (
            A,
            impl Fn(&mut A, usize, &[[f32; 4]; Q]),
            impl Fn(&A) -> PassSums<R>,
        ),
    ) {
        let rows = Self::THREAD_ROWS;
        const { assert!(R > 0 && Self::THREAD_ROWS % R == 0) };
        let c = self.lane + 32 * (self.warp % 2);
        let group = self.warp / 2;
        let first_out = (step * K + rows as u64 * group) as i64 - (M as i64 - 1);
        if first_out + rows as i64 <= 0 || first_out >= self.out_rows as i64 {
            return;
        }
        // Inlined whatever the number of kernels sharing an instance of this pass: an
        // outlined band would take its captures through a stack frame.
        let band = #[inline(always)]
        |band: usize| {
            let first_out = first_out + (R * band) as i64;
            let slot = self.advance(pass_slot, rows as u64 * group + (R * band) as u64);
            // Row `i` sits in slot `slot + i`, or `slot + i - ring_rows` from `i = ring_rows -
            // slot` on (at most one wrap: `R + M - 1 <= ring_rows`), a multiple of `R` where
            // the ring is (both terms then are; `ring_rows` is a compile-time constant, so
            // `group` is too). 32-bit arithmetic.
            let group = if self.ring_rows.is_multiple_of(8) {
                R
            } else {
                1
            };
            let wrap_groups = (self.ring_rows - slot) as u32 / group as u32;
            let row_bytes = row_words as u32 * 4;
            let first = SharedTile::address32(ring + slot * row_words + 4 * c);
            let wrapped = first.wrapping_sub(self.ring_rows as u32 * row_bytes);
            let mut sums = zero;
            for i in 0..R + M - 1 {
                // The group's first row, hidden from the optimiser so that its rows' reads
                // take it plus an immediate offset (folded into the select, every row's
                // address would take a register and two adds).
                let group_row = (i / group * group) as u32 * row_bytes;
                let base = opaque(if ((i / group) as u32) < wrap_groups {
                    first.wrapping_add(group_row)
                } else {
                    wrapped.wrapping_add(group_row)
                } as usize) as u32;
                let row = base.wrapping_add((i % group) as u32 * row_bytes);
                let window: [[f32; 4]; Q] = core::array::from_fn(|q| {
                    if q < quads {
                        // SAFETY: a ring row (see above), quad `q` at words `4c + q quad_words`
                        // within it or a later ring (caller), stored before the barrier (rows
                        // before the block's first feed only rows it does not store).
                        unsafe { SharedTile::load4_at(row + 4 * (q as u64 * quad_words) as u32) }
                    } else {
                        [0.0; 4]
                    }
                });
                apply(&mut sums, i, &window);
            }
            let sums = finish(&sums);
            let e = self.e0 + 4 * c;
            let elements = u64::from(p.width) * p.channels as u64;
            with_finish(p, |finish| {
                if first_out >= 0
                    && first_out as u64 + R as u64 <= self.out_rows
                    && e + 4 <= elements
                {
                    // The common case, all the band's rows and 4 elements inside: one
                    // address, advanced by the pitch (the checks and addresses of each row
                    // would take a large share of a 5 x 5 step's instructions).
                    let mut at =
                        output.wrapping_add(((self.y0 + first_out as u64) * p.pitch + e) as usize);
                    for row_sums in &sums {
                        // SAFETY: rows `y0 + first_out .. + R <= y0 + out_rows <= height`,
                        // elements `e .. e + 4 <= width * channels <= pitch`; 16-byte aligned
                        // (`e`, the pitch and the buffer are).
                        unsafe { S::store4_streaming(at, row_sums.map(|sum| finish(sum, p))) };
                        at = at.wrapping_add(p.pitch as usize);
                    }
                    return;
                }
                for (k, row_sums) in sums.iter().enumerate() {
                    let o = first_out + k as i64;
                    if o >= 0 && (o as u64) < self.out_rows && e < elements {
                        let at = output.wrapping_add(((self.y0 + o as u64) * p.pitch + e) as usize);
                        // SAFETY: row `y0 + o < height`, element `e < width * channels <=
                        // pitch`; 16-byte aligned (`e`, the pitch and the buffer are).
                        unsafe { store_segment(at, row_sums, (e, elements), |sum| finish(sum, p)) };
                    }
                }
            });
        };
        // One band of `rows` rows is the whole pass; narrower ones loop without unrolling.
        if R == rows {
            band(0);
        } else {
            for b in 0..opaque(rows / R) {
                band(b);
            }
        }
    }
}
