"""Project-wide pytest options: slow tests (FPGA place-and-route, long RTL runs) are opt-in;
parallel workers share the cores (one BLAS thread each)."""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run tests marked slow (FPGA builds, long RTL simulations)")


def pytest_configure(config):
    """Under ``pytest -n N`` each worker gets ``cores // N`` BLAS/OpenMP threads (at least
    one), unless the environment already says.  Two workers each running two spinning
    OpenBLAS threads on a 2-core machine made one scikit-learn MLP fit 40 s instead of
    1.4 s.  Set here, in the controlling process, before the workers start: they inherit
    it before they import numpy."""
    workers = getattr(config.option, "numprocesses", None)
    if isinstance(workers, int) and workers > 1:
        per = str(max(1, (os.cpu_count() or 1) // workers))
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, per)


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def icarus_vector_runs(tmp_path_factory):
    """Every golden vector (tests/data/vectors) on the default core's Verilog under Icarus,
    in one simulator invocation, once per test run: ``{file name: (image after the run,
    expected image, {"cycles", "error", "bytes_read", "bytes_written"})}``.  Used by
    sim_tests/test_hw_vectors.py and tests/test_hw_fastrtl.py.  Under ``pytest -n N`` the
    first worker to ask runs it under a lock in the run's shared temporary folder and the
    others read its result (it is the suite's longest single simulation)."""
    import fcntl
    import json
    import shutil
    from pathlib import Path

    import numpy as np
    if shutil.which("iverilog") is None:
        pytest.skip("Icarus Verilog (iverilog) is not installed")
    paths = sorted((Path(__file__).parent / "tests" / "data" / "vectors").glob("*.npz"))
    vecs = []
    for p in paths:
        with np.load(p, allow_pickle=False) as v:
            vecs.append({k: v[k] for k in ("insns", "dram_in", "dram_out")})
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent                  # one folder for all the run's workers
    images, info = shared / "icarus_vectors.npz", shared / "icarus_vectors.json"
    with open(shared / "icarus_vectors.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not info.exists():
            from vta_hw.runners.rtlsim import run_rtl_batch
            progs = [(v["insns"].tobytes(), v["dram_in"].copy()) for v in vecs]
            res = run_rtl_batch(progs, simulator="icarus", raise_on_error=False)
            np.savez(images, **{p.name: prog[1] for p, prog in zip(paths, progs)})
            info.write_text(json.dumps({p.name: {
                "cycles": int(r.cycles), "error": r.extra["error"],
                "bytes_read": int(r.extra["bytes_read"]),
                "bytes_written": int(r.extra["bytes_written"])} for p, r in zip(paths, res)}))
        stats = json.loads(info.read_text())
        with np.load(images, allow_pickle=False) as z:
            return {p.name: (z[p.name], v["dram_out"], stats[p.name]) for p, v in zip(paths, vecs)}
