//! Host copies that keep the page-locked staging buffers out of the CPU's caches.
//!
//! A copy engine reading a buffer whose lines sit dirty in the caches of the cores that wrote
//! it, or writing one whose lines those cores hold after reading it, must fetch or invalidate
//! every line from them first, which makes small copies several times slower (measured:
//! PERFORMANCE.md, Host -> host). So packing uses non-temporal stores, which go to memory
//! without taking the lines into the caches, and a small band's staging is evicted from the
//! caches after the host has used it (large bands keep the copies' speed without it, and
//! evicting them slows the unpacking).

/// Staging at most this large is evicted from the caches after use.
const EVICT_AT_MOST_BYTES: usize = 8 << 20;

/// Copies below this many bytes use plain stores: too short to pay for the fence.
const STREAMING_FROM_BYTES: usize = 256;

/// Bytes of a cache line.
const LINE_BYTES: usize = 64;

/// Bytes of the thread pool's eviction tasks.
const EVICT_TASK_BYTES: usize = 64 << 10;

/// Copies `source` into `destination` (of equal lengths) with non-temporal stores where the
/// CPU has them (x86-64), else as `copy_from_slice`.
pub(crate) fn copy_streaming<T: Copy>(destination: &mut [T], source: &[T]) {
    assert_eq!(destination.len(), source.len(), "copy_streaming lengths");
    let bytes = size_of_val(source);
    #[cfg(target_arch = "x86_64")]
    if bytes >= STREAMING_FROM_BYTES {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
        let (to, from) = (
            destination.as_mut_ptr().cast::<u8>(),
            source.as_ptr().cast::<u8>(),
        );
        let head = to.align_offset(16).min(bytes);
        let body = (bytes - head) / 16;
        // SAFETY: both slices hold `bytes` bytes and do not overlap (one is borrowed mutably);
        // `head + 16 * body <= bytes`; the stores go to 16-byte aligned addresses of
        // `destination`, the loads are unaligned; SSE2 is part of x86-64. The fence orders the
        // non-temporal stores before whatever the thread does next (a copy engine may read the
        // buffer once the thread pool's join has been seen).
        unsafe {
            std::ptr::copy_nonoverlapping(from, to, head);
            for i in 0..body {
                let at = head + 16 * i;
                let value = _mm_loadu_si128(from.add(at).cast::<__m128i>());
                _mm_stream_si128(to.add(at).cast::<__m128i>(), value);
            }
            let done = head + 16 * body;
            std::ptr::copy_nonoverlapping(from.add(done), to.add(done), bytes - done);
            _mm_sfence();
        }
        return;
    }
    destination.copy_from_slice(source);
}

/// [`evict`] for staging of at most [`EVICT_AT_MOST_BYTES`]; larger buffers stay as they are.
pub(crate) fn evict_small<T: Copy + Sync>(buffer: &[T]) {
    if size_of_val(buffer) <= EVICT_AT_MOST_BYTES {
        evict(buffer);
    }
}

/// Writes back and drops `buffer`'s cache lines from every core's caches, on the thread pool,
/// where the CPU offers `clflushopt` (x86-64; `clflush` serialises and costs more than it
/// saves); elsewhere it does nothing. The contents are unchanged.
pub(crate) fn evict<T: Copy + Sync>(buffer: &[T]) {
    #[cfg(target_arch = "x86_64")]
    if has_clflushopt() {
        use rayon::prelude::*;
        // SAFETY: the bytes of a slice of plain values are readable as bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), size_of_val(buffer))
        };
        bytes.par_chunks(EVICT_TASK_BYTES).for_each(|task| {
            for line in task.chunks(LINE_BYTES) {
                // SAFETY: `clflushopt` takes an address of memory this thread may read (a
                // byte of `task`) and changes only where the line is cached, not its contents;
                // the CPU has the instruction (checked above).
                unsafe {
                    std::arch::asm!("clflushopt [{}]", in(reg) line.as_ptr(), options(nostack));
                }
            }
            // SAFETY: SSE2 is part of x86-64; the fence orders the flushes before later stores.
            unsafe { std::arch::x86_64::_mm_sfence() };
        });
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = buffer;
}

/// Whether the CPU has `clflushopt` (CPUID leaf 7, EBX bit 23), asked once.
#[cfg(target_arch = "x86_64")]
fn has_clflushopt() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        // Leaf 7 exists where the maximum leaf (leaf 0, EAX) is at least 7.
        std::arch::x86_64::__cpuid(0).eax >= 7
            && std::arch::x86_64::__cpuid_count(7, 0).ebx >> 23 & 1 == 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment of the destination and the source, lengths around the streaming
    /// threshold and the 16-byte body, for 1-, 2-, 4- and 8-byte elements.
    #[test]
    fn streaming_copies_equal_plain_copies() {
        fn check<T: Copy + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> T) {
            let source: Vec<T> = (0..1200).map(&make).collect();
            for len in [0, 1, 15, 16, 17, 63, 64, 255, 256, 257, 1000] {
                for from in 0..3 {
                    for to in 0..3 {
                        let mut destination: Vec<T> = (0..1200).map(|i| make(i + 7)).collect();
                        let before = destination.clone();
                        copy_streaming(&mut destination[to..to + len], &source[from..from + len]);
                        assert_eq!(&destination[to..to + len], &source[from..from + len]);
                        assert_eq!(destination[..to], before[..to]);
                        assert_eq!(destination[to + len..], before[to + len..]);
                    }
                }
            }
        }
        check(|i| i as u8);
        check(|i| (i * 31) as u16);
        check(|i| i as f32 * 0.5);
        check(|i| i as f64 * 0.25);
    }

    #[test]
    fn eviction_keeps_the_contents() {
        let buffer: Vec<f32> = (0..100_000).map(|i| i as f32).collect();
        evict(&buffer);
        evict(&buffer[3..17]);
        assert!(buffer.iter().enumerate().all(|(i, &v)| v == i as f32));
    }
}
