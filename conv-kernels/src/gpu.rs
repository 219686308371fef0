//! The device-side layer: what `cuda_std` offers Rust-CUDA kernels, on rustc's NVPTX target.
//!
//! Thread and block indices and the barrier wrap `core::arch::nvptx`. The constant-memory mask and
//! the dynamic shared-memory tile are module-scope PTX symbols declared with `global_asm!` and read
//! or written with one PTX instruction each, so kernels can say `ConstantMask.tap(j)` and
//! `SharedTile::load(k)` instead of carrying inline assembly.

use crate::abi::MASK_CAPACITY;
use crate::element::Real;
use core::arch::{asm, global_asm, nvptx};

// Aligned to 8 bytes: `f64` kernels read the same symbol as `MASK_CAPACITY / 2` doubles.
global_asm!(
    ".const .align 8 .f32 MASK[{capacity}];",
    capacity = const MASK_CAPACITY,
);
// Aligned to 128 bytes: tensor copies (`separable_tma`) write boxes at 128-byte aligned offsets.
global_asm!(".extern .shared .align 128 .b8 DYNAMIC_SMEM[];");

/// `value`, hidden from LLVM: a loop over `0..opaque(n)` keeps its trip count from the
/// unroller (the kernels' unroll threshold fully unrolls every loop with a constant one).
#[inline(always)]
pub fn opaque(value: usize) -> usize {
    let hidden: u64;
    // SAFETY: a register move.
    unsafe {
        asm!(
            "mov.b64 {hidden}, {value};",
            hidden = out(reg64) hidden,
            value = in(reg64) value as u64,
            options(pure, nomem, nostack),
        );
    }
    hidden as usize
}

/// The address of element `index` from `base`, computed where it is used (one `mad.wide`):
/// LLVM would otherwise hoist each of a loop's `base + index` parts that does not change into
/// a 64-bit register of its own.
#[inline(always)]
pub fn element_at<T>(base: *const T, index: u32) -> *const T {
    let address: u64;
    // SAFETY: register arithmetic.
    unsafe {
        asm!(
            "mad.wide.u32 {address}, {index}, {size}, {base};",
            address = out(reg64) address,
            index = in(reg32) index,
            size = in(reg32) size_of::<T>() as u32,
            base = in(reg64) base as u64,
            options(pure, nomem, nostack),
        );
    }
    address as *const T
}

/// `(value / divisor, value % divisor)` for a launch parameter `divisor >= 1`, without the
/// division-by-zero branch of `/`, which every kernel would otherwise carry.
#[inline(always)]
pub fn div_rem(value: u64, divisor: u64) -> (u64, u64) {
    // SAFETY: `divisor >= 1` by the callers' launch contracts.
    let quotient = unsafe { core::intrinsics::unchecked_div(value, divisor) };
    (quotient, value - quotient * divisor)
}

/// A thread's place in a walk of a block's threads over the elements of a `rows x columns`
/// region in row-major order: thread `t` visits elements `t`, `t + step`, ... Each step
/// carries the column into the row instead of dividing (a 64-bit division per element would
/// take most of the staging loops' instructions).
#[derive(Clone, Copy)]
pub struct Walk {
    /// The current element's row and column.
    pub row: u32,
    pub column: u32,
    columns: u32,
    row_step: u32,
    column_step: u32,
}

impl Walk {
    /// The walk of the thread that starts at element `first`, stepping `step` elements, over
    /// rows of `columns >= 1` elements.
    #[inline(always)]
    pub fn new(first: u32, step: u32, columns: u32) -> Self {
        Self {
            row: first / columns,
            column: first % columns,
            columns,
            row_step: step / columns,
            column_step: step % columns,
        }
    }

    /// Moves to the next element of this thread.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.row += self.row_step;
        self.column += self.column_step;
        if self.column >= self.columns {
            self.column -= self.columns;
            self.row += 1;
        }
    }
}

/// Elements a thread loads in [`Walk::stage`] before it stores any.
const STAGE_BATCH: usize = 4;

