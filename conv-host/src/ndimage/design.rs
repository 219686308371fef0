//! How a planned call runs on the GPU: 1D signals and 2D images on the seeds' designs (the one
//! named in the options, or `Auto`'s choice), everything else on the N-D machinery.

use super::dense::Dense;
use super::device::UNCLAMPED;
use super::filters::{Filter, Terms};
use crate::conv1d::Conv1dOptions;
use crate::conv2d::Conv2dOptions;
use crate::conv3d::{Mask3d, VolumeShape};
use crate::error::{ConvError, Result};
use crate::options::{BoundaryMode, Clamp, Kernel};
use crate::plan::LaunchPlan;
use ndarray::{Array1, Array2};

/// The design options of a call: the kernel and its threads per block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Design {
    pub(crate) kernel: Kernel,
    pub(crate) tile: Option<(u32, u32)>,
}

/// Interleaved channels a 2D design takes: an `H x W x C` input whose mask leaves the last
/// axis alone runs on them up to this many channels, on the 3D kernel past it.
const MAX_IMAGE_CHANNELS: usize = 4;

/// What runs a call on the GPU.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Runs {
    /// One of the seeds' designs, on a 1D signal or a 2D image (`H x W`, or `H x W x C` with
    /// up to 4 channels): the design, its entry point, block, tile and memory.
    Design(LaunchPlan),
    /// Passes along axes, fused where a kernel takes several (the separable filters, and
    /// correlations of more dimensions whose mask spans one axis).
    AxisPasses,
    /// The 3D kernel, over a volume, a batch of images or a volume with channels last.
    Volume,
    /// The CPU backend.
    Cpu,
}

/// A planned call as the GPU runs it.
pub(crate) enum Gpu {
    /// One of the seeds' designs.
    Design(Designed),
    /// Passes along axes.
    Lines(Filter),
    /// The 3D kernel over `shape`: volumes `[D, H, W, channels]`.
    Volume {
        shape: VolumeShape,
        mask: Mask3d,
        mode: BoundaryMode,
        clamp: (f32, f32),
    },
}

/// A call on one of the seeds' designs.
pub(crate) enum Designed {
    /// A 1D input filtered by one pass: the 1D designs.
    Signal {
        taps: Array1<f64>,
        options: Conv1dOptions,
    },
    /// A 2D image of `channels` interleaved channels: the 2D designs, with the mask in
    /// correlation order or, with `flip`, as given.
    Image {
        mask: Array2<f64>,
        options: Conv2dOptions,
        flip: bool,
        channels: usize,
    },
}

impl Gpu {
    /// How the GPU runs `plan` over an input of `shape`, with `design`.
    ///
    /// # Errors
    /// [`ConvError::InvalidDesign`] for a named kernel or a tile on a call that no design of
    /// the seeds runs, or a tile of two rows for a 1D signal.
    pub(crate) fn new(plan: Dense, shape: &[usize], design: Design) -> Result<Gpu> {
        let gpu = match plan {
            Dense::Line(filter) => match shape.len() {
                1 => signal(&filter, design)?.unwrap_or(Gpu::Lines(filter)),
                _ => Gpu::Lines(filter),
            },
            Dense::Plane {
                mask,
                mut options,
                flip,
            } => {
                (options.kernel, options.tile) = (design.kernel, design.tile);
                Gpu::Design(Designed::Image {
                    mask,
                    options,
                    flip,
                    channels: 1,
                })
            }
            Dense::Volume {
                shape: volume,
                mask,
                mode,
                clamp,
            } if shape.len() == 3
                && mask.dims[2] == 1
                && mask.anchors[2] == 0
                && volume[2] <= MAX_IMAGE_CHANNELS =>
            {
                let origin = |k: usize| mask.anchors[k] as isize - (mask.dims[k] / 2) as isize;
                let image = Array2::from_shape_vec((mask.dims[0], mask.dims[1]), mask.taps)
                    .map_err(|_| ConvError::EmptyMask)?;
                Gpu::Design(Designed::Image {
                    mask: image,
                    options: Conv2dOptions {
                        mode,
                        origin: [origin(0), origin(1)],
                        kernel: design.kernel,
                        tile: design.tile,
                        clamp: clamp_option(clamp),
                    },
                    flip: false,
                    channels: volume[2],
                })
            }
            Dense::Volume {
                shape,
                mask,
                mode,
                clamp,
            } => Gpu::Volume {
                shape,
                mask,
                mode,
                clamp,
            },
        };
        if matches!(gpu, Gpu::Lines(_) | Gpu::Volume { .. })
            && (design.kernel != Kernel::Auto || design.tile.is_some())
        {
            return Err(ConvError::InvalidDesign {
                kernel: design.kernel,
                reason: "the designs run correlations of 1D signals and 2D images (H x W, or \
                         H x W x C with up to 4 channels and the mask along the first two axes); \
                         this call runs on the N-D kernels, which take kernel Auto and no tile",
            });
        }
        Ok(gpu)
    }
}

/// A 1D input's filter as a [`Gpu::Signal`] where it is one pass, summed.
fn signal(filter: &Filter, design: Design) -> Result<Option<Gpu>> {
    let ([term], Terms::Sum) = (filter.terms.as_slice(), filter.combine) else {
        return Ok(None);
    };
    let [pass] = term.as_slice() else {
        return Ok(None);
    };
    let tile = match design.tile {
        None => None,
        Some((x, 1)) => Some(x),
        Some(_) => {
            return Err(ConvError::InvalidDesign {
                kernel: design.kernel,
                reason: "a 1D signal's blocks are one row: give a tile of (x, 1)",
            });
        }
    };
    Ok(Some(Gpu::Design(Designed::Signal {
        taps: Array1::from(pass.taps.clone()),
        options: Conv1dOptions {
            mode: pass.mode,
            origin: pass.left as isize - (pass.taps.len() / 2) as isize,
            kernel: design.kernel,
            tile,
            clamp: clamp_option(filter.clamp),
        },
    })))
}

/// Clamp bounds as the designs' options take them.
fn clamp_option(clamp: (f32, f32)) -> Option<Clamp> {
    (clamp != UNCLAMPED).then_some(Clamp {
        lo: clamp.0,
        hi: clamp.1,
    })
}
