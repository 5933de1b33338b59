"""This project's int8 against onnxruntime's static int8, side by side in one run, on the same
calibration data and the same held-out samples.

For each model (``resnet18``: torchvision's ResNet-18 exported by ``torch.onnx``, random
seeded weights with randomised batch-norm statistics, random normal images; ``digits``:
:func:`compiler.graph.models.digits_cnn` trained in numpy on scikit-learn's 8x8 digits):

1. the float model run by onnxruntime is the reference;
2. this project compiles the float model with each calibration method (``--methods``):
   SQNR of its output vs float (and top-1 agreement with float);
3. onnxruntime's ``quantize_static`` (QDQ, MinMax, symmetric int8 activations, int8
   weights per channel) of the same model on the same calibration samples, run by
   onnxruntime: SQNR vs float;
4. that QDQ model compiled by this project (its own scales kept, fixed-point
   requantisation): SQNR vs float, and agreement with onnxruntime executing it: per layer,
   the share of int8 outputs within one LSB and exactly equal, and the largest difference
   (onnxruntime run with every QuantizeLinear output exposed; the final output from the
   unmodified model), and the same with power-of-two scales (the previous behaviour);
   per layer both isolated (each layer run on onnxruntime's own int8 inputs: its arithmetic
   alone) and end to end, next to onnxruntime's two executions of the model (optimised:
   QLinearConv & co; unoptimised: DequantizeLinear -> float op -> QuantizeLinear) compared
   end to end the same way;
5. one held-out sample of each compiled program runs on the timed simulator and must be
   bit-exact against the quantised graph's reference (the other samples use the
   reference, which that check ties to the program).

Usage::

    python benchmarks/bench_int8_vs_ort.py --models resnet18,digits --calib 8 --eval 8

torch and torchvision are needed for ``resnet18`` (the corpus's opt-in dependency),
scikit-learn for ``digits``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from isa import VTAConfig  # noqa: E402
from vta_runtime import SimDevice  # noqa: E402

from compiler.graph.driver import compile_model  # noqa: E402
from compiler.graph.onnx_import import import_onnx  # noqa: E402
from compiler.graph.passes import float_pipeline  # noqa: E402
from compiler.graph.quantize import quantize  # noqa: E402
from compiler.graph.reference import run_graph  # noqa: E402

CFG = VTAConfig()


def sqnr(ref, got) -> float:
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    e = float(((ref - got) ** 2).sum())
    return float("inf") if e == 0 else 10 * np.log10(float((ref ** 2).sum()) / e)


# ------------------------------------------------------------------ models

def resnet18_model(path: str) -> tuple:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))
    from build_corpus import import_torchvision
    torch, tv = import_torchvision()
    torch.manual_seed(0)
    m = tv.models.resnet18(weights=None).eval()
    for mod in m.modules():          # random, but not identity, batch-norm statistics
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.0)
            mod.bias.data.uniform_(-0.2, 0.2)
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True)
    rng = np.random.default_rng(1)
    return "input", lambda n: rng.normal(size=(n, 1, 3, 224, 224)).astype(np.float32), None


def digits_model(path: str) -> tuple:
    import onnx
    from sklearn.datasets import load_digits

    from compiler.graph.models import digits_cnn, train_digits_cnn
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32).reshape(-1, 1, 1, 8, 8)
    perm = np.random.default_rng(0).permutation(len(x))
    w = train_digits_cnn(x[perm[:1300]].reshape(-1, 1, 8, 8), y[perm[:1300]], epochs=10)
    onnx.save(digits_cnn(w), path)
    pool = iter([x[perm[:1300]], x[perm[1300:]]])
    labels = y[perm[1300:]]
    return "image", lambda n: next(pool)[:n], labels


# ------------------------------------------------------------------ onnxruntime

def ort_qdq(fpath: str, qpath: str, name: str, calib) -> str:
    """onnxruntime's QDQ quantisation of ``fpath`` into ``qpath`` calibrated on ``calib``: an
    array of samples of input ``name``, or a list of feed dicts (``name`` unused).  Weights
    per channel, or per tensor where onnxruntime's per-channel quantisation fails on the
    model (magika: its int32-bias weight-scale adjustment raises); returns which."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([x if isinstance(x, dict) else {name: x} for x in calib])

        def get_next(self):
            return next(self.it, None)
    pre = qpath + ".pre.onnx"
    try:
        quant_pre_process(fpath, pre)
    except Exception:   # onnxruntime's symbolic shape inference fails on some real models
        quant_pre_process(fpath, pre, skip_symbolic_shape=True)
    for per_channel in (True, False):
        try:
            quantize_static(pre, qpath, Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                            per_channel=per_channel, extra_options={"ActivationSymmetric": True})
            return "per-channel" if per_channel else "per-tensor"
        except ValueError:
            if not per_channel:
                raise
    return ""


