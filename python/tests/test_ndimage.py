"""gpu_conv.ndimage against scipy.ndimage: every function, mode, element type and axis, the
output argument's forms, and SciPy's argument errors. NumPy arrays run on the GPU where one
is found, else on the CPU backend (`gpu_conv.backend()` says which)."""

import threading

import numpy as np
import pytest
from scipy import ndimage as sp

import gpu_conv
from gpu_conv import ndimage as gc

MODES = ["reflect", "constant", "nearest", "mirror", "wrap", "grid-mirror", "grid-constant", "grid-wrap"]
ON_GPU = not gpu_conv.backend().startswith("cpu")
# f32 arithmetic on the GPU and the CPU backend, f64 for float64 data.
F32_TOL = 2e-5


def rng():
    return np.random.default_rng()


def close(actual, expected, tol=F32_TOL):
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=0, atol=tol * scale)


def separable_cases(ndim):
    """(name, gpu_conv call, scipy call) for every separable function on an array of ``ndim``."""
    return [
        ("gaussian_filter", lambda m, x, **k: m.gaussian_filter(x, 1.5, **k)),
        ("gaussian_filter order", lambda m, x, **k: m.gaussian_filter(x, [1.0] * ndim, order=[1] + [0] * (ndim - 1), **k)),
        ("gaussian_filter1d", lambda m, x, **k: m.gaussian_filter1d(x, 2.0, axis=0, **k)),
        ("gaussian_filter1d order 2", lambda m, x, **k: m.gaussian_filter1d(x, 1.2, axis=-1, order=2, **k)),
        ("uniform_filter", lambda m, x, **k: m.uniform_filter(x, 4, **k)),
        ("uniform_filter1d", lambda m, x, **k: m.uniform_filter1d(x, 5, axis=0, origin=1, **k)),
        ("sobel", lambda m, x, **k: m.sobel(x, axis=0, **k)),
        ("prewitt", lambda m, x, **k: m.prewitt(x, axis=-1, **k)),
        ("laplace", lambda m, x, **k: m.laplace(x, **k)),
        ("gaussian_laplace", lambda m, x, **k: m.gaussian_laplace(x, 1.3, **k)),
        ("gaussian_gradient_magnitude", lambda m, x, **k: m.gaussian_gradient_magnitude(x, 1.1, **k)),
        ("correlate1d", lambda m, x, **k: m.correlate1d(x, [1.0, -2.0, 0.5, 3.0], axis=0, **k)),
        ("convolve1d", lambda m, x, **k: m.convolve1d(x, [1.0, -2.0, 0.5, 3.0], axis=-1, origin=-1, **k)),
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(37,), (19, 23), (7, 9, 11)])
def test_every_function_and_mode_matches_scipy(mode, shape):
    x = rng().standard_normal(shape).astype(np.float32)
    for name, f in separable_cases(len(shape)):
        ours = f(gc, x, mode=mode, cval=0.75)
        theirs = f(sp, x.astype(np.float64), mode=mode, cval=0.75)
        assert ours.dtype == np.float32, name
        close(ours, theirs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,weights", [((40,), (5,)), ((21, 18), (3, 4)), ((9, 8, 10), (3, 2, 3))])
def test_correlate_and_convolve_match_scipy(mode, shape, weights):
    x = rng().standard_normal(shape).astype(np.float32)
    w = rng().standard_normal(weights)
    origin = [-(n // 2) for n in weights]
    for f in ("correlate", "convolve"):
        ours = getattr(gc, f)(x, w, mode=mode, cval=-0.5, origin=origin)
        theirs = getattr(sp, f)(x.astype(np.float64), w, mode=mode, cval=-0.5, origin=origin)
        close(ours, theirs)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_zero_dimensional_inputs_as_scipy(dtype):
    x = np.array(7, dtype=dtype)
    calls = [
        lambda m, **k: m.gaussian_filter(x, 1.0, **k),
        lambda m, **k: m.uniform_filter(x, 3, **k),
        lambda m, **k: m.laplace(x, **k),
        lambda m, **k: m.gaussian_laplace(x, 1.0, **k),
        lambda m, **k: m.gaussian_gradient_magnitude(x, 1.0, **k),
        lambda m, **k: m.correlate(x, np.array(2.5), **k),
        lambda m, **k: m.convolve(x, np.array(-0.5), **k),
    ]
    for f in calls:
        ours, exact = f(gc), f(sp, output=np.float64)
        assert ours.shape == () and ours.dtype == f(sp).dtype
        # Integer outputs round to nearest and saturate, where SciPy truncates.
        close(ours, np.clip(np.round(exact), 0, 255) if dtype == "uint8" else exact)
        out = np.empty((), np.float64)
        assert f(gc, output=out) is out
        close(out, exact)
    for f in (gc.sobel, gc.gaussian_filter1d, gc.uniform_filter1d):
        with pytest.raises(ValueError):
            f(x, 1) if f is not gc.sobel else f(x)


def test_masks_wider_than_the_input():
    x = rng().standard_normal((6, 5)).astype(np.float32)
    w = rng().standard_normal((9, 11))
    for mode in ("reflect", "mirror", "wrap", "nearest", "constant"):
        close(gc.correlate(x, w, mode=mode), sp.correlate(x.astype(np.float64), w, mode=mode))
    close(gc.gaussian_filter1d(x, 4.0, axis=1), sp.gaussian_filter1d(x.astype(np.float64), 4.0, axis=1))


def test_axes_select_the_filtered_axes():
    x = rng().standard_normal((8, 9, 3)).astype(np.float32)
    d = x.astype(np.float64)
    close(gc.gaussian_filter(x, [1.0, 2.0], axes=(0, 1)), sp.gaussian_filter(d, [1.0, 2.0], axes=(0, 1)))
    close(gc.uniform_filter(x, 3, axes=[-2]), sp.uniform_filter(d, 3, axes=[-2]))
    w = rng().standard_normal((3, 3))
    close(gc.correlate(x, w, axes=(0, 1)), sp.correlate(d, w, axes=(0, 1)))
    close(gc.laplace(x, axes=(1, 2)), sp.laplace(d, axes=(1, 2)))
    close(gc.gaussian_laplace(x, 1.0, axes=(0, 1)), sp.gaussian_laplace(d, 1.0, axes=(0, 1)))


def test_unordered_axes_place_weights_and_origins_as_scipy():
    # SciPy lays the weights' axes on the sorted axes, and the origins on the axes as given
    # (on the input's own axes where ``axes`` names them all).
    x = rng().standard_normal((8, 9, 7)).astype(np.float32)
    d = x.astype(np.float64)
    w = rng().standard_normal((2, 3))
    for f in ("correlate", "convolve"):
        for axes, origin in (((2, 0), (1, -1)), ((2, 0), (-1, 0)), ((2, 1), (1, 0))):
            ours = getattr(gc, f)(x, w, axes=axes, origin=origin)
            close(ours, getattr(sp, f)(d, w, axes=axes, origin=origin))
        for m in (gc, sp):
            with pytest.raises(ValueError, match="Invalid origin"):
                getattr(m, f)(d, w, axes=(2, 1), origin=(0, 1))
        close(getattr(gc, f)(x[0], w, axes=(1, 0), origin=(-1, 1)),
              getattr(sp, f)(d[0], w, axes=(1, 0), origin=(-1, 1)))
    close(gc.gaussian_filter(x, [1.0, 2.0], axes=(2, 0), order=[1, 0], mode=["wrap", "constant"]),
          sp.gaussian_filter(d, [1.0, 2.0], axes=(2, 0), order=[1, 0], mode=["wrap", "constant"]))
    close(gc.uniform_filter(x, [3, 4], axes=(2, 0), origin=[1, -1]),
          sp.uniform_filter(d, [3, 4], axes=(2, 0), origin=[1, -1]))


def test_per_axis_modes_radius_and_truncate():
    x = rng().standard_normal((15, 16)).astype(np.float32)
    d = x.astype(np.float64)
    modes = ["wrap", "mirror"]
    close(gc.gaussian_filter(x, 1.5, mode=modes), sp.gaussian_filter(d, 1.5, mode=modes))
    close(gc.gaussian_filter(x, 1.5, radius=[2, 5]), sp.gaussian_filter(d, 1.5, radius=[2, 5]))
    close(gc.gaussian_filter(x, 2.0, truncate=2.5), sp.gaussian_filter(d, 2.0, truncate=2.5))
    close(gc.gaussian_laplace(x, 1.0, truncate=3.0), sp.gaussian_laplace(d, 1.0, truncate=3.0))
    close(gc.sobel(x, 1, mode=["nearest", "wrap"]), sp.sobel(d, 1, mode=["nearest", "wrap"]))


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int8", "int16", "int32", "uint32", "float16", "float32", "float64"])
def test_element_types_keep_scipys_output_type(dtype):
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        low, high = max(info.min, -30000), min(info.max, 60000)
        x = rng().integers(low, high, size=(17, 19), endpoint=True).astype(dtype)
    else:
        x = rng().standard_normal((17, 19)).astype(dtype)
    ours = gc.uniform_filter(x, 3)
    assert ours.dtype == x.dtype
    exact = sp.uniform_filter(x.astype(np.float64), 3)
    if info is not None:
        # Rounded to nearest (SciPy truncates), within one unit of the f32 sum.
        assert np.max(np.abs(ours.astype(np.float64) - exact)) <= 1.0
    else:
        tol = {"float16": 2e-3, "float32": F32_TOL, "float64": 1e-12}[dtype]
        close(ours, exact, tol)


def test_bfloat16_through_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = rng().standard_normal((20, 21)).astype(ml_dtypes.bfloat16)
    ours = gc.gaussian_filter(x, 1.0)
    assert ours.dtype == x.dtype
    close(ours.astype(np.float64), sp.gaussian_filter(x.astype(np.float64), 1.0), 1e-2)


def test_output_as_dtype_array_and_the_input_itself():
    x = rng().standard_normal((12, 13)).astype(np.float32)
    expected = sp.gaussian_filter(x.astype(np.float64), 1.0)
    close(gc.gaussian_filter(x, 1.0, output=np.float64), expected)
    out = np.empty((12, 13), dtype=np.float32)
    assert gc.gaussian_filter(x, 1.0, output=out) is out
    close(out, expected)
    strided = np.empty((12, 26), dtype=np.float32)[:, ::2]
    gc.gaussian_filter(x, 1.0, output=strided)
    close(strided, expected)
    y = x.copy()
    gc.gaussian_filter(y, 1.0, output=y)
    close(y, expected)
    u8 = gc.gaussian_filter((x * 40 + 128).clip(0, 255).astype(np.uint8), 1.0, output="float32")
    assert u8.dtype == np.float32


def test_any_layout_of_input():
    base = rng().standard_normal((30, 40)).astype(np.float32)
    for x in (np.asfortranarray(base), base[::-1, ::2], base.T, base[3:20, 5:33]):
        x.flags.writeable = False
        close(gc.gaussian_filter(x, 1.2, mode="mirror"), sp.gaussian_filter(x.astype(np.float64), 1.2, mode="mirror"))


def test_big_endian_input():
    x = rng().standard_normal((10, 11)).astype(">f8")
    close(gc.sobel(x, 0), sp.sobel(x, 0), 1e-12)


def test_lists_are_arrays():
    close(gc.correlate1d([1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0]), sp.correlate1d(np.array([1.0, 2.0, 3.0, 4.0]), [1.0, 1.0, 1.0]))


def test_scipys_errors():
    x = np.zeros((5, 6), dtype=np.float32)
    with pytest.raises(RuntimeError, match="boundary mode not supported"):
        gc.gaussian_filter(x, 1.0, mode="bogus")
    with pytest.raises(RuntimeError, match="sequence argument must have length"):
        gc.gaussian_filter(x, [1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError, match="no filter weights"):
        gc.correlate1d(x, [])
    with pytest.raises(RuntimeError, match="incorrect shape"):
        gc.correlate(x, np.ones(3))
    with pytest.raises(RuntimeError, match="incorrect filter size"):
        gc.uniform_filter(x, 0)
    with pytest.raises(ValueError, match="Invalid origin"):
        gc.correlate1d(x, [1.0, 1.0, 1.0], origin=2)
    with pytest.raises(ValueError, match="axes must be unique"):
        gc.gaussian_filter(x, 1.0, axes=(0, 0))
    with pytest.raises(ValueError, match="order must be non-negative"):
        gc.gaussian_filter(x, 1.0, order=-1)
    with pytest.raises(RuntimeError, match="output shape not correct"):
        gc.sobel(x, output=np.empty((2, 2), dtype=np.float32))
    with pytest.raises(TypeError, match="unexpected keyword"):
        gc.gaussian_laplace(x, 1.0, bogus=1)
    with pytest.raises(TypeError, match="int64"):
        gc.sobel(np.arange(12).reshape(3, 4))
    with pytest.raises(TypeError, match="Complex"):
        gc.sobel(np.ones((3, 3), dtype=np.complex64))
    with pytest.raises(ValueError, match="taps"):
        gc.correlate1d(x, np.ones((1 << 24) + 1))
    # The library's own errors, as ValueError with its message.
    with pytest.raises(ValueError, match="sigma"):
        gc.gaussian_filter(x, -1.0)
    with pytest.raises(ValueError, match="order"):
        gc.gaussian_filter1d(x, 1.0, order=3)
    # Still usable afterwards.
    close(gc.sobel(x + 1), np.zeros((5, 6)))


def test_threads_share_the_engine():
    inputs = [rng().standard_normal((64 + i, 48)).astype(np.float32) for i in range(16)]
    results = [None] * len(inputs)

    def work(i):
        results[i] = gc.gaussian_filter(inputs[i], 1.0 + i % 3, mode=MODES[i % 5])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, x in enumerate(inputs):
        close(results[i], sp.gaussian_filter(x.astype(np.float64), 1.0 + i % 3, mode=MODES[i % 5]))


def test_backend_is_reported():
    assert gpu_conv.backend().startswith("cpu") or gpu_conv.backend().startswith("cuda:0")
