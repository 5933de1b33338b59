"""ONNX conformance of the compiler's float path: the node tests shipped in the ``onnx`` wheel
(``onnx.backend.test``, one small model and reference outputs per operator case) run through
:class:`compiler.graph.onnx_backend.VtaBackend`, counted per operator.

Operators: every operator the importer knows plus every operator issue 23 asks for (the work
list).  A test belongs to the operator of its single node; an ``_expanded`` test (the
operator written as its ONNX function body) to the operator it expands.  The ``data/light``
models (nine real architectures) are run too, against their shipped outputs.  The sequence
and optional operators (:data:`STRUCTURED`, issue 23's second part) are a table of their own,
with the ``data/simple`` sequence models (``test_sequence_model1`` to ``8``: the only tests of
SequenceConstruct, SequenceEmpty, SequenceAt, SequenceErase, SequenceLength and
ConcatFromSequence the onnx wheel ships), each counted for every operator it uses.  The node
tests are counted twice: with the backend's default binding of the inputs the importer needs
as constants (weights, shapes, non-float inputs) to the test's values, and with every input
left an activation.

Usage::

    python benchmarks/corpus/conformance.py                      # markdown tables on stdout
    python benchmarks/corpus/conformance.py --json OUT.json --ops Relu,Conv
    python benchmarks/corpus/conformance.py --failures           # first error of each failure
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
import unittest
import warnings

#: operators ``compiler.graph.onnx_import`` imports today (ONNX names).
SUPPORTED = ["Conv", "BatchNormalization", "Relu", "Clip", "MaxPool", "AveragePool",
             "GlobalAveragePool", "Add", "Mul", "Gemm", "MatMul", "Flatten", "Reshape",
             "Concat", "Softmax", "Identity", "Dropout", "Constant", "Shape", "Gather",
             "Unsqueeze", "Squeeze", "Cast", "ArgMax", "QuantizeLinear", "DequantizeLinear"]

#: operators issue 23 asks for (besides those above).
WANTED = ["Div", "Sub", "Pow", "Sqrt", "Exp", "Log", "Tanh", "Erf", "Neg", "Abs", "Reciprocal",
          "Min", "Max", "Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "Elu",
          "Gelu", "Softplus", "ReduceMean", "ReduceSum", "ReduceMax", "LayerNormalization",
          "InstanceNormalization", "LogSoftmax", "Einsum", "Transpose", "Slice", "Split", "Pad",
          "Tile", "Expand", "Where", "Equal", "Less", "Greater", "ConstantOfShape", "Range",
          "Resize", "Upsample", "ConvTranspose", "DepthToSpace", "SpaceToDepth"]

#: the sequence and optional operators (compiler.ops.sequence), a group of their own.
STRUCTURED = ["SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceInsert",
              "SequenceErase", "SequenceLength", "ConcatFromSequence", "SplitToSequence",
              "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement"]


def node_tests() -> dict[str, str]:
    """{test name (without the device suffix): ONNX operator} for every node test."""
    from onnx.backend.test.loader import load_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    ops = {}
    for c in cases:
        nodes = c.model.graph.node
        ops[c.name] = nodes[0].op_type if len(nodes) == 1 else None
    for name in ops:                               # expanded forms: the op of the base test
        if ops[name] is None:
            base = re.sub(r"_expanded(_ver\d+)?$", "", name)
            ops[name] = ops.get(base) or "?"
    return ops


def backend(bind: bool):
    """VtaBackend, or a variant that never binds inputs to constants (every input stays an
    activation of the imported graph)."""
    from compiler.graph.onnx_backend import VtaBackend
    if bind:
        return VtaBackend

    class VtaBackendNoBind(VtaBackend):
        @classmethod
        def prepare(cls, model, device="CPU", **kw):
            kw["bind"] = False
            return super().prepare(model, device, **kw)
    return VtaBackendNoBind


def run(ops_wanted: list[str], bind: bool = True) -> tuple[dict, dict]:
    """Run the node tests of ``ops_wanted``; returns ({op: Counter(outcome)},
    {test: (op, outcome, first error line)})."""
    from onnx.backend.test import BackendTest
    ops = node_tests()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = BackendTest(backend(bind), __name__)
    items = bt._test_items["NodeModel"]
    counts = {op: collections.Counter() for op in ops_wanted}
    detail = {}
    for name, op in sorted(ops.items()):
        if op not in counts:
            continue
        item = items.get(name + "_cpu")
        if item is None:
            continue
        try:
            with warnings.catch_warnings(), np_quiet():
                warnings.simplefilter("ignore")
                item.func(None)
            outcome, msg = "pass", ""
        except unittest.SkipTest as e:
            outcome, msg = "skip", str(e)
        except AssertionError as e:
            outcome, msg = "mismatch", _first(e)
        except Exception as e:  # import / run errors are the result being measured
            outcome, msg = "error", f"{type(e).__name__}: {_first(e)}"
        counts[op][outcome] += 1
        detail[name] = (op, outcome, msg)
    return counts, detail


def run_sequence_models() -> list[tuple[str, list, str, str]]:
    """The ``data/simple`` sequence models through the backend (the onnx runner, against
    their shipped outputs): [(name, its operators, outcome, first error line)]."""
    import os

    import onnx
    import onnx.backend.test as obt
    from onnx.backend.test import BackendTest
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = BackendTest(backend(True), __name__)
    data = os.path.join(os.path.dirname(obt.__file__), "data", "simple")
    out = []
    for name, item in sorted(bt._test_items["SimpleModel"].items()):
        if not name.startswith("test_sequence_model") or not name.endswith("_cpu"):
            continue
        ops = sorted({n.op_type for n in onnx.load(os.path.join(
            data, name[:-len("_cpu")], "model.onnx")).graph.node})
        try:
            with warnings.catch_warnings(), np_quiet():
                warnings.simplefilter("ignore")
                item.func(None)
            outcome, msg = "pass", ""
        except AssertionError as e:
            outcome, msg = "mismatch", _first(e)
        except Exception as e:  # the outcome being measured
            outcome, msg = "error", f"{type(e).__name__}: {_first(e)}"
        out.append((name[:-len("_cpu")], ops, outcome, msg))
    return out


def structured_table(counts: dict, models: list) -> str:
    """The sequence and optional operators: node tests, and the sequence models using each."""
    lines = ["| operator | node tests | pass | sequence models using it | pass |",
             "|---|---|---|---|---|"]
    for op, c in counts.items():
        used = [m for m in models if op in m[1]]
        lines.append(f"| {op} | {sum(c.values())} | {c['pass']} | {len(used)} | "
                     f"{sum(m[2] == 'pass' for m in used)} |")
    lines.append(f"| **total** | {sum(sum(c.values()) for c in counts.values())} | "
                 f"{sum(c['pass'] for c in counts.values())} | {len(models)} models | "
                 f"{sum(m[2] == 'pass' for m in models)} |")
    return "\n".join(lines)


def light_models() -> list[str]:
    """The ``data/light`` models of the onnx wheel (real architectures, weights written as
    ConstantOfShape to keep them small)."""
    import glob
    import os

    import onnx.backend.test as obt
    d = os.path.join(os.path.dirname(obt.__file__), "data", "light")
    return sorted(glob.glob(os.path.join(d, "light_*.onnx")))


def run_light() -> list[tuple[str, str, str]]:
    """Each light model through the backend on the onnx runner's dummy input, against the
    output shipped beside it: [(name, outcome, detail)]."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    from compiler.graph.onnx_backend import VtaBackend
    out = []
    for p in light_models():
        name = p.rsplit("/", 1)[-1][len("light_"):-len(".onnx")]
        m = onnx.load(p)
        init = {i.name for i in m.graph.initializer}
        xs = [Runner.generate_dummy_data(vi, seed=0, name=name, random=False)
              for vi in m.graph.input if vi.name not in init]
        ref = numpy_helper.to_array(onnx.load_tensor(p[:-5] + "_output_0.pb"))
        try:
            with np_quiet():
                (y,) = VtaBackend.prepare(m).run(xs)
        except Exception as e:  # the outcome being measured
            out.append((name, "error", f"{type(e).__name__}: {_first(e)}"))
            continue
        ok = y.shape == ref.shape and np.allclose(y, ref, rtol=1e-3, atol=1e-5)
        err = float(np.abs(y - ref).max()) if y.shape == ref.shape else float("nan")
        out.append((name, "pass" if ok else "mismatch", f"max abs error {err:.3g}"))
    return out