def session(model_or_path, optimise: bool = True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if not optimise:      # DequantizeLinear -> float op -> QuantizeLinear, no QLinear fusion
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    src = model_or_path if isinstance(model_or_path, (str, bytes)) else \
        model_or_path.SerializeToString()
    return ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def exposed_qdq(qpath: str):
    """The QDQ model with every QuantizeLinear output also a graph output."""
    import onnx
    m = onnx.load(qpath)
    have = {o.name for o in m.graph.output}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and n.output[0] not in have:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(n.output[0]))
    return m


def ort_name(fv: str) -> str:
    return (fv.replace("_DequantizeLinear_Output", "_QuantizeLinear_Output")
            if fv.endswith("_DequantizeLinear_Output") else fv + "_QuantizeLinear_Output")


# ------------------------------------------------------------------ runs

def check_on_sim(c, name, x) -> bool:
    ex = c.executor(SimDevice(CFG, timed=True))
    got = ex.run({name: x})
    ref = run_graph(c.qgraph, {name: x})
    return all(np.array_equal(got[o], ref[o]) for o in ref)


def layer_agreement(q, qpath, name, xs):
    """{ORT Q output: ([n, within 1, exact, max diff] end to end, the same isolated)} over
    ``xs``, for q's int8 values.  End to end: this project's whole program against
    onnxruntime's (one-LSB differences propagate from layer to layer); isolated: each
    integer node run on onnxruntime's own int8 inputs (its arithmetic alone)."""
    from compiler.graph.reference import run_node
    s = session(exposed_qdq(qpath))
    names = [o.name for o in s.get_outputs()]
    tot: dict = {}
    producer = {n.output: n for n in q.nodes}

    def acc(key, k, a, b):
        d = np.abs(a.astype(np.int64) - b.astype(np.int64))
        t = tot.setdefault(key, ([0, 0, 0, 0], [0, 0, 0, 0]))[k]
        t[0] += d.size
        t[1] += int((d <= 1).sum())
        t[2] += int((d == 0).sum())
        t[3] = max(t[3], int(d.max()))
    for x in xs:
        res = dict(zip(names, s.run(None, {name: x})))
        env = run_graph(q, {name: x}, keep=True)
        for qn in q.scales:
            on = ort_name(q.float_of.get(qn, ""))
            if on not in res or env[qn].shape != res[on].shape:
                continue
            acc(on, 0, env[qn], res[on])
            n = producer.get(qn)
            ins = []
            for i in (n.inputs if n is not None else []):
                oi = ort_name(q.float_of.get(i, "")) if i in q.scales else None
                ins.append(res[oi] if oi in res and res[oi].shape == env[i].shape else env[i])
            if n is not None and n.op not in ("squantize",):
                acc(on, 1, run_node(n, ins), res[on])
            else:
                acc(on, 1, env[qn], res[on])
    return tot


def ort_self_agreement(qpath, name, xs):
    """Per layer, the share of onnxruntime's int8 outputs within one LSB between its two
    executions of the same QDQ model: optimised (QLinearConv etc., integer kernels, the
    default) and unoptimised (each DequantizeLinear -> float op -> QuantizeLinear): how far
    two faithful executions drift apart end to end."""
    m = exposed_qdq(qpath)
    a, b = session(m), session(m, optimise=False)
    names = [o.name for o in a.get_outputs()]
    tot: dict = {}
    for x in xs:
        ra, rb = a.run(None, {name: x}), b.run(None, {name: x})
        for nm, u, v in zip(names, ra, rb):
            if u.dtype.kind not in "iu":
                continue
            d = np.abs(u.astype(np.int64) - v.astype(np.int64))
            t = tot.setdefault(nm, [0, 0])
            t[0] += d.size
            t[1] += int((d <= 1).sum())
    return {k: 100 * t[1] / t[0] for k, t in tot.items()}


