"""SciPy's argument rules for the ndimage filters: modes and their aliases, per-axis
sequences, axes, origins and sizes, with the exceptions and messages SciPy raises."""

from __future__ import annotations

import numbers
import operator
from collections.abc import Iterable, Sequence

import numpy as np

# Every name scipy.ndimage's filters accept, and the mode the library runs for it.
_MODES = {
    "reflect": "reflect",
    "grid-mirror": "reflect",
    "constant": "constant",
    "grid-constant": "constant",
    "nearest": "nearest",
    "mirror": "mirror",
    "wrap": "wrap",
    "grid-wrap": "wrap",
}


def mode_name(mode: object) -> str:
    """The library's name of one SciPy mode; RuntimeError as SciPy for an unknown one."""
    if isinstance(mode, str) and mode in _MODES:
        return _MODES[mode]
    raise RuntimeError("boundary mode not supported")


def normalize_sequence(value: object, rank: int, name: str) -> list:
    """A scalar repeated ``rank`` times, or a sequence of exactly ``rank`` values (SciPy's
    ``_normalize_sequence``)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return [value] * rank
    values = list(value)
    if len(values) != rank:
        raise RuntimeError(f"sequence argument must have length equal to input rank ({name})")
    return values


def modes(mode: object, rank: int) -> list[str]:
    """One library mode name per filtered axis."""
    return [mode_name(m) for m in normalize_sequence(mode, rank, "mode")]


def check_axes(axes: object, ndim: int) -> list[int] | None:
    """``axes`` as distinct non-negative axes of an ``ndim``-dimensional input, or ``None``
    for every axis (SciPy's ``_check_axes``)."""
    if axes is None:
        return None
    if isinstance(axes, numbers.Integral):
        axes = [axes]
    elif not isinstance(axes, Iterable):
        raise ValueError("axes must be an integer, iterable of integers, or None")
    resolved = []
    for axis in axes:
        axis = operator.index(axis)
        if not -ndim <= axis < ndim:
            raise ValueError("axes must be in range [-ndim, ndim)")
        resolved.append(axis % ndim)
    if len(set(resolved)) != len(resolved):
        raise ValueError("axes must be unique")
    return resolved


# NumPy's error for an axis out of range (``numpy.exceptions`` from NumPy 1.25 on).
_AxisError = getattr(getattr(np, "exceptions", np), "AxisError")


def check_axis(axis: object, ndim: int) -> int:
    """``axis`` as a non-negative axis of an ``ndim``-dimensional input (NumPy's rule and
    ``AxisError``, a ``ValueError`` and ``IndexError``)."""
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise _AxisError(axis, ndim)
    return axis % ndim



def integers(values: Sequence, name: str) -> list[int]:
    """Each value as an int; TypeError as NumPy for a non-integer."""
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"{name} must be integers") from None


def origins(origin: object, sizes: Sequence[int]) -> list[int]:
    """One origin per mask axis, each within SciPy's bounds for the mask's extent there."""
    return checked_origins(integers(normalize_sequence(origin, len(sizes), "origin"), "origin"), sizes)


def dense_axes(
    axes: list[int] | None, ndim: int, origin: object, shape: Sequence[int]
) -> tuple[list[int] | None, list[int]]:
    """The axes a ``weights`` array of ``shape`` spans and one origin per weights axis, as
    SciPy places them: the weights' axes lie on ``axes`` in increasing order, while the
    origins follow ``axes`` as given (or the input's axes where ``axes`` names them all)."""
    given = integers(normalize_sequence(origin, len(shape), "origin"), "origin")
    if axes is None:
        return None, checked_origins(given, shape)
    placed = sorted(axes)
    by_axis = dict(zip(axes if len(axes) < ndim else placed, given))
    return placed, checked_origins([by_axis[a] for a in placed], shape)


def checked_origins(result: list[int], sizes: Sequence[int]) -> list[int]:
    """``result``, each origin checked against SciPy's bounds for the mask's extent there."""
    for o, size in zip(result, sizes):
        if not -(size // 2) <= o <= (size - 1) // 2:
            raise ValueError(
                "Invalid origin; origin must satisfy -(weights.shape[k] // 2) <= origin[k] <= "
                "(weights.shape[k]-1) // 2"
            )
    return result


def sigmas(sigma: object, rank: int) -> list[float]:
    """One standard deviation per filtered axis."""
    return [float(s) for s in normalize_sequence(sigma, rank, "sigma")]


def radius(value: object, rank: int) -> list[int] | None:
    """SciPy's ``radius`` per filtered axis, each a non-negative integer, or ``None``."""
    if value is None:
        return None
    radii = integers(normalize_sequence(value, rank, "radius"), "radius")
    if any(r < 0 for r in radii):
        raise ValueError("radius must be a nonnegative integer")
    return radii


def orders(order: object, rank: int) -> list[int]:
    """One derivative order per filtered axis, each non-negative."""
    result = integers(normalize_sequence(order, rank, "order"), "order")
    if any(o < 0 for o in result):
        raise ValueError("order must be non-negative")
    return result
