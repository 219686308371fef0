//! The library's error type.

use cudarc::driver::DriverError;

/// Everything that can go wrong in this library. No function of the library panics on bad input;
/// it returns one of these, and the [`crate::Engine`] stays usable afterwards.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvError {
    /// The CUDA driver library (`libcuda.so` / `nvcuda.dll`) is not installed.
    #[error("no NVIDIA driver: the CUDA driver library (libcuda) was not found on this machine")]
    NoDriver,
    /// The driver is there, but there is no usable device with that ordinal.
    #[error("no CUDA device {ordinal}: {reason}")]
    NoDevice {
        /// The device ordinal asked for.
        ordinal: usize,
        /// What the driver said.
        reason: String,
    },
    /// A tile size or shared-memory need that the device cannot launch.
    #[error("invalid launch configuration for kernel `{kernel}`: {reason}")]
    InvalidLaunch {
        /// The kernel that would have been launched.
        kernel: &'static str,
        /// Which limit was broken, with the numbers.
        reason: String,
    },
    /// A kernel design or tile named for a call it does not run.
    #[error("the {kernel} design cannot run this call: {reason}")]
    InvalidDesign {
        /// The design named.
        kernel: crate::Kernel,
        /// Which calls it runs.
        reason: &'static str,
    },
    /// The driver reported an error; `context` names the operation or kernel (with its
    /// configuration) that caused it.
    #[error("CUDA driver error in {context}: {source}")]
    Driver {
        /// The operation, or the kernel and its launch configuration.
        context: String,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// An earlier kernel fault left the CUDA context unusable (the driver's errors after a fault
    /// are sticky): every later call on any engine of this process reports it. Restart the
    /// process to use the GPU again.
    #[error("the CUDA context is unusable since an earlier fault: {cause}")]
    ContextLost {
        /// The fault: the kernel, its configuration and the driver's error.
        cause: String,
    },
    /// The device has too little free memory for the buffers of this call.
    #[error(
        "out of device memory: this call needs {requested} bytes, the device has {free} of {total} bytes free"
    )]
    OutOfMemory {
        /// Bytes this call allocates on the device.
        requested: usize,
        /// Free device memory when the call started.
        free: usize,
        /// Total device memory.
        total: usize,
    },
    /// Host memory could not be had: page-locked staging buffers, or an output or mask array
    /// larger than the allocator gives.
    #[error("out of host memory: this call needs {requested} bytes of host memory")]
    HostOutOfMemory {
        /// Bytes asked for.
        requested: usize,
    },
    /// A device array given to the CPU backend's operations.
    #[error("device arrays are filtered by a GPU engine; this call runs on the CPU backend")]
    DeviceArrayOnCpu,
    /// A device array given to an engine of another GPU.
    #[error("the array lives on device {array}, the engine runs on device {engine}")]
    DeviceMismatch {
        /// The engine's device ordinal.
        engine: usize,
        /// The array's device ordinal.
        array: usize,
    },
    /// One GPU of a [`crate::MultiEngine`] failed its part of a call: the GPU, the rows (2D)
    /// or elements (1D) it held, and its error. The other parts of the output hold their
    /// results; the failed part's rows are unspecified. The other GPUs stay usable.
    #[error("GPU {ordinal}, part {start}..{end}: {source}")]
    OnDevice {
        /// The failing GPU's ordinal.
        ordinal: usize,
        /// First row (or element) of its part.
        start: usize,
        /// End of its part.
        end: usize,
        /// Its error.
        #[source]
        source: Box<ConvError>,
    },
    /// The mask has no taps.
    #[error("the mask is empty")]
    EmptyMask,
    /// The origin puts the mask's anchor outside the mask (SciPy's rule).
    #[error(
        "origin {origin} is invalid for a mask of length {mask_len}: it must lie in [{min}, {max}]"
    )]
    InvalidOrigin {
        /// The origin given (after the flip for convolution).
        origin: isize,
        /// Length of the mask along that axis.
        mask_len: usize,
        /// Smallest valid origin, `-(mask_len / 2)`.
        min: isize,
        /// Largest valid origin, `(mask_len - 1) / 2`.
        max: isize,
    },
    /// An `_into` output whose shape differs from the input's.
    #[error("output shape {actual:?} differs from the input shape {expected:?}")]
    ShapeMismatch {
        /// The input's shape.
        expected: Vec<usize>,
        /// The output's shape.
        actual: Vec<usize>,
    },
    /// An `_into` output that shares memory with the input.
    #[error("the output overlaps the input in memory; write into a separate array")]
    OverlappingOutput,
    /// A clamp range with `lo > hi` or a NaN bound.
    #[error("invalid clamp range [{lo}, {hi}]: need lo <= hi, neither NaN")]
    InvalidClamp {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// A mask parameter out of its domain (a Gaussian's sigma or truncate, a box's size).
    #[error("invalid {name} {value}: {expected}")]
    InvalidParameter {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: f64,
        /// What the parameter must be.
        expected: &'static str,
    },
    /// An axis (`axis`, or one of `axes`) the input does not have, or one named twice.
    #[error("invalid axis {axis} of an input of {ndim} dimensions: {expected}")]
    InvalidAxis {
        /// The axis given (negative ones count from the end).
        axis: isize,
        /// The input's number of dimensions.
        ndim: usize,
        /// What the axis must be.
        expected: &'static str,
    },
    /// An array with a number of dimensions the operation does not take.
    #[error("{array} has {ndim} dimensions: {expected}")]
    InvalidRank {
        /// Which array: `input`, `weights`.
        array: &'static str,
        /// Its number of dimensions.
        ndim: usize,
        /// What the operation takes.
        expected: &'static str,
    },
    /// An input too long for this build's indexing (more elements than `i64::MAX`).
    #[error("input of {len} elements is too large")]
    TooLarge {
        /// The number of elements.
        len: usize,
    },
}

impl ConvError {
    /// `InvalidLaunch` of `kernel`, as a function of the reason: plans build their errors
    /// with it.
    pub(crate) fn invalid_launch(kernel: &'static str) -> impl Fn(String) -> ConvError {
        move |reason| ConvError::InvalidLaunch { kernel, reason }
    }
}

/// Shorthand for this crate's results.
pub type Result<T, E = ConvError> = std::result::Result<T, E>;

/// Attaches a context to driver errors.
pub(crate) trait DriverContext<T> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| ConvError::Driver {
            context: context(),
            source,
        })
    }
}