def run_model(label, build, methods, n_cal, n_eval, tmp, layers_out):
    fpath, qpath = os.path.join(tmp, label + ".onnx"), os.path.join(tmp, label + "_qdq.onnx")
    name, data, labels = build(fpath)
    cal, ev = data(n_cal), data(n_eval)
    fs = session(fpath)
    ref = [fs.run(None, {name: x})[0] for x in ev]
    rows = []

    def row(what, outs, note=""):
        db = sqnr(np.stack(ref), np.stack(outs))
        agree = np.mean([np.argmax(a) == np.argmax(b) for a, b in zip(ref, outs)])
        acc = "" if labels is None else \
            f"{np.mean([np.argmax(o) == t for o, t in zip(outs, labels[:len(outs)])]):.3f}"
        rows.append((label, what, db, agree, acc, note))
        print(f"{label:9s} {what:38s} SQNR {db:6.2f} dB  top-1 agrees {agree:.3f} {acc} {note}",
              flush=True)

    if labels is not None:
        row("float (onnxruntime)", ref)
    for m in methods:
        t0 = time.process_time()
        c = compile_model(fpath, CFG, calib={name: cal}, mode=m)
        secs = time.process_time() - t0
        outs = [run_graph(c.qgraph, {name: x})[c.qgraph.outputs[0]] for x in ev]
        row(f"this project, --calib-method {m}", outs,
            f"(compile {secs:.1f} s CPU; sim bit-exact {check_on_sim(c, name, ev[0])})")
    ort_qdq(fpath, qpath, name, cal)
    qs = session(qpath)
    ort_out = [qs.run(None, {name: x})[0] for x in ev]
    row("onnxruntime int8 QDQ (MinMax)", ort_out)
    c = compile_model(qpath, CFG)
    q = c.qgraph
    outs = [run_graph(q, {name: x})[q.outputs[0]] for x in ev]
    last = next((n for n in q.nodes if n.output == q.outputs[0]), None)
    step = float(last.attrs.get("scale", 1.0)) if last is not None else 1.0
    fin = np.abs(np.stack(outs) - np.stack(ort_out)).max()
    row("this project, the QDQ model's scales", outs,
        f"(vs ORT QDQ {sqnr(np.stack(ort_out), np.stack(outs)):.1f} dB; sim bit-exact "
        f"{check_on_sim(c, name, ev[0])}; notes {len(q.qdq_notes)})")
    fg = float_pipeline().run(import_onnx(qpath))
    q2 = quantize(fg, ranges=dict(fg.qdq_ranges), keep_qdq_scales=False)
    outs2 = [run_graph(q2, {name: x})[q2.outputs[0]] for x in ev]
    row("this project, QDQ at power-of-two scales", outs2,
        f"(vs ORT QDQ {sqnr(np.stack(ort_out), np.stack(outs2)):.1f} dB)")
    tot = layer_agreement(q, qpath, name, ev)
    for j, what in ((1, "isolated"), (0, "end to end")):
        worst = min((t[j][1] / t[j][0], k) for k, t in tot.items()) if tot else (np.nan, "")
        print(f"{label}: {len(tot)} layers vs ORT QDQ, {what}: worst within-1-LSB "
              f"{100 * worst[0]:.3f}% ({worst[1]})")
    print(f"{label}: final output max |diff| vs ORT QDQ {fin:.4g} ({fin / step:.2f} LSB)")
    selfa = ort_self_agreement(qpath, name, ev)
    if selfa:
        k = min(selfa, key=selfa.get)
        print(f"{label}: onnxruntime optimised vs unoptimised on the same QDQ model, end to "
              f"end: worst within-1-LSB {selfa[k]:.3f}% ({k})")
    for k, (e2e, iso) in tot.items():
        layers_out.append((label, k, iso[0], 100 * iso[1] / iso[0], 100 * iso[2] / iso[0],
                           iso[3], 100 * e2e[1] / e2e[0], 100 * e2e[2] / e2e[0], e2e[3],
                           selfa.get(k, float("nan"))))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="digits,resnet18")
    ap.add_argument("--methods", default="minmax,percentile,kl,mse")
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--eval", type=int, default=8)
    ap.add_argument("--layers", action="store_true", help="print every layer's agreement")
    a = ap.parse_args(argv)
    builders = {"resnet18": resnet18_model, "digits": digits_model}
    methods = a.methods.split(",")
    from compiler.graph.calibrate import check_method
    for m in methods:
        check_method(m)
    layers: list = []
    with tempfile.TemporaryDirectory() as tmp:
        for label in a.models.split(","):
            if label not in builders:
                raise SystemExit(f"unknown model {label!r} (resnet18, digits)")
            n_eval = a.eval if label != "digits" else 497
            run_model(label, builders[label], methods, a.calib if label != "digits" else 200,
                      n_eval, tmp, layers)
    print("\nper layer: model | ORT Q output | elements | isolated: within 1 LSB % | exact % "
          "| max diff | end to end: within 1 LSB % | exact % | max diff | ORT optimised vs "
          "unoptimised, end to end: within 1 LSB %")
    for r in layers:
        if a.layers or r[3] < 99.9:
            print(f"{r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]} | {r[6]:.3f} | "
                  f"{r[7]:.3f} | {r[8]} | {r[9]:.3f}")
    if layers:
        print(f"layers: {len(layers)}; isolated: min within-1-LSB "
              f"{min(r[3] for r in layers):.3f}%, min exact {min(r[4] for r in layers):.3f}%; "
              f"end to end: min within-1-LSB {min(r[6] for r in layers):.3f}%, min exact "
              f"{min(r[7] for r in layers):.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
