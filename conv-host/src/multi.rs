//! Several GPUs as one: a host call split into one part per GPU (contiguous rows of an image,
//! elements of a signal), each filtered by its GPU's own engine, with its own streams and
//! page-locked staging, on its own thread. A part takes its halo rows from the rest of the
//! input and its boundary rows as one GPU's call does, so every boundary mode gives the same
//! result as one GPU, element for element.

use crate::element::Element;
use crate::engine::Engine;
use crate::error::{ConvError, Result};
use ndarray::{ArrayViewMut, Axis, Dimension};
use std::ops::Range;

/// Engines over several GPUs (all of the host's by default) that split host calls between
/// them ([`MultiEngine::ndimage`]): calls on the seeds' designs (1D signals, 2D images) are
/// split by rows; other N-D calls run on the first GPU. Device arrays stay on their GPU's
/// engine.
///
/// ```no_run
/// use conv_host::{MultiEngine, masks, ndimage::NdOptions};
/// let gpus = MultiEngine::new()?;                  // every GPU of the host
/// let image = ndarray::Array2::<f32>::ones((16384, 16384));
/// let blurred = gpus.ndimage().correlate(&image, &masks::box2d(5, 5)?, &NdOptions::default())?;
/// # Ok::<(), conv_host::ConvError>(())
/// ```
#[derive(Debug)]
pub struct MultiEngine {
    engines: Vec<Engine>,
}

impl MultiEngine {
    /// An engine on every GPU of the host.
    ///
    /// # Errors
    /// As [`Engine::with_device`]; [`ConvError::NoDevice`] when the host has no GPU.
    pub fn new() -> Result<Self> {
        Engine::new()?;
        let count =
            cudarc::driver::CudaContext::device_count().map_err(|e| ConvError::NoDevice {
                ordinal: 0,
                reason: e.to_string(),
            })?;
        let ordinals: Vec<usize> = (0..count.max(0) as usize).collect();
        Self::with_devices(&ordinals)
    }

    /// An engine on each GPU of `ordinals`, in that order (an ordinal given twice gives two
    /// engines sharing that GPU).
    ///
    /// # Errors
    /// As [`Engine::with_device`]; [`ConvError::InvalidParameter`] for an empty list.
    pub fn with_devices(ordinals: &[usize]) -> Result<Self> {
        if ordinals.is_empty() {
            return Err(ConvError::InvalidParameter {
                name: "ordinals",
                value: 0.0,
                expected: "at least one GPU ordinal",
            });
        }
        let engines = ordinals
            .iter()
            .map(|&ordinal| Engine::with_device(ordinal))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { engines })
    }

    /// The engines, one per GPU, in the order given.
    pub fn engines(&self) -> &[Engine] {
        &self.engines
    }

    /// The first engine on the GPU of `ordinal`.
    ///
    /// # Errors
    /// [`ConvError::DeviceMismatch`] where none is.
    pub(crate) fn engine_of(&self, ordinal: usize) -> Result<&Engine> {
        self.engines
            .iter()
            .find(|engine| engine.device().ordinal == ordinal)
            .ok_or(ConvError::DeviceMismatch {
                engine: self.engines[0].device().ordinal,
                array: ordinal,
            })
    }

    /// Splits `output` along its first axis into one part per engine and runs `work` on each,
    /// each on its own thread; returns the first part's error, as [`ConvError::OnDevice`].
    pub(crate) fn run_parts<O, D>(
        &self,
        mut output: ArrayViewMut<'_, O, D>,
        work: impl Fn(&Engine, Range<usize>, ArrayViewMut<'_, O, D>) -> Result<()> + Sync,
    ) -> Result<()>
    where
        O: Element,
        D: Dimension,
    {
        let parts = split(output.len_of(Axis(0)), self.engines.len());
        let mut views = Vec::with_capacity(parts.len());
        for part in &parts {
            let (head, tail) = output.split_at(Axis(0), part.len());
            views.push(head);
            output = tail;
        }
        let work = &work;
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let running: Vec<_> = self
                .engines
                .iter()
                .zip(parts)
                .zip(views)
                .map(|((engine, part), view)| {
                    scope.spawn(move || {
                        work(engine, part.clone(), view).map_err(|source| ConvError::OnDevice {
                            ordinal: engine.device().ordinal,
                            start: part.start,
                            end: part.end,
                            source: Box::new(source),
                        })
                    })
                })
                .collect();
            running
                .into_iter()
                // A part's thread panics only on a bug: the panic goes on in the caller.
                .map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        results.into_iter().collect()
    }
}

/// `len` split into `parts` contiguous ranges of sizes differing by at most one.
fn split(len: usize, parts: usize) -> Vec<Range<usize>> {
    let parts = parts.max(1);
    (0..parts)
        .map(|i| len * i / parts..len * (i + 1) / parts)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn parts_cover_the_length_in_order() {
        for (len, parts) in [(10, 3), (2, 4), (0, 2), (16384, 2), (7, 1)] {
            let ranges = split(len, parts);
            assert_eq!(ranges.len(), parts);
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert_eq!(ranges.last().map(|r| r.end), Some(len));
            assert!(ranges.windows(2).all(|w| w[0].end == w[1].start));
            assert!(ranges.iter().all(|r| r.len() <= len / parts + 1));
        }
    }
}