impl Walk {
    /// Walks this thread over the rows before `rows`, reading each element with `load(row,
    /// column)` and writing it with `store(row, column, value)`, in batches of `STAGE_BATCH`
    /// loads issued before their stores: a thread then waits on memory once per batch, not once
    /// per element (the staging loops otherwise ran one load's latency per element).
    #[inline(always)]
    pub fn stage<T: Copy + Default>(
        mut self,
        rows: u32,
        load: impl Fn(u32, u32) -> T,
        store: impl Fn(u32, u32, T),
    ) {
        while self.row < rows {
            // Slots past the walk's end keep the row `u32::MAX`.
            let mut batch = [(u32::MAX, 0u32, T::default()); STAGE_BATCH];
            for slot in batch.iter_mut() {
                if self.row < rows {
                    *slot = (self.row, self.column, load(self.row, self.column));
                    self.advance();
                }
            }
            for &(row, column, value) in batch.iter() {
                if row != u32::MAX {
                    store(row, column, value);
                }
            }
        }
    }
}

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_idx_x() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_thread_idx_x() as u64 }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_idx_x() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_block_idx_x() as u64 }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim_x() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_block_dim_x() as u64 }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_grid_dim_x() as u64 }
}

/// `threadIdx.y`.
#[inline(always)]
pub fn thread_idx_y() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_thread_idx_y() as u64 }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_idx_y() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_block_idx_y() as u64 }
}

/// `blockIdx.z`.
#[inline(always)]
pub fn block_idx_z() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_block_idx_z() as u64 }
}

/// `blockDim.y`.
#[inline(always)]
pub fn block_dim_y() -> u64 {
    // SAFETY: reads a special register; always defined inside a kernel.
    unsafe { nvptx::_block_dim_y() as u64 }
}

/// `__syncthreads()`: every thread of the block must reach it.
#[inline(always)]
pub fn sync_threads() {
    // SAFETY: callers keep the barrier out of divergent control flow.
    unsafe { nvptx::_syncthreads() }
}

/// Fused multiply-add `a * b + c`, rounded once.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    core::intrinsics::fmaf32(a, b, c)
}

/// One 16-byte load of 4 `f32` by the PTX `$template` (operands `addr`, `a` to `d`) from the
/// address `$address` in a register of class `$class` (`reg64`, or `reg32` for a shared-window
/// address), as an array. Expands to inline assembly: use it in `unsafe`.
macro_rules! vector_load {
    ($template:literal, $address:expr) => {
        vector_load!($template, $address, reg64)
    };
    ($template:literal, $address:expr, $class:ident) => {{
        let (a, b, c, d): (f32, f32, f32, f32);
        asm!(
            $template,
            addr = in($class) $address,
            a = out(reg32) a,
            b = out(reg32) b,
            c = out(reg32) c,
            d = out(reg32) d,
            options(pure, readonly, nostack),
        );
        [a, b, c, d]
    }};
}

/// Four `f32`, so that one aligned 16-byte store writes them.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub struct Quad(pub [f32; 4]);

/// Writes `[a, b, c, d]` to `target[0..4]` with one 16-byte store, marked as streaming
/// (`.cs`: written once, not read again by the kernel, so L2 may evict it first).
///
/// # Safety
/// `target` points to 4 writable `f32` in global memory, 16-byte aligned.
#[inline(always)]
pub unsafe fn store4_streaming(target: *mut f32, [a, b, c, d]: [f32; 4]) {
    // SAFETY: by the contract; `cvta.to.global` turns the generic pointer into the global
    // address `st.global` expects.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {addr}; st.global.cs.v4.f32 [g], {{{a}, {b}, {c}, {d}}}; }}",
            addr = in(reg64) target,
            a = in(reg32) a,
            b = in(reg32) b,
            c = in(reg32) c,
            d = in(reg32) d,
            options(nostack),
        );
    }
}

/// A word that one streaming store writes: `u32` or `u64`.
pub trait StreamingWord: Copy {
    /// Writes `value` to `target` with `st.global.cs`.
    ///
    /// # Safety
    /// `target` points to a writable, aligned word of global memory.
    unsafe fn store(target: *mut Self, value: Self);
}

/// Implements [`StreamingWord`] for `$t`, PTX type `$ptx` in register class `$class`.
macro_rules! streaming_word {
    ($($t:ty: $ptx:literal, $class:ident),+) => {$(
        impl StreamingWord for $t {
            #[inline(always)]
            unsafe fn store(target: *mut Self, value: Self) {
                // SAFETY: by the contract; `cvta.to.global` turns the generic pointer into the
                // global address `st.global` expects.
                unsafe {
                    asm!(
                        concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {addr}; st.global.cs.", $ptx, " [g], {value}; }}"),
                        addr = in(reg64) target,
                        value = in($class) value,
                        options(nostack),
                    );
                }
            }
        }
    )+};
}

streaming_word!(u32: "u32", reg32, u64: "u64", reg64);

/// Writes `value` to `target` with one store, marked as streaming (`.cs`).
///
/// # Safety
/// `target` points to a writable word of global memory, aligned to its size.
#[inline(always)]
pub unsafe fn store_streaming<W: StreamingWord>(target: *mut W, value: W) {
    // SAFETY: forwarded contract.
    unsafe { W::store(target, value) }
}

