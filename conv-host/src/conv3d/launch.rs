//! The launch of a 3D kernel: its grids, as many as the device's grid takes, and the check
//! of the kernels' 32-bit offsets within a slice.

use crate::abi::{CONV3D_THREADS, Conv3dParams};
use crate::error::{ConvError, Result};
use crate::plan::for_each_grid;
use crate::registry::KernelId;
use crate::session::Session;
use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg};
use std::sync::Arc;

impl Session<'_> {
    /// Enqueues on `stream` the 3D kernel `entry_point` over `blocks` blocks of 256 threads with
    /// `shared` bytes of shared memory each, reading its taps from `taps` (or MASK, for `None`),
    /// in as many grids as the device takes, `params(offset)` the parameters of the grid whose
    /// first block is block `offset`.
    ///
    /// # Errors
    /// [`ConvError::TooLarge`] for a slice of `2^32 - 1` elements or more (the kernels keep
    /// offsets within a slice in 32 bits), [`ConvError::Driver`].
    ///
    /// # Safety
    /// The 3D kernels' contract (`conv-kernels/src/conv3d/mod.rs`): `input` and `output` are
    /// distinct buffers holding the rows `params` describes, the taps are where the kernel
    /// reads them (written before in `stream`'s order), `blocks` covers the tiles and slices
    /// of `params` and `shared` is the staged slices' shared memory of its rows a thread.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn launch_volume<R: DeviceRepr>(
        &self,
        stream: &Arc<CudaStream>,
        entry: KernelId,
        (blocks, shared): (u64, u64),
        taps: Option<&CudaView<'_, R>>,
        params: impl Fn(u64) -> Conv3dParams,
        input: &CudaView<'_, u8>,
        output: &mut CudaViewMut<'_, u8>,
    ) -> Result<()> {
        let first = params(0);
        let slice = first.height.saturating_mul(first.pitch);
        if slice >= u64::from(u32::MAX) {
            return Err(ConvError::TooLarge {
                len: usize::try_from(slice).unwrap_or(usize::MAX),
            });
        }
        let max_grid = u64::from(self.device().max_grid_dim.0);
        for_each_grid(blocks, max_grid, |offset, count| {
            let config = LaunchConfig {
                grid_dim: (count as u32, 1, 1),
                block_dim: (CONV3D_THREADS.0 * CONV3D_THREADS.1, 1, 1),
                shared_mem_bytes: shared as u32,
            };
            let p = params(offset);
            // SAFETY: the caller's contract, for this grid's blocks.
            unsafe {
                self.launch_async(stream, entry, config, |args| {
                    args.arg(input);
                    match taps {
                        Some(taps) => args.arg(taps),
                        None => args.arg(input),
                    };
                    args.arg(&mut *output);
                    args.arg(&p);
                })
            }
        })
    }
}
