"""gpu_conv.ndimage on Dask arrays against whole-array scipy.ndimage: every function and mode,
chunks smaller than, equal to and larger than the halo, uneven chunks, 2D and 3D; laziness and
meta; a distributed cluster of worker processes, one started by hand, a worker killed during a
computation, and Zarr stores read and written chunk by chunk."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage as sp

import gpu_conv
from gpu_conv import ndimage as gc

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def close(actual, expected, tol=2e-5):
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=0, atol=tol * scale)


def cases(ndim):
    """(name, call) for every function, with origins, radii and axes that make halos uneven."""
    first = [1] + [0] * (ndim - 1)
    return [
        ("correlate", lambda m, x, **k: m.correlate(x, np.arange(2.0 * 3 ** (ndim - 1)).reshape((2,) + (3,) * (ndim - 1)), origin=-1, **k)),
        ("convolve", lambda m, x, **k: m.convolve(x, np.linspace(-1, 2, 4 ** ndim).reshape((4,) * ndim), origin=[1] + [-1] * (ndim - 1), **k)),
        ("correlate1d", lambda m, x, **k: m.correlate1d(x, [1.0, -2.0, 0.5, 3.0, 1.0], axis=0, origin=2, **k)),
        ("convolve1d", lambda m, x, **k: m.convolve1d(x, [1.0, -2.0, 0.5, 3.0], axis=-1, origin=-2, **k)),
        ("gaussian_filter", lambda m, x, **k: m.gaussian_filter(x, [1.5] + [0.8] * (ndim - 1), order=first, **k)),
        ("gaussian_filter1d", lambda m, x, **k: m.gaussian_filter1d(x, 2.0, axis=0, order=2, truncate=3.0, **k)),
        ("uniform_filter", lambda m, x, **k: m.uniform_filter(x, [4] + [3] * (ndim - 1), origin=first, **k)),
        ("uniform_filter1d", lambda m, x, **k: m.uniform_filter1d(x, 6, axis=-1, origin=-3, **k)),
        ("sobel", lambda m, x, **k: m.sobel(x, axis=0, **k)),
        ("prewitt", lambda m, x, **k: m.prewitt(x, axis=-1, **k)),
        ("laplace", lambda m, x, **k: m.laplace(x, **k)),
        ("gaussian_laplace", lambda m, x, **k: m.gaussian_laplace(x, 1.2, radius=[3] + [2] * (ndim - 1), **k)),
        ("gaussian_gradient_magnitude", lambda m, x, **k: m.gaussian_gradient_magnitude(x, 1.0, **k)),
    ]


# Chunkings per rank: smaller than every halo (dask widens them), about equal, larger, uneven.
CHUNKINGS = {
    (29, 34): [(2, 3), (3, 4), (16, 20), ((9, 1, 19), (5, 20, 9))],
    (11, 14, 9): [(2, 3, 2), (4, 5, 9), ((3, 8), (14,), (1, 4, 4))],
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", list(CHUNKINGS))
def test_every_function_mode_and_chunking_matches_scipy(mode, shape):
    x = np.random.default_rng().standard_normal(shape).astype(np.float32)
    expected = {name: f(sp, x.astype(np.float64), mode=mode, cval=0.4) for name, f in cases(len(shape))}
    for chunks in CHUNKINGS[shape]:
        lazy = da.from_array(x, chunks=chunks)
        for name, f in cases(len(shape)):
            result = f(gc, lazy, mode=mode, cval=0.4)
            assert isinstance(result, da.Array), name
            close(result.compute(scheduler="threads"), expected[name])


def test_filters_reaching_across_a_whole_axis():
    x = np.random.default_rng().standard_normal((23, 6)).astype(np.float32)
    lazy = da.from_array(x, chunks=(5, 2))
    for mode in MODES:
        close(gc.gaussian_filter(lazy, 4.0, mode=mode).compute(), sp.gaussian_filter(x.astype(np.float64), 4.0, mode=mode))
        w = np.random.default_rng().standard_normal((3, 15))
        close(gc.correlate(lazy, w, mode=mode).compute(), sp.correlate(x.astype(np.float64), w, mode=mode))


def test_per_axis_modes_and_axes():
    x = np.random.default_rng().standard_normal((13, 17, 5)).astype(np.float32)
    d = x.astype(np.float64)
    lazy = da.from_array(x, chunks=(4, 6, 2))
    modes = ["wrap", "mirror", "constant"]
    close(gc.gaussian_filter(lazy, 1.5, mode=modes).compute(), sp.gaussian_filter(d, 1.5, mode=modes))
    close(gc.sobel(lazy, 1, mode=modes).compute(), sp.sobel(d, 1, mode=modes))
    close(gc.uniform_filter(lazy, [5, 2], axes=(2, 0), mode=["wrap", "nearest"]).compute(),
          sp.uniform_filter(d, [5, 2], axes=(2, 0), mode=["wrap", "nearest"]))
    w = np.random.default_rng().standard_normal((3, 4))
    close(gc.convolve(lazy, w, axes=(2, 1), origin=(1, 0), mode="wrap").compute(),
          sp.convolve(d, w, axes=(2, 1), origin=(1, 0), mode="wrap"))


def refuse_to_compute(*args, **kwargs):
    raise AssertionError("the graph was computed while it was being built")


def test_results_are_lazy_with_meta_and_output_types():
    x = np.random.default_rng().integers(0, 255, size=(40, 30), dtype=np.uint8)
    lazy = da.from_array(x, chunks=(10, 11))
    with dask.config.set(scheduler=refuse_to_compute):
        smooth = gc.gaussian_filter(lazy, 2.0, output=np.float32)
        same = gc.uniform_filter(lazy, 3)
    assert smooth.dtype == np.float32 and type(smooth._meta) is np.ndarray
    assert smooth._meta.dtype == np.float32 and same.dtype == np.uint8
    assert smooth.chunks == lazy.chunks
    close(smooth.compute(), sp.gaussian_filter(x.astype(np.float64), 2.0))
    rounded = np.clip(np.round(sp.uniform_filter(x.astype(np.float64), 3)), 0, 255)
    np.testing.assert_array_equal(same.compute(), rounded)


def test_argument_errors_are_raised_when_the_graph_is_built():
    lazy = da.zeros((10, 10), chunks=5, dtype=np.float32)
    with pytest.raises(RuntimeError, match="boundary mode not supported"):
        gc.gaussian_filter(lazy, 1.0, mode="bogus")
    with pytest.raises(RuntimeError, match="sequence argument"):
        gc.gaussian_filter(lazy, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Invalid origin"):
        gc.uniform_filter1d(lazy, 3, origin=2)
    with pytest.raises(TypeError, match="output must be None or a dtype"):
        gc.sobel(lazy, output=np.empty((10, 10), np.float32))
    with pytest.raises(TypeError, match="complex"):
        gc.laplace(lazy, output=np.complex64)
    with pytest.raises(TypeError, match="int64"):
        gc.laplace(da.zeros((4, 4), chunks=2, dtype=np.int64))


def test_empty_and_single_chunk_arrays():
    empty = da.zeros((0, 7), chunks=(1, 3), dtype=np.float32)
    assert gc.gaussian_filter(empty, 1.0).compute().shape == (0, 7)
    x = np.random.default_rng().standard_normal((9, 8)).astype(np.float32)
    close(gc.sobel(da.from_array(x), 0).compute(), sp.sobel(x.astype(np.float64), 0))


# ---------------------------------------------------------------------------------------
# A distributed cluster of worker processes.


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=2, processes=True, dashboard_address=":0"
    )
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


def test_on_a_cluster_of_worker_processes(client):
    x = np.random.default_rng().standard_normal((24, 31, 18)).astype(np.float32)
    lazy = da.from_array(x, chunks=(7, 10, 9))
    calls = [(f, mode) for mode in MODES for _, f in cases(3)]
    results = client.gather(client.compute([f(gc, lazy, mode=mode) for f, mode in calls]))
    for (f, mode), result in zip(calls, results):
        close(result, f(sp, x.astype(np.float64), mode=mode))


def test_library_errors_reach_the_client(client):
    # A chunk whose type differs from what the array declares fails on the worker.
    lazy = da.zeros((8, 8), chunks=4, dtype=np.float32)
    wrong = lazy.map_blocks(lambda b: b.astype(np.int64), dtype=np.float32)
    with pytest.raises(TypeError, match="dtype int64"):
        client.compute(gc.gaussian_filter(wrong, 1.0)).result()


def slowly(block):
    time.sleep(0.2)
    return block


def test_a_killed_worker_is_replaced_and_the_result_holds(client):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    x = np.random.default_rng().standard_normal((64, 48, 40)).astype(np.float32)
    lazy = da.from_array(x, chunks=(8, 12, 40)).map_blocks(slowly, dtype=np.float32)
    future = client.compute(gc.gaussian_filter(lazy, 1.5, mode="wrap"))
    pids = client.run(os.getpid)
    time.sleep(0.5)
    assert not future.done()
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    close(future.result(timeout=120), sp.gaussian_filter(x.astype(np.float64), 1.5, mode="wrap"))
    client.wait_for_workers(2, timeout=60)
    assert set(client.run(os.getpid).values()) != set(pids.values())


def test_zarr_to_zarr_chunk_by_chunk(tmp_path):
    zarr = pytest.importorskip("zarr")
    from distributed.diagnostics import MemorySampler

    shape, chunks = (128, 256, 256), (4, 256, 256)  # 32 MiB of float32 in 32 chunks of 1 MiB
    source = zarr.open_array(tmp_path / "in.zarr", mode="w", shape=shape, chunks=chunks, dtype="f4")
    rng = np.random.default_rng()
    for z in range(0, shape[0], 32):
        source[z:z + 32] = rng.standard_normal((32,) + shape[1:], dtype=np.float32)
    sampler = MemorySampler()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster):
        lazy = gc.gaussian_filter(da.from_zarr(str(tmp_path / "in.zarr")), 1.0, mode="mirror")
        with sampler.sample("filter", interval=0.01, measure="managed"):
            lazy.to_zarr(str(tmp_path / "out.zarr"), mode="w")
    held = max(size for _, size in sampler.samples["filter"]) / 2**20
    # Dask holds a few chunks, their halos and results at a time: far from the whole volume.
    assert 0 < held <= 16, f"the workers held {held:.1f} MiB of a 32 MiB volume at once"
    result = zarr.open_array(tmp_path / "out.zarr", mode="r")
    close(result[:], sp.gaussian_filter(source[:].astype(np.float64), 1.0, mode="mirror"))


def test_a_cluster_started_by_hand(tmp_path):
    dask_cli = [sys.executable, "-m", "dask"]
    file = tmp_path / "scheduler.json"
    scheduler = subprocess.Popen(dask_cli + ["scheduler", "--host", "127.0.0.1", "--port", "0",
                                             "--no-dashboard", "--scheduler-file", file])
    workers = None
    try:
        deadline = time.monotonic() + 60
        while not file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = subprocess.Popen(dask_cli + ["worker", "--scheduler-file", file, "--nworkers", "2",
                                               "--nthreads", "1", "--no-dashboard"])
        with distributed.Client(scheduler_file=str(file), timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
            x = np.random.default_rng().standard_normal((30, 41)).astype(np.float32)
            lazy = da.from_array(x, chunks=(8, 9))
            close(c.compute(gc.uniform_filter(lazy, 5, mode="wrap")).result(),
                  sp.uniform_filter(x.astype(np.float64), 5, mode="wrap"))
    finally:
        for process in (workers, scheduler):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)


def test_the_zarr_example(tmp_path):
    zarr = pytest.importorskip("zarr")
    example = Path(__file__).parents[1] / "examples" / "zarr_volume.py"
    source, target = tmp_path / "in.zarr", tmp_path / "out.zarr"
    run = subprocess.run([sys.executable, example, source, target, "--make", "0.004", "--plane", "64",
                          "--sigma", "1.5"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "gaussian_filter sigma 1.5" in run.stdout
    volume = zarr.open_array(source, mode="r")[:]
    assert volume.shape == (262, 64, 64)  # 0.004 GiB of 64 x 64 planes
    close(zarr.open_array(target, mode="r")[:], sp.gaussian_filter(volume.astype(np.float64), 1.5))


# ---------------------------------------------------------------------------------------
# CuPy-backed Dask arrays and a CUDA cluster (skipped without a GPU).

needs_gpu = pytest.mark.skipif(gpu_conv.backend().startswith("cpu"), reason="needs a CUDA GPU")


@needs_gpu
@pytest.mark.parametrize("mode", MODES)
def test_cupy_chunks_stay_on_the_gpu(mode):
    cupy = pytest.importorskip("cupy")
    x = np.random.default_rng().standard_normal((21, 30, 19)).astype(np.float32)
    lazy = da.from_array(cupy.asarray(x), chunks=(5, 8, 19), asarray=False)
    for name, f in cases(3):
        result = f(gc, lazy, mode=mode)
        assert isinstance(result._meta, cupy.ndarray), name
        computed = result.compute(scheduler="threads")
        assert isinstance(computed, cupy.ndarray), name
        close(computed.get(), f(sp, x.astype(np.float64), mode=mode))


@needs_gpu
def test_on_a_local_cuda_cluster():
    cupy = pytest.importorskip("cupy")
    dask_cuda = pytest.importorskip("dask_cuda")
    x = np.random.default_rng().standard_normal((40, 33, 27)).astype(np.float32)
    d = x.astype(np.float64)
    with dask_cuda.LocalCUDACluster(n_workers=1, threads_per_worker=4,
                                    dashboard_address=":0") as cluster, distributed.Client(cluster) as c:
        assert c.submit(gpu_conv.backend).result() != "cpu"
        host = da.from_array(x, chunks=(9, 11, 27))
        device = host.map_blocks(cupy.asarray, meta=cupy.empty((0, 0, 0), np.float32))
        for mode in MODES:
            close(c.compute(gc.gaussian_filter(host, 2.0, mode=mode)).result(),
                  sp.gaussian_filter(d, 2.0, mode=mode))
            on_gpu = c.compute(gc.sobel(device, 1, mode=mode)).result()
            assert isinstance(on_gpu, cupy.ndarray)
            close(on_gpu.get(), sp.sobel(d, 1, mode=mode))
