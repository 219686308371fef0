"""The Python package against cupyx.scipy.ndimage, scipy.ndimage and OpenCV, in one run.

    python bench.py [--out FILE.csv] [--quick]

Device cases time CuPy arrays with CUDA events around each call on the current stream (the
median of the calls after warm-up); host cases time NumPy arrays in and out with a wall clock.
Inputs are random (never zeros); each result is checked against cupyx's (or SciPy's) before
it is timed. The device-to-device copy of the same bytes is the roofline of the same run; for
long masks the floor is the device's FMA peak (128 lanes an SM at the reported clock).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time

import numpy as np

import gpu_conv
from gpu_conv import ndimage as gc


def device_ms(call, runs: int) -> float:
    """Median milliseconds of ``call()`` on the current stream, by CUDA events."""
    import cupy

    for _ in range(3):
        call()
    times = []
    for _ in range(runs):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def host_ms(call, runs: int) -> float:
    """Median wall-clock milliseconds of ``call()``, which returns when its result is ready."""
    call()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def check(ours, theirs, what: str, tol: float = 1e-4) -> None:
    ours = np.asarray(ours.get() if hasattr(ours, "get") else ours, dtype=np.float64)
    theirs = np.asarray(theirs.get() if hasattr(theirs, "get") else theirs, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(theirs))))
    error = float(np.max(np.abs(ours - theirs))) / scale
    if error > tol:
        sys.exit(f"{what}: differs from the anchor by {error:.3g} (relative to its largest value)")


def device_cases(quick: bool):
    import cupy
    from cupyx.scipy import ndimage as cx

    rng = cupy.random.default_rng(1)
    big = 4096 if quick else 8192
    image = rng.random((big, big), dtype=cupy.float32)
    volume = rng.random((256 if quick else 512,) * 3, dtype=cupy.float32)
    rgb = (rng.random((big, big, 3)) * 255).astype(cupy.uint8)
    # Each library's masks as its users give them: NumPy for this one (they go to constant
    # memory), CuPy for cupyx.
    w5_host = np.random.default_rng(2).standard_normal((5, 5)).astype(np.float32)
    masks = {gc: w5_host, cx: cupy.asarray(w5_host)}
    return [
        (f"correlate {big}^2 f32 5x5 constant", image, lambda m, x: m.correlate(x, masks[m], mode="constant")),
        (f"correlate {big}^2 f32 5x5 reflect", image, lambda m, x: m.correlate(x, masks[m])),
        (f"gaussian_filter {big}^2 f32 sigma 2", image, lambda m, x: m.gaussian_filter(x, 2.0)),
        (f"gaussian_filter {volume.shape[0]}^3 f32 sigma 2", volume, lambda m, x: m.gaussian_filter(x, 2.0)),
        (f"gaussian_filter {big}^2x3 u8 sigma (2,2,0)", rgb, lambda m, x: m.gaussian_filter(x, (2.0, 2.0, 0.0))),
    ], cx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="CSV file of the figures")
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer runs")
    args = parser.parse_args()
    runs = 10 if args.quick else 30
    rows = []
    print(f"backend: {gpu_conv.backend()}")

    import cupy

    cases, cx = device_cases(args.quick)
    for name, x, f in cases:
        # Integers: cupyx truncates each pass into the type, the library rounds once.
        check(f(gc, x), f(cx, x), name, 3 / 255 if x.dtype == cupy.uint8 else 1e-4)
        ours = device_ms(lambda: f(gc, x), runs if x.size > 4096 else 200)
        anchor = device_ms(lambda: f(cx, x), runs if x.size > 4096 else 200)
        copy = device_ms(lambda: cupy.copyto(cupy.empty_like(x), x), runs)
        rows.append(("device", name, ours, "cupyx", anchor, copy))

    # Long masks (FIR filters) along a 2^24 signal: the FMA peak of the device is the floor,
    # cupyx's direct correlate1d and its FFT overlap-add (oaconvolve, same output) the anchors.
    from cupyx.scipy import signal as cxs

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    fma_per_ms = props["multiProcessorCount"] * 128 * props["clockRate"]
    signal = cupy.random.default_rng(5).random(1 << 24, dtype=cupy.float32)
    for taps in [63, 255, 1023, 4095]:
        w = np.random.default_rng(taps).standard_normal(taps).astype(np.float32)
        w_cupy = cupy.asarray(w)
        name = f"correlate1d 2^24 f32 {taps} taps constant"
        ours_call = lambda: gc.correlate1d(signal, w, mode="constant")  # noqa: E731
        fft_call = lambda: cxs.oaconvolve(signal, w_cupy[::-1], mode="same")  # noqa: E731
        check(ours_call(), fft_call(), name, 1e-3)
        ours = device_ms(ours_call, runs)
        floor = signal.size * taps / fma_per_ms
        if taps <= 1023:
            direct = device_ms(lambda: cx.correlate1d(signal, w_cupy, mode="constant"), runs)
            rows.append(("device", name, ours, "cupyx correlate1d", direct, floor))
        rows.append(("device", name, ours, "cupyx oaconvolve", device_ms(fft_call, runs), floor))

    # Call overhead: wall-clock microseconds from call to return (the kernels run behind), the
    # whole call and its parts: the Python layer (the native call left out) and the native
    # call alone.
    small = cupy.asarray(np.random.default_rng(4).random((64, 64), dtype=np.float32))
    w3 = np.full((3, 3), 1 / 9, dtype=np.float32)
    try:
        cx.correlate(small, w3)
        w3_cupyx = w3
    except (TypeError, ValueError):
        w3_cupyx = cupy.asarray(w3)

    def per_call_us(call, calls=3000, rounds=3):
        """The median over ``rounds`` of the mean time per call, after a round of warm-up (the
        first thousands of calls run slower while pools grow and clocks rise)."""
        times = []
        for _ in range(rounds + 1):
            cupy.cuda.Device().synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                call()
            times.append((time.perf_counter() - start) / calls * 1e6)
        cupy.cuda.Device().synchronize()
        return statistics.median(times[1:])

    whole = per_call_us(lambda: gc.correlate(small, w3))
    anchor = per_call_us(lambda: cx.correlate(small, w3_cupyx))
    captured = []
    native = gpu_conv._native.filter_device

    def keep_first(*args):
        # Only the first call's arguments: keeping every call's would keep its output alive,
        # so that each `cupy.empty` took new memory instead of reusing the pool's.
        if not captured:
            captured.append(args)

    gpu_conv._native.filter_device = keep_first
    python_only = per_call_us(lambda: gc.correlate(small, w3))
    gpu_conv._native.filter_device = native
    native_only = per_call_us(lambda: native(*captured[0]))
    for part, us in (("whole call", whole), ("Python layer", python_only), ("native call", native_only)):
        rows.append(("call", f"correlate 64^2 f32 3x3: {part} (us)", us, "cupyx (us)", anchor, float("nan")))

    # Host to host: NumPy arrays in and out.
    from scipy import ndimage as sp

    big = 4096 if args.quick else 8192
    host = np.random.default_rng(3).random((big, big), dtype=np.float32)
    w5 = np.random.default_rng(2).standard_normal((5, 5)).astype(np.float32)
    small = host[:2048, :2048]
    check(gc.correlate(small, w5), sp.correlate(small.astype(np.float64), w5), "host correlate")
    ours = host_ms(lambda: gc.correlate(host, w5), runs)
    try:
        import cv2

        import os

        cv2.setNumThreads(os.cpu_count())
        check(cv2.filter2D(small, -1, w5, borderType=cv2.BORDER_REFLECT), sp.correlate(small, w5), "OpenCV")
        opencv = host_ms(lambda: cv2.filter2D(host, -1, w5, borderType=cv2.BORDER_REFLECT), runs)
    except ImportError:
        opencv = float("nan")
    cupy_host = host_ms(lambda: cx.correlate(cupy.asarray(host), cupy.asarray(w5)).get(), runs)
    start = time.perf_counter()
    sp.correlate(host, w5)
    scipy_ms = (time.perf_counter() - start) * 1e3
    # The transfer floor: the input up and the output down through page-locked memory at once.
    def pinned_like(array):
        memory = cupy.cuda.alloc_pinned_memory(array.nbytes)
        return np.frombuffer(memory, array.dtype, array.size).reshape(array.shape)

    up, down = pinned_like(host), pinned_like(host)
    up[...] = host
    source, target = cupy.empty(host.shape, cupy.float32), cupy.asarray(host)
    streams = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)

    def both_ways():
        source.set(up, stream=streams[0])
        target.get(out=down, stream=streams[1])
        streams[0].synchronize()
        streams[1].synchronize()

    floor = host_ms(both_ways, runs)
    name = f"correlate {big}^2 f32 5x5 reflect, NumPy in and out"
    rows.append(("host", name, ours, "OpenCV", opencv, floor))
    rows.append(("host", name, ours, "CuPy host to host", cupy_host, floor))
    rows.append(("host", name, ours, "SciPy (one run)", scipy_ms, floor))

    print(f"{'kind':6} {'case':48} {'ours ms':>9} {'anchor':>18} {'ms':>9} {'floor ms':>9} {'x floor':>8}")
    for kind, case, ours, anchor_name, anchor, floor in rows:
        print(f"{kind:6} {case:48} {ours:9.3f} {anchor_name:>18} {anchor:9.3f} {floor:9.3f} {ours / floor:8.2f}")
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["kind", "case", "ours_ms", "anchor", "anchor_ms", "floor_ms"])
            writer.writerows(rows)


if __name__ == "__main__":
    main()
