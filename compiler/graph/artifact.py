"""The compiled artifact: a directory, or the same files in a zip (``MODEL.vtar``).

Contents::

    manifest.json     format, sha256 of every other file, the config's hash
    config.json       the VTAConfig the program was compiled for
    graph.json        the quantised graph (values with int8 scales, nodes, placement options,
                      each VTA layer's schedule knobs: a tuned artifact stays tuned)
    params/NNN.npy    constants (weights int8, biases int32), loaded with allow_pickle=False
    vta/<node>.txt    each VTA kernel's op program (loads, GEMM/ALU micro-kernels, stores,
                      dependency tokens), as compiled
    vta/<node>.insns.bin, .uops.bin
                      its instruction stream and micro-op image as the runtime emitted them
                      in a recording run (``vta disasm``; DRAM addresses of that run)
    cpu/<node>.ll     each CPU kernel's optimised LLVM IR (when the LLVM backend built it)
    report.txt        the compile report (partition, SQNR per layer)

Loading treats the artifact as untrusted: every member is read in bounded chunks while it is
hashed, against the size the manifest declares (``sizes``) and a total cap
(:data:`MAX_ARTIFACT_BYTES`); a zip member the manifest does not list is refused; the
directory form never follows a symlink (out of the artifact or within it) and never opens a
FIFO or device; JSON that is nested too deeply is a one-line error.  It checks every hash
first (a tampered or missing file is an :class:`ArtifactError` naming it), never unpickles, and rebuilds the executable program from the graph for the
stored configuration (VTA instruction streams are produced by the JIT runtime when the
program runs, as in TVM's runtime); a device whose configuration differs from the stored
one is refused.

The sha256 manifest proves integrity (the files are those the manifest lists), not origin:
anyone can rebuild a matching manifest.  With a key in the environment variable
``VTA_ARTIFACT_KEY``, :func:`save` also writes ``manifest.sig`` (HMAC-SHA256 of
``manifest.json``) and :func:`load` refuses an artifact whose signature is missing or does
not match (see docs/networks.md).

Example::

    import tempfile, os, numpy as np
    from isa import VTAConfig
    from compiler.graph.driver import compile_model
    from compiler.graph.models import small_cnn
    from compiler.graph.artifact import save, load
    xs = np.random.default_rng(0).normal(size=(2, 1, 1, 8, 8)).astype(np.float32)
    c = compile_model(small_cnn(), VTAConfig(), calib={"image": xs})
    path = os.path.join(tempfile.mkdtemp(), "cnn.vtar")
    save(c, path)
    c2 = load(path)
    assert [n.op for n in c2.qgraph.nodes] == [n.op for n in c.qgraph.nodes]
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import zipfile

import numpy as np

from isa import VTAConfig

from ..ops import registry
from .ir import Graph, GraphError

FORMAT = "vta-stack-network-1"
#: Most bytes an artifact's members may hold in all, and any one of them.
MAX_ARTIFACT_BYTES = 2 << 30
#: members of a zipped artifact: a 10,000-node network has about 3 per VTA layer; the byte cap
#: above still bounds the whole (a zip's central directory costs ~100 bytes a member)
MAX_ARTIFACT_MEMBERS = 200_000
MAX_MEMBER_BYTES = 1 << 30
MAX_MANIFEST_BYTES = 4 << 20
SIGNATURE = "manifest.sig"
KEY_ENV = "VTA_ARTIFACT_KEY"
_TUPLE_KEYS = ("strides", "pads", "dilations", "kernel", "shape", "out")


class ArtifactError(GraphError):
    """A missing, tampered or mismatched artifact file (names the file)."""


def _cfg_json(cfg: VTAConfig) -> bytes:
    d = cfg.to_dict() if hasattr(cfg, "to_dict") else dict(cfg.__dict__)
    return json.dumps(d, sort_keys=True, indent=1, default=str).encode()


def _graph_json(q: Graph, options: dict, knobs: dict) -> bytes:
    params = {}
    for k, p in enumerate(q.params):
        params[p] = f"params/{k:03d}.npy"
    doc = {
        "name": q.name, "inputs": q.inputs, "outputs": q.outputs,
        "values": {n: {"shape": list(v.shape), "dtype": v.dtype, "frac": v.frac}
                   for n, v in q.values.items()},
        "params": params,
        "nodes": [{"op": n.op, "name": n.name, "inputs": n.inputs, "output": n.output,
                   "attrs": n.attrs} for n in q.nodes],
        "options": {k: v for k, v in options.items() if k != "tuning_log"},
        "knobs": knobs,
    }
    return json.dumps(doc, indent=1, default=_jsonable).encode()


def _jsonable(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, tuple):
        return list(v)
    raise TypeError(f"cannot store {type(v).__name__} in graph.json")


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


def save(compiled, path: str, record_streams: bool = True) -> dict:
    """Write ``compiled`` (a :class:`~.driver.Compiled`) to ``path`` (a ``.vtar``/``.zip``
    file, else a directory).  Returns {file: sha256}."""
    q = compiled.qgraph
    vta_steps = [st for st in compiled.program.steps if st.kind == "vta"]
    if record_streams and any(getattr(st.kernel, "last_run", None) is None for st in vta_steps):
        # one run on the functional simulator records every kernel's instruction stream
        from vta_runtime import SimDevice
        g = compiled.program.graph
        ex = compiled.executor(SimDevice(compiled.cfg))
        was = gc.isenabled()
        gc.disable()        # the run allocates no cycles; a long program's full collections
        try:                # would re-scan the whole compiled network every few steps
            ex.run({i: np.zeros(g.values[i].shape, np.float32) for i in g.inputs})
        finally:
            if was:
                gc.enable()
            ex.close()
    knobs = {st.node.name: st.kernel.knobs.as_dict() for st in vta_steps
             if getattr(registry.get(st.node.op), "tunable", False)
             and hasattr(st.kernel.knobs, "as_dict")}
    files: dict[str, bytes] = {"config.json": _cfg_json(compiled.cfg),
                               "graph.json": _graph_json(q, compiled.options, knobs),
                               "report.txt": compiled.report().encode()}
    for k, p in enumerate(q.params):
        files[f"params/{k:03d}.npy"] = _npy(q.params[p])
    for s in compiled.program.steps:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in s.node.name)
        if s.kind == "vta":
            files[f"vta/{safe}.txt"] = (s.kernel.workload.describe() + "\n"
                                        + s.kernel.listing(None)).encode()
            run = getattr(s.kernel, "last_run", None)
            if run is not None:
                files[f"vta/{safe}.insns.bin"] = bytes(run.insns)
                files[f"vta/{safe}.uops.bin"] = bytes(run.uop_image)
        elif s.kind == "cpu" and getattr(s.kernel, "module", None) is not None:
            files[f"cpu/{safe}.ll"] = s.kernel.module.show("llvm").encode()
    hashes = {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}
    manifest = {"format": FORMAT, "files": hashes,
                "sizes": {n: len(b) for n, b in files.items()},
                "config_sha256": hashes["config.json"]}
    files["manifest.json"] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    from isa.safe_archive import hmac_sign, key_from_env
    key = key_from_env(KEY_ENV)
    if key is not None:
        files[SIGNATURE] = (hmac_sign(files["manifest.json"], key) + "\n").encode()
    if path.endswith((".vtar", ".zip")):
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise ArtifactError(f"{path}: directory {d} does not exist")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for n, b in files.items():
                z.writestr(n, b)
    else:
        for n, b in files.items():
            fp = os.path.join(path, n)
            os.makedirs(os.path.dirname(fp), exist_ok=True)
            with open(fp, "wb") as f:
                f.write(b)
    return hashes


class _Reader:
    """Bounded reads of an artifact's members (see the module docstring)."""

    def __init__(self, path: str):
        from isa.files import InputFileError
        from isa.safe_archive import open_zip
        self.path = path
        self.total = 0
        if os.path.isdir(path):
            self.z = None
        elif os.path.isfile(path):
            try:
                self._cm = open_zip(path, "compiled network", max_bytes=MAX_ARTIFACT_BYTES,
                                    max_members=MAX_ARTIFACT_MEMBERS)
                self.z = self._cm.__enter__()
            except InputFileError as e:
                if zipfile.is_zipfile(path) or "limit" in str(e):
                    raise ArtifactError(str(e)) from None
                raise ArtifactError(f"{path}: not a compiled network (not a zip file nor a "
                                    f"directory)") from None
        elif os.path.lexists(path) or os.path.exists(path):
            raise ArtifactError(f"{path}: not a compiled network (not a regular file nor a "
                                f"directory)")
        else:
            raise ArtifactError(f"{path}: no such artifact")

    def names(self) -> list[str] | None:
        return None if self.z is None else [i.filename for i in self.z.infolist()
                                            if not i.is_dir()]

    def has(self, name: str) -> bool:
        if self.z is not None:
            return name in self.z.NameToInfo
        return os.path.lexists(os.path.join(self.path, name))

    def read(self, name: str, size: int | None = None,
             cap: int = MAX_MEMBER_BYTES) -> tuple[bytes, str]:
        """``(bytes, sha256)`` of member ``name``: exactly ``size`` bytes when declared, at
        most ``cap``, and within what is left of :data:`MAX_ARTIFACT_BYTES`."""
        from isa.files import InputFileError
        from isa.safe_archive import read_zip_member
        from isa.safe_io import read_folder_file
        if not self.has(name):
            raise ArtifactError(f"{self.path}: missing file {name}")
        left = MAX_ARTIFACT_BYTES - self.total
        if size is not None and size > left:
            raise ArtifactError(f"{self.path}: {name} declares {size:,} bytes, past the "
                                f"{MAX_ARTIFACT_BYTES:,}-byte limit of an artifact")
        try:
            if self.z is None:
                data, digest = read_folder_file(self.path, name, declared_size=size,
                                                max_bytes=min(cap, left), what="member of an artifact")
            else:
                data, digest = read_zip_member(self.z, name, declared_size=size,
                                               max_bytes=min(cap, left))
        except InputFileError as e:
            raise ArtifactError(str(e)) from None
        except OSError as e:
            raise ArtifactError(f"{self.path}: {name}: {e.strerror or e}") from None
        self.total += len(data)
        return data, digest

    def close(self) -> None:
        if self.z is not None:
            self._cm.__exit__(None, None, None)


