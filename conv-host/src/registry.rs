//! The registry of kernels: every entry point of the kernels' PTX as a typed [`KernelId`]
//! (family, mask shape, channels, element type), the architecture it needs and its launch
//! bounds.
//!
//! One list serves three users. The build script bounds each entry point by
//! [`KernelId::bounds`] and fails the build if the PTX and [`compiled`] disagree by one entry;
//! the host's plans hold a `KernelId`, never a name; the kernel crate declares its specialised
//! entry points from the same size lists (`conv-kernels/src/sizes.rs`). The build script
//! includes this file (`#[path]`), so it uses nothing but `core`, `std` and those size lists.

use std::fmt;

/// The element type a kernel reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Storage {
    F32,
    F64,
    U8,
    U16,
    F16,
    Bf16,
}

impl Storage {
    /// The narrow types, which the conversion kernels and the native-type kernels serve.
    pub const NARROW: [Self; 4] = [Self::U8, Self::U16, Self::F16, Self::Bf16];

    /// The type's name in entry points.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
        }
    }
}

/// The textbook designs of the 1D and 2D families, with the mask in constant memory or (the
/// `GlobalMask` variants) in global memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Textbook {
    Basic,
    ConstantMask,
    Tiled,
    TiledGlobalMask,
    TiledL2,
    TiledL2GlobalMask,
}

impl Textbook {
    /// Every textbook design.
    pub const ALL: [Self; 6] = [
        Self::Basic,
        Self::ConstantMask,
        Self::Tiled,
        Self::TiledGlobalMask,
        Self::TiledL2,
        Self::TiledL2GlobalMask,
    ];

    const fn name(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::ConstantMask => "constant_mask",
            Self::Tiled => "tiled",
            Self::TiledGlobalMask => "tiled_global_mask",
            Self::TiledL2 => "tiled_l2",
            Self::TiledL2GlobalMask => "tiled_l2_global_mask",
        }
    }
}

/// A kernel family: one design or variant, instantiated over the shapes, channel counts and
/// element types [`compiled`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// The SM copy kernel the benchmark measures as the roofline.
    SmCopy,
    /// A kernel that faults on purpose, for the fault tests.
    DiagnosticTrap,
    /// A narrow type widened to `f32`.
    Widen,
    /// `f32` narrowed to a narrow type.
    Narrow,
    /// The textbook 1D designs.
    Conv1d(Textbook),
    /// The textbook 2D designs.
    Conv2d(Textbook),
    /// Register-tiled 1D, by mask length, and for any length (`Shape::Any`).
    Conv1dRegisterTiled,
    /// The general fused separable 2D kernel (any rank-1 mask).
    Conv2dSeparable,
    /// The wide fused separable 2D kernels, by square mask and channels.
    Conv2dSeparableWide,
    /// The wide separable row pass of one channel, by mask width.
    Conv2dSeparableWideRow,
    /// The wide separable pair (row and column pass in one kernel) of one channel.
    Conv2dSeparableWidePair,
    /// The wide separable column pass of one channel, by mask height.
    Conv2dSeparableWideColumn,
    /// The tensor-copy separable 2D kernels (sm_90).
    Conv2dSeparableTma,
    /// The wide register-tiled 2D kernels, by mask width and channels.
    Conv2dRegisterTiledWide,
    /// The streaming register-tiled 2D kernels in steps of 32 rows.
    Conv2dStream,
    /// The streaming register-tiled 2D kernels in steps of 16 rows.
    Conv2dStream16,
    /// The tensor-copy streaming 2D kernels (sm_90).
    Conv2dStreamTma,
    /// One axis pass, the line staged in shared memory.
    AxisStaged,
    /// One axis pass read straight from global memory.
    AxisDirect,
    /// One axis pass along rows with the taps compiled in, by mask length.
    AxisRing,
    /// The 3D tiled design staged through registers.
    Conv3dTiled,
    /// The 3D tiled design staged by asynchronous copies (sm_90).
    Conv3dTiledAsync,
    /// The one-pass separable 3D design (sm_90), by taps a side.
    Conv3dSeparableAsync,
}

