#!/usr/bin/env python3
"""Differential check against SciPy: random arrays through the `convolve` example (on the GPU
where there is one) and through scipy.ndimage in float64.

usage: scripts/scipy_check.py PATH/TO/examples/convolve [CASES]
Exits non-zero if any case differs by more than 1e-5 relative to sum(|mask| * |input|).
"""
import os, subprocess, sys, tempfile
import numpy as np
import scipy.ndimage as ndi

binary = sys.argv[1]
cases = int(sys.argv[2]) if len(sys.argv) > 2 else 200
rng = np.random.default_rng()
seed = int(rng.integers(2**31))
rng = np.random.default_rng(seed)
modes = ["constant", "nearest", "reflect", "mirror", "wrap"]
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    x_path, m_path, y_path = (os.path.join(tmp, n) for n in ("x.npy", "m.npy", "y.npy"))
    for case in range(cases):
        kind = case % 3
        if kind == 0:
            x = rng.uniform(-1, 1, int(rng.integers(1, 5000))).astype(np.float32)
            m = rng.uniform(-1, 1, int(rng.integers(1, 40))).astype(np.float32)
        else:
            shape = (int(rng.integers(1, 90)), int(rng.integers(1, 90)))
            if kind == 2:
                shape += (int(rng.integers(1, 6)),)
            x = rng.uniform(-1, 1, shape).astype(np.float32)
            m = rng.uniform(-1, 1, (int(rng.integers(1, 12)), int(rng.integers(1, 12)))).astype(np.float32)
        mode = modes[int(rng.integers(len(modes)))]
        cval = float(np.float32(rng.uniform(-1, 1)))
        correlate = bool(rng.integers(2))
        # An origin valid on every mask axis for both operations.
        limit = min(m.shape) // 2 - (1 if min(m.shape) % 2 == 0 else 0)
        origin = int(rng.integers(-limit, limit + 1)) if limit > 0 else 0
        np.save(x_path, x)
        np.save(m_path, m)
        args = [binary, "--input", x_path, "--mask", m_path, "--output", y_path, "--mode", mode,
                "--cval", repr(cval), "--origin", str(origin)] + (["--correlate"] if correlate else [])
        run = subprocess.run(args, capture_output=True, text=True)
        if run.returncode != 0:
            print(f"case {case}: convolve failed: {run.stderr.strip()}")
            failures += 1
            continue
        y = np.load(y_path)
        weights = m.astype(np.float64)
        if x.ndim == 3:
            weights = weights[:, :, None]
        origins = [origin] * x.ndim
        if x.ndim == 3:
            origins[2] = 0
        op = ndi.correlate if correlate else ndi.convolve
        ref = op(x.astype(np.float64), weights, mode=mode, cval=cval, origin=origins)
        mag = op(np.abs(x.astype(np.float64)), np.abs(weights), mode=mode, cval=abs(cval), origin=origins)
        bad = np.abs(y - ref) > 1e-5 * mag + 1e-30
        if bad.any():
            failures += 1
            print(f"case {case}: {x.shape} mask {m.shape} {mode} cval {cval} origin {origin} "
                  f"correlate {correlate}: {int(bad.sum())} elements differ, worst {np.abs(y - ref).max()}")
print(f"scipy check (seed {seed}): {cases - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
