"""``--min-layer-sqnr`` on the 64x128, 2-block encoder: layers kept float, output SQNR vs
onnxruntime float (mean over 4 held-out sequences), share of GEMM MACs left on VTA, for no
bound and bounds of 28 and 30 dB.

Run::

    .venv/bin/python benchmarks/bench_min_layer_sqnr.py
"""
import numpy as np, onnxruntime as ort, time
from isa import VTAConfig
from vta_runtime import SimDevice
from compiler.graph.transformer import encoder, sample_tokens, vta_gemm_share
from compiler.graph.driver import compile_model
m = encoder(tokens=64, dim=128, heads=4, mlp=256, blocks=2)
xs = sample_tokens(12, tokens=64, dim=128)
sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
for b in (None, 28.0, 30.0):
    t = time.perf_counter()
    c = compile_model(m, VTAConfig(), calib={"tokens": xs[:8]}, min_layer_sqnr=b)
    t = time.perf_counter() - t
    ex = c.executor(SimDevice(c.cfg, timed=True))
    sq = []
    for x in xs[8:]:
        ref = sess.run(None, {"tokens": x})[0].astype(np.float64); got = ex.run({"tokens": x})["hidden"]
        sq.append(10*np.log10((ref**2).sum()/((ref-got)**2).sum()))
    v, tot = vta_gemm_share(c)
    print(b, f"{t:.2f}s", [(k[0], k[1], round(k[2],1)) for k in c.options["kept_float"]], f"{np.mean(sq):.1f}", f"{v/tot:.1%}")
