from typing import Any, Literal, Sequence, Union

from numpy.typing import ArrayLike, DTypeLike

_Mode = Literal[
    "reflect", "grid-mirror", "constant", "grid-constant", "nearest", "mirror", "wrap", "grid-wrap"
]
_Modes = Union[_Mode, Sequence[_Mode]]
_Output = Union[None, DTypeLike, Any]
_Ints = Union[int, Sequence[int]]
_Floats = Union[float, Sequence[float]]
_Axes = Union[None, int, Sequence[int]]

def correlate1d(
    input: ArrayLike, weights: ArrayLike, axis: int = -1, output: _Output = None,
    mode: _Mode = "reflect", cval: float = 0.0, origin: int = 0,
) -> Any: ...
def convolve1d(
    input: ArrayLike, weights: ArrayLike, axis: int = -1, output: _Output = None,
    mode: _Mode = "reflect", cval: float = 0.0, origin: int = 0,
) -> Any: ...
def correlate(
    input: ArrayLike, weights: ArrayLike, output: _Output = None, mode: _Mode = "reflect",
    cval: float = 0.0, origin: _Ints = 0, *, axes: _Axes = None,
) -> Any: ...
def convolve(
    input: ArrayLike, weights: ArrayLike, output: _Output = None, mode: _Mode = "reflect",
    cval: float = 0.0, origin: _Ints = 0, *, axes: _Axes = None,
) -> Any: ...
def gaussian_filter1d(
    input: ArrayLike, sigma: float, axis: int = -1, order: int = 0, output: _Output = None,
    mode: _Mode = "reflect", cval: float = 0.0, truncate: float = 4.0, *, radius: int | None = None,
) -> Any: ...
def gaussian_filter(
    input: ArrayLike, sigma: _Floats, order: _Ints = 0, output: _Output = None,
    mode: _Modes = "reflect", cval: float = 0.0, truncate: float = 4.0, *,
    radius: _Ints | None = None, axes: _Axes = None,
) -> Any: ...
def uniform_filter1d(
    input: ArrayLike, size: int, axis: int = -1, output: _Output = None, mode: _Mode = "reflect",
    cval: float = 0.0, origin: int = 0,
) -> Any: ...
def uniform_filter(
    input: ArrayLike, size: _Ints = 3, output: _Output = None, mode: _Modes = "reflect",
    cval: float = 0.0, origin: _Ints = 0, *, axes: _Axes = None,
) -> Any: ...
def sobel(
    input: ArrayLike, axis: int = -1, output: _Output = None, mode: _Modes = "reflect",
    cval: float = 0.0,
) -> Any: ...
def prewitt(
    input: ArrayLike, axis: int = -1, output: _Output = None, mode: _Modes = "reflect",
    cval: float = 0.0,
) -> Any: ...
def laplace(
    input: ArrayLike, output: _Output = None, mode: _Modes = "reflect", cval: float = 0.0, *,
    axes: _Axes = None,
) -> Any: ...
def gaussian_laplace(
    input: ArrayLike, sigma: _Floats, output: _Output = None, mode: _Modes = "reflect",
    cval: float = 0.0, *, axes: _Axes = None, truncate: float = 4.0, radius: _Ints | None = None,
) -> Any: ...
def gaussian_gradient_magnitude(
    input: ArrayLike, sigma: _Floats, output: _Output = None, mode: _Modes = "reflect",
    cval: float = 0.0, *, axes: _Axes = None, truncate: float = 4.0, radius: _Ints | None = None,
) -> Any: ...
