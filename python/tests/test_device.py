"""CuPy arrays and PyTorch CUDA tensors: filtered where they are, the same kind returned,
ordered on the caller's stream; compared with scipy.ndimage. Skipped without a GPU."""

import numpy as np
import pytest
from scipy import ndimage as sp

import gpu_conv
from gpu_conv import ndimage as gc

if gpu_conv.backend().startswith("cpu"):
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

cupy = pytest.importorskip("cupy")


def close(actual, expected, tol=2e-5):
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=0, atol=tol * scale)


CASES = [
    lambda m, x: m.gaussian_filter(x, 1.5, mode="mirror"),
    lambda m, x: m.uniform_filter(x, 5, mode="wrap"),
    lambda m, x: m.sobel(x, axis=0, mode="nearest"),
    lambda m, x: m.laplace(x, mode="constant", cval=0.5),
    lambda m, x: m.gaussian_gradient_magnitude(x, 1.0),
    lambda m, x: m.correlate1d(x, [1.0, 2.0, -1.0], axis=-1, mode="reflect"),
    lambda m, x: m.correlate(x, np.arange(9.0).reshape(3, 3) if x.ndim == 2 else np.ones((3,) * x.ndim), mode="reflect"),
]


@pytest.mark.parametrize("shape", [(301,), (67, 130), (13, 40, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int16"])
def test_cupy_in_cupy_out(shape, dtype):
    host = np.random.default_rng().standard_normal(shape) * 40 + 100
    host = host.astype(dtype)
    x = cupy.asarray(host)
    for case in CASES:
        ours = case(gc, x)
        assert isinstance(ours, cupy.ndarray) and ours.dtype == x.dtype
        theirs = case(sp, host.astype(np.float64))
        if np.dtype(dtype).kind in "iu":
            theirs = np.clip(np.round(theirs), np.iinfo(dtype).min, np.iinfo(dtype).max)
            assert np.max(np.abs(ours.get().astype(np.float64) - theirs)) <= 1.0
        else:
            close(ours.get(), theirs)


def test_cupy_views_outputs_and_streams():
    host = np.random.default_rng().standard_normal((96, 128)).astype(np.float32)
    expected = sp.gaussian_filter(host.astype(np.float64), 2.0)
    x = cupy.asarray(host)
    out = cupy.empty_like(x)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        # Work the caller enqueued before the call, on its stream: the filter comes after it.
        y = x * 1.0
        assert gc.gaussian_filter(y, 2.0, output=out) is out
        # ...and the caller's next kernel on the stream after the filter.
        total = out.sum()
    stream.synchronize()
    close(out.get(), expected)
    assert abs(float(total) - expected.sum()) < 1e-2 * abs(expected).sum()
    # Strided and transposed views, and the input as the output.
    view = cupy.asarray(np.ascontiguousarray(host.T))[::2]
    close(gc.sobel(view, 1).get(), sp.sobel(view.get().astype(np.float64), 1))
    z = x.copy()
    gc.gaussian_filter(z, 2.0, output=z)
    close(z.get(), expected)
    with pytest.raises(ValueError, match="output must be"):
        gc.gaussian_filter(x, 2.0, output=np.empty((96, 128), np.float32))


def test_torch_tensors():
    torch = pytest.importorskip("torch")
    host = np.random.default_rng().standard_normal((3, 64, 80)).astype(np.float32)
    x = torch.from_numpy(host).cuda()
    ours = gc.gaussian_filter(x, 1.5, axes=(1, 2))
    assert isinstance(ours, torch.Tensor) and ours.is_cuda and ours.dtype == torch.float32
    close(ours.cpu().numpy(), sp.gaussian_filter(host.astype(np.float64), 1.5, axes=(1, 2)))
    half = x.to(torch.bfloat16)
    out = gc.uniform_filter(half, 3)
    assert out.dtype == torch.bfloat16
    close(out.float().cpu().numpy(), sp.uniform_filter(half.float().cpu().numpy().astype(np.float64), 3), 1e-2)


def test_dlpack_only_arrays():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX sees no GPU")
    host = np.random.default_rng().standard_normal((50, 70)).astype(np.float32)
    x = jax.device_put(jnp.asarray(host), jax.devices("gpu")[0])
    ours = gc.gaussian_filter(x, 1.5)
    assert type(ours).__module__.startswith("jax")
    close(np.asarray(ours), sp.gaussian_filter(host.astype(np.float64), 1.5))


def test_zero_dimensional_device_arrays():
    x = cupy.asarray(np.array(3.0, dtype=np.float32))
    for ours, theirs in ((gc.gaussian_filter(x, 1.0), sp.gaussian_filter(np.float32(3.0), 1.0)),
                         (gc.correlate(x, np.array(2.0)), sp.correlate(np.float32(3.0), np.array(2.0)))):
        assert isinstance(ours, cupy.ndarray) and ours.shape == ()
        close(ours.get(), theirs)
