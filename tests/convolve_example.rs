//! Runs the convolve example as a user would, on the CPU path: bad files and bad options end
//! the process with a one-line error (exit 1 for a failed run, 2 for bad arguments), never an
//! abort, and good ones filter.

mod common;

use common::example_binary;
use ndarray::{Array1, Array2, ArrayD};
use ndarray_npy::WriteNpyExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(example_binary(name))
        .args(args)
        .output()
        .expect("run the example")
}

/// `convolve --cpu` from `input` with `mask` into `output`, with `extra` arguments.
fn convolve(input: &Path, mask: &Path, output: &Path, extra: &[&str]) -> Output {
    let paths = [input, mask, output].map(|p| p.to_str().expect("a UTF-8 path"));
    let mut words = vec![
        "--cpu", "--input", paths[0], "--mask", paths[1], "--output", paths[2],
    ];
    words.extend_from_slice(extra);
    run("convolve", &words)
}

/// A fresh directory for one test's files.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("convolve-example-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_npy<A: WriteNpyExt>(path: &Path, array: &A) {
    let mut bytes = Vec::new();
    array.write_npy(&mut bytes).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The process failed with `code`, printing one error line that contains `needle`.
fn assert_fails(output: &Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "stderr: {stderr}");
    let first = stderr.lines().next().unwrap_or("");
    assert!(
        first.starts_with("error: ") && first.contains(needle),
        "expected one error line with `{needle}`, got: {stderr}"
    );
}

/// A `.npy` header claiming a shape of 10^18 elements over 64 bytes of data, and one whose
/// extents overflow: refused before anything is allocated.
#[test]
fn headers_claiming_more_than_the_file_holds_are_refused() {
    let dir = scratch("headers");
    let mask = dir.join("mask.npy");
    write_npy(&mask, &Array1::from(vec![1.0f32, 2.0, 1.0]));
    for (name, shape, needle) in [
        (
            "huge.npy",
            "(1000000000, 1000000000)",
            "needs 4000000000000000000 bytes",
        ),
        (
            "overflow.npy",
            "(4294967296, 4294967296, 4294967296)",
            "more elements",
        ),
        (
            "short.npy",
            "(17,)",
            "needs 68 bytes of data, the file holds 64",
        ),
    ] {
        let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0u8; 64]);
        let input = dir.join(name);
        std::fs::write(&input, bytes).unwrap();
        let output = convolve(&input, &mask, &dir.join("out.npy"), &[]);
        assert_fails(&output, 1, needle);
    }
    // A truncated file and a file that is no .npy at all.
    let input = dir.join("truncated.npy");
    std::fs::write(&input, b"\x93NUMPY\x01\x00\xff\x00{'descr'").unwrap();
    let output = convolve(&input, &mask, &dir.join("out.npy"), &[]);
    assert_fails(&output, 1, "truncated.npy");
    std::fs::write(&input, b"not a numpy file").unwrap();
    let output = convolve(&input, &mask, &dir.join("out.npy"), &[]);
    assert_fails(&output, 1, "not a .npy file");
}

/// Options that would be ignored or silently overridden are errors; good ones filter.
#[test]
fn options_are_checked() {
    let dir = scratch("options");
    let (input, mask2d, mask1d, out) = (
        dir.join("x.npy"),
        dir.join("m2.npy"),
        dir.join("m1.npy"),
        dir.join("y.npy"),
    );
    write_npy(
        &input,
        &ArrayD::from_shape_fn(vec![6, 7], |i| (i[0] * 7 + i[1]) as f32),
    );
    write_npy(&mask2d, &Array2::from_elem((3, 3), 1.0f32));
    write_npy(&mask1d, &Array1::from(vec![1.0f32, 2.0, 1.0]));
    let with = |mask: &Path, extra: &[&str]| convolve(&input, mask, &out, extra);
    assert_fails(
        &with(&mask2d, &["--axis", "0"]),
        1,
        "--axis takes a 1-D mask",
    );
    assert_fails(
        &with(&mask1d, &["--mode", "wrap", "--mode", "nearest"]),
        2,
        "--mode is given twice",
    );
    assert_fails(&with(&mask1d, &["--mode", "sideways"]), 2, "sideways");
    assert_fails(&with(&mask1d, &["--axis", "x"]), 2, "--axis");
    assert_fails(&with(&mask1d, &["--output-dtype", "int64"]), 2, "int64");
    assert!(with(&mask2d, &[]).status.success());
    // SciPy's `cval` is taken with any mode and used by `constant` alone.
    assert!(
        with(&mask1d, &["--axis", "1", "--mode", "wrap", "--cval", "2"])
            .status
            .success()
    );
    assert!(
        with(
            &mask1d,
            &["--axis", "0", "--mode", "constant", "--cval", "2"]
        )
        .status
        .success()
    );

    let blur = |extra: &[&str]| {
        let mut words = vec!["--output", out.to_str().unwrap()];
        words.extend_from_slice(extra);
        run("blur", &words)
    };
    let png = dir.join("blur.png");
    for (extra, needle) in [
        (
            &["--truncate", "3", "--radius", "4"][..],
            "--truncate and --radius",
        ),
        (&["--cpu", "--require-gpu"], "contradict"),
        (
            &["--cpu", "--kernel", "tiled"],
            "--kernel picks a GPU design",
        ),
        (&["--cpu", "--tile", "32x8"], "--tile"),
        (&["--cval", "0.5"], "--cval applies to --mode constant"),
        (&["--sigma", "1", "--sigma", "2"], "--sigma is given twice"),
    ] {
        assert_fails(&blur(extra), 2, needle);
    }
    let words = [
        "--cpu",
        "--output",
        png.to_str().unwrap(),
        "--mode",
        "constant",
        "--cval",
        "0.5",
    ];
    assert!(run("blur", &words).status.success());
}
