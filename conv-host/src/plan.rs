//! Launch planning shared by the operations: kernel choice and checks against the device.

use crate::device::DeviceInfo;
use crate::error::{ConvError, Result};
use crate::options::{BoundaryMode, Clamp, Kernel, clamp_bounds};
use crate::registry::{Family, KernelId, Shape, Storage, Textbook};

/// What a call will launch on this device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// The design that runs (never `Auto`).
    pub kernel: Kernel,
    /// The kernel (its entry point: [`KernelId::entry_point`]).
    pub entry: KernelId,
    /// Threads per block along x (along a row) and y (down the rows; 1 in 1D).
    pub block: (u32, u32),
    /// Output elements per block along x and y; smaller than `block` in the textbook's 2D tiled
    /// design, where the block covers the input tile. For the separable and streaming kernels,
    /// `output_tile.1` is the most: small images get shorter blocks, so that they still fill
    /// the GPU.
    pub output_tile: (u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub shared_memory_bytes: u32,
    /// Whether the mask is read from constant memory (else from global memory).
    pub mask_in_constant_memory: bool,
}

/// [`ConvError::InvalidLaunch`] for a design without `f64` kernels: every design but `Auto`
/// and the four textbook ones (`family`: `conv1d` or `conv2d`, for the message).
pub(crate) fn has_f64_kernels(kernel: Kernel, family: &'static str) -> Result<()> {
    if kernel == Kernel::Auto || Kernel::TEXTBOOK.contains(&kernel) {
        return Ok(());
    }
    Err(ConvError::InvalidLaunch {
        kernel: family,
        reason: format!(
            "the {kernel} design has no f64 kernel for this mask (f64 runs on auto, basic, \
             constant-mask, tiled and tiled-l2, and in 2D on register-tiled for square masks \
             of 3 and 5 taps)"
        ),
    })
}

/// What a launch of a planned operation takes besides its data: the plan, the boundary mode
/// and the output clamp bounds.
#[derive(Clone, Copy)]
pub(crate) struct Launch<'a> {
    pub(crate) plan: &'a LaunchPlan,
    pub(crate) mode: BoundaryMode,
    pub(crate) clamp: (f32, f32),
}

impl<'a> Launch<'a> {
    /// The launch of `plan` with these options.
    ///
    /// # Errors
    /// [`ConvError::InvalidClamp`] for a clamp whose bounds are reversed or NaN.
    pub(crate) fn new(
        plan: &'a LaunchPlan,
        mode: BoundaryMode,
        clamp: Option<Clamp>,
    ) -> Result<Self> {
        Ok(Self {
            plan,
            mode,
            clamp: clamp_bounds(clamp)?,
        })
    }
}

/// The textbook design `Auto` stands for and its kernel in the 1D or 2D family (`family`) over
/// `storage`, for a mask that does (`fits`) or does not fit the constant-memory symbol.
pub(crate) fn select_textbook(
    family: fn(Textbook) -> Family,
    storage: Storage,
    kernel: Kernel,
    fits: bool,
) -> (Kernel, KernelId) {
    let kernel = match kernel {
        Kernel::Auto if fits => Kernel::ConstantMask,
        Kernel::Auto => Kernel::Basic,
        chosen => chosen,
    };
    let design = match (kernel, fits) {
        (Kernel::ConstantMask, true) => Textbook::ConstantMask,
        (Kernel::Tiled, true) => Textbook::Tiled,
        (Kernel::Tiled, false) => Textbook::TiledGlobalMask,
        (Kernel::TiledL2, true) => Textbook::TiledL2,
        (Kernel::TiledL2, false) => Textbook::TiledL2GlobalMask,
        // RegisterTiled and the separable designs are planned by the 1D and 2D modules
        // before here.
        _ => Textbook::Basic,
    };
    let id = KernelId::new(family(design), Shape::Any, None, storage);
    (kernel, id)
}

/// Checks a block shape and its shared memory against the device's limits.
pub(crate) fn check_block(
    device: &DeviceInfo,
    entry: KernelId,
    block: (u32, u32),
    shared_bytes: u64,
) -> Result<()> {
    let invalid = ConvError::invalid_launch(entry.entry_point());
    let (x, y) = block;
    if x == 0 || y == 0 {
        return Err(invalid(format!(
            "tile {x} x {y}: every side needs at least 1 thread"
        )));
    }
    let (max_x, max_y) = device.max_block_dim;
    if x > max_x || y > max_y {
        return Err(invalid(format!(
            "tile {x} x {y} exceeds the device's block limits {max_x} x {max_y}"
        )));
    }
    if u64::from(x) * u64::from(y) > u64::from(device.max_threads_per_block) {
        return Err(invalid(format!(
            "tile {x} x {y} has {} threads, over the device's {} per block",
            u64::from(x) * u64::from(y),
            device.max_threads_per_block
        )));
    }
    if shared_bytes > u64::from(device.max_shared_memory_per_block) {
        return Err(invalid(format!(
            "tile {x} x {y} with this mask needs {shared_bytes} bytes of shared memory, over the \
             device's {} per block; use a smaller tile or Kernel::TiledL2",
            device.max_shared_memory_per_block
        )));
    }
    Ok(())
}

/// Runs `launch(offset, count)` for the grids that cover `blocks` blocks, at most `max_grid`
/// blocks a grid, in order.
///
/// # Errors
/// The first error `launch` returns.
pub(crate) fn for_each_grid(
    blocks: u64,
    max_grid: u64,
    mut launch: impl FnMut(u64, u64) -> Result<()>,
) -> Result<()> {
    let max_grid = max_grid.max(1);
    let mut offset = 0;
    while offset < blocks {
        let count = (blocks - offset).min(max_grid);
        launch(offset, count)?;
        offset += count;
    }
    Ok(())
}
