"""A QDQ model (onnxruntime's ``quantize_static``) compiled with its own scales, against
onnxruntime executing the same QDQ model, layer by layer, isolated and end to end.

For every QuantizeLinear output (onnxruntime run with all of them exposed as graph outputs,
which it then executes as DequantizeLinear -> float Conv -> QuantizeLinear for every conv and
QLinearAdd for the adds) and this project's int8 twin of it, over ``--eval`` held-out
images: the share of elements exactly equal and within one LSB, and the largest difference,
for

* ``program``: this project's quantised graph (its integer reference; one sample of the
  compiled program runs on the timed simulator and must be bit-exact against it);
* ``ideal``: the same integer graph with every requantisation done exactly
  (``rint(acc * M)`` in float64, half to even): the best any integer rounding can do; what
  it still differs by is onnxruntime's float32 conv arithmetic, amplified layer by layer;
* ``program isolated`` / ``ideal isolated``: the same, each node fed onnxruntime's own
  int8 inputs (:func:`compiler.graph.quantize_fixed.run_isolated`), so only that layer's
  arithmetic is compared; ``ideal isolated`` against onnxruntime is where onnxruntime's own
  float32 result differs from the exact requantisation;
* ``program vs ideal``: this project's two integer pipelines end to end against each other
  (not onnxruntime): how far a few differing roundings spread through this network.

Also: SQNR of the final output vs onnxruntime float for this project and onnxruntime int8,
SQNR vs onnxruntime's QDQ output, and the VTA cycles of one inference on the timed
simulator.  ``--model resnet18`` (default) is :func:`bench_int8_vs_ort.resnet18_model`
(torchvision ResNet-18, random seeded weights and batch-norm statistics, 8 calibration and
``--eval`` held-out N(0, 1) images); ``--model NAME`` of ``benchmarks/corpus/pretrained.py``
(ocr_cls, ocr_rec, ocr_det, captcha, magika, vad) is that real pretrained model, pinned to its
input shape, calibrated on ``--calib`` of its task samples (seed 1) and evaluated on
``--eval`` others (seed 0; vad: 512-sample frames of ``task_metrics.vad_audio`` with
the float model's state carried), with the task metric of float (onnxruntime), onnxruntime's QDQ
execution and this project's program (the quantised graph's reference, which the program
matches bit for bit) on ``--metric-n`` samples.  The quantisation is the same in both cases
(``bench_int8_vs_ort.ort_qdq``: QDQ, MinMax, symmetric int8 activations, per-channel int8
weights, ``quant_pre_process`` first).

Usage::

    python benchmarks/bench_qdq_layers.py [--model NAME] --eval 8 [--calib 8] [--metric-n 32]
        [--workdir DIR] [--no-ideal] [--vs-plain] [--ort-reference {default,int8-allowed,basic}]

``--ort-reference`` compiles for that onnxruntime session (``compile_model(ort_reference=)``)
and runs every onnxruntime session of the QDQ model (exposed, plain, the QDQ output's) with
its options (``--vs-plain`` then compares the program with the session it follows).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))

import bench_int8_vs_ort as B  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.quantize_fixed import qdq_output_name, run_isolated  # noqa: E402
from compiler.graph.reference import run_graph, run_node  # noqa: E402


def ideal_node(n, ins):
    """``n`` with its requantisation exact (float64, half to even), else as compiled
    (onnxruntime's float32 requantisation is the program itself with ``--qdq-requant
    float32``: ``qreq32``)."""
    a = n.attrs
    if n.op in ("qconv", "qdense") and a.get("stages") and not a.get("wide"):
        from compiler.ops.conv import conv_nchw
        if n.op == "qconv":
            acc = conv_nchw(ins[0], ins[1], a["strides"], a["pads"], a["dilations"],
                            a["group"], acc=np.int64) + ins[2].astype(np.int64).reshape(1, -1, 1, 1)
            sh = (1, -1, 1, 1)
        else:
            acc = ins[0].astype(np.int64) @ ins[1].astype(np.int64).T + ins[2].astype(np.int64)
            sh = (1, -1)
        M = np.asarray(a["mult"], np.float64) / 2.0 ** a["shift"]
        for s_i, m_i in a["stages"]:          # the multiplier the stages approximate
            M = M * np.asarray(m_i, np.float64) / 2.0 ** s_i
        M = M.reshape(sh)
        return np.clip(np.rint(acc * M), a["lo"], a["hi"]).astype(np.int8)
    if n.op == "qaddfx":
        v = (ins[0].astype(np.float64) * a["ma"] * a.get("ma2", 1) +
             ins[1].astype(np.float64) * a["mb"] * a.get("mb2", 1)) / 2.0 ** a["shift"]
        return np.clip(np.rint(v), a["lo"], a["hi"]).astype(np.int8)
    return run_node(n, ins)


def run_ideal(q, feeds):
    env = dict(q.params)
    env.update({k: np.asarray(v) for k, v in feeds.items()})
    for n in q.nodes:
        env[n.output] = ideal_node(n, [env[i] for i in n.inputs])
    return env


#: the input of each of onnxruntime's fused quantised kernels that is its output scale, and
#: the float operator of the QDQ model it replaces (None: matched by the scale alone)
PLAIN_SCALE_INPUT = {"QuantizeLinear": (1, None), "QLinearConv": (6, None),
                     "QLinearMatMul": (6, "MatMul"), "QLinearAdd": (6, "Add"),
                     "QLinearMul": (6, "Mul"), "QLinearSoftmax": (3, "Softmax"),
                     "QLinearSigmoid": (3, "Sigmoid")}


def ort_options(ref: str = "default"):
    """onnxruntime session options of ``compile_model(ort_reference=ref)``'s session
    (compiler/graph/ort_qdq.py ``ORT_REFERENCES``), one thread."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if ref == "int8-allowed":
        so.add_session_config_entry("session.qdqisint8allowed", "1")
    elif ref == "basic":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return so