def np_quiet():
    import numpy as np
    return np.errstate(all="ignore")


def _first(e) -> str:
    s = str(e).strip().splitlines()
    return next((ln.strip() for ln in s if ln.strip()), "")[:160]


def table(counts: dict, detail: dict, unbound: dict | None = None) -> str:
    reasons = collections.defaultdict(collections.Counter)
    for op, outcome, msg in detail.values():
        if outcome in ("error", "mismatch"):
            r = re.sub(r"(node|value|graph input|graph output) '[^']*'", r"\1", msg)
            r = re.sub(r" \('[^']*'\)", "", r)
            reasons[op][r[:90]] += 1
    ub = "| pass, inputs unbound " if unbound is not None else ""
    lines = [f"| operator | node tests | pass {ub}| fail | most common failure |",
             "|---|---|---|" + ("---|" if unbound is not None else "") + "---|---|"]
    tot = collections.Counter()
    for op, c in counts.items():
        n = sum(c.values())
        fail = c["error"] + c["mismatch"]
        tot.update(c)
        top = reasons[op].most_common(1)
        why = f"{top[0][0]} ({top[0][1]})" if top else ""
        u = f"| {unbound[op]['pass']} " if unbound is not None else ""
        lines.append(f"| {op} | {n} | {c['pass']} {u}| {fail} | {why.replace('|', '/')} |")
    n = sum(tot.values())
    u = (f"| {sum(c['pass'] for c in unbound.values())} " if unbound is not None else "")
    lines.append(f"| **total** | {n} | {tot['pass']} {u}| {tot['error'] + tot['mismatch']} | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="", help="comma-separated ONNX operators (default: the "
                    "importer's and issue 23's)")
    ap.add_argument("--json", default=None, help="write every test's outcome here")
    ap.add_argument("--failures", action="store_true", help="print every failing test")
    a = ap.parse_args(argv)
    ops = [o for o in a.ops.split(",") if o] or SUPPORTED + WANTED
    t0 = time.perf_counter()
    counts, detail = run(ops)
    unbound = run(ops, bind=False)[0]
    print(table(counts, detail, unbound))
    print(f"\n{sum(sum(c.values()) for c in counts.values())} node tests in "
          f"{time.perf_counter() - t0:.1f} s")
    if not a.ops:
        scounts, sdetail = run(STRUCTURED)
        detail.update(sdetail)
        models = run_sequence_models()
        print("\nSequence and optional operators:\n")
        print(structured_table(scounts, models))
        print("\n| onnx sequence model | operators | outcome | detail |\n|---|---|---|---|")
        for name, mops, outcome, msg in models:
            print(f"| {name} | {', '.join(mops)} | {outcome} | {msg.replace('|', '/')} |")
    print("\n| onnx light model | outcome | detail |\n|---|---|---|")
    for name, outcome, msg in run_light():
        print(f"| {name} | {outcome} | {msg.replace('|', '/')} |")
    if a.failures:
        for name, (op, outcome, msg) in sorted(detail.items()):
            if outcome in ("error", "mismatch"):
                print(f"{name:60s} {op:20s} {outcome:8s} {msg}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: list(v) for k, v in detail.items()}, f, indent=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
