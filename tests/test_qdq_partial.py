"""A QDQ model that onnxruntime's ``quantize_static`` quantised only in part (its default op
types: MatMul, Conv, Add, Mul, ... while ReduceMean, Pow, Sqrt of a written-out LayerNorm stay
float, as onnxruntime then runs them) compiles without calibration samples: values the model
gives no Q/DQ range stay float on the CPU (the partition report says why), and the layout
nodes the importer adds around a 1-D conv or a batched MatMul take the range of the value
they reshape, so those run int8 on VTA at the model's own scales.  Before, both refused with
"value ... has no Q/DQ range; give --calib"."""

import sys
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxruntime.quantization")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "corpus"))

import graph_fuzz  # noqa: E402
from pretrained import ort_int8_of  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402
from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

CFG = VTAConfig()


def _qdq(seed):
    m, shape, desc = graph_fuzz.random_model(seed)
    xs = graph_fuzz._inputs(m, shape, 6, 1000 + seed)
    q, _ = ort_int8_of(m, [{"x": x} for x in xs[:3]])
    return q, xs[3:], desc


@pytest.mark.parametrize("seed,vta_op", [(3, "qdense"), (25, "qconv"), (394, "qconv")])
def test_partly_quantised_qdq_model_compiles_without_calibration(seed, vta_op):
    """Seed 3: three MLP blocks over (1, 4, 8) tokens with LayerNorm written out (batched
    MatMuls); seed 25: two Conv1d layers; seed 394: Relu, hard-swish written out, Conv1d,
    where onnxruntime quantised the Relu's output but not the graph input it reads (the
    input was quantised at a made-up scale, 2^-7: 6.9 dB against onnxruntime)."""
    q, xs, desc = _qdq(seed)
    c = compile_model(q, CFG)
    kinds = {}
    for s in c.program.steps:
        kinds.setdefault(s.node.op, set()).add(s.kind)
    assert "vta" in kinds.get(vta_op, set()), (desc, kinds)
    if seed == 3:       # the LayerNorm's ReduceMean has no Q/DQ: float, with the reason
        assert "no Q/DQ range in the QDQ model" in c.report()
    if seed == 394:
        assert "its input 'x' has no Q/DQ range in the QDQ model" in c.report()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(q.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ex = c.executor(SimDevice(CFG, timed=True))
    for x in xs:
        got = ex.run({"x": x})["y"]
        assert np.array_equal(got, run_graph(c.qgraph, {"x": x})["y"])
        # onnxruntime's QDQ emulation (DequantizeLinear -> float op -> QuantizeLinear)
        assert graph_fuzz._sqnr(sess.run(None, {"x": x})[0], got) >= 20.0