def u8s8_probe(ref: str = "default", channels: int = 64):
    """(onnxruntime's int8 output, the exact one) of a 1x1 QDQ conv whose every input is 127
    and every weight 127 (acc = 127 * 127 * ``channels``), in the session of ``ref``.  The
    default session converts the activation to uint8 (zero point 128) and runs QLinearConv
    U8S8; on an x86 CPU without AVX-VNNI, MLAS's AVX2 kernel sums each pair of products
    with VPMADDUBSW, which saturates at 32,767 (255 * 127 * 2 = 64,770), so the result is
    not the integer conv (onnxruntime's documented U8S8 saturation); with VNNI, or int8
    allowed, or unfused (basic), it is exact."""
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper, numpy_helper
    sx, sw, sy = np.float32(0.02), np.float32(0.01), np.float32(2.0)
    zero = np.array(0, np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "sw", "z"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "sy", "z"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "z"], ["out"])]
    inits = [numpy_helper.from_array(v, k) for k, v in (
        ("sx", np.array(sx)), ("sw", np.array(sw)), ("sy", np.array(sy)), ("z", zero),
        ("wq", np.full((1, channels, 1, 1), 127, np.int8)))]
    g = helper.make_graph(nodes, "u8s8", [helper.make_tensor_value_info(
        "x", TP.FLOAT, [1, channels, 1, 1])], [helper.make_tensor_value_info(
            "out", TP.FLOAT, [1, 1, 1, 1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    s = ort.InferenceSession(m.SerializeToString(), ort_options(ref),
                             providers=["CPUExecutionProvider"])
    got = s.run(None, {"x": np.full((1, channels, 1, 1), 127 * sx, np.float32)})[0]
    exact = np.clip(np.rint(127 * 127 * channels * float(sx) * float(sw) / float(sy)), -128, 127)
    return int(np.rint(float(got.reshape(-1)[0]) / sy)), int(exact)


def plain_visible(qpath: str, tmp: str, ref: str = "default"):
    """onnxruntime's execution of the plain QDQ model (its own fusions: QLinearConv, QGemm,
    QLinearSoftmax, float Add / Mul ...; exposing a QuantizeLinear output as a graph output
    changes them) with the values of the model's QuantizeLinear outputs that it still
    computes made visible: the graph it optimises is saved, and the node that now produces
    each one - a QuantizeLinear (renamed when duplicated), a QLinearConv (NHWC when
    ``channels_last``) by its output scale's initializer; a QLinearMatMul, QLinearAdd /
    QLinearMul, QLinearSoftmax or QLinearSigmoid as the next QuantizeLinear, in graph
    order, of its float operator's output at its output scale - is made a graph output,
    and the graph runs again unoptimised.  (session, {Q output: (name, NHWC, producer's op
    type)}); a uint8
    value (onnxruntime's S8 -> U8 transform, zero point 128) is compared minus 128.  ``ref``:
    the session's options (:func:`ort_options`)."""
    import onnx
    import onnxruntime as ort
    so = ort_options(ref)
    so.optimized_model_filepath = os.path.join(tmp, "plain_optimised.onnx")
    ort.InferenceSession(qpath, so, providers=["CPUExecutionProvider"])
    m = onnx.load(so.optimized_model_filepath)
    by_scale: dict = {}
    by_op: dict = {}                # (float op, scale): its Q outputs in graph order
    src = onnx.load(qpath).graph.node
    made = {o: n.op_type for n in src for o in n.output}
    for n in src:
        if n.op_type == "QuantizeLinear":
            by_scale.setdefault(n.input[1], []).append(n.output[0])
            by_op.setdefault((made.get(n.input[0]), n.input[1]), []).append(n.output[0])
    qnames = {q for qs in by_scale.values() for q in qs}
    seen, where, kinds = set(), {}, {}
    for n in m.graph.node:          # the input that is the output scale
        k, op = PLAIN_SCALE_INPUT.get(n.op_type, (None, None))
        if op is not None and len(n.input) > k:   # a fused kernel: the next Q (in graph
            qs = by_op.get((op, n.input[k]), [])  # order) of its float operator's output
            if qs:
                where[qs[0]] = (n.output[0], False, n.op_type)
                kinds[qs.pop(0)] = n.op_type
            continue
        qs = by_scale.get(n.input[k], []) if k is not None and len(n.input) > k else []
        if len(qs) != 1 or (n.output[0] in qnames and n.output[0] != qs[0]):
            continue                # (another Q's value at this scale: a Relu removed)
        if qs[0] in seen:           # two producers of one value (a duplicated Q): neither
            where.pop(qs[0], None)
            continue
        seen.add(qs[0])
        nhwc = any(a.name == "channels_last" and a.i for a in n.attribute)
        where[qs[0]] = (n.output[0], nhwc, n.op_type)
        kinds[qs[0]] = n.op_type
    print("plain execution: the QuantizeLinear outputs it keeps, by producer:", ", ".join(
        f"{k} {list(kinds.values()).count(k)}" for k in sorted(set(kinds.values()))), flush=True)
    have = {o.name for o in m.graph.output}
    for o, *_ in where.values():
        if o not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
            have.add(o)
    return B.session(m, optimise=False), where


def plain_value(pv: dict, name_nhwc, shape=None) -> np.ndarray:
    """A value of :func:`plain_visible`'s run as this project's int8 in NCHW (a fused
    kernel's value reshaped to ``shape`` when it has as many elements: QLinearSoftmax's
    flattened rows)."""
    name, nhwc, kind = name_nhwc
    v = pv[name]
    v = v.astype(np.int64) - 128 if v.dtype == np.uint8 else v.astype(np.int64)
    v = v.transpose(0, 3, 1, 2) if nhwc and v.ndim == 4 else v
    if shape is not None and len(shape) == 4 and v.ndim == 4 and tuple(v.shape) != \
            tuple(shape) and tuple(v.shape) == (shape[0], shape[2], shape[3], shape[1]):
        v = v.transpose(0, 3, 1, 2)     # a kernel inside an NHWC region (int8-allowed)
    fused = kind not in ("QuantizeLinear", "QLinearConv")
    return v.reshape(shape) if fused and shape is not None and v.size == np.prod(shape) else v


def load_model(model: str, tmp: str, n_cal: int, n_eval: int):
    """(float path, QDQ path, calibration feeds, held-out feeds, metric(predict, n) or None)."""
    fpath, qpath = os.path.join(tmp, f"{model}.onnx"), os.path.join(tmp, f"{model}_qdq.onnx")
    if model == "resnet18":
        name, data, _ = B.resnet18_model(fpath)
        cal, ev = [{name: x} for x in data(n_cal)], [{name: x} for x in data(n_eval)]
        metric = None
    else:
        import onnx
        import pretrained as P
        m = P.pinned(model)
        if next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx")) < 13:
            # per-channel DequantizeLinear (axis) needs opset 13: onnxruntime's per-channel
            # output of an opset-11/12 model is an invalid graph otherwise
            from onnx import version_converter
            m = version_converter.convert_version(m, 13)
        onnx.save(m, fpath)
        if model == "vad":         # frames of synthetic vowels, the state carried (float)
            import task_metrics as T
            ort_f = P.ort_predict(m)

            def frames(n, seed):
                st, out = np.zeros((2, 1, 128), np.float32), []
                for x in T.vad_feeds(T.vad_audio(n, seed=seed)):
                    out.append({"input": x, "state": st, "sr": np.array(16000, np.int64)})
                    st = np.asarray(ort_f(out[-1])[1], np.float32)
                return out
            cal, ev = frames(n_cal, 1), frames(n_eval, 0)

            def metric(predict, n):   # frame agreement (p > 0.5) with float
                audio = T.vad_audio(n, seed=0)
                pf = T.vad_decisions(ort_f, audio)
                return float(np.mean((T.vad_decisions(predict, audio) > 0.5) == (pf > 0.5)))
        else:
            cal, ev = P.samples(model, n_cal, seed=1)[0], P.samples(model, n_eval, seed=0)[0]
            metric = lambda predict, n: P.evaluate(model, predict, n)  # noqa: E731
    if not os.path.exists(qpath):
        print(f"{model}: onnxruntime quantize_static, weights",
              B.ort_qdq(fpath, qpath, "", cal), flush=True)
    return fpath, qpath, cal, ev, metric


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--eval", type=int, default=8)
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--metric-n", type=int, default=32)
    ap.add_argument("--workdir", default="")
    ap.add_argument("--no-ideal", action="store_true")
    ap.add_argument("--vs-plain", action="store_true",
                    help="also compare onnxruntime's plain execution with the exposed one at "
                    "the QuantizeLinear outputs the plain one keeps (plain_visible)")
    ap.add_argument("--qdq-requant", choices=("fixed", "float32", "auto"), default="auto",
                    help="compile_model(qdq_requant=...): fixed-point on VTA, float32 on "
                    "the CPU as onnxruntime, or auto (per layer; the default)")
    ap.add_argument("--ort-reference", choices=("default", "int8-allowed", "basic"),
                    default="default",
                    help="compile_model(ort_reference=...), and the plain session (and the "
                    "QDQ output's) with the same options")
    a = ap.parse_args(argv)
    tmp = a.workdir or tempfile.mkdtemp()
    os.makedirs(tmp, exist_ok=True)
    fpath, qpath, cal, ev, metric = load_model(a.model, tmp, a.calib, a.eval)
    t0 = time.process_time()
    c = compile_model(qpath, B.CFG, calib=cal, bias_correct=False, output_thresholds=False,
                      qdq_requant=a.qdq_requant, ort_reference=a.ort_reference)
    print(f"{a.model}: compile {time.process_time() - t0:.1f} s CPU", flush=True)
    got, exact = u8s8_probe(a.ort_reference)
    print(f"onnxruntime's QLinearConv on this CPU ({a.ort_reference} session), 1x1 conv of 64 "
          f"products 127 x 127: {got} (exact {exact}): " +
          ("exact" if got == exact else "NOT the integer conv: U8S8 pair sums saturate "
           "(VPMADDUBSW, x86 without AVX-VNNI); the plain session's QLinearConv outputs "
           "are not a reference here"), flush=True)
    q = c.qgraph
    if getattr(q, "qdq_refused", ""):
        print("  QDQ scales not kept:", q.qdq_refused)
    for nn in getattr(q, "qdq_notes", []):
        print("  not at the model's scales:", nn)
    rq = getattr(q, "qdq_requant", [])
    if rq:
        print(f"  qdq_requant auto: {sum(r[1] == 'fixed' for r in rq)} of {len(rq)} layers "
              f"fixed-point (equal to float32 on every accumulator), the others float32")
    from collections import Counter
    fl = Counter(n.op for n in q.nodes if q.values[n.output].dtype.startswith("float") and
                 n.op not in ("sdequantize", "dequantize"))
    print("  int8 nodes:", dict(Counter(n.op for n in q.nodes if q.values[n.output].dtype == "int8")))
    wide = Counter(n.op for n in q.nodes if q.values[n.output].dtype == "int32")
    if wide:
        print("  int32 (wide accumulator) nodes:", dict(wide))
    print("  float nodes (CPU):", dict(fl))
    ex = c.executor(SimDevice(B.CFG, timed=True))
    got = ex.run(ev[0])
    ref0 = run_graph(q, ev[0])
    exact_sim = all(np.array_equal(got[o], ref0[o]) for o in ref0)
    print(f"timed simulator bit-exact vs the quantised graph: {exact_sim}; VTA cycles "
          f"{ex.summary()['vta_cycles']:,}", flush=True)
    cpu_s: dict = {}
    vta_c: dict = {}
    for _ in range(3):                # the CPU nodes' seconds: the least of three runs
        ex.run(ev[0])
        per: dict = {}
        for r in ex.records:
            if r["where"] == "vta":
                vta_c[r["op"]] = vta_c.get(r["op"], 0) + r["cycles"] / 3
            else:
                per[r["op"]] = per.get(r["op"], 0.0) + r["seconds"]
        for k, v in per.items():
            cpu_s[k] = min(cpu_s.get(k, v), v)
    top = sorted(cpu_s.items(), key=lambda kv: -kv[1])
    print(f"  CPU nodes {sum(cpu_s.values()) * 1e3:.1f} ms per inference (least of 3): " +
          ", ".join(f"{k} {v * 1e3:.2f}" for k, v in top[:8]))
    print("  VTA cycles by op: " + ", ".join(
        f"{k} {int(v):,}" for k, v in sorted(vta_c.items(), key=lambda kv: -kv[1])))
    import onnxruntime as ort
    fs = B.session(fpath)
    qs = ort.InferenceSession(qpath, ort_options(a.ort_reference),
                              providers=["CPUExecutionProvider"])
    s = ort.InferenceSession(B.exposed_qdq(qpath).SerializeToString(),
                             ort_options(a.ort_reference), providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    modes = ["program"] + ([] if a.no_ideal else ["ideal"])
    modes += [m + " isolated" for m in modes] + ([] if a.no_ideal else ["program vs ideal"])
    tot: dict = {}
    ptot: dict = {}
    if a.vs_plain:
        ps, pkept = plain_visible(qpath, tmp, a.ort_reference)
    outs: dict = {m: [] for m in modes}
    fref, oref, eref = [], [], []
    for x in ev:
        res = dict(zip(names, s.run(None, x)))
        fref.append(fs.run(None, x)[0])
        oref.append(qs.run(None, x)[0])
        eref.append(res[qs.get_outputs()[0].name])
        pv = dict(zip([o.name for o in ps.get_outputs()], ps.run(None, x))) if a.vs_plain \
            else {}

        def count(key, got, want):
            d = np.abs(got.astype(np.int64) - want.astype(np.int64))
            t = ptot.setdefault(key, [0, 0, 0])
            t[0], t[1], t[2] = t[0] + d.size, t[1] + int((d <= 1).sum()), t[2] + int((d == 0).sum())
        for on in pkept if a.vs_plain else []:   # onnxruntime's two executions
            if on in res and res[on].shape == plain_value(pv, pkept[on], res[on].shape).shape:
                count(("exposed", on), res[on], plain_value(pv, pkept[on], res[on].shape))
        envs = {}
        for m in modes:
            if m == "program":
                env = run_graph(q, x, keep=True)
            elif m == "ideal":
                env = run_ideal(q, x)
            elif m.endswith("isolated"):
                env = run_isolated(q, x, res,
                                   None if m.startswith("program") else ideal_node)
            else:                      # our two integer pipelines against each other
                env = envs["ideal"]
            envs[m] = env
            outs[m].append(env[q.outputs[0]])
            for qn in q.scales:
                on = qdq_output_name(q, qn)
                if on not in res:
                    continue
                other = envs["program"][qn] if m == "program vs ideal" else res.get(on)
                if m == "program" and on in pkept and \
                        plain_value(pv, pkept[on], env[qn].shape).shape == env[qn].shape:
                    count(("program", on), env[qn], plain_value(pv, pkept[on], env[qn].shape))
                if other is None or env[qn].shape != other.shape:
                    continue
                d = np.abs(env[qn].astype(np.int64) - other.astype(np.int64))
                t = tot.setdefault((on, m), [0, 0, 0, 0])
                t[0] += d.size
                t[1] += int((d <= 1).sum())
                t[2] += int((d == 0).sum())
                t[3] = max(t[3], int(d.max()))
    fr = np.stack(fref)
    print(f"SQNR vs float: onnxruntime int8 {B.sqnr(fr, np.stack(oref)):.2f} dB; this "
          f"project {B.sqnr(fr, np.stack(outs['program'])):.2f} dB (vs onnxruntime's QDQ "
          f"output {B.sqnr(np.stack(oref), np.stack(outs['program'])):.2f} dB)")
    od = np.stack(oref) != np.stack(eref)
    print(f"onnxruntime against itself, the plain QDQ model vs the same with every "
          f"QuantizeLinear output exposed (other fusions): output SQNR "
          f"{B.sqnr(np.stack(oref), np.stack(eref)):.2f} dB, {int(od.sum()):,} of {od.size:,} "
          f"outputs differ")
    for who in ("exposed", "program") if a.vs_plain else ():
        pt = {k[1]: t for k, t in ptot.items() if k[0] == who}
        low = [k for k, t in pt.items() if t[1] < 0.99 * t[0]]
        print(f"{'onnxruntime exposed' if who == 'exposed' else 'this project'} vs onnxruntime "
              f"plain at the {len(pt)} QuantizeLinear outputs the plain execution keeps: "
              f"{len(low)} below 99% within 1 LSB; {sum(t[0] - t[2] for t in pt.values()):,} "
              f"of {sum(t[0] for t in pt.values()):,} differ" + "".join(
                  f"\n  {k}: {100 * pt[k][2] / pt[k][0]:.3f}% exact, "
                  f"{100 * pt[k][1] / pt[k][0]:.3f}% within 1 LSB" for k in low))
        fused = [k for k in pt if pkept[k][2] not in ("QuantizeLinear", "QLinearConv")]
        if fused:
            print("  at the fused kernels' outputs: " + "; ".join(
                f"{pkept[k][2]} {k.replace('_QuantizeLinear_Output', '')} "
                f"{100 * pt[k][2] / pt[k][0]:.3f}% exact" for k in fused))
    qdq_layers = sum(1 for n in B.exposed_qdq(qpath).graph.node if n.op_type == "QuantizeLinear")
    print(f"layers compared: {len({k[0] for k in tot})} of {qdq_layers} QuantizeLinear outputs "
          f"of the QDQ model (the others are inside float regions or folded)")
    print("\nlayer | " + " | ".join(f"{m}: exact % | within 1 LSB % | max" for m in modes))
    layers = []
    for (on, m) in tot:
        if on not in layers:
            layers.append(on)
    worst = {m: (101.0, "") for m in modes}
    for on in layers:
        row = []
        for m in modes:
            t = tot[(on, m)]
            w1 = 100 * t[1] / t[0]
            worst[m] = min(worst[m], (w1, on))
            row.append(f"{100 * t[2] / t[0]:.3f} | {w1:.3f} | {t[3]}")
        short = on.replace("_QuantizeLinear_Output", "").replace("_output_0", "")
        print(f"{short} | " + " | ".join(row))
    for m in modes:
        t = [tot[k] for k in tot if k[1] == m]
        n, diff = sum(x[0] for x in t), sum(x[0] - x[2] for x in t)
        below = sum(1 for on in layers if 100 * tot[(on, m)][1] / tot[(on, m)][0] < 99)
        print(f"{m}: worst within-1-LSB {worst[m][0]:.3f}% ({worst[m][1]}); {below} of "
              f"{len(layers)} layers below 99%; {diff:,} of {n:,} outputs differ "
              f"({diff / max(n, 1):.2e}), {sum(x[0] - x[1] for x in t):,} by more than one LSB")
    if metric is not None and a.metric_n:
        import pretrained as P
        sq = P.ort_predict(qpath)
        mf = metric(P.ort_predict(fpath), a.metric_n)
        mo = metric(sq, a.metric_n)
        mp = metric(lambda f: [run_graph(q, f)[o] for o in q.outputs], a.metric_n)
        print(f"task metric ({a.metric_n} samples): float {mf:.4f}; onnxruntime QDQ {mo:.4f}; "
              f"this project's QDQ program {mp:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