def _json(data: bytes, where: str):
    from isa.files import InputFileError
    from isa.safe_io import parse_json
    try:
        return parse_json(data.decode("utf-8"), where)
    except UnicodeDecodeError:
        raise ArtifactError(f"{where}: not UTF-8 text") from None
    except InputFileError as e:
        raise ArtifactError(str(e)) from None


def _check_signature(r: _Reader, raw_manifest: bytes) -> None:
    from isa.files import InputFileError
    from isa.safe_archive import hmac_verify, key_from_env
    key = key_from_env(KEY_ENV)
    if key is None:
        return
    if not r.has(SIGNATURE):
        raise ArtifactError(f"{r.path}: no {SIGNATURE}, but {KEY_ENV} is set: an unsigned "
                            f"artifact is refused (unset {KEY_ENV} to load it anyway)")
    sig, _ = r.read(SIGNATURE, cap=1024)
    try:
        hmac_verify(raw_manifest, sig.decode("ascii", "replace"), key,
                    f"{r.path}: {SIGNATURE}")
    except InputFileError as e:
        raise ArtifactError(str(e)) from None


def _read_manifest(r: _Reader, path: str) -> tuple[dict, dict]:
    try:
        raw, _ = r.read("manifest.json", cap=MAX_MANIFEST_BYTES)
    except ArtifactError as e:
        if "missing file" in str(e):
            raise ArtifactError(f"{path}: not a compiled network (no manifest.json)") from None
        raise
    _check_signature(r, raw)
    manifest = _json(raw, f"{path}: manifest.json")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArtifactError(f"{path}: manifest.json: unknown format "
                            f"{manifest.get('format') if isinstance(manifest, dict) else None!r}"
                            f" (expected {FORMAT})")
    files = manifest.get("files")
    if not isinstance(files, dict) or "graph.json" not in files or "config.json" not in files:
        raise ArtifactError(f"{path}: manifest.json does not list graph.json and config.json")
    sizes = manifest.get("sizes", {})
    if not isinstance(sizes, dict):
        raise ArtifactError(f"{path}: manifest.json: 'sizes' must be an object")
    for name, digest in files.items():
        if not isinstance(name, str) or name.startswith(("/", "\\")) or ".." in name.split("/") \
                or name in ("manifest.json", SIGNATURE):
            raise ArtifactError(f"{path}: manifest.json names a file outside the artifact: "
                                f"{name!r}")
        if not isinstance(digest, str):
            raise ArtifactError(f"{path}: manifest.json: the hash of {name} is not a string")
        size = sizes.get(name)
        if size is not None and (not isinstance(size, int) or isinstance(size, bool)
                                 or size < 0):
            raise ArtifactError(f"{path}: manifest.json: the size of {name} is not a byte "
                                f"count: {size!r}")
    declared = sum(v for v in sizes.values() if isinstance(v, int))
    if declared > MAX_ARTIFACT_BYTES:
        raise ArtifactError(f"{path}: manifest.json declares {declared:,} bytes, past the "
                            f"{MAX_ARTIFACT_BYTES:,}-byte limit of an artifact")
    names = r.names()
    if names is not None:
        extra = sorted(set(names) - set(files) - {"manifest.json", SIGNATURE})
        if extra:
            raise ArtifactError(f"{path}: {extra[0]} is in the archive but not listed in "
                                f"manifest.json")
    return files, sizes


