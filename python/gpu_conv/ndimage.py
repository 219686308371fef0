"""``scipy.ndimage``'s linear filters on the GPU, with SciPy's names, signatures, defaults
and argument errors.

NumPy arrays (any strides and order) run through the engine's host pipeline with the GIL
released, so calls from several threads run at once; CuPy arrays and PyTorch CUDA tensors are
filtered where they are, on the GPU that holds them, ordered on the caller's current stream,
and the same kind of array is returned. Without a GPU (or with ``GPU_CONV_BACKEND=cpu``),
NumPy arrays are filtered by the library's CPU backend, on every core.

Differences from SciPy: integer outputs are rounded to nearest (ties to even) and saturated
to the type's range, where SciPy truncates and wraps around; data of every type but
``float64`` is filtered in ``float32`` arithmetic (``int32`` and ``uint32`` in ``float64``);
Gaussian derivatives go to order 2; ``int64``, ``uint64``, ``bool`` and complex inputs raise
``TypeError``.
"""

from __future__ import annotations

import functools

import numpy as np

from . import _args, _arrays, _native, _reach
from ._dask import accepts_dask

__all__ = [
    "convolve",
    "convolve1d",
    "correlate",
    "correlate1d",
    "gaussian_filter",
    "gaussian_filter1d",
    "gaussian_gradient_magnitude",
    "gaussian_laplace",
    "laplace",
    "prewitt",
    "sobel",
    "uniform_filter",
    "uniform_filter1d",
]


# The most taps a mask may have (the library's MAX_MASK_TAPS_1D).
_MAX_TAPS = 1 << 24


def _call(op: str, **fields) -> dict:
    """The arguments of one native call, with the defaults of the fields ``op`` leaves out."""
    call = {
        "op": op,
        "weights": None,
        "weights_shape": None,
        "axis": -1,
        "sigma": [0.0],
        "order": [0],
        "size": [1],
        "modes": ["reflect"],
        "cval": 0.0,
        "origin": [0],
        "truncate": 4.0,
        "radius": None,
        "axes": None,
    }
    call.update(fields)
    return call


def _input(input):
    """The input as an array: a device array as it is, anything else through NumPy."""
    if _arrays.is_device_array(input) or _arrays.is_foreign_device_array(input):
        return input
    array = np.asarray(input)
    if array.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _output_type(output, input) -> str:
    if output is None:
        return _arrays.dtype_name(input.dtype)
    if isinstance(output, (type, np.dtype, str)) or str(type(output)) == "<class 'torch.dtype'>":
        return _arrays.dtype_name(output)
    return _arrays.dtype_name(output.dtype)


def _given_output(output, shape):
    """The caller's output array, if ``output`` is one (shape checked as SciPy checks it)."""
    if output is None or isinstance(output, (type, np.dtype, str)):
        return None
    if str(type(output)) == "<class 'torch.dtype'>":
        return None
    if tuple(output.shape) != tuple(shape):
        raise RuntimeError("output shape not correct")
    return output


def _carrier(array: np.ndarray) -> np.ndarray:
    """The array as NumPy passes it to the native module (``bfloat16`` as its bits)."""
    return array.view(np.uint16) if array.dtype.name == "bfloat16" else array


def _on_host(input: np.ndarray, output, call: dict):
    out_name = _output_type(output, input)
    plan = _arrays.plan(_arrays.dtype_name(input.dtype), out_name)
    given = _given_output(output, input.shape)
    result = given if given is not None else np.empty(input.shape, dtype=out_name)
    source = input if input.dtype.name == plan.work_in else input.astype(plan.work_in)
    direct = (
        plan.work_out == out_name
        and result.flags.writeable
        and not np.may_share_memory(source, result)
    )
    target = result if direct else np.empty(input.shape, dtype=plan.work_out)
    types = (plan.work_in, plan.work_out)
    _native.filter_host(call, _carrier(source), _carrier(target), types, _arrays.host_on_gpu())
    if target is not result:
        result[...] = _arrays.rounded(target, out_name, np).astype(out_name, copy=False)
    return result


def _on_device(input, output, call: dict):
    kind = _arrays.DeviceKind.of(input)
    device = _arrays.device_of(input)
    shape = tuple(input.shape)
    out_name = _output_type(output, input)
    plan = _arrays.plan(_arrays.dtype_name(input.dtype), out_name)
    given = _given_output(output, shape)
    if given is not None and (
        not _arrays.is_device_array(given) or _arrays.device_of(given) != device
    ):
        raise ValueError(f"output must be an array on the input's GPU (device {device})")
    source = input
    if _arrays.dtype_name(source.dtype) != plan.work_in:
        source = kind.astype(source, plan.work_in)
    if not kind.is_contiguous(source):
        source = kind.contiguous(source)
    size = kind.nbytes(source)
    if size == 0:
        return given if given is not None else kind.empty(shape, out_name, input, device)
    start = kind.address(source)
    target = result = None
    if given is not None and plan.work_out == out_name and kind.is_contiguous(given):
        # The caller's output, unless it overlaps the input.
        address = kind.address(given)
        if address >= start + size or start >= address + kind.nbytes(given):
            target = result = given
    if target is None:
        target = kind.empty(shape, plan.work_out, input, device)
        result = given if given is not None else (
            target if plan.work_out == out_name else kind.empty(shape, out_name, input, device)
        )
    arrays = ((start, plan.work_in), (kind.address(target), plan.work_out))
    _native.filter_device(call, arrays, shape, (device, kind.stream(input)))
    if target is not result:
        kind.copy_into(result, kind.round_into(target, out_name))
    return result