/// Asks L2 to fetch the 128-byte line holding `address` from device memory: a hint that
/// nothing waits for, so a later load of the line finds it in L2.
///
/// # Safety
/// `address` points into a global-memory allocation.
#[inline(always)]
pub unsafe fn prefetch_l2(address: *const f32) {
    // SAFETY: by the contract; `cvta.to.global` turns the generic pointer into the global
    // address `prefetch.global` expects.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {addr}; prefetch.global.L2 [g]; }}",
            addr = in(reg64) address,
            options(readonly, nostack, preserves_flags),
        );
    }
}

/// Where a kernel reads its mask taps of type `T` from.
pub trait Mask<T: Real = f32>: Copy {
    /// Tap `j`; `j` is below the mask length the host uploaded.
    fn tap(self, j: u64) -> T;
}

/// The mask in the constant-memory symbol `MASK`, uploaded by the host before the launch.
/// All threads of a warp read the same tap at once, which constant memory broadcasts.
#[derive(Clone, Copy)]
pub struct ConstantMask;

impl<T: Real> Mask<T> for ConstantMask {
    #[inline(always)]
    fn tap(self, j: u64) -> T {
        // SAFETY: `j` is below the taps the host uploaded (`MASK_CAPACITY` bytes' worth at
        // most: the host routes longer masks to `GlobalMask`).
        unsafe { T::constant_tap(j) }
    }
}

/// The mask in `MASK`, each tap loaded at its use: for unrolled kernels with more taps than
/// registers to hold them, where ptxas makes every load an operand of its multiply-add.
#[derive(Clone, Copy)]
pub struct ConstantOperands;

impl<T: Real> Mask<T> for ConstantOperands {
    #[inline(always)]
    fn tap(self, j: u64) -> T {
        // SAFETY: as `ConstantMask::tap`.
        unsafe { T::constant_operand(j) }
    }
}

/// A mask in global memory (the basic kernels, and masks longer than `MASK_CAPACITY`).
#[derive(Clone, Copy)]
pub struct GlobalMask<T = f32>(pub *const T);

impl<T: Real> Mask<T> for GlobalMask<T> {
    #[inline(always)]
    fn tap(self, j: u64) -> T {
        // SAFETY: the host passes a device buffer holding at least `mask_len > j` taps.
        unsafe { *self.0.add(j as usize) }
    }
}

/// The block's dynamic shared memory seen as an `f32` array; its size is set at launch.
pub struct SharedTile;

impl SharedTile {
    #[inline(always)]
    fn address(index: u64) -> u64 {
        let base: u64;
        // SAFETY: takes the shared-window address of the module's dynamic shared-memory symbol.
        unsafe {
            asm!("mov.u64 {base}, DYNAMIC_SMEM;", base = out(reg64) base, options(pure, nomem, nostack));
        }
        base + index * 4
    }

    /// The shared-window address of element `index` of the tile seen as an array of `T`.
    #[inline(always)]
    pub fn real_address<T: Real>(index: u64) -> u64 {
        Self::address(0) + index * size_of::<T>() as u64
    }

    /// Writes element `index` of the tile seen as an array of `T`.
    ///
    /// # Safety
    /// `index` is below the count of `T` the launch reserved.
    #[inline(always)]
    pub unsafe fn store_real<T: Real>(index: u64, value: T) {
        let address = Self::real_address::<T>(index);
        // SAFETY: in bounds by the caller's contract, aligned (the symbol is `.align 128`).
        unsafe { T::store_shared(address, value) }
    }

    /// Reads element `index` of the tile seen as an array of `T`.
    ///
    /// # Safety
    /// `index` is below the count of `T` the launch reserved, stored before the last
    /// `sync_threads`.
    #[inline(always)]
    pub unsafe fn load_real<T: Real>(index: u64) -> T {
        let address = Self::real_address::<T>(index);
        // SAFETY: in bounds and written by the caller's contract, aligned.
        unsafe { T::load_shared(address) }
    }

    /// Writes element `index`.
    ///
    /// # Safety
    /// `index` is below the `f32` count the launch reserved.
    #[inline(always)]
    pub unsafe fn store(index: u64, value: f32) {
        // SAFETY: in bounds by the caller's contract; `st.shared` touches only this block's tile.
        unsafe {
            asm!(
                "st.shared.f32 [{addr}], {value};",
                addr = in(reg64) Self::address(index),
                value = in(reg32) value,
                options(nostack),
            );
        }
    }

