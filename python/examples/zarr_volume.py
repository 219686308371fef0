"""Smooth a Zarr volume on a Dask cluster, chunk by chunk, into a new Zarr.

    python zarr_volume.py IN.zarr OUT.zarr [--sigma 2] [--cluster cpu|cuda|tcp://host:8786]
    python zarr_volume.py IN.zarr OUT.zarr --make 48   # first write a random 48 GiB input

Each worker reads its chunks and their halos from IN.zarr, filters them (NumPy chunks through
the GPU's host pipeline, or the CPU where a worker has no GPU) and writes OUT.zarr: the
workers hold some of the chunks at a time, never the whole volume. The made input's chunks
are 64 planes deep, the whole plane wide.
"""

from __future__ import annotations

import argparse
import time

import dask.array as da
import distributed
import numpy as np

import gpu_conv
from gpu_conv import ndimage


def make(path: str, gib: float, plane: int = 2048, depth: int = 64) -> None:
    """A random float32 volume of about ``gib`` GiB, written chunk by chunk."""
    planes = max(depth, int(gib * 2**30 / (4 * plane * plane)))
    volume = da.random.default_rng(0).standard_normal(
        (planes, plane, plane), chunks=(depth, plane, plane), dtype=np.float32
    )
    volume.to_zarr(path, mode="w")


def connect(cluster: str) -> distributed.Client:
    if cluster == "cuda":
        from dask_cuda import LocalCUDACluster  # one worker per GPU

        return distributed.Client(LocalCUDACluster())
    if cluster == "cpu":
        return distributed.Client(distributed.LocalCluster(threads_per_worker=2))
    return distributed.Client(cluster)  # a running scheduler: `dask scheduler`, `dask worker`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--sigma", type=float, default=2.0)
    parser.add_argument("--cluster", default="cpu", help="cpu, cuda or a scheduler's address")
    parser.add_argument("--make", type=float, metavar="GIB", help="first write a random input")
    parser.add_argument("--plane", type=int, default=2048, help="the made input's plane width")
    args = parser.parse_args()
    with connect(args.cluster) as client:
        if args.make:
            make(args.source, args.make, args.plane)
        volume = da.from_zarr(args.source)
        print(f"{volume.shape} {volume.dtype}, {volume.nbytes / 2**30:.1f} GiB in "
              f"{volume.npartitions} chunks; workers: {client.submit(gpu_conv.backend).result()}")
        start = time.perf_counter()
        ndimage.gaussian_filter(volume, args.sigma).to_zarr(args.target, mode="w")
        print(f"gaussian_filter sigma {args.sigma}: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