def _scalar(input, output, call: dict):
    """A 0-d input, as SciPy filters it: along none of its (no) axes, so the input itself,
    times the one weight of a 0-d mask."""
    factor = call["weights"][0] if call["weights"] is not None else 1.0
    out_name = _output_type(output, input)
    _arrays.plan(_arrays.dtype_name(input.dtype), out_name)
    given = _given_output(output, ())
    if _arrays.is_device_array(input):
        kind = _arrays.DeviceKind.of(input)
        value = kind.round_into(kind.astype(input, "float64") * factor, out_name)
        if given is None:
            return value
        kind.copy_into(given, value)
        return given
    value = _arrays.rounded(np.asarray(input, dtype=np.float64) * factor, out_name, np)
    if given is None:
        return np.asarray(value).astype(out_name)
    given[...] = value
    return given


def _filter(input, output, call: dict):
    if len(input.shape) == 0:
        return _scalar(input, output, call)
    if _arrays.is_device_array(input):
        return _on_device(input, output, call)
    if _arrays.is_foreign_device_array(input):
        if _arrays.is_foreign_device_array(output):
            output = _arrays.as_cupy(output)
        result = _on_device(_arrays.as_cupy(input), output, call)
        return _arrays.from_dlpack_like(input, result)
    return _on_host(input, output, call)


def _ndim(input) -> int:
    return len(input.shape)


def _filtered_rank(input, axes) -> tuple[list[int] | None, int]:
    axes = _args.check_axes(axes, _ndim(input))
    return axes, _ndim(input) if axes is None else len(axes)


def _weights(weights) -> np.ndarray:
    if _arrays.is_device_array(weights):
        weights = weights.get() if hasattr(weights, "get") else weights.cpu().numpy()
    weights = np.asarray(weights, dtype=np.float64)
    if weights.size > _MAX_TAPS:
        raise ValueError(f"weights of {weights.size} taps: at most 2**24 are taken")
    return weights


def _weighted1d(op, input, weights, axis, output, mode, cval, origin):
    input = _input(input)
    weights = _weights(weights)
    if weights.ndim != 1 or weights.shape[0] < 1:
        raise RuntimeError("no filter weights given")
    axis = _args.check_axis(axis, _ndim(input))
    # Convolution's origin, mirrored, falls within the same bounds.
    origin = _args.origins(origin, [weights.shape[0]])[0]
    return _filter(input, output, _call(
        op, weights=weights.tolist(), axis=axis,
        modes=[_args.mode_name(mode)], cval=float(cval), origin=[origin],
    ))


@accepts_dask(functools.partial(_reach.weighted1d, convolution=False))
def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Correlate ``input`` with the 1-D ``weights`` along ``axis`` (``scipy.ndimage.correlate1d``)."""
    return _weighted1d("correlate1d", input, weights, axis, output, mode, cval, origin)


@accepts_dask(functools.partial(_reach.weighted1d, convolution=True))
def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Convolve ``input`` with the 1-D ``weights`` along ``axis`` (``scipy.ndimage.convolve1d``)."""
    return _weighted1d("convolve1d", input, weights, axis, output, mode, cval, origin)


def _dense(op, input, weights, output, mode, cval, origin, axes):
    input = _input(input)
    weights = _weights(weights)
    axes, rank = _filtered_rank(input, axes)
    if weights.ndim != rank:
        raise RuntimeError("filter weights array has incorrect shape.")
    if weights.size == 0:
        raise RuntimeError("no filter weights given")
    # Convolution's origins, mirrored, fall within the same bounds.
    axes, origins = _args.dense_axes(axes, _ndim(input), origin, weights.shape)
    return _filter(input, output, _call(
        op, weights=weights.ravel().tolist(), weights_shape=list(weights.shape),
        modes=[_args.mode_name(mode)], cval=float(cval), origin=origins, axes=axes,
    ))


@accepts_dask(functools.partial(_reach.dense, convolution=False))
def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """Multidimensional correlation with ``weights`` (``scipy.ndimage.correlate``)."""
    return _dense("correlate", input, weights, output, mode, cval, origin, axes)


@accepts_dask(functools.partial(_reach.dense, convolution=True))
def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """Multidimensional convolution with ``weights`` (``scipy.ndimage.convolve``)."""
    return _dense("convolve", input, weights, output, mode, cval, origin, axes)