impl Family {
    /// The entry points' common prefix.
    fn prefix(self) -> String {
        let fixed = match self {
            Self::Conv1d(design) => return format!("conv1d_{}", design.name()),
            Self::Conv2d(design) => return format!("conv2d_{}", design.name()),
            Self::SmCopy => "sm_copy",
            Self::DiagnosticTrap => "diagnostic_trap",
            Self::Widen | Self::Narrow => "convert",
            Self::Conv1dRegisterTiled => "conv1d_register_tiled",
            Self::Conv2dSeparable => "conv2d_separable",
            Self::Conv2dSeparableWide => "conv2d_separable_wide",
            Self::Conv2dSeparableWideRow => "conv2d_separable_wide_row",
            Self::Conv2dSeparableWidePair => "conv2d_separable_wide_pair",
            Self::Conv2dSeparableWideColumn => "conv2d_separable_wide_column",
            Self::Conv2dSeparableTma => "conv2d_separable_tma",
            Self::Conv2dRegisterTiledWide => "conv2d_register_tiled_wide",
            Self::Conv2dStream => "conv2d_register_tiled_stream",
            Self::Conv2dStream16 => "conv2d_register_tiled_stream16",
            Self::Conv2dStreamTma => "conv2d_register_tiled_tma",
            Self::AxisStaged => "axis_staged",
            Self::AxisDirect => "axis_direct",
            Self::AxisRing => "axis_ring",
            Self::Conv3dTiled => "conv3d_tiled",
            Self::Conv3dTiledAsync => "conv3d_tiled_async",
            Self::Conv3dSeparableAsync => "conv3d_separable_async",
        };
        fixed.to_string()
    }

    /// The architecture the family's kernels need.
    pub const fn arch(self) -> Arch {
        match self {
            Self::Conv2dSeparableTma
            | Self::Conv2dStreamTma
            | Self::Conv3dTiledAsync
            | Self::Conv3dSeparableAsync => Arch::Sm90,
            _ => Arch::Sm70,
        }
    }
}

/// The PTX build a kernel is in: every device from Volta on, or Hopper on (tensor and
/// asynchronous copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Sm70,
    Sm90,
}

/// The mask shape a kernel is specialised on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Shape {
    /// Read at run time.
    Any,
    /// A mask of this many taps along one axis.
    Taps(u32),
    /// A square 2D mask of this side.
    Square(u32),
    /// A 2D mask of this width and any height.
    Width(u32),
    /// A cubic 3D mask of this side.
    Cube(u32),
    /// A 3D mask one slice deep, square of this side.
    Plane(u32),
}

impl Shape {
    /// The side or length the shape is compiled for (`None` for [`Shape::Any`]).
    pub const fn size(self) -> Option<u32> {
        match self {
            Self::Any => None,
            Self::Taps(n) | Self::Square(n) | Self::Width(n) | Self::Cube(n) | Self::Plane(n) => {
                Some(n)
            }
        }
    }
}

/// One kernel of the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KernelId {
    family: Family,
    shape: Shape,
    /// Interleaved channels compiled in (`None`: read at run time, or one for families that
    /// name none).
    channels: Option<u32>,
    storage: Storage,
}

impl KernelId {
    /// The kernel of `family` for `shape`, `channels` and `storage`; whether it is compiled is
    /// [`compiled`]'s to say (the host's lookups return `None` for one that is not).
    pub const fn new(
        family: Family,
        shape: Shape,
        channels: Option<u32>,
        storage: Storage,
    ) -> Self {
        Self {
            family,
            shape,
            channels,
            storage,
        }
    }

    /// A kernel of `family` over `f32` with neither shape nor channels compiled in.
    pub const fn plain(family: Family) -> Self {
        Self::new(family, Shape::Any, None, Storage::F32)
    }

    /// The kernel's family.
    pub const fn family(self) -> Family {
        self.family
    }

    /// The mask shape compiled in.
    pub const fn shape(self) -> Shape {
        self.shape
    }

