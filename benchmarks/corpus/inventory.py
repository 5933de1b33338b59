"""Op inventory and gap report of the corpus: for every model, the ONNX operator types (with
the attributes that decide how they can be implemented), whether today's compiler imports and
compiles it, and the first error; written as markdown (``INVENTORY.md`` beside this file).

Compilation is ``compiler.graph.driver.compile_model(path, mode="global_scale")`` (int8, no
calibration data needed), each model in its own subprocess with a timeout, so one crash or
hang cannot stop the report.  Pretrained models are compiled with their symbolic input
dimensions pinned (``pretrained.pinned``): the compiler has no ``--input-shape`` yet.

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
    """Every node, subgraphs (If/Loop bodies) included, with a depth marker."""
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


def supported_ops() -> set[str]:
    from compiler.graph.onnx_import import _Importer
    return {k[3:] for k in dir(_Importer) if k.startswith("op_")}


def _compile_one(path: str, pinned_name: str | None) -> dict:
    """Runs in the child: import, then compile; the first error and the stage it came from."""
    import numpy as np  # noqa: F401
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
        m = onnx.load(path, load_external_data=False)
        t0 = time.perf_counter()
        res = compile_in_child(path, pin, a.timeout)
        opset = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in m.opset_import
                          if o.domain in ("", "ai.onnx", "ai.onnx.ml"))
        rows.append({"name": name, "source": source, "path_name": Path(path).name,
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
