//! Options shared by every operation: boundary modes, kernel choice, clamping.

use crate::error::{ConvError, Result};
use std::fmt;
use std::str::FromStr;

/// How the input is extended beyond its edges (SciPy `ndimage` names and semantics).
///
/// Diagrams show the input `a b c d` and what a mask sees to its left and right:
///
/// ```text
/// Constant(k)  k k k | a b c d | k k k      (the textbook's zero ghost cells: k = 0)
/// Nearest      a a a | a b c d | d d d
/// Reflect      c b a | a b c d | d c b      (half-sample symmetric: the edge repeats)
/// Mirror       d c b | a b c d | c b a      (whole-sample symmetric: the edge does not)
/// Wrap         b c d | a b c d | a b c      (periodic)
/// ```
///
/// Reflect, Mirror and Wrap keep folding for masks wider than the input, as SciPy does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BoundaryMode {
    /// Every ghost cell holds this value.
    Constant(f32),
    /// Ghost cells repeat the nearest edge element.
    Nearest,
    /// Reflection about the edge of the last element.
    Reflect,
    /// Reflection about the centre of the last element.
    Mirror,
    /// The input repeats periodically.
    Wrap,
}

impl Default for BoundaryMode {
    /// `Constant(0.0)`: the zero ghost cells of the textbook.
    fn default() -> Self {
        BoundaryMode::Constant(0.0)
    }
}

impl BoundaryMode {
    /// The code the kernels take, and the ghost-cell value (used by `Constant` only).
    pub(crate) fn code_and_cval(self) -> (u32, f32) {
        use crate::abi::{MODE_CONSTANT, MODE_MIRROR, MODE_NEAREST, MODE_REFLECT, MODE_WRAP};
        match self {
            BoundaryMode::Constant(cval) => (MODE_CONSTANT, cval),
            BoundaryMode::Nearest => (MODE_NEAREST, 0.0),
            BoundaryMode::Reflect => (MODE_REFLECT, 0.0),
            BoundaryMode::Mirror => (MODE_MIRROR, 0.0),
            BoundaryMode::Wrap => (MODE_WRAP, 0.0),
        }
    }

    /// The constant of `Constant`, `None` for the other modes.
    pub(crate) fn constant(self) -> Option<f32> {
        match self {
            BoundaryMode::Constant(cval) => Some(cval),
            _ => None,
        }
    }
}

/// Parses SciPy's mode names: `constant` (cval 0), `nearest`, `reflect`, `mirror`, `wrap`.
impl FromStr for BoundaryMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "constant" | "grid-constant" => Ok(BoundaryMode::Constant(0.0)),
            "nearest" => Ok(BoundaryMode::Nearest),
            "reflect" | "grid-mirror" => Ok(BoundaryMode::Reflect),
            "mirror" => Ok(BoundaryMode::Mirror),
            "wrap" | "grid-wrap" => Ok(BoundaryMode::Wrap),
            other => Err(format!(
                "unknown boundary mode `{other}` (expected constant, nearest, reflect, mirror or wrap)"
            )),
        }
    }
}