    /// Writes elements `index..index + 4` with one 16-byte access.
    ///
    /// # Safety
    /// `index` is a multiple of 4 and `index + 4` is within the reserved count.
    #[inline(always)]
    pub unsafe fn store4(index: u64, [a, b, c, d]: [f32; 4]) {
        // SAFETY: in bounds and 16-byte aligned (the symbol is `.align 16`) by the contract.
        unsafe {
            asm!(
                "st.shared.v4.f32 [{addr}], {{{a}, {b}, {c}, {d}}};",
                addr = in(reg64) Self::address(index),
                a = in(reg32) a,
                b = in(reg32) b,
                c = in(reg32) c,
                d = in(reg32) d,
                options(nostack),
            );
        }
    }

    /// Reads elements `index..index + 4` with one 16-byte access.
    ///
    /// # Safety
    /// `index` is a multiple of 4, `index + 4` is within the reserved count, and the elements
    /// were stored before the last `sync_threads`.
    #[inline(always)]
    pub unsafe fn load4(index: u64) -> [f32; 4] {
        // SAFETY: in bounds and 16-byte aligned (the symbol is `.align 16`) by the contract.
        unsafe {
            vector_load!(
                "ld.shared.v4.f32 {{{a}, {b}, {c}, {d}}}, [{addr}];",
                Self::address(index)
            )
        }
    }

    /// The 32-bit shared-window address of element `index`, for [`SharedTile::load4_at`]:
    /// addresses chosen among precomputed ones cost no 64-bit arithmetic per access.
    #[inline(always)]
    pub fn address32(index: u64) -> u32 {
        let base: u32;
        // SAFETY: takes the shared-window address of the dynamic shared-memory symbol, which
        // fits in 32 bits (the shared window is at most 228 KiB).
        unsafe {
            asm!("mov.u32 {base}, DYNAMIC_SMEM;", base = out(reg32) base, options(pure, nomem, nostack));
        }
        base + index as u32 * 4
    }

    /// Reads the 4 elements at shared-window address `address` with one 16-byte access.
    ///
    /// # Safety
    /// As [`SharedTile::load4`] for the element whose [`SharedTile::address32`] is `address`.
    #[inline(always)]
    pub unsafe fn load4_at(address: u32) -> [f32; 4] {
        // SAFETY: in bounds and 16-byte aligned by the contract.
        unsafe {
            vector_load!(
                "ld.shared.v4.f32 {{{a}, {b}, {c}, {d}}}, [{addr}];",
                address,
                reg32
            )
        }
    }

    /// Reads the element at shared-window address `address`.
    ///
    /// # Safety
    /// As [`SharedTile::load`] for the element whose [`SharedTile::address32`] is `address`.
    #[inline(always)]
    pub unsafe fn load_at(address: u32) -> f32 {
        let value: f32;
        // SAFETY: in bounds by the caller's contract; `readonly` keeps it after the barrier.
        unsafe {
            asm!(
                "ld.shared.f32 {value}, [{addr}];",
                addr = in(reg32) address,
                value = out(reg32) value,
                options(pure, readonly, nostack),
            );
        }
        value
    }

    /// Writes the element at shared-window address `address`.
    ///
    /// # Safety
    /// As [`SharedTile::store`] for the element whose [`SharedTile::address32`] is `address`.
    #[inline(always)]
    pub unsafe fn store_at(address: u32, value: f32) {
        // SAFETY: in bounds by the caller's contract; `st.shared` touches only this block's tile.
        unsafe {
            asm!(
                "st.shared.f32 [{addr}], {value};",
                addr = in(reg32) address,
                value = in(reg32) value,
                options(nostack),
            );
        }
    }

    /// Reads element `index`.
    ///
    /// # Safety
    /// `index` is below the reserved count and was stored before the last `sync_threads`.
    #[inline(always)]
    pub unsafe fn load(index: u64) -> f32 {
        let value: f32;
        // SAFETY: in bounds by the caller's contract; `readonly` keeps it after the barrier.
        unsafe {
            asm!(
                "ld.shared.f32 {value}, [{addr}];",
                addr = in(reg64) Self::address(index),
                value = out(reg32) value,
                options(pure, readonly, nostack),
            );
        }
        value
    }
}