    /// The channel count compiled in, if any.
    pub const fn channels(self) -> Option<u32> {
        self.channels
    }

    /// The element type the kernel reads and writes.
    pub const fn storage(self) -> Storage {
        self.storage
    }

    /// The same kernel over `storage`.
    pub const fn with_storage(self, storage: Storage) -> Self {
        Self { storage, ..self }
    }

    /// The most threads a block of this kernel may have, and the blocks per SM its registers
    /// are bounded for (`.maxntid`, `.minnctapersm`): what ptxas gets instead of CUDA's
    /// `__launch_bounds__`. The figures behind each are in PERFORMANCE.md.
    pub fn bounds(self) -> LaunchBounds {
        use Family as F;
        let size = self.shape.size().unwrap_or(0);
        let blocks = match self.family {
            F::SmCopy | F::DiagnosticTrap | F::Widen | F::Narrow => None,
            // Any length: 128 registers hold the sums and windows of 16 `f32` or 8 `f64`.
            F::Conv1dRegisterTiled if self.shape == Shape::Any => Some(2),
            F::Conv1d(_) | F::Conv2d(_) | F::Conv1dRegisterTiled => None,
            // Three fit 72 registers without spilling.
            F::Conv2dSeparable => Some(3),
            // From 27 taps their shared memory leaves one block per SM anyway.
            F::Conv2dSeparableWidePair if size >= 27 => Some(1),
            F::Conv2dSeparableWide
            | F::Conv2dSeparableWideRow
            | F::Conv2dSeparableWidePair
            | F::Conv2dSeparableWideColumn
            | F::Conv2dSeparableTma => Some(2),
            F::Conv2dStreamTma => Some(2),
            F::Conv2dStream16 => Some(4),
            F::Conv2dStream => Some(3),
            F::Conv2dRegisterTiledWide if size == 9 => {
                Some(if self.channels == Some(1) { 4 } else { 3 })
            }
            F::Conv2dRegisterTiledWide => Some(2),
            F::AxisStaged | F::AxisDirect => Some(3),
            F::AxisRing => Some(if size >= 27 { 1 } else { 2 }),
            F::Conv3dSeparableAsync => Some(match size {
                9.. => 2,
                7.. => 3,
                _ => 4,
            }),
            F::Conv3dTiled if self.shape == Shape::Plane(5) && self.storage == Storage::F64 => {
                Some(1)
            }
            F::Conv3dTiledAsync if self.shape == Shape::Cube(5) && self.channels.is_none() => {
                Some(1)
            }
            F::Conv3dTiled | F::Conv3dTiledAsync => Some(2),
        };
        let threads = match self.family {
            F::SmCopy | F::DiagnosticTrap | F::Widen | F::Narrow | F::Conv1d(_) | F::Conv2d(_) => {
                1024
            }
            F::Conv1dRegisterTiled if self.shape != Shape::Any => 1024,
            _ => 256,
        };
        LaunchBounds {
            threads,
            blocks_per_sm: blocks,
        }
    }
}

/// The entry point's name, as the kernel crate declares it.
impl fmt::Display for KernelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let storage = self.storage.name();
        match self.family {
            Family::Widen => return write!(f, "convert_{storage}_f32"),
            Family::Narrow => return write!(f, "convert_f32_{storage}"),
            _ => {}
        }
        f.write_str(&self.family.prefix())?;
        match self.shape {
            Shape::Any => {}
            Shape::Taps(n) | Shape::Square(n) | Shape::Cube(n) => write!(f, "_m{n}")?,
            Shape::Width(n) => write!(f, "_w{n}")?,
            Shape::Plane(n) => write!(f, "_m1x{n}")?,
        }
        if let Some(channels) = self.channels {
            write!(f, "_c{channels}")?;
        }
        if self.storage != Storage::F32 {
            write!(f, "_{storage}")?;
        }
        Ok(())
    }
}

/// A kernel's launch bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// The most threads a block may have.
    pub threads: u32,
    /// The blocks per SM ptxas keeps the registers for, if bounded.
    pub blocks_per_sm: Option<u32>,
}

