//! Runs the blur example end to end, as a user would: on the CPU path here (CI has no GPU), and
//! on the GPU where there is one.

mod common;

use common::example_binary;
use std::path::{Path, PathBuf};
use std::process::Command;

fn blur_binary() -> PathBuf {
    example_binary("blur")
}

fn run_blur(args: &[&str]) -> String {
    let output = Command::new(blur_binary())
        .args(args)
        .output()
        .expect("run the blur example");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "blur {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Blurs the image file `input` on the CPU path into `output`, with `extra` arguments, and
/// opens the result.
fn blur_file_on_cpu(input: &Path, output: &Path, extra: &[&str]) -> image::DynamicImage {
    let paths = [input.to_str().unwrap(), output.to_str().unwrap()];
    let mut args = vec!["--cpu", "--input", paths[0], "--output", paths[1]];
    args.extend_from_slice(extra);
    run_blur(&args);
    image::open(output).unwrap()
}

/// Sum of absolute differences between horizontal and vertical neighbours, over all channels.
fn total_variation(image: &image::DynamicImage) -> u64 {
    let pixels = image.to_rgba8();
    let (w, h) = pixels.dimensions();
    let mut total = 0u64;
    for y in 0..h {
        for x in 0..w {
            let here = pixels.get_pixel(x, y).0;
            for (nx, ny) in [(x + 1, y), (x, y + 1)] {
                if nx < w && ny < h {
                    let there = pixels.get_pixel(nx, ny).0;
                    total += here
                        .iter()
                        .zip(there)
                        .map(|(&a, b)| u64::from(a.abs_diff(b)))
                        .sum::<u64>();
                }
            }
        }
    }
    total
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("blur-example-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    dir
}

#[test]
fn blur_example_on_the_builtin_image_is_smoother() {
    let dir = temp_dir("builtin");
    let (original, blurred) = (dir.join("original.png"), dir.join("blurred.png"));
    // sigma 0 is the identity: it writes the built-in image itself.
    run_blur(&[
        "--cpu",
        "--sigma",
        "0",
        "--output",
        original.to_str().unwrap(),
    ]);
    let stdout = run_blur(&["--cpu", "--output", blurred.to_str().unwrap()]);
    assert!(
        stdout.contains(&format!("wrote {}", blurred.display())),
        "{stdout}"
    );
    let (original, blurred) = (
        image::open(original).unwrap(),
        image::open(blurred).unwrap(),
    );
    assert_eq!(
        (blurred.width(), blurred.height()),
        (original.width(), original.height())
    );
    assert_eq!(blurred.color(), image::ColorType::Rgb8);
    let (before, after) = (total_variation(&original), total_variation(&blurred));
    assert!(
        after * 2 < before,
        "total variation {before} -> {after}: not smoother"
    );
}

/// Grey, alpha and 16-bit inputs come back in their own format (16 bits stay 16 bits).
#[test]
fn blur_example_keeps_grey_alpha_and_16_bit_inputs() {
    let dir = temp_dir("formats");
    for (name, image) in [
        (
            "grey.png",
            image::DynamicImage::ImageLuma8(image::GrayImage::from_fn(45, 31, |x, y| {
                image::Luma([((x * 37 + y * 91) % 256) as u8])
            })),
        ),
        (
            "rgba.png",
            image::DynamicImage::ImageRgba8(image::RgbaImage::from_fn(33, 20, |x, y| {
                image::Rgba([(x * 7) as u8, (y * 13) as u8, ((x ^ y) * 29) as u8, 200])
            })),
        ),
        (
            "rgb16.png",
            image::DynamicImage::ImageRgb16(image::ImageBuffer::from_fn(29, 17, |x, y| {
                image::Rgb([
                    (x * 2011) as u16,
                    (y * 3001) as u16,
                    ((x ^ y) * 1999) as u16,
                ])
            })),
        ),
    ] {
        let (input, output) = (dir.join(name), dir.join(format!("out-{name}")));
        image.save(&input).unwrap();
        let blurred = blur_file_on_cpu(&input, &output, &["--sigma", "1.5", "--mode", "mirror"]);
        assert_eq!(blurred.color(), image.color(), "{name}");
        assert_eq!(
            (blurred.width(), blurred.height()),
            (image.width(), image.height())
        );
        assert!(
            total_variation(&blurred) < total_variation(&image),
            "{name}: not smoother"
        );
    }
}

#[test]
fn blur_example_rejects_bad_arguments() {
    for args in [
        &["--sigma", "-1", "--cpu"][..],
        &["--mode", "sideways"],
        &["--tile", "32"],
    ] {
        let status = Command::new(blur_binary())
            .args(args)
            .arg("--output")
            .arg(temp_dir("bad").join("x.png"))
            .output()
            .unwrap()
            .status;
        assert!(!status.success(), "{args:?} should fail");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn blur_example_on_the_gpu_matches_the_cpu() {
    let dir = temp_dir("gpu");
    let (gpu, cpu) = (dir.join("gpu.png"), dir.join("cpu.png"));
    for kernel in ["basic", "constant-mask", "tiled", "tiled-l2"] {
        let stdout = run_blur(&[
            "--require-gpu",
            "--kernel",
            kernel,
            "--output",
            gpu.to_str().unwrap(),
        ]);
        assert!(
            stdout.contains("kernel time:") && stdout.contains("GB/s"),
            "{stdout}"
        );
        println!("{stdout}");
        run_blur(&["--cpu", "--output", cpu.to_str().unwrap()]);
        let (gpu, cpu) = (
            image::open(&gpu).unwrap().to_rgb8(),
            image::open(&cpu).unwrap().to_rgb8(),
        );
        // f32 on the GPU against f64 on the CPU: at most one 8-bit step apart after rounding.
        let worst = gpu
            .as_raw()
            .iter()
            .zip(cpu.as_raw())
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap();
        assert!(worst <= 1, "{kernel}: GPU and CPU differ by {worst} levels");
    }
}

#[test]
fn blur_example_reads_and_writes_jpeg() {
    let dir = temp_dir("jpeg");
    let (input, output) = (dir.join("in.jpg"), dir.join("out.jpg"));
    let image = image::RgbImage::from_fn(40, 24, |x, y| {
        image::Rgb([(x * 6) as u8, (y * 10) as u8, ((x + y) * 4) as u8])
    });
    image.save(&input).unwrap();
    let blurred = blur_file_on_cpu(&input, &output, &[]);
    assert_eq!(
        (blurred.width(), blurred.height(), blurred.color()),
        (40, 24, image::ColorType::Rgb8)
    );
}

#[test]
fn without_a_driver_require_gpu_fails_and_the_default_falls_back() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return; // a GPU machine: blur_example_on_the_gpu_matches_the_cpu covers it
    }
    let dir = temp_dir("nogpu");
    let output = dir.join("out.png");
    let stdout = run_blur(&["--output", output.to_str().unwrap()]);
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("no GPU")).count(),
        1,
        "{stdout}"
    );
    assert!(output.exists());
    let status = Command::new(blur_binary())
        .args(["--require-gpu", "--output"])
        .arg(&output)
        .output()
        .unwrap()
        .status;
    assert!(!status.success(), "--require-gpu must fail without a GPU");
}
