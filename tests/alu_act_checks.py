"""Shared checks for the integer forms that run on VTA's ALU (compiler/vta/alu_act.py):
a small ONNX graph compiled, the node's placement and reason in the partition report, the
timed simulator bit-exact against the quantised graph's reference, and the result close to
onnxruntime's float execution."""

import numpy as np

from isa import VTAConfig
from vta_runtime import SimDevice

from compiler.graph.driver import compile_model
from compiler.graph.reference import run_graph

CFG = VTAConfig()


def compile_and_check(model, xs, q_op: str, where: str, n_calib: int = 3,
                      min_sqnr_db: float = 20.0, out: str = "y"):
    """Compile ``model`` calibrated on ``xs[:n_calib]``; ``q_op`` runs ``where``; on the
    rest of ``xs`` the timed simulator equals the quantised reference bit for bit and the
    float model (onnxruntime) within ``min_sqnr_db``.  Returns (compiled, VTA cycles of the
    ``q_op`` steps on the last sample)."""
    import onnxruntime as ort
    c = compile_model(model, CFG, calib={"x": xs[:n_calib]})
    steps = [s for s in c.program.steps if s.node.op == q_op]
    assert steps and all(s.kind == where for s in steps), c.program.partition_table()
    ex = c.executor(SimDevice(CFG, timed=True))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sig = err = 0.0
    for x in xs[n_calib:]:
        got = ex.run({"x": x})[out]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})[out])
        fl = sess.run(None, {"x": x})[0].astype(np.float64)
        sig += float((fl ** 2).sum())
        err += float(((fl - got) ** 2).sum())
    assert err > 0 and 10 * np.log10(sig / err) >= min_sqnr_db, 10 * np.log10(sig / err)
    return c