def load(path: str, cfg: VTAConfig | None = None):
    """Load and verify an artifact; returns a :class:`~.driver.Compiled` whose program is
    rebuilt for the stored configuration.  ``cfg``, when given, must equal it."""
    from .driver import Compiled
    from .partition import compile_graph
    r = _Reader(path)
    try:
        files, sizes = _read_manifest(r, path)
        blobs = {}
        for name, digest in files.items():
            b, got = r.read(name, sizes.get(name))
            if got != digest:
                raise ArtifactError(f"{path}: {name} does not match its hash in manifest.json "
                                    f"(the file was modified)")
            blobs[name] = b
    finally:
        r.close()
    try:
        stored = VTAConfig.from_dict(_json(blobs["config.json"], f"{path}: config.json"))
    except (TypeError, ValueError) as e:
        if isinstance(e, ArtifactError):
            raise
        raise ArtifactError(f"{path}: config.json: {e}") from None
    if cfg is not None and _cfg_json(cfg) != _cfg_json(stored):
        raise ArtifactError(f"{path}: compiled for a different VTA configuration "
                            f"({_describe(stored)}) than the one given ({_describe(cfg)})")
    try:
        q, opts = _graph_from_json(blobs, path)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        if isinstance(e, GraphError):
            raise ArtifactError(f"{path}: graph.json: {e}") from None
        raise ArtifactError(f"{path}: graph.json is malformed ({type(e).__name__}: {e})") \
            from None
    try:
        prog = compile_graph(q, stored, opts.get("cpu_only", False),
                             opts.get("first_conv_cpu", False), knobs=opts.get("_knobs"))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            ZeroDivisionError) as e:
        from ..te.errors import CompilerError
        if isinstance(e, (GraphError, *CompilerError)):
            raise
        # the hashes match, yet the graph is not one the compiler wrote (shapes that do not
        # fit their operators): untrusted input, so a one-line error, never a traceback
        raise ArtifactError(f"{path}: graph.json does not build ({type(e).__name__}: "
                            f"{' '.join(str(e).split())[:200]})") from None
    return Compiled(stored, None, q, prog, opts)


