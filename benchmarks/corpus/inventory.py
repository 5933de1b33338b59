"""Op inventory and gap report of the corpus: for every model, the ONNX operator types (with
the attributes that decide how they can be implemented), whether today's compiler imports and
compiles it, and the first error; written as markdown (``INVENTORY.md`` beside this file).

Compilation is ``compiler.graph.driver.compile_model(path, mode="global_scale")`` (int8, no
calibration data needed), each model in its own subprocess with a timeout, so one crash or
hang cannot stop the report.  Pretrained models are compiled with their symbolic input
dimensions pinned (``pretrained.pinned``, as ``vta compile --input-shape`` does).

Usage::

    python benchmarks/corpus/build_corpus.py                   # the torchvision models first
    python benchmarks/corpus/inventory.py [--out benchmarks/corpus/INVENTORY.md] [--models a,b]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.corpus import build_corpus, pretrained  # noqa: E402

#: attributes worth listing per operator (what decides lowering, layout or support).
KEY_ATTRS = {
    "Conv": ("group", "dilations", "auto_pad", "kernel_shape", "strides"),
    "ConvTranspose": ("group", "strides", "kernel_shape", "output_padding", "pads"),
    "MaxPool": ("kernel_shape", "strides", "ceil_mode", "auto_pad", "dilations"),
    "AveragePool": ("kernel_shape", "strides", "ceil_mode", "count_include_pad", "auto_pad"),
    "Resize": ("mode", "coordinate_transformation_mode", "nearest_mode"),
    "Upsample": ("mode",),
    "ReduceMean": ("axes", "keepdims"), "ReduceSum": ("axes", "keepdims"),
    "ReduceMax": ("axes", "keepdims"),
    "Softmax": ("axis",), "LogSoftmax": ("axis",), "Concat": ("axis",), "Split": ("axis",),
    "Gather": ("axis",), "Transpose": ("perm",), "Flatten": ("axis",), "Pad": ("mode",),
    "Gemm": ("transA", "transB", "alpha", "beta"), "HardSigmoid": ("alpha", "beta"),
    "LeakyRelu": ("alpha",), "Squeeze": ("axes",), "Unsqueeze": ("axes",),
    "LayerNormalization": ("axis",), "ArgMax": ("axis", "keepdims"), "Cast": ("to",),
    "LSTM": ("direction", "hidden_size"), "Einsum": ("equation",), "If": (),
}


def _short(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ",".join(str(_short(x)) for x in v) + "]"
    return v


def _all_nodes(graph):
    """Every node, the nodes of subgraphs (If/Loop bodies) included."""
    from onnx import helper
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == a.GRAPH:
                yield from _all_nodes(helper.get_attribute_value(a))
            elif a.type == a.GRAPHS:
                for g in helper.get_attribute_value(a):
                    yield from _all_nodes(g)


def op_profile(model) -> dict:
    """{op: {"count": n, "attrs": {attr: sorted distinct values}, "const_inputs": ...}}."""
    from onnx import helper
    consts = {t.name for t in model.graph.initializer}
    consts |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    prof: dict = {}
    for n in _all_nodes(model.graph):
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
        p = prof.setdefault(key, {"count": 0, "attrs": collections.defaultdict(set),
                                  "act_inputs": collections.Counter()})
        p["count"] += 1
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        for k in KEY_ATTRS.get(n.op_type, ()):
            if k in attrs:
                p["attrs"][k].add(str(_short(attrs[k])))
        nact = sum(1 for i in n.input if i and i not in consts)
        if n.op_type in ("MatMul", "Gemm", "Mul", "Add", "Div", "Sub", "Einsum", "Conv"):
            p["act_inputs"][nact] += 1
    return prof


def _all_values(model, feeds_shapes) -> dict:
    """Every top-level tensor of ``model`` from one onnxruntime run on zero inputs (the
    shapes, and the values of shape computations and constant subgraphs); {} when
    onnxruntime is missing or fails on the model."""
    try:
        import numpy as np
        import onnxruntime as ort
        from onnx import helper
    except ImportError:
        return {}
    try:
        m = type(model)()
        m.CopyFrom(model)
        have = {o.name for o in m.graph.output}
        for n in m.graph.node:
            for o in n.output:
                if o and o not in have:
                    m.graph.output.append(helper.make_empty_tensor_value_info(o))
                    have.add(o)
        for vi in m.graph.output:          # let onnxruntime infer the types
            if vi.type.tensor_type.elem_type == 0:
                vi.ClearField("type")
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        feeds = {}
        for i in s.get_inputs():
            shape = feeds_shapes.get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
            dt = {"tensor(float)": np.float32, "tensor(int64)": np.int64,
                  "tensor(int32)": np.int32}.get(i.type, np.float32)
            feeds[i.name] = np.full(shape, 16000 if i.name == "sr" else 0, dt)  # sr: 16 kHz
        vals = dict(feeds)
        names = [o.name for o in s.get_outputs()]
        for n, v in zip(names, s.run(None, feeds)):
            if isinstance(v, np.ndarray):
                vals[n] = v
        return vals
    except Exception as e:  # best effort: without it the shapes come from shape inference
        print(f"inventory: onnxruntime could not run the model ({type(e).__name__}: "
              f"{str(e)[:200]})", file=sys.stderr)
        return {}


def node_support(model, input_shapes: dict) -> dict:
    """Each node of an imported operator alone (its activation inputs as graph inputs with
    the inferred shapes, its constant and integer inputs as initializers) through the
    importer: {op: Counter(outcome)}, outcome "ok" or the error without the node name."""
    import re

    from onnx import helper, numpy_helper, shape_inference

    from compiler.graph.onnx_import import import_onnx
    sup = supported_ops()
    inf = shape_inference.infer_shapes(model)
    types = {vi.name: vi.type for vi in list(inf.graph.value_info) + list(inf.graph.input)
             + list(inf.graph.output)}
    consts = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = n.attribute[0].t
    vals = _all_values(model, input_shapes)
    folded = set(consts)            # constant subgraphs (ConstantOfShape weights, shapes)
    for n in model.graph.node:
        if all(i in folded for i in n.input if i) and not any(
                a.type in (a.GRAPH, a.GRAPHS) for a in n.attribute):
            folded.update(n.output)
    ints = {k: v for k, v in vals.items()
            if (k in folded or v.dtype.kind in "iub") and k not in consts}
    out: dict = {}
    for k, n in enumerate(model.graph.node):
        if n.op_type not in sup or n.domain not in ("", "ai.onnx") or n.op_type == "Constant":
            continue
        ins, inits, bad = [], [], None
        for i in dict.fromkeys(n.input):         # x * x: one graph input
            if not i:
                continue
            if i in consts:
                t = type(consts[i])()
                t.CopyFrom(consts[i])
                t.name = i
                inits.append(t)
            elif i in ints:
                inits.append(numpy_helper.from_array(ints[i], i))
            elif i in vals:
                ins.append(helper.make_tensor_value_info(
                    i, helper.np_dtype_to_tensor_dtype(vals[i].dtype), vals[i].shape))
            elif i in types and types[i].tensor_type.shape.dim:
                ins.append(helper.make_value_info(i, types[i]))
            else:
                bad = "input shape unknown"
        if bad is None:
            g = helper.make_graph([n], "node", ins, [helper.make_value_info(
                o, types[o]) if o in types else helper.make_tensor_value_info(o, 1, None)
                for o in n.output if o], inits)
            # IR >= 4: initializers need not be graph inputs (IR 3 models, e.g. data/light,
            # list every initializer as an input; a node cut out of one does not)
            mm = helper.make_model(g, opset_imports=list(model.opset_import),
                                   ir_version=max(model.ir_version, 4))
            try:
                import_onnx(mm)
                bad = "ok"
            except Exception as e:  # the outcome being recorded
                bad = re.sub(r"node '[^']*'( \(\w+\))?: ", "", str(e).splitlines()[0])
                bad = re.sub(r"\('[^']*'\)", "", bad)
                bad = re.sub(r"(graph input|value) '[^']*'", r"\1", bad)
                bad = re.sub(r"\(1, \d+, 1, 1\) must have the result's shape \(1, \d+, \d+, "
                             r"\d+\)", "(1, C, 1, 1) must have the result's shape (1, C, H, W)",
                             bad)[:120]
        out.setdefault(n.op_type, collections.Counter())[bad] += 1
    return out


def supported_ops() -> set[str]:
    from compiler.ops import registry
    return set(registry.onnx_ops())


def _compile_one(path: str, pinned_name: str | None) -> dict:
    """Runs in the child: import, then compile; the first error and the stage it came from."""
    from isa import VTAConfig
    from compiler.graph.driver import compile_model
    from compiler.graph.onnx_import import import_onnx
    from compiler.graph.passes import float_pipeline
    model = pretrained.pinned(pinned_name) if pinned_name else path
    out = {"stage": None, "error": None, "seconds": {}}
    for stage, fn in (("import", lambda: import_onnx(model)),
                      ("float passes", lambda: float_pipeline().run(import_onnx(model))),
                      ("compile", lambda: compile_model(model, VTAConfig(),
                                                        mode="global_scale"))):
        t0 = time.perf_counter()
        try:
            r = fn()
        except Exception as e:  # the error is what the inventory records
            out["stage"], out["error"] = stage, f"{type(e).__name__}: {e}".splitlines()[0][:300]
            return out
        out["seconds"][stage] = round(time.perf_counter() - t0, 2)
        if stage == "compile":
            steps = r.program.steps
            out["steps"] = {k: sum(s.kind == k for s in steps) for k in ("vta", "cpu", "host")}
    return out


def compile_in_child(path: str, pinned_name: str | None, timeout: int) -> dict:
    cmd = [sys.executable, __file__, "--child", path, "--pinned", pinned_name or ""]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"stage": "compile", "error": f"timeout after {timeout} s", "seconds": {}}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    return {"stage": "crash", "error": f"exit {r.returncode}: {tail[:300]}", "seconds": {}}


def models(names=None) -> list[tuple[str, str, str, str | None]]:
    """[(name, source, path, pinned name)] for the cached corpus and installed pretrained."""
    out = []
    cache = build_corpus.cached()
    for n in build_corpus.MODELS:
        if n in cache:
            out.append((n, "torchvision", str(cache[n]), None))
    for n in pretrained.available():
        spec = pretrained.PRETRAINED[n]
        out.append((n, f"{spec['pip']} (pretrained)", str(pretrained.locate(n)), n))
    from benchmarks.corpus.conformance import light_models
    for p in light_models():
        n = "light_" + Path(p).stem[len("light_"):]
        out.append((n, "onnx wheel data/light", p, None))
    return [m for m in out if not names or m[0] in names]


def _inputs(model) -> str:
    init = {t.name for t in model.graph.initializer}
    parts = []
    for vi in model.graph.input:
        if vi.name in init:
            continue
        dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
                for d in vi.type.tensor_type.shape.dim]
        parts.append(f"{vi.name} {'x'.join(dims)}")
    return "; ".join(parts)


def report(rows: list[dict], sup: set[str]) -> str:
    date = time.strftime("%Y-%m-%d", time.gmtime())
    L = [f"# Corpus op inventory and gap report ({date})", "",
         "Generated by `python benchmarks/corpus/inventory.py` (compile = `compile_model(path, "
         "mode=\"global_scale\")`, int8, default 1x16x16 configuration; pretrained models "
         "with their symbolic input dimensions pinned to the shapes in "
         "`benchmarks/corpus/pretrained.py`). An operator in **bold** is not imported today.",
         "", "## Models", "",
         "| model | source | opset | inputs (as shipped) | nodes | op types | compiles | "
         "first error (stage) | operators not imported |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ok = "yes" if r["result"]["error"] is None else "no"
        if ok == "yes":
            st = r["result"].get("steps", {})
            err = (f"- ({st.get('vta', 0)} VTA / {st.get('cpu', 0)} CPU steps, "
                   f"{r['result']['seconds'].get('compile', 0):.1f} s)")
        else:
            err = f"{r['result']['error']} ({r['result']['stage']})"
        miss = [o for o in r["ops"] if o.split(".")[-1] not in sup]
        L.append(f"| {r['name']} | {r['source']} | {r['opset']} | {r['inputs']} | "
                 f"{r['nodes']} | {len(r['ops'])} | {ok} | {err.replace('|', '/')} | "
                 f"{', '.join(miss) or '-'} |")
    n_ok = sum(r["result"]["error"] is None for r in rows)
    L += ["", f"{n_ok} of {len(rows)} models compile.", "", "## Operators (the work list)", "",
          "Per operator: the models that use it (node count), whether the importer has it, and "
          "the distinct values of the attributes that matter; `act inputs` counts nodes by "
          "how many of their inputs are activations (not initializers/Constants): "
          "`MatMul 2:n` means n matmuls of two activations.", "",
          "| operator | imported | models | nodes | attributes | act inputs |",
          "|---|---|---|---|---|---|"]
    agg: dict = {}
    for r in rows:
        for op, p in r["ops"].items():
            a = agg.setdefault(op, {"models": [], "count": 0,
                                    "attrs": collections.defaultdict(set),
                                    "act": collections.Counter()})
            a["models"].append(r["name"])
            a["count"] += p["count"]
            for k, v in p["attrs"].items():
                a["attrs"][k] |= set(v)
            a["act"].update(p["act_inputs"])
    for op in sorted(agg, key=lambda o: (o.split(".")[-1] in sup, -len(agg[o]["models"]), o)):
        a = agg[op]
        imp = "yes" if op.split(".")[-1] in sup else "**no**"
        attrs = "; ".join(f"{k}={'/'.join(sorted(v)[:6])}{'/...' if len(v) > 6 else ''}"
                          for k, v in sorted(a["attrs"].items()))
        act = " ".join(f"{k}:{v}" for k, v in sorted(a["act"].items()))
        name = op if op.split(".")[-1] in sup else f"**{op}**"
        L.append(f"| {name} | {imp} | {len(a['models'])}: {', '.join(a['models'])} | "
                 f"{a['count']} | {attrs.replace('|', '/')} | {act} |")
    L += ["", "## Imported operators, node by node", "",
          "Each node of an operator the importer has, imported alone (activation inputs with "
          "the shapes of one onnxruntime run on zero inputs; constants, constant subgraphs and "
          "integer shape values as initializers): how many import, and why the others do not.", "",
          "| operator | nodes | import alone | why not (count: models) |", "|---|---|---|---|"]
    sup_agg: dict = {}
    for r in rows:
        for op, c in r["support"].items():
            a = sup_agg.setdefault(op, {"n": 0, "ok": 0, "why": collections.defaultdict(
                lambda: [0, set()])})
            for why, k in c.items():
                a["n"] += k
                if why == "ok":
                    a["ok"] += k
                else:
                    a["why"][why][0] += k
                    a["why"][why][1].add(r["name"])
    for op in sorted(sup_agg, key=lambda o: (sup_agg[o]["ok"] == sup_agg[o]["n"], o)):
        a = sup_agg[op]
        why = "; ".join(f"{w} ({k}: {', '.join(sorted(ms))})" for w, (k, ms) in
                        sorted(a["why"].items(), key=lambda kv: -kv[1][0]))
        L.append(f"| {op} | {a['n']} | {a['ok']} | {why.replace('|', '/') or '-'} |")
    L += ["", "## Per model", ""]
    for r in rows:
        ops = ", ".join(f"{o} {p['count']}" for o, p in
                        sorted(r["ops"].items(), key=lambda kv: -kv[1]["count"]))
        L.append(f"- **{r['name']}** ({r['path_name']}): {ops}")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE / "INVENTORY.md"))
    ap.add_argument("--json", default=None, help="also write the raw rows here")
    ap.add_argument("--models", default="", help="comma-separated subset")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pinned", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_compile_one(a.child, a.pinned or None)))
        return 0
    import onnx
    sup = supported_ops()
    rows = []
    for name, source, path, pin in models([n for n in a.models.split(",") if n]):
        m = onnx.load(path)
        t0 = time.perf_counter()
        res = compile_in_child(path, pin, a.timeout)
        opset = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import
                          if o.domain in ("", "ai.onnx", "ai.onnx.ml"))
        try:
            pm = pretrained.pinned(pin) if pin else m
            shapes = pretrained.PRETRAINED[pin]["inputs"] if pin else {}
            support = node_support(pm, shapes)
        except Exception as e:  # noqa: BLE001 - recorded, not fatal for the report
            support = {"?": collections.Counter({f"node check failed: {e}"[:120]: 1})}
        rows.append({"name": name, "source": source, "path_name": Path(path).name,
                     "support": support,
                     "opset": opset, "inputs": _inputs(m), "nodes": sum(1 for _ in
                                                                        _all_nodes(m.graph)),
                     "ops": op_profile(m), "result": res})
        print(f"{name:28s} {time.perf_counter() - t0:6.1f} s  "
              f"{res['error'] or 'compiles'} ({res['stage'] or '-'})", flush=True)
    text = report(rows, sup)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(a.out)), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    if a.json:
        def enc(o):
            return sorted(o) if isinstance(o, set) else dict(o)
        with open(a.json, "w") as f:
            json.dump(rows, f, default=enc, indent=0)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