@accepts_dask(_reach.gaussian_filter1d)
def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    """1-D Gaussian filter, or its ``order``-th derivative (``scipy.ndimage.gaussian_filter1d``)."""
    input = _input(input)
    axis = _args.check_axis(axis, _ndim(input))
    return _filter(input, output, _call(
        "gaussian_filter1d", sigma=[float(sigma)], axis=axis, order=_args.orders(order, 1),
        modes=[_args.mode_name(mode)], cval=float(cval), truncate=float(truncate),
        radius=_args.radius(radius, 1),
    ))


@accepts_dask(_reach.gaussian_filter)
def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                    *, radius=None, axes=None):
    """Multidimensional Gaussian filter (``scipy.ndimage.gaussian_filter``)."""
    input = _input(input)
    axes, rank = _filtered_rank(input, axes)
    return _filter(input, output, _call(
        "gaussian_filter", sigma=_args.sigmas(sigma, rank), order=_args.orders(order, rank),
        modes=_args.modes(mode, rank), cval=float(cval), truncate=float(truncate),
        radius=_args.radius(radius, rank), axes=axes,
    ))


@accepts_dask(_reach.uniform_filter1d)
def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """1-D uniform (box mean) filter (``scipy.ndimage.uniform_filter1d``)."""
    input = _input(input)
    axis = _args.check_axis(axis, _ndim(input))
    size = _args.integers([size], "size")[0]
    if size < 1:
        raise RuntimeError("incorrect filter size")
    origin = _args.origins(origin, [size])[0]
    return _filter(input, output, _call(
        "uniform_filter1d", size=[size], axis=axis, modes=[_args.mode_name(mode)],
        cval=float(cval), origin=[origin],
    ))


@accepts_dask(_reach.uniform_filter)
def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    """Multidimensional uniform (box mean) filter (``scipy.ndimage.uniform_filter``)."""
    input = _input(input)
    axes, rank = _filtered_rank(input, axes)
    sizes = _args.integers(_args.normalize_sequence(size, rank, "size"), "size")
    if any(s < 1 for s in sizes):
        raise RuntimeError("incorrect filter size")
    return _filter(input, output, _call(
        "uniform_filter", size=sizes, modes=_args.modes(mode, rank), cval=float(cval),
        origin=_args.origins(origin, sizes), axes=axes,
    ))


@accepts_dask(_reach.derivative)
def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0):
    """Sobel derivative along ``axis`` (``scipy.ndimage.sobel``)."""
    input = _input(input)
    axis = _args.check_axis(axis, _ndim(input))
    return _filter(input, output, _call(
        "sobel", axis=axis, modes=_args.modes(mode, _ndim(input)), cval=float(cval),
    ))


@accepts_dask(_reach.derivative)
def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0):
    """Prewitt derivative along ``axis`` (``scipy.ndimage.prewitt``)."""
    input = _input(input)
    axis = _args.check_axis(axis, _ndim(input))
    return _filter(input, output, _call(
        "prewitt", axis=axis, modes=_args.modes(mode, _ndim(input)), cval=float(cval),
    ))


@accepts_dask(_reach.laplace)
def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    """Laplace filter from second differences (``scipy.ndimage.laplace``)."""
    input = _input(input)
    axes, rank = _filtered_rank(input, axes)
    return _filter(input, output, _call(
        "laplace", modes=_args.modes(mode, rank), cval=float(cval), axes=axes,
    ))


def _gaussian_terms(op, input, sigma, output, mode, cval, axes, kwargs):
    unknown = set(kwargs) - {"truncate", "radius"}
    if unknown:
        name = sorted(unknown)[0]
        raise TypeError(f"{op}() got an unexpected keyword argument '{name}'")
    input = _input(input)
    axes, rank = _filtered_rank(input, axes)
    return _filter(input, output, _call(
        op, sigma=_args.sigmas(sigma, rank), modes=_args.modes(mode, rank), cval=float(cval),
        truncate=float(kwargs.get("truncate", 4.0)),
        radius=_args.radius(kwargs.get("radius"), rank), axes=axes,
    ))


@accepts_dask(_reach.gaussian_terms)
def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None, **kwargs):
    """Laplace filter from Gaussian second derivatives (``scipy.ndimage.gaussian_laplace``);
    ``kwargs`` (``truncate``, ``radius``) go to the Gaussian."""
    return _gaussian_terms("gaussian_laplace", input, sigma, output, mode, cval, axes, kwargs)


@accepts_dask(_reach.gaussian_terms)
def gaussian_gradient_magnitude(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None,
                                **kwargs):
    """Gradient magnitude from Gaussian derivatives
    (``scipy.ndimage.gaussian_gradient_magnitude``); ``kwargs`` go to the Gaussian."""
    return _gaussian_terms(
        "gaussian_gradient_magnitude", input, sigma, output, mode, cval, axes, kwargs
    )