def _graph_from_json(blobs: dict, path: str = "artifact"):
    doc = _json(blobs["graph.json"], f"{path}: graph.json")
    q = Graph(doc["name"])
    for p, f in doc["params"].items():
        if f not in blobs:
            raise ArtifactError(f"parameter {p!r}: {f!r} is not listed in manifest.json")
        arr = np.lib.format.read_array(io.BytesIO(blobs[f]), allow_pickle=False)
        v = doc["values"][p]
        if str(arr.dtype) != v["dtype"] or list(arr.shape) != list(v["shape"]):
            raise ArtifactError(f"parameter {p!r}: {f} holds {arr.dtype} {arr.shape}, the "
                                f"graph declares {v['dtype']} {tuple(v['shape'])}")
        q.add_param(p, arr, v["frac"])
    for i in doc["inputs"]:
        v = doc["values"][i]
        q.add_input(i, v["shape"], v["dtype"])
    for n in doc["nodes"]:
        v = doc["values"][n["output"]]
        attrs = {k: (tuple(a) if k in _TUPLE_KEYS and isinstance(a, list) else a)
                 for k, a in n["attrs"].items()}
        node = q.add_node(n["op"], n["output"], n["inputs"], v["shape"], v["dtype"], attrs,
                          frac=v["frac"])
        node.name = n["name"]
    q.outputs = list(doc["outputs"])
    if not q.outputs:
        raise ArtifactError("the graph has no outputs")
    from .ir import verify
    verify(q, "load")
    for n in q.nodes:
        _check_attrs(q, n)
    options, knobs = doc.get("options", {}), doc.get("knobs") or {}
    if not isinstance(options, dict) or not all(
            isinstance(options.get(k, False), bool) for k in ("cpu_only", "first_conv_cpu")):
        raise ArtifactError("'options' must be an object with true/false cpu_only and "
                            "first_conv_cpu")
    if not isinstance(knobs, dict) or not all(isinstance(v, dict) for v in knobs.values()):
        raise ArtifactError("'knobs' must be an object of {node: {knob: value}}")
    return q, {**options, "_knobs": knobs}