/// Starts copying the value at `source` (global memory; 4, 8 or 16 bytes: an element or a
/// 16-byte word of them) to the shared-window address `target` without passing through
/// registers (`cp.async`: sm_80 and later, so only kernels of the sm_90 build call it);
/// [`wait_async_copies`] waits for it. Cached in L1 (`.ca`), where the warps of a block that
/// stage one line's parts hit (bypassing L1 slows the 3D kernels; measured: PERFORMANCE.md,
/// Approaches measured and not kept).
///
/// # Safety
/// `source` is readable and aligned to its size; `target` lies in the block's reserved shared
/// memory, aligned to the same size, and nothing reads it before the copy's group is waited
/// for and a barrier passed.
#[inline(always)]
pub unsafe fn copy_to_shared_async<T>(target: u32, source: *const T) {
    const { assert!(matches!(size_of::<T>(), 4 | 8 | 16)) };
    // SAFETY: readable, in bounds and aligned (caller).
    unsafe {
        asm!(
            "cp.async.ca.shared.global [{target}], [{source}], {bytes};",
            target = in(reg32) target,
            source = in(reg64) source,
            bytes = const size_of::<T>(),
            options(nostack),
        );
    }
}

/// Closes the group of this thread's asynchronous copies started since the last group
/// ([`copy_to_shared_async`]; sm_80 and later).
#[inline(always)]
pub fn commit_async_copies() {
    // SAFETY: groups the thread's own copies; no memory is touched.
    unsafe { asm!("cp.async.commit_group;", options(nostack)) };
}

/// Waits until at most the `PENDING` newest groups of this thread's asynchronous copies are
/// still in flight (sm_80 and later). Other threads' copies need a barrier after this.
#[inline(always)]
pub fn wait_async_copies<const PENDING: u32>() {
    // SAFETY: a wait; the copies write only shared memory their kernels reserved.
    unsafe { asm!("cp.async.wait_group {n};", n = const PENDING, options(nostack)) };
}

/// A transaction barrier (`mbarrier`) in shared memory, at a shared-window address, that
/// tensor copies complete (Hopper, sm_90).
#[cfg(conv_hopper)]
#[derive(Clone, Copy)]
pub struct TransactionBarrier(pub u32);

#[cfg(conv_hopper)]
impl TransactionBarrier {
    /// Initialises the barrier for one arrival per phase and makes it visible to the tensor
    /// copies; the block must wait (`sync_threads`) before any thread uses it.
    ///
    /// # Safety
    /// The address is 8-byte aligned shared memory of this block, used for nothing else; one
    /// thread calls this.
    #[inline(always)]
    pub unsafe fn init(self) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "mbarrier.init.shared.b64 [{bar}], 1;",
                "fence.mbarrier_init.release.cluster;",
                "fence.proxy.async.shared::cta;",
                bar = in(reg32) self.0,
                options(nostack),
            );
        }
    }

    /// Arrives once and expects `bytes` of tensor copies to complete the phase.
    ///
    /// # Safety
    /// Initialised; one arrival per phase.
    #[inline(always)]
    pub unsafe fn arrive_expecting(self, bytes: u32) {
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "{{ .reg .b64 state; mbarrier.arrive.expect_tx.shared.b64 state, [{bar}], {bytes}; }}",
                bar = in(reg32) self.0,
                bytes = in(reg32) bytes,
                options(nostack),
            );
        }
    }

    /// Waits until the phase of parity `parity` is complete.
    ///
    /// # Safety
    /// Initialised.
    #[inline(always)]
    pub unsafe fn wait(self, parity: u32) {
        loop {
            let done: u32;
            // SAFETY: the caller's contract; a test, no side effect but the wait.
            unsafe {
                asm!(
                    "{{ .reg .pred done; mbarrier.try_wait.parity.shared.b64 done, [{bar}], {parity}; selp.u32 {out}, 1, 0, done; }}",
                    bar = in(reg32) self.0,
                    parity = in(reg32) parity,
                    out = out(reg32) done,
                    options(nostack),
                );
            }
            if done != 0 {
                break;
            }
        }
    }
}

/// Copies the box of the tensor map at global address `map` at element `(x, y)` to
/// shared-window address `target`, completing `barrier`'s transactions (out-of-bounds elements
/// read as zero).
///
/// # Safety
/// `map` holds a tensor map the host wrote before the launch; `target` is 128-byte aligned
/// shared memory of this block with room for the box; the barrier expects the bytes.
#[cfg(conv_hopper)]
#[inline(always)]
pub unsafe fn tensor_copy_2d(
    map: *const u64,
    target: u32,
    (x, y): (i32, i32),
    barrier: TransactionBarrier,
) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{target}], [{map}, {{{x}, {y}}}], [{bar}];",
            map = in(reg64) map,
            target = in(reg32) target,
            x = in(reg32) x,
            y = in(reg32) y,
            bar = in(reg32) barrier.0,
            options(nostack),
        );
    }
}
