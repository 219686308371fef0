"""The kinds of arrays the filters take (NumPy arrays, CuPy arrays, PyTorch CUDA tensors),
their element types, and the plan of which types the engine computes in."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

import numpy as np

from . import _native

# The element types the engine reads and writes itself.
NATIVE = ("uint8", "uint16", "float16", "bfloat16", "float32", "float64")
# The pairs (input, output) it filters natively: one type into itself, or a type of `f32`
# arithmetic into `float32`.
NATIVE_PAIRS = {(t, t) for t in NATIVE} | {
    (t, "float32") for t in ("uint8", "uint16", "float16", "bfloat16")
}
# Integer types read in a float type that holds each of their values exactly.
EXACT_IN = {"int8": "float32", "int16": "float32", "int32": "float64", "uint32": "float64"}
INTEGER = {"uint8", "uint16", "int8", "int16", "int32", "uint32", "int64", "uint64"}


# Names of the element types seen so far, by type object (NumPy's name is slow to make).
_NAMES: dict = {}


def dtype_name(dtype: object) -> str:
    """NumPy's name of a NumPy, ml_dtypes or PyTorch element type."""
    try:
        return _NAMES[dtype]
    except (KeyError, TypeError):
        pass
    name = str(dtype)
    if name.startswith("torch."):
        name = name[len("torch."):]
    else:
        name = np.dtype(dtype).name
    try:
        _NAMES[dtype] = name
    except TypeError:
        pass
    return name


def _unsupported(name: str) -> TypeError:
    hint = {
        "int64": "values beyond 2**53 have no exact float; pass .astype(numpy.float64)",
        "uint64": "values beyond 2**53 have no exact float; pass .astype(numpy.float64)",
        "bool": "pass .astype(numpy.uint8)",
    }.get(name, "complex and object arrays are not filtered")
    return TypeError(f"gpu_conv does not filter arrays of dtype {name}: {hint}")


@dataclass(frozen=True)
class Plan:
    """The types one call computes in: the input converted to ``work_in`` (where it is not
    already), filtered into ``work_out``, then rounded and converted into ``output``."""

    work_in: str
    work_out: str
    output: str


# Output types results are rounded into beyond those read exactly.
WIDE_OUT = {"int64": "float64", "uint64": "float64"}


@functools.lru_cache(maxsize=None)
def plan(input_type: str, output_type: str) -> Plan:
    """Which types the engine runs a call from ``input_type`` into ``output_type`` in."""
    if input_type not in NATIVE and input_type not in EXACT_IN:
        raise _unsupported(input_type)
    if output_type not in NATIVE and output_type not in EXACT_IN and output_type not in WIDE_OUT:
        raise _unsupported(output_type)
    if (input_type, output_type) in NATIVE_PAIRS:
        return Plan(input_type, output_type, output_type)
    # float64 where either side needs its precision, else float32.
    wide = "float64" in (input_type, output_type) or any(
        {**EXACT_IN, **WIDE_OUT}.get(n) == "float64" for n in (input_type, output_type)
    )
    real = "float64" if wide else "float32"
    work_in = input_type if (input_type, real) in NATIVE_PAIRS else real
    return Plan(work_in, real, output_type)


def rounded(values, name: str, xp):
    """``values`` (a float array) in the integer or float type ``name``: integers rounded to
    nearest (ties to even) and saturated to the type's range, as the engine rounds."""
    if name in INTEGER:
        info = np.iinfo(name)
        values = xp.clip(xp.round(values), info.min, info.max)
    return values


# ---------------------------------------------------------------------------------------
# Device arrays.


# The top-level module of each array type seen so far.
_MODULES: dict = {}


def _module_of(array) -> str:
    kind = type(array)
    name = _MODULES.get(kind)
    if name is None:
        name = _MODULES[kind] = kind.__module__.split(".")[0]
    return name


def is_torch(array) -> bool:
    return _module_of(array) == "torch"


def is_device_array(array) -> bool:
    """Whether ``array`` is a CuPy array or a PyTorch CUDA tensor (filtered as it is)."""
    name = _module_of(array)
    if name == "torch":
        return array.is_cuda
    return name == "cupy" and isinstance(array, sys.modules["cupy"].ndarray)


# DLPack's device type of CUDA memory.
_DLPACK_CUDA = 2


