"""gpu_conv: ``scipy.ndimage``'s linear filters on NVIDIA GPUs, with kernels written in Rust.

>>> import numpy as np
>>> from gpu_conv import ndimage
>>> image = np.random.default_rng(0).random((512, 512), dtype=np.float32)
>>> smooth = ndimage.gaussian_filter(image, sigma=2.0)          # SciPy's defaults: reflect
>>> edges = ndimage.sobel(smooth, axis=0, mode="nearest")

NumPy arrays in give NumPy arrays out; CuPy arrays and PyTorch CUDA tensors stay on their GPU.
:func:`backend` says where NumPy arrays are filtered.
"""

from __future__ import annotations

from . import _arrays, _native, ndimage

__all__ = ["backend", "ndimage"]
__version__ = "0.1.0"


def backend() -> str:
    """Where NumPy arrays are filtered: ``"cuda:0 (<GPU name>, sm_XY)"``, or the CPU backend
    (``"cpu (<threads> threads, <vector instructions>)"``) where no GPU is found or
    ``GPU_CONV_BACKEND=cpu`` asks for it."""
    if not _arrays.host_on_gpu():
        return _native.cpu_info()
    name, (major, minor) = _native.gpu_info(0)
    return f"cuda:0 ({name}, sm_{major}{minor})"