/// Which kernel design runs the operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The library picks the kernel for the mask (its shape, and whether it is rank 1), the
    /// image or signal size and the device;
    /// [`Ndimage::plan_correlate`](crate::ndimage::Ndimage::plan_correlate) says which.
    #[default]
    Auto,
    /// One thread per output, input and mask read from global memory.
    Basic,
    /// As `Basic`, with the mask in constant memory.
    ConstantMask,
    /// The block's input tile and its halo cells staged in shared memory.
    Tiled,
    /// Only the tile's own elements in shared memory; halo cells read through the L2 cache.
    TiledL2,
    /// Compiled for 1D masks of 3, 5, 7, 9, 15 or 31 taps, and for 2D masks with 1, 3 or 4
    /// channels that are square of 3, 5, 7 or 9 taps, or 1 or any odd number from 9 to 31 taps
    /// wide (any height, up to the 4096 taps of constant memory): each thread keeps several
    /// outputs in registers (4 or 8 consecutive ones in 1D; 4 elements x 4 rows for the square
    /// 2D masks of 3 and 5 taps, 4 x 8 for 7 and 9, 16 elements x 2 rows for the wide ones) and
    /// reuses every input value it reads for all of them. `Auto` picks it where it applies,
    /// unless the input is too small to give it enough blocks (fewer than one per two SMs in
    /// 1D, one per five SMs for the wide 2D design), where a textbook design is faster, and where
    /// [`RegisterTiledTma`](Kernel::RegisterTiledTma) applies and is faster. In `f64` it runs
    /// square masks of 3 and 5 taps on the 3D design's kernels, an image a volume one slice
    /// deep: 8 or 4 rows a thread, each staged value added into every row's sum it reaches;
    /// `Auto` picks it for those masks.
    RegisterTiled,
    /// 2D masks of rank 1 (`mask[i][j] = column[i] * row[j]`, such as Gaussian and box masks):
    /// one fused kernel filters along the rows into shared memory, then down the columns, so an
    /// `M x M` mask costs about `2M` instead of `M^2` multiply-adds per output and the
    /// intermediate never goes to device memory. `Auto` picks it for masks it finds separable
    /// (see [`SEPARABLE_TOLERANCE`](crate::SEPARABLE_TOLERANCE)); naming any other kernel opts
    /// out. Naming it for a mask that is not separable is an error.
    Separable,
    /// `Separable`'s passes with the input rows staged by Hopper's tensor memory accelerator
    /// instead of the threads: one thread asks for the next rows while the block filters the
    /// current ones, so no thread spends instructions or waits on staging. It needs a GPU of compute capability 9.0 or more, one
    /// channel, a square rank-1 mask of 3 to 31 taps (odd) centred along the rows
    /// (`origin[1] = 0`) and the zero border, `BoundaryMode::Constant(0.0)` (the copies read
    /// elements outside the image as zeros); naming it otherwise is an error. `Auto` picks it
    /// for such masks from 11 x 11 on, and for every size on images up to 4096 x 4096.
    SeparableTma,
    /// `RegisterTiled`'s streaming kernels (square masks of 3 to 9 taps) with the input rows
    /// staged by Hopper's tensor memory accelerator: one warp asks for the next step's rows
    /// while the block computes the current ones, one barrier a step instead of two. It needs
    /// a GPU of compute capability 9.0 or more, a square mask of 3, 5, 7 or 9 taps over 1, 3
    /// or 4 channels, centred along the rows (`origin[1] = 0`), and the zero border,
    /// `BoundaryMode::Constant(0.0)`; naming it otherwise is an error. `Auto` picks it for such
    /// masks from 7 x 7 on, for 5 x 5 over several channels, and for every size on images up
    /// to 1024 x 1024.
    RegisterTiledTma,
}

impl Kernel {
    /// The four designs of the textbook chapter (Kirk and Hwu, chapter 7), for tests and benchmarks.
    pub const TEXTBOOK: [Kernel; 4] = [
        Kernel::Basic,
        Kernel::ConstantMask,
        Kernel::Tiled,
        Kernel::TiledL2,
    ];

    /// Every design a caller can name, `Auto` first.
    pub const EVERY: [Kernel; 9] = [
        Kernel::Auto,
        Kernel::Basic,
        Kernel::ConstantMask,
        Kernel::Tiled,
        Kernel::TiledL2,
        Kernel::RegisterTiled,
        Kernel::Separable,
        Kernel::SeparableTma,
        Kernel::RegisterTiledTma,
    ];

    /// The name [`FromStr`] accepts.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Auto => "auto",
            Kernel::Basic => "basic",
            Kernel::ConstantMask => "constant-mask",
            Kernel::Tiled => "tiled",
            Kernel::TiledL2 => "tiled-l2",
            Kernel::RegisterTiled => "register-tiled",
            Kernel::Separable => "separable",
            Kernel::SeparableTma => "separable-tma",
            Kernel::RegisterTiledTma => "register-tiled-tma",
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses the names [`Kernel::name`] gives: `auto`, `basic`, `constant-mask`, `tiled`, `tiled-l2`,
/// `register-tiled`, `separable`, `separable-tma`, `register-tiled-tma`.
impl FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Kernel::EVERY
            .into_iter()
            .find(|k| k.name() == s.to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<&str> = Kernel::EVERY.iter().map(|k| k.name()).collect();
                format!(
                    "unknown kernel `{s}` (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// An inclusive output range, e.g. `Clamp { lo: 0.0, hi: 1.0 }` for normalised pixels.
/// NaN outputs stay NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clamp {
    /// Smallest output value.
    pub lo: f32,
    /// Largest output value.
    pub hi: f32,
}

/// The kernels' clamp bounds: `(-inf, inf)` when there is none.
pub(crate) fn clamp_bounds(clamp: Option<Clamp>) -> Result<(f32, f32)> {
    match clamp {
        None => Ok((f32::NEG_INFINITY, f32::INFINITY)),
        Some(Clamp { lo, hi }) if lo <= hi => Ok((lo, hi)),
        Some(Clamp { lo, hi }) => Err(ConvError::InvalidClamp { lo, hi }),
    }
}
