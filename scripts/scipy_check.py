#!/usr/bin/env python3
"""Differential check against SciPy: random arrays through the `convolve` example (on the GPU
where there is one) and through scipy.ndimage in float64.

usage: [SEED=N] scripts/scipy_check.py PATH/TO/examples/convolve [CASES]
Cases cycle through signals, images, images with channels, volumes (3-D masks, channels last
in a quarter of them) and 1-D masks along a random axis (--axis) of 1-D to 3-D inputs. Inputs
are float32 in half of the cases, else float64, float16, uint8 or uint16, with float32 or
float64 masks. Exits non-zero if a case differs from SciPy's float64 result by more than: 1e-5
relative to sum(|mask| * |input|) for float32, 1e-12 for float64, that plus half an ulp (of a
subnormal where the result is one) for float16; for integers, more than the rounding to nearest and saturation of a float32 sum (within
1e-6 of that magnitude), where SciPy would truncate and wrap around.
"""
import os, subprocess, sys, tempfile
import numpy as np
import scipy.ndimage as ndi

binary = sys.argv[1]
cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
rng = np.random.default_rng()
# SEED replays a run (its seed is printed at the end).
seed = int(os.environ.get("SEED", rng.integers(2**31)))
rng = np.random.default_rng(seed)
modes = ["constant", "nearest", "reflect", "mirror", "wrap"]
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    x_path, m_path, y_path = (os.path.join(tmp, n) for n in ("x.npy", "m.npy", "y.npy"))
    for case in range(cases):
        kind = case % 5
        axis = None
        if kind == 0:
            x = rng.uniform(-1, 1, int(rng.integers(1, 5000))).astype(np.float32)
            m = rng.uniform(-1, 1, int(rng.integers(1, 40))).astype(np.float32)
        elif kind == 3:
            shape = tuple(int(rng.integers(1, 24)) for _ in range(3))
            if rng.integers(4) == 0:
                shape += (int(rng.integers(1, 5)),)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            m = rng.uniform(-1, 1, tuple(int(rng.integers(1, 7)) for _ in range(3))).astype(np.float32)
        elif kind == 4:
            shape = tuple(int(rng.integers(1, 60)) for _ in range(int(rng.integers(1, 4))))
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            m = rng.uniform(-1, 1, int(rng.integers(1, 40))).astype(np.float32)
            axis = int(rng.integers(-len(shape), len(shape)))
        else:
            shape = (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
            if kind == 2:
                shape += (int(rng.integers(1, 6)),)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            m = rng.uniform(-1, 1, (int(rng.integers(1, 12)), int(rng.integers(1, 12)))).astype(np.float32)
        dtype = np.float32 if case % 2 == 0 else [np.float64, np.float16, np.uint8, np.uint16][case // 2 % 4]
        if np.issubdtype(dtype, np.integer):
            x = rng.integers(0, np.iinfo(dtype).max + 1, x.shape).astype(dtype)
        else:
            x = x.astype(dtype)
        m = m.astype(np.float64) if rng.integers(2) else m
        mode = modes[int(rng.integers(len(modes)))]
        cval = float(np.float32(rng.uniform(-1, 1)))
        correlate = bool(rng.integers(2))
        # An origin valid on every mask axis for both operations.
        limit = min(m.shape) // 2 - (1 if min(m.shape) % 2 == 0 else 0)
        origin = int(rng.integers(-limit, limit + 1)) if limit > 0 else 0
        np.save(x_path, x)
        np.save(m_path, m)
        args = [binary, "--input", x_path, "--mask", m_path, "--output", y_path, "--mode", mode,
                "--cval", repr(cval), "--origin", str(origin)] + (["--correlate"] if correlate else []) \
               + (["--axis", str(axis)] if axis is not None else [])
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"case {case}: convolve failed: {run.stderr.strip()}")
            failures += 1
            continue
        y = np.load(y_path)
        # The mask the GPU computes with: float32, or float64 for float64 inputs.
        weights = m.astype(np.float64 if dtype == np.float64 else np.float32).astype(np.float64)
        origins = [origin] * x.ndim
        if axis is not None:
            op1 = ndi.correlate1d if correlate else ndi.convolve1d
            op = lambda a, w, cval, **kw: op1(a, w, axis=axis, mode=mode, cval=cval, origin=origin)
        else:
            if x.ndim == weights.ndim + 1:
                weights = weights[..., None]
                origins[-1] = 0
            op2 = ndi.correlate if correlate else ndi.convolve
            op = lambda a, w, cval, **kw: op2(a, w, mode=mode, cval=cval, origin=origins)
        ref = op(x.astype(np.float64), weights, cval=cval)
        mag = op(np.abs(x.astype(np.float64)), np.abs(weights), cval=abs(cval))
        if y.dtype != dtype:
            print(f"case {case}: output dtype {y.dtype}, input {np.dtype(dtype)}")
            failures += 1
            continue
        y64 = y.astype(np.float64)
        if np.issubdtype(dtype, np.integer):
            top = np.iinfo(dtype).max
            lo = np.clip(np.rint(ref - 1e-6 * mag), 0, top)
            hi = np.clip(np.rint(ref + 1e-6 * mag), 0, top)
            bad = (y64 < lo) | (y64 > hi)
        else:
            tolerance = {np.float64: 1e-12, np.float32: 1e-5, np.float16: 1e-5}[dtype] * mag
            if dtype == np.float16:
                # Half an ulp: 2^-11 relative, or half the subnormals' spacing of 2^-24.
                tolerance = tolerance + np.maximum(np.abs(ref) * 2.0**-11, 2.0**-25)
            bad = np.abs(y64 - ref) > tolerance + 1e-30
        if bad.any():
            failures += 1
            print(f"case {case}: {np.dtype(dtype)} {x.shape} mask {m.dtype} {m.shape} {mode} cval {cval} "
                  f"origin {origin} correlate {correlate} axis {axis}: {int(bad.sum())} elements differ, "
                  f"worst {np.abs(y64 - ref).max()}")
print(f"scipy check (seed {seed}): {cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