/// The channel counts the specialised 2D kernels are compiled for.
pub const CHANNELS: [u32; 3] = [1, 3, 4];

/// Every kernel of the PTX, the sm_70 and the sm_90 builds together.
pub fn compiled() -> Vec<KernelId> {
    use Family as F;
    use Shape::{Any, Cube, Plane, Square, Taps, Width};
    use Storage::{Bf16, F16, F32, F64, U8, U16};
    let id = KernelId::new;
    let mut all = vec![
        KernelId::plain(F::SmCopy),
        KernelId::plain(F::DiagnosticTrap),
    ];
    for storage in Storage::NARROW {
        all.push(id(F::Widen, Any, None, storage));
        all.push(id(F::Narrow, Any, None, storage));
    }
    for design in Textbook::ALL {
        for storage in [F32, F64] {
            all.push(id(F::Conv1d(design), Any, None, storage));
            all.push(id(F::Conv2d(design), Any, None, storage));
        }
    }
    all.push(KernelId::plain(F::Conv2dSeparable));
    for taps in register_1d_sizes!(size_array!()) {
        all.push(id(F::Conv1dRegisterTiled, Taps(taps), None, F32));
    }
    for storage in [F32, F64] {
        all.push(id(F::Conv1dRegisterTiled, Any, None, storage));
    }
    for size in separable_sizes!(size_array!()) {
        for channels in CHANNELS {
            for storage in [F32, U8, U16] {
                all.push(id(
                    F::Conv2dSeparableWide,
                    Square(size),
                    Some(channels),
                    storage,
                ));
            }
        }
        for family in [
            F::Conv2dSeparableWideRow,
            F::Conv2dSeparableWidePair,
            F::Conv2dSeparableWideColumn,
        ] {
            all.push(id(family, Taps(size), None, F32));
        }
        all.push(id(F::Conv2dSeparableTma, Square(size), Some(1), F32));
    }
    for width in wide_widths!(size_array!()) {
        for channels in CHANNELS {
            all.push(id(
                F::Conv2dRegisterTiledWide,
                Width(width),
                Some(channels),
                F32,
            ));
        }
    }
    for size in stream_sizes!(size_array!()) {
        for channels in CHANNELS {
            all.push(id(F::Conv2dStream, Square(size), Some(channels), F32));
            all.push(id(F::Conv2dStreamTma, Square(size), Some(channels), F32));
        }
    }
    for size in stream_short_step_sizes!(size_array!()) {
        for channels in CHANNELS {
            all.push(id(F::Conv2dStream16, Square(size), Some(channels), F32));
            for storage in [U8, U16, F16, Bf16] {
                all.push(id(F::Conv2dStream, Square(size), Some(channels), storage));
                all.push(id(F::Conv2dStream16, Square(size), Some(channels), storage));
            }
        }
    }
    for storage in [F32, F64] {
        all.push(id(F::AxisStaged, Any, None, storage));
        all.push(id(F::AxisDirect, Any, None, storage));
    }
    for taps in ring_sizes!(size_array!()) {
        all.push(id(F::AxisRing, Taps(taps), None, F32));
    }
    for (shape, storage) in [
        (Any, F32),
        (Cube(3), F32),
        (Cube(5), F32),
        (Plane(3), F32),
        (Plane(5), F32),
        (Any, F64),
        (Cube(3), F64),
        (Plane(3), F64),
        (Plane(5), F64),
    ] {
        all.push(id(F::Conv3dTiled, shape, None, storage));
    }
    for side in [3, 5] {
        all.push(id(F::Conv3dTiledAsync, Cube(side), None, F32));
        all.push(id(F::Conv3dTiledAsync, Cube(side), Some(1), F32));
        for channels in CHANNELS {
            all.push(id(F::Conv3dTiledAsync, Plane(side), Some(channels), F64));
        }
    }
    for side in separable3d_sizes!(size_array!()) {
        all.push(id(F::Conv3dSeparableAsync, Cube(side), None, F32));
    }
    all
}