#: integer attributes of the quantised operators and their bounds: a shift or a scale past
#: 255 bits is no model's (a tampered shift of 10**9 built 7e7 shift stages: a hang)
_INT_ATTRS = {"shift": (-255, 255), "shift2": (-255, 255), "frac": (-255, 255),
              "frac_w": (-255, 255), "lo": (-2 ** 31, 2 ** 31 - 1),
              "hi": (-2 ** 31, 2 ** 31 - 1), "group": (1, 2 ** 31 - 1)}
#: integer-list attributes and their bounds (a Pad crops with negative pads; a conv refuses them)
_INT_LISTS = {"strides": (1, 2 ** 16), "dilations": (1, 2 ** 16), "pads": (-2 ** 16, 2 ** 16),
              "mult": (0, 2 ** 31 - 1)}


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_attrs(q: Graph, n) -> None:
    """The attributes of a loaded node have the types and ranges the compiler writes
    (:data:`_INT_ATTRS`, :data:`_INT_LISTS`, ``lo <= hi``, a reshape keeps the element
    count); a :class:`GraphError` names the node, the attribute and the value."""
    import math
    a = n.attrs

    def bad(key, why):
        raise GraphError(f"node {n.name!r} ({n.op}): attribute {key!r} = {a[key]!r}: {why}")
    for key, (lo, hi) in _INT_ATTRS.items():
        if key in a and a[key] is not None and not (_is_int(a[key]) and lo <= a[key] <= hi):
            bad(key, f"must be an integer in [{lo}, {hi}]")
    for key, (lo, hi) in _INT_LISTS.items():
        if key in a and not (isinstance(a[key], (list, tuple)) and all(
                _is_int(v) and lo <= v <= hi for v in a[key])):
            bad(key, f"must be a list of integers in [{lo}, {hi}]")
    if _is_int(a.get("lo")) and _is_int(a.get("hi")) and a["lo"] > a["hi"]:
        bad("lo", f"is above 'hi' = {a['hi']}")
    f = q.values[n.output].frac
    if f is not None and not (_is_int(f) and -255 <= f <= 255):
        raise GraphError(f"value {n.output!r}: frac {f!r} must be an integer in [-255, 255]")
    if n.op in ("qconv", "qdense") and len(n.inputs) > 1 and n.inputs[1] in q.params:
        want = _gemm_shape(q, n)
        o = q.params[n.inputs[1]].shape[0]
        if "mult" in a and len(a["mult"]) != o:
            bad("mult", f"needs one value per output channel ({o})")
        xs, ws = q.values[n.inputs[0]].shape, q.params[n.inputs[1]].shape
        if n.op == "qconv" and len(xs) == 4 and len(ws) == 4 and not a.get("im2col") and \
                xs[1] != ws[1] * a.get("group", 1):
            raise GraphError(f"node {n.name!r} (qconv): {xs[1]} input channels, weight "
                             f"{tuple(ws)} with group {a.get('group', 1)}")
        if want is not None and want != tuple(q.values[n.output].shape):
            raise GraphError(f"node {n.name!r} ({n.op}): output shape "
                             f"{tuple(q.values[n.output].shape)}, its input and weight give "
                             f"{want}")
    if n.op in ("cast", "affine_quantize") and "to" in a:
        _check_to(q, n, bad)
    if n.op in _POOLS and n.inputs:
        _check_window(q, n, bad)
    if n.op in ("reshape", "qreshape") and "shape" in a:
        shape, out = tuple(a["shape"]), tuple(q.values[n.output].shape)
        src = q.values[n.inputs[0]].shape if n.inputs else ()
        if shape != out or math.prod(out) != math.prod(src):
            bad("shape", f"reshapes {tuple(src)} to {out}")


