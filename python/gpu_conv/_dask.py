"""Dask arrays through the same filters: each chunk is filtered with a halo of its
neighbours' elements as deep as the filter's reach on each axis, so every chunk edge gives the
whole array's result.

At the array's edges a chunk has no halo and the filter's own boundary mode runs there, as on
a whole array; along axes in ``wrap`` mode the halo comes from the array's far end instead.
An axis the filter reaches across whole (reach at least its length) is gathered into one chunk.
Chunks are filtered by the same function on the workers: NumPy chunks through the host
pipeline with the GIL released, CuPy chunks on their GPU, each worker process with its own
engine, made once.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable

import numpy as np

from . import _arrays

# (call's arguments, input's rank) -> one (reach, mode) per axis.
ReachOf = Callable[[dict, int], list]


def is_dask_array(value) -> bool:
    """Whether ``value`` is a Dask array (without importing Dask where it is not loaded)."""
    module = sys.modules.get("dask.array")
    return module is not None and isinstance(value, module.Array)


def accepts_dask(reach: ReachOf):
    """Decorate a filter so that a Dask array in gives a lazy Dask array out."""

    def decorate(filter):
        signature = inspect.signature(filter)

        @functools.wraps(filter)
        def call(*args, **kwargs):
            if not is_dask_array(args[0] if args else kwargs.get("input")):
                return filter(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return _lazy(call, bound, reach)

        return call

    return decorate


class _Chunk:
    """One filter call with fixed arguments, applied to a chunk (picklable for workers)."""

    def __init__(self, filter, args: tuple, kwargs: dict):
        self.filter, self.args, self.kwargs = filter, args, kwargs

    def __call__(self, chunk):
        return self.filter(chunk, *self.args, **self.kwargs)


def _output_dtype(output, input_dtype) -> np.dtype:
    if output is None:
        dtype = np.dtype(input_dtype)
    elif isinstance(output, (type, np.dtype, str)):
        dtype = np.dtype(output)
    else:
        raise TypeError("output must be None or a dtype for Dask arrays: the result is lazy")
    _arrays.plan(_arrays.dtype_name(input_dtype), _arrays.dtype_name(dtype))
    return dtype


def _halos(array, reaches: list) -> tuple[dict, dict, dict]:
    """Dask's ``depth`` and ``boundary`` per axis, and the axes to gather into one chunk."""
    depth, boundary, whole = {}, {}, {}
    for axis, (reach, mode) in enumerate(reaches):
        blocks = array.numblocks[axis]
        if reach >= array.shape[axis] and blocks > 1:
            whole[axis] = -1
        needed = reach > 0 and blocks > 1 and axis not in whole
        depth[axis] = reach if needed else 0
        boundary[axis] = "periodic" if needed and mode == "wrap" else "none"
    return depth, boundary, whole


def _lazy(filter, bound: inspect.BoundArguments, reach: ReachOf):
    from dask.array.utils import meta_from_array

    array = bound.arguments["input"]
    dtype = _output_dtype(bound.arguments["output"], array.dtype)
    depth, boundary, whole = _halos(array, reach(bound.arguments, array.ndim))
    if whole:
        array = array.rechunk(whole)
    bound.arguments["output"] = dtype
    chunk = _Chunk(filter, bound.args[1:], bound.kwargs)
    meta = meta_from_array(array, ndim=array.ndim, dtype=dtype)
    if array.size == 0 or not any(depth.values()):
        return array.map_blocks(chunk, dtype=dtype, meta=meta, token=filter.__name__)
    return array.map_overlap(
        chunk, depth=depth, boundary=boundary, dtype=dtype, meta=meta, token=filter.__name__
    )
