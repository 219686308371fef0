//! The copy kernel the benchmark times beside the copy engines' device-to-device copy: it reads
//! every element once and writes it once and does nothing else, so its bandwidth is the memory
//! roofline a kernel running on the SMs can reach, which the copy engines' may exceed.

use crate::abi::{SM_COPY_QUADS_PER_THREAD, SM_COPY_THREADS};
use crate::gpu::{Quad, block_idx_x, store4_streaming, thread_idx_x};

/// Copies `quads` 16-byte quads from `input` to `output`. Block `b` copies quads `b *
/// SM_COPY_THREADS * SM_COPY_QUADS_PER_THREAD ..` of its share: thread `t` the quads `t`, `t +
/// SM_COPY_THREADS`, ... (coalesced 16-byte accesses), all its loads issued before its stores,
/// which are marked streaming like the convolution kernels' output stores.
///
/// # Safety
/// `input` and `output` hold `quads` quads each, 16-byte aligned, not overlapping; blocks of
/// `SM_COPY_THREADS` threads, enough of them to cover the quads.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn sm_copy(input: *const f32, output: *mut f32, quads: u64) {
    const THREADS: u64 = SM_COPY_THREADS as u64;
    const PER_THREAD: usize = SM_COPY_QUADS_PER_THREAD as usize;
    let first = block_idx_x() * THREADS * PER_THREAD as u64 + thread_idx_x();
    let quad = |k: usize| first + THREADS * k as u64;
    let values: [Quad; PER_THREAD] = core::array::from_fn(|k| {
        if quad(k) < quads {
            // SAFETY: quad `quad(k) < quads` of the input, 16-byte aligned (caller).
            unsafe { *(input as *const Quad).add(quad(k) as usize) }
        } else {
            Quad([0.0; 4])
        }
    });
    for (k, value) in values.iter().enumerate() {
        if quad(k) < quads {
            // SAFETY: quad `quad(k) < quads` of the output, 16-byte aligned (caller).
            unsafe { store4_streaming(output.add(4 * quad(k) as usize), value.0) };
        }
    }
}
