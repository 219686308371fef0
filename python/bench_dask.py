"""A Zarr volume filtered chunk by chunk on a Dask cluster, against reading and writing the same
chunks unfiltered and against dask-image with CuPy, in one run.

    python bench_dask.py --workdir DIR [--shape 1024,2048,2048] [--chunk-depth 64] [--runs 3]
                         [--cluster cuda|cpu] [--threads 8] [--out FILE.csv]

The input is a random ``float32`` volume stored uncompressed. Each case reads every chunk of
it, filters (or not) and writes a Zarr output of the same chunks; its time is the wall clock
of that whole computation on the cluster, the median of ``--runs``. The outputs are checked
against each other on slabs at both ends and the middle, and against scipy.ndimage on a slab.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np


def make_input(path: Path, shape: tuple, depth: int) -> None:
    import dask.array as da

    if path.exists():
        return
    random = da.random.default_rng(7).standard_normal(shape, chunks=(depth,) + shape[1:],
                                                      dtype=np.float32)
    random.to_zarr(str(path), mode="w", compressors=None)


def store(lazy, path: Path, client) -> float:
    """Seconds to compute ``lazy`` into a new uncompressed Zarr array at ``path``."""
    shutil.rmtree(path, ignore_errors=True)
    start = time.perf_counter()
    client.compute(lazy.to_zarr(str(path), mode="w", compute=False, compressors=None)).result()
    return time.perf_counter() - start


def cases(source: Path, sigma: float, on_gpu: bool):
    """(name, lazy result) for each case."""
    import dask.array as da

    from gpu_conv import ndimage as gc

    volume = da.from_zarr(str(source))
    yield "read and write", volume
    yield "gpu_conv, NumPy chunks", gc.gaussian_filter(volume, sigma)
    if not on_gpu:
        return
    import cupy

    on_device = volume.map_blocks(cupy.asarray, dtype=volume.dtype,
                                  meta=cupy.empty((0,) * volume.ndim, volume.dtype))
    yield "gpu_conv, CuPy chunks", gc.gaussian_filter(on_device, sigma).map_blocks(
        cupy.asnumpy, dtype=volume.dtype, meta=np.empty((0,) * volume.ndim, volume.dtype))
    try:
        from dask_image import ndfilters
    except ImportError:
        return
    yield "dask-image, CuPy chunks", ndfilters.gaussian_filter(on_device, sigma).map_blocks(
        cupy.asnumpy, dtype=volume.dtype, meta=np.empty((0,) * volume.ndim, volume.dtype))


def check(source, result, name: str, sigma: float) -> None:
    """Exits unless ``result`` (a Zarr array) matches scipy.ndimage on a slab of ``source``."""
    from scipy import ndimage as sp

    reach, middle = int(4 * sigma + 0.5), source.shape[0] // 2
    slab = (slice(middle - 2 * reach, middle + 2 * reach), slice(0, 256), slice(0, 256))
    inner = (slice(reach, -reach),) * 3
    expected = sp.gaussian_filter(source[slab].astype(np.float64), sigma)[inner]
    error = float(np.max(np.abs(result[slab][inner] - expected)) / np.max(np.abs(expected)))
    if error > 1e-4:
        sys.exit(f"{name}: differs from scipy.ndimage by {error:.3g}")
    print(f"{name}: within {error:.2g} of scipy.ndimage", flush=True)


def cluster(kind: str, threads: int):
    """One worker per GPU, or four CPU worker processes, of ``threads`` threads each."""
    import distributed

    if kind == "cuda":
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(threads_per_worker=threads, dashboard_address=":0")
    return distributed.LocalCluster(n_workers=4, threads_per_worker=threads, dashboard_address=":0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--shape", default="1024,2048,2048")
    parser.add_argument("--chunk-depth", type=int, default=64)
    parser.add_argument("--sigma", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cluster", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split(","))
    gib = np.prod(shape) * 4 / 2**30
    import distributed
    import zarr

    args.workdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    make_input(args.workdir / "in.zarr", shape, args.chunk_depth)
    print(f"input {shape} float32 ({gib:.1f} GiB, chunks of {args.chunk_depth} planes): "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    rows = []
    with cluster(args.cluster, args.threads) as c, distributed.Client(c) as client:
        import gpu_conv

        on_gpu = client.submit(gpu_conv.backend).result() != "cpu"
        print("workers:", client.submit(gpu_conv.backend).result(), flush=True)
        for index, (name, lazy) in enumerate(cases(args.workdir / "in.zarr", args.sigma, on_gpu)):
            out = args.workdir / "out.zarr"
            times = [store(lazy, out, client) for _ in range(args.runs)]
            if index > 0:
                check(zarr.open_array(str(args.workdir / "in.zarr"), mode="r"),
                      zarr.open_array(str(out), mode="r"), name, args.sigma)
            shutil.rmtree(out)
            median = statistics.median(times)
            rows.append({"case": name, "gib": round(gib, 2), "median_s": round(median, 3),
                         "gib_per_s": round(gib / median, 3),
                         "runs_s": " ".join(f"{t:.2f}" for t in times)})
            print(f"{name:28} {median:8.2f} s  {gib / median:6.2f} GiB/s  runs {rows[-1]['runs_s']}",
                  flush=True)
    base = rows[0]["median_s"]
    for row in rows:
        row["x_read_write"] = round(row["median_s"] / base, 3)
        print(f"{row['case']:28} {row['x_read_write']:6.2f} x read and write")
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