def is_foreign_device_array(array) -> bool:
    """Whether ``array`` is another library's CUDA array (a JAX array, say), which DLPack or
    the CUDA Array Interface lends as a CuPy array."""
    if is_torch(array) or _module_of(array) in ("cupy", "numpy"):
        return False
    device = getattr(array, "__dlpack_device__", None)
    if device is not None:
        return device()[0] == _DLPACK_CUDA
    return hasattr(array, "__cuda_array_interface__")


def as_cupy(array):
    """A CuPy view of another library's CUDA array, without a copy."""
    import cupy

    if hasattr(array, "__dlpack__"):
        return cupy.from_dlpack(array)
    return cupy.asarray(array)


def from_dlpack_like(array, result):
    """``result`` (a CuPy array) as an array of ``array``'s library, through DLPack, no copy."""
    import importlib

    name = _module_of(array)
    root = importlib.import_module("jax" if name == "jaxlib" else name)
    module = getattr(root, "numpy", root) if not hasattr(root, "from_dlpack") else root
    return module.from_dlpack(result)


def device_of(array) -> int:
    """The ordinal of the GPU that holds a CuPy array or PyTorch CUDA tensor."""
    if is_torch(array):
        return array.device.index or 0
    return array.device.id


# The kind of each array library, by whether it is PyTorch.
_KINDS: dict = {}


class DeviceKind:
    """The array library of a device input: makes, converts and copies its arrays."""

    def __init__(self, torch: bool):
        self.torch = torch
        if torch:
            import torch as lib
        else:
            import cupy as lib
        self.lib = lib

    @staticmethod
    def of(array) -> "DeviceKind":
        """The kind of ``array`` (made once per library)."""
        torch = is_torch(array)
        kind = _KINDS.get(torch)
        if kind is None:
            kind = _KINDS[torch] = DeviceKind(torch)
        return kind

    def dtype(self, name: str):
        if self.torch:
            return getattr(self.lib, name)
        return np.dtype(name)

    def empty(self, shape, name: str, like, device: int):
        """A new array of ``shape`` and type ``name`` on ``like``'s GPU, number ``device``."""
        if self.torch:
            return self.lib.empty(tuple(shape), dtype=self.dtype(name), device=like.device)
        if device == self.lib.cuda.runtime.getDevice():
            return self.lib.empty(shape, dtype=name)
        with like.device:
            return self.lib.empty(shape, dtype=name)

    def stream(self, like) -> int:
        """The handle of the caller's current stream on ``like``'s GPU (the stream its next
        kernels run on), which the engine orders its work between."""
        if self.torch:
            return self.lib.cuda.current_stream(like.device).cuda_stream
        return self.lib.cuda.get_current_stream().ptr

    def contiguous(self, array):
        if self.torch:
            return array.detach().contiguous()
        return self.lib.ascontiguousarray(array)

    def is_contiguous(self, array) -> bool:
        if self.torch:
            return array.is_contiguous()
        return array.flags.c_contiguous

    def astype(self, array, name: str):
        if self.torch:
            return array.to(self.dtype(name))
        return array.astype(name)

    def round_into(self, values, name: str):
        """``values`` rounded as the engine rounds and converted to ``name``."""
        if self.torch:
            if name in INTEGER:
                info = np.iinfo(name)
                values = self.lib.clamp(self.lib.round(values), int(info.min), int(info.max))
            return values.to(self.dtype(name))
        return rounded(values, name, self.lib).astype(name)

    def address(self, array) -> int:
        if self.torch:
            return int(array.data_ptr())
        return int(array.data.ptr)

    def nbytes(self, array) -> int:
        if self.torch:
            return array.numel() * array.element_size()
        return array.nbytes

    def copy_into(self, target, source):
        if self.torch:
            target.copy_(source)
        else:
            target[...] = source


def backend_forced() -> str | None:
    """The backend ``GPU_CONV_BACKEND`` asks for (``cpu`` or ``cuda``), if any."""
    value = os.environ.get("GPU_CONV_BACKEND")
    if value not in (None, "", "cpu", "cuda"):
        print(f"gpu_conv: GPU_CONV_BACKEND={value!r} is not cpu or cuda; ignored", file=sys.stderr)
        return None
    return value or None


_GPU: list = []


def host_on_gpu() -> bool:
    """Whether NumPy arrays are filtered on the GPU (device 0), else on the CPU backend."""
    if not _GPU:
        forced = backend_forced()
        if forced == "cpu":
            _GPU.append(False)
        else:
            try:
                _native.gpu_info(0)
                _GPU.append(True)
            except RuntimeError:
                if forced == "cuda":
                    raise
                _GPU.append(False)
    return _GPU[0]
