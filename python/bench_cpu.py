"""The package's CPU backend against OpenCV and SciPy on the same cores, in one run.

    python bench_cpu.py [--out FILE.csv] [--quick]

NumPy arrays in and out, wall clock, the median of the runs after one warm-up. Inputs are
random (never zeros); each result is checked against SciPy's in float64 before it is timed
(``bench.py``'s timer and check, so it runs beside it).
The floor of the same run is the host's memory bandwidth: the input's bytes read and the
output's written by a copy on every core (NumPy copies of row blocks on a thread each).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from concurrent.futures import ThreadPoolExecutor

os.environ["GPU_CONV_BACKEND"] = "cpu"

import numpy as np  # noqa: E402
from scipy import ndimage as sp  # noqa: E402

import gpu_conv  # noqa: E402
from bench import check, host_ms as wall_ms  # noqa: E402
from gpu_conv import ndimage as gc  # noqa: E402

THREADS = os.cpu_count() or 1


def copy_floor_ms(x, runs: int) -> float:
    """A parallel copy of ``x`` into an array of its shape made once: the bytes a filter moves."""
    out = np.empty_like(x)
    blocks = np.array_split(np.arange(x.shape[0]), THREADS)
    with ThreadPoolExecutor(THREADS) as pool:

        def copy():
            list(pool.map(lambda b: np.copyto(out[b[0] : b[-1] + 1], x[b[0] : b[-1] + 1]), blocks))

        return wall_ms(copy, runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="CSV file of the figures")
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer runs")
    args = parser.parse_args()
    runs = 5 if args.quick else 15
    print(f"backend: {gpu_conv.backend()}")
    try:
        import cv2

        cv2.setNumThreads(THREADS)
    except ImportError:
        cv2 = None
    rng = np.random.default_rng(1)
    big = 4096 if args.quick else 8192
    image = rng.random((big, big), dtype=np.float32)
    rgb = (rng.random((4000, 6000, 3)) * 255).astype(np.uint8)
    volume = rng.random((128 if args.quick else 256, 512, 512), dtype=np.float32)
    signal = rng.random(1 << 24, dtype=np.float32)
    w5 = rng.standard_normal((5, 5)).astype(np.float32)
    w63 = rng.standard_normal(63).astype(np.float32)
    # (name, input, the call on a module (this package's or SciPy's), OpenCV's or None,
    # tolerance against SciPy)
    cases = [
        (f"correlate {big}^2 f32 5x5 reflect", image, lambda m, x: m.correlate(x, w5),
         lambda: cv2.filter2D(image, -1, w5, borderType=cv2.BORDER_REFLECT), 1e-5),
        ("gaussian_filter 4000x6000x3 u8 sigma (2,2,0)", rgb, lambda m, x: m.gaussian_filter(x, (2, 2, 0)),
         lambda: cv2.GaussianBlur(rgb, (17, 17), 2.0, borderType=cv2.BORDER_REFLECT), 1.01 / 255),
        (f"gaussian_filter {volume.shape[0]}x512x512 f32 sigma 2", volume,
         lambda m, x: m.gaussian_filter(x, 2.0), None, 1e-5),
        ("correlate1d 2^24 f32 63 taps", signal, lambda m, x: m.correlate1d(x, w63), None, 1e-5),
    ]
    rows = []
    for name, x, call, opencv, tol in cases:
        part = x[:512]
        check(call(gc, part), call(sp, part.astype(np.float64)), name, tol)
        floor = copy_floor_ms(x, runs)
        ours_ms = wall_ms(lambda: call(gc, x), runs)
        start = time.perf_counter()
        call(sp, x)
        scipy_ms = (time.perf_counter() - start) * 1e3
        rows.append((name, ours_ms, "SciPy (one run)", scipy_ms, floor))
        if opencv is not None and cv2 is not None:
            rows.append((name, ours_ms, f"OpenCV {THREADS} threads", wall_ms(opencv, runs), floor))
    print(f"{'case':46} {'ours ms':>9} {'anchor':>18} {'ms':>9} {'floor ms':>9} {'x floor':>8}")
    for case, ours_ms, anchor, anchor_ms, floor in rows:
        print(f"{case:46} {ours_ms:9.2f} {anchor:>18} {anchor_ms:9.2f} {floor:9.2f} {ours_ms / floor:8.2f}")
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["case", "ours_ms", "anchor", "anchor_ms", "floor_ms"])
            writer.writerows(rows)


if __name__ == "__main__":
    main()
