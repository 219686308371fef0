//! The size sweeps of a full, quick or targets run: every size, mask and tile in scope, 1D and
//! 2D, each design that applies.

use crate::args::Scope;
use crate::cases::{Case1d, Case2d};
use crate::cases::{design, image_mask, zero_border};
use crate::timing::cpu_time;
use crate::{Bench, random_vec};
use conv_host::{Kernel, reference};
use ndarray::{Array1, Array2, Array3};

impl Bench<'_> {
    /// Measures 1D signals of every size, mask length and tile in scope.
    pub(crate) fn bench_1d(&mut self) -> Result<(), String> {
        let sizes: Vec<u32> = match self.plan.scope {
            Scope::Targets => vec![26],
            Scope::Quick => vec![16, 20, 24],
            Scope::Full => (12..=28).step_by(2).collect(),
        };
        let masks: &[usize] = match self.plan.scope {
            Scope::Targets => &[7, 31],
            Scope::Quick => &[3, 7, 31],
            Scope::Full => &[3, 5, 7, 9, 15, 31],
        };
        let tiles: &[u32] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[256],
            Scope::Full => &[128, 256, 1024],
        };
        for &log2 in &sizes {
            let n = 1usize << log2;
            let input = Array1::from(random_vec(&mut self.rng, n));
            for &taps in masks {
                let mask = Array1::from(random_vec(&mut self.rng, taps));
                let cpu_ms = cpu_time(n * taps, || {
                    let _ =
                        reference::correlate1d(&input, &mask, 0, &zero_border(Kernel::Auto, None));
                });
                let register = zero_border(Kernel::RegisterTiled, None);
                let fixed = if design(self.engine, &[n], &mask, &register).is_ok() {
                    &[Kernel::RegisterTiled][..]
                } else {
                    &[]
                };
                for (kernel, tile) in variants(tiles, fixed) {
                    let options = zero_border(kernel, tile.map(|t| (t, 1)));
                    let case = Case1d {
                        input: &input,
                        mask: &mask,
                        log2,
                        options,
                        cpu_ms,
                    };
                    let row = case.measure(self)?;
                    self.rows.push(row);
                }
            }
            eprintln!("1d n = 2^{log2} done");
        }
        self.bench_long_1d()
    }

    /// Measures masks without a specialised kernel, up to long FIR filters, over a signal of
    /// 2^24 elements on the register-tiled design (its any-length kernel) and the tiled
    /// textbook design, against the FMA peak: where `Auto` changes from one to the other.
    fn bench_long_1d(&mut self) -> Result<(), String> {
        let masks: &[usize] = match self.plan.scope {
            Scope::Targets => &[17, 25, 63, 255, 1023, 4095],
            Scope::Quick => &[255],
            Scope::Full => &[11, 17, 25, 63, 255, 1023, 4095, 8191],
        };
        let log2 = 24;
        let input = Array1::from(random_vec(&mut self.rng, 1 << log2));
        for &taps in masks {
            let mask = Array1::from(random_vec(&mut self.rng, taps));
            for kernel in [Kernel::RegisterTiled, Kernel::Tiled] {
                let case = Case1d {
                    input: &input,
                    mask: &mask,
                    log2,
                    options: zero_border(kernel, None),
                    cpu_ms: None,
                };
                let row = case.measure(self)?;
                self.rows.push(row);
            }
        }
        eprintln!("1d long masks done");
        Ok(())
    }

    /// Measures 2D images of every size, mask shape and tile in scope, and rank-1 masks through
    /// the separable kernels.
    pub(crate) fn bench_2d(&mut self) -> Result<(), String> {
        let mut images: Vec<(usize, usize)> = match self.plan.scope {
            Scope::Targets => vec![(8192, 1)],
            Scope::Quick => vec![(1024, 1), (4096, 1), (8192, 1)],
            Scope::Full => [256, 1024, 4096, 8192].iter().map(|&s| (s, 1)).collect(),
        };
        images.push((4096, 3));
        let sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[5, 7, 9, 31],
            Scope::Quick => &[3, 5, 9, 31],
            Scope::Full => &[3, 5, 7, 9, 15, 31],
        };
        let mut masks: Vec<(usize, usize)> = sides.iter().map(|&s| (s, s)).collect();
        let line_sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[31],
            Scope::Full => &[3, 9, 31],
        };
        masks.extend(line_sides.iter().flat_map(|&s| [(1, s), (s, 1)]));
        // Gaussian sizes (SciPy's truncate 4: sigma 1.5, 2, 2.5 and 3; 17 x 17 is the blur
        // example's default), measured as rank-1 masks only, on the single-channel images.
        let gaussian_sides: &[usize] = match self.plan.scope {
            Scope::Targets => &[17],
            Scope::Quick => &[],
            Scope::Full => &[13, 17, 21, 25],
        };
        let tiles: &[(u32, u32)] = match self.plan.scope {
            Scope::Targets => &[],
            Scope::Quick => &[(32, 8)],
            Scope::Full => &[(32, 8), (16, 16)],
        };
        for &(side, channels) in &images {
            let shape = (side, side, channels);
            let image =
                Array3::from_shape_vec(shape, random_vec(&mut self.rng, side * side * channels))
                    .expect("shape");
            for &mask_shape in &masks {
                if self.plan.scope == Scope::Targets && channels == 3 && mask_shape != (5, 5) {
                    continue;
                }
                let mask = Array2::from_shape_vec(
                    mask_shape,
                    random_vec(&mut self.rng, mask_shape.0 * mask_shape.1),
                )
                .expect("shape");
                let cpu_ms = cpu_time(image.len() * mask.len(), || {
                    let weights = image_mask(&mask);
                    let _ =
                        reference::correlate(&image, &weights, &zero_border(Kernel::Auto, None));
                });
                // The register-tiled designs (staged by the threads, and by tensor copies) where
                // one was compiled for the case.
                let fixed: Vec<Kernel> = [Kernel::RegisterTiled, Kernel::RegisterTiledTma]
                    .into_iter()
                    .filter(|&kernel| {
                        let options = zero_border(kernel, None);
                        design(self.engine, image.shape(), &image_mask(&mask), &options).is_ok()
                    })
                    .collect();
                for (kernel, tile) in variants(tiles, &fixed) {
                    let options = zero_border(kernel, tile);
                    let case = Case2d {
                        image: &image,
                        mask: &mask,
                        options,
                        cpu_ms,
                    };
                    let row = case.measure(self)?;
                    self.rows.push(row);
                }
                // The same shape as a rank-1 mask (an outer product), through the fused kernel.
                if mask_shape.0 > 1 && mask_shape.1 > 1 {
                    self.measure_rank_one(&image, mask_shape, cpu_ms)?;
                }
            }
            if channels == 1 {
                for &side in gaussian_sides {
                    self.measure_rank_one(&image, (side, side), None)?;
                }
            }
            eprintln!("2d {side}x{side}x{channels} done");
        }
        Ok(())
    }

    /// Measures a random rank-1 mask of `shape` (an outer product) over `image` through the
    /// fused separable kernels: staged by the threads, and by tensor copies where they apply.
    fn measure_rank_one(
        &mut self,
        image: &Array3<f32>,
        shape: (usize, usize),
        cpu_ms: Option<f64>,
    ) -> Result<(), String> {
        let column = Array1::from(random_vec(&mut self.rng, shape.0));
        let row = Array1::from(random_vec(&mut self.rng, shape.1));
        let rank_one = Array2::from_shape_fn(shape, |(i, j)| column[i] * row[j]);
        for kernel in [Kernel::Separable, Kernel::SeparableTma] {
            let options = zero_border(kernel, None);
            if kernel == Kernel::SeparableTma
                && design(self.engine, image.shape(), &image_mask(&rank_one), &options).is_err()
            {
                continue;
            }
            let case = Case2d {
                image,
                mask: &rank_one,
                options,
                cpu_ms,
            };
            let row = case.measure(self)?;
            self.rows.push(row);
        }
        Ok(())
    }
}

/// The textbook designs at every tile, and the designs of fixed blocks `fixed`.
fn variants<T: Copy>(tiles: &[T], fixed: &[Kernel]) -> Vec<(Kernel, Option<T>)> {
    let textbook = Kernel::TEXTBOOK
        .iter()
        .flat_map(|&k| tiles.iter().map(move |&t| (k, Some(t))));
    textbook.chain(fixed.iter().map(|&k| (k, None))).collect()
}
