"""How far each filter reaches along each axis, and its boundary mode there: the halo a chunk
of a Dask array needs from its neighbours for the filter to give the whole array's result.

Each function takes the call's arguments (by parameter name, defaults filled in) and the
input's rank, validates them with SciPy's rules, and returns one ``(reach, mode)`` per axis of
the input: ``reach`` the most elements the filter reads past an output element on either side,
``mode`` the library's name of the boundary mode on that axis.
"""

from __future__ import annotations

import numpy as np

from . import _args

Reach = list[tuple[int, str]]

# SciPy filters along an axis only where its sigma exceeds this.
_TINY_SIGMA = 1e-15


def _window(size: int, origin: int) -> int:
    """The reach of a correlation window of ``size`` taps centred at ``size // 2 + origin``."""
    left = size // 2 + origin
    return max(left, size - 1 - left)


def _convolution_origin(size: int, origin: int) -> int:
    """The origin of the correlation a convolution of ``size`` taps at ``origin`` runs as."""
    return -origin - (1 if size % 2 == 0 else 0)


def _gaussian(sigma: float, truncate: float, radius: int | None) -> int:
    """SciPy's half-width of a Gaussian of ``sigma`` (0 where it skips the axis)."""
    if sigma <= _TINY_SIGMA:
        return 0
    return radius if radius is not None else int(truncate * sigma + 0.5)


def _spread(ndim: int, axes: list[int] | None, reaches: list[int], modes: list[str]) -> Reach:
    """Per-axis reach and mode of a filter on ``axes`` (every axis when ``None``)."""
    axes = list(range(ndim)) if axes is None else axes
    result = [(0, "reflect")] * ndim
    for axis, reach, mode in zip(axes, reaches, modes):
        result[axis] = (reach, mode)
    return result


def _along(args: dict, ndim: int, reach: int) -> Reach:
    axis = _args.check_axis(args["axis"], ndim)
    return _spread(ndim, [axis], [reach], [_args.mode_name(args["mode"])])


def weighted1d(args: dict, ndim: int, convolution: bool) -> Reach:
    size = int(np.size(args["weights"]))
    if size < 1:
        raise RuntimeError("no filter weights given")
    origin = _args.origins(args["origin"], [size])[0]
    if convolution:
        origin = _convolution_origin(size, origin)
    return _along(args, ndim, _window(size, origin))


def dense(args: dict, ndim: int, convolution: bool) -> Reach:
    shape = np.shape(args["weights"])
    axes = _args.check_axes(args["axes"], ndim)
    if len(shape) != (ndim if axes is None else len(axes)):
        raise RuntimeError("filter weights array has incorrect shape.")
    if 0 in shape:
        raise RuntimeError("no filter weights given")
    axes, origins = _args.dense_axes(axes, ndim, args["origin"], shape)
    if convolution:
        origins = [_convolution_origin(s, o) for s, o in zip(shape, origins)]
    reaches = [_window(s, o) for s, o in zip(shape, origins)]
    return _spread(ndim, axes, reaches, [_args.mode_name(args["mode"])] * len(shape))


def gaussian_filter1d(args: dict, ndim: int) -> Reach:
    _args.orders(args["order"], 1)
    radius = _args.radius(args["radius"], 1)
    return _along(args, ndim, _gaussian(
        float(args["sigma"]), float(args["truncate"]), None if radius is None else radius[0]
    ))


def _gaussians(args: dict, ndim: int, truncate: float, radius: object) -> Reach:
    axes = _args.check_axes(args["axes"], ndim)
    rank = ndim if axes is None else len(axes)
    sigmas = _args.sigmas(args["sigma"], rank)
    radii = _args.radius(radius, rank) or [None] * rank
    reaches = [_gaussian(s, truncate, r) for s, r in zip(sigmas, radii)]
    return _spread(ndim, axes, reaches, _args.modes(args["mode"], rank))


def gaussian_filter(args: dict, ndim: int) -> Reach:
    axes = _args.check_axes(args["axes"], ndim)
    _args.orders(args["order"], ndim if axes is None else len(axes))
    return _gaussians(args, ndim, float(args["truncate"]), args["radius"])


def gaussian_terms(args: dict, ndim: int) -> Reach:
    """``gaussian_laplace`` and ``gaussian_gradient_magnitude``: a Gaussian derivative along
    each axis, smoothed by the Gaussian along the others, so each axis reaches its radius."""
    kwargs = args["kwargs"]
    return _gaussians(args, ndim, float(kwargs.get("truncate", 4.0)), kwargs.get("radius"))


def uniform_filter1d(args: dict, ndim: int) -> Reach:
    size = _args.integers([args["size"]], "size")[0]
    if size < 1:
        raise RuntimeError("incorrect filter size")
    return _along(args, ndim, _window(size, _args.origins(args["origin"], [size])[0]))


def uniform_filter(args: dict, ndim: int) -> Reach:
    axes = _args.check_axes(args["axes"], ndim)
    rank = ndim if axes is None else len(axes)
    sizes = _args.integers(_args.normalize_sequence(args["size"], rank, "size"), "size")
    if any(s < 1 for s in sizes):
        raise RuntimeError("incorrect filter size")
    origins = _args.origins(args["origin"], sizes)
    reaches = [_window(s, o) for s, o in zip(sizes, origins)]
    return _spread(ndim, axes, reaches, _args.modes(args["mode"], rank))


def derivative(args: dict, ndim: int) -> Reach:
    """``sobel`` and ``prewitt``: three taps along every axis."""
    _args.check_axis(args["axis"], ndim)
    return _spread(ndim, None, [1] * ndim, _args.modes(args["mode"], ndim))


def laplace(args: dict, ndim: int) -> Reach:
    axes = _args.check_axes(args["axes"], ndim)
    rank = ndim if axes is None else len(axes)
    return _spread(ndim, axes, [1] * rank, _args.modes(args["mode"], rank))