#: the pooling ops whose ``kernel`` / ``pads`` (begins, then ends) / ``dilations`` are one
#: entry per spatial axis of their NC... input
_POOLS = ("maxpool", "avgpool", "qmaxpool", "qavgpool", "maxpool_indices", "maxpool_indices_nd")


def _check_window(q: Graph, n, bad) -> None:
    """A pool's window fits its padded input on every spatial axis (a tampered kernel of
    30000 x 30000 taps is a loop of 9e8 steps in a host reference), and an explicit ``out``
    is the output value's spatial shape."""
    a, xs = n.attrs, tuple(q.values[n.inputs[0]].shape)
    sp = xs[2:]
    k = a.get("kernel")
    if not (isinstance(k, (list, tuple)) and len(k) == len(sp) and
            all(_is_int(v) and v >= 1 for v in k)):
        bad("kernel", f"must be {len(sp)} positive integers (input {xs})")
    pads = a.get("pads", (0,) * (2 * len(sp)))
    dil = a.get("dilations", (1,) * len(sp))
    if len(pads) != 2 * len(sp) or len(dil) != len(sp) or \
            len(a.get("strides", sp)) != len(sp):
        bad("kernel", f"strides, pads and dilations do not describe a {len(sp)}-D window")
    for i, (kk, d, size) in enumerate(zip(k, dil, sp)):
        if (kk - 1) * d + 1 > size + pads[i] + pads[len(sp) + i]:
            bad("kernel", f"the window of axis {i + 2} spans {(kk - 1) * d + 1}, the padded "
                          f"input {size + pads[i] + pads[len(sp) + i]}")
    if "out" in a and tuple(a["out"]) != tuple(q.values[n.output].shape[2:]):
        bad("out", f"is not the output's spatial shape {tuple(q.values[n.output].shape[2:])}")


def _check_to(q: Graph, n, bad) -> None:
    """A cast's or an affine quantize's target type ``to`` is one the importer writes and
    the output value is declared in its carrier type (a tampered ``to`` was handed to numpy
    as a dtype name at run time: a crash inside numpy, or ``object`` arrays)."""
    from ..ops.typecast import CARRIER, NP_TYPES, ROUND_MODES
    a = n.attrs
    to = a["to"]
    if not isinstance(to, str) or to not in set(NP_TYPES.values()) | set(CARRIER):
        bad("to", "is not an element type the compiler writes")
    carrier = CARRIER.get(to) or ("float32" if to in ("float16", "float64") else to)
    if q.values[n.output].dtype != carrier:
        bad("to", f"needs output dtype {carrier}, the graph declares "
                  f"{q.values[n.output].dtype}")
    if not isinstance(a.get("saturate", True), bool):
        bad("saturate", "must be true or false")
    if a.get("round_mode", "up") not in ROUND_MODES:
        bad("round_mode", f"must be one of {', '.join(ROUND_MODES)}")


def _describe(cfg: VTAConfig) -> str:
    return f"{cfg.batch}x{cfg.block_in}x{cfg.block_out}"


def _gemm_shape(q: Graph, n):
    """The output shape a qconv (NCHW, OIHW weight) or a qdense ((N, K) by (O, K)) gives
    its input, or None when the node is not of that plain form."""
    x, w = tuple(q.values[n.inputs[0]].shape), q.params[n.inputs[1]].shape
    if n.op == "qdense":
        return (x[0], w[0]) if len(x) == 2 and len(w) == 2 else None
    a = n.attrs
    if len(x) != 4 or len(w) != 4 or a.get("im2col"):
        return None
    from ..ops.conv import out_hw
    oh, ow = out_hw(x[2], x[3], w[2:], a.get("strides", (1, 1)), a.get("pads", (0, 0, 0, 0)),
                    a.get("dilations", (1, 1)))
    return (x[0], w[0], oh, ow)
