"""The workloads of ``vta dse``: the conv2d/dense layers every design point compiles and runs.

``resnet18`` is the VTA paper's benchmark (ResNet-18 C2-C11, :data:`compiler.tuner.workloads.RESNET18`);
``LAYERS.json`` lists layers; ``MODEL.onnx`` takes the Conv and Gemm/MatMul layers of a model
through the ONNX front end (:mod:`compiler.graph.onnx_import`).  Each layer is an int8 conv2d
(a dense layer is a 1x1 conv of a 1x1 image) followed by the benchmark's requantising
epilogue; channel counts that are not whole blocks of a point's BLOCK are padded up.

``LAYERS.json``: a list (or ``{"layers": [...]}``) of objects ``{"name": "C2", "hw": 56,
"cin": 64, "cout": 64, "k": 3, "pad": 1, "stride": 1}`` (``h`` and ``w`` instead of ``hw``
for non-square images) or ``{"name": "fc", "dense": true, "cin": 512, "cout": 1000}``.

Example::

    from compiler.dse.workload import load_workload
    layers, note = load_workload("resnet18")
    print(len(layers), layers[0])       # 10 Layer(name='C2', h=56, w=56, cin=64, ...)
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass

from .space import DseError

__all__ = ["Layer", "load_workload", "workload_id", "MIN_VTA_CHANNELS"]

#: Convolutions with fewer input channels stay on the CPU (ResNet-18's C1, 3 channels).
MIN_VTA_CHANNELS = 16


@dataclass(frozen=True)
class Layer:
    """One conv2d layer (NCHW, square kernel, symmetric padding)."""
    name: str
    h: int
    w: int
    cin: int
    cout: int
    k: int
    pad: int
    stride: int

    def to_dict(self) -> dict:
        return asdict(self)


_INT_FIELDS = ("h", "w", "cin", "cout", "k", "pad", "stride")
#: Largest layer a sweep builds (each point compiles and simulates every layer): per field,
#: and in multiply-accumulates.
LIMITS = {"h": 1 << 20, "w": 1 << 20, "cin": 65536, "cout": 65536, "k": 64, "pad": 64,
          "stride": 64}
MAX_PIXELS = 1 << 24
MAX_MACS = 1 << 36


def _layer(d, where: str) -> Layer:
    if not isinstance(d, dict):
        raise DseError(f"{where}: a layer must be an object, not {type(d).__name__}")
    d = dict(d)
    name = d.pop("name", None)
    if not isinstance(name, str) or not name:
        raise DseError(f"{where}: a layer needs a non-empty \"name\"")
    where = f"{where} ({name})"
    if d.pop("dense", False):
        d = {"h": 1, "w": 1, "k": 1, "pad": 0, "stride": 1, **d}
    if "hw" in d:
        hw = d.pop("hw")
        d.setdefault("h", hw)
        d.setdefault("w", hw)
    unknown = set(d) - set(_INT_FIELDS)
    if unknown:
        raise DseError(f"{where}: unknown key(s) {sorted(unknown)} (known: name, dense, hw, "
                       f"{', '.join(_INT_FIELDS)})")
    missing = [f for f in _INT_FIELDS if f not in d]
    if missing:
        raise DseError(f"{where}: missing {', '.join(missing)}")
    for f in _INT_FIELDS:
        v = d[f]
        lo = 0 if f == "pad" else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise DseError(f"{where}: {f} must be an integer >= {lo}, not {v!r}")
        if v > LIMITS[f]:
            raise DseError(f"{where}: {f} {v} is more than the {LIMITS[f]} a sweep builds in "
                           f"bounded time and memory")
    if d["h"] * d["w"] > MAX_PIXELS:
        raise DseError(f"{where}: a {d['h']}x{d['w']} image is more than the {MAX_PIXELS:,} "
                       f"pixels a sweep builds in bounded time and memory")
    macs = d["h"] * d["w"] * d["cin"] * d["cout"] * d["k"] ** 2 // d["stride"] ** 2
    if macs > MAX_MACS:
        raise DseError(f"{where}: {macs:.3g} multiply-accumulates is more than the "
                       f"{MAX_MACS:.3g} a sweep builds in bounded time")
    if d["k"] > d["h"] + 2 * d["pad"] or d["k"] > d["w"] + 2 * d["pad"]:
        raise DseError(f"{where}: the {d['k']}x{d['k']} kernel is larger than the padded "
                       f"{d['h']}x{d['w']} image")
    return Layer(name, **{f: d[f] for f in _INT_FIELDS})


def _from_json(path: str) -> list[Layer]:
    from isa.files import InputFileError, read_json
    try:
        doc = read_json(path, "DSE layer list (JSON)")
    except InputFileError as e:
        raise DseError(str(e)) from None
    if isinstance(doc, dict) and "layers" in doc:
        doc = doc["layers"]
    if not isinstance(doc, list) or not doc:
        raise DseError(f"{path}: expected a non-empty list of layers (or {{\"layers\": [...]}})")
    layers = [_layer(d, f"{path}: layer {i}") for i, d in enumerate(doc)]
    names = [l.name for l in layers]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DseError(f"{path}: layer name(s) {', '.join(dup)} used twice")
    return layers


def _from_onnx(path: str) -> tuple[list[Layer], str]:
    try:
        from compiler.graph.onnx_import import import_onnx
        from compiler.graph.ir import GraphError
    except ImportError as e:
        raise DseError(f"{path}: ONNX workloads need the ONNX front end (compiler.graph) and "
                       f"the onnx package, which are not available here ({e})") from None
    try:
        g = import_onnx(path)
    except GraphError as e:
        raise DseError(str(e)) from None
    except ImportError as e:
        raise DseError(f"{path}: ONNX workloads need the onnx package ({e})") from None
    layers, skipped = [], []
    for n in g.nodes:
        if n.op not in ("conv", "dense"):
            continue
        x = g.values[n.inputs[0]].shape
        wshape = g.values[n.inputs[1]].shape
        label = n.name or n.output
        if n.op == "dense":
            layers.append(Layer(label, 1, 1, int(wshape[1]), int(wshape[0]), 1, 0, 1))
            continue
        st, pads = tuple(n.attrs.get("strides", (1, 1))), tuple(n.attrs.get("pads", (0,) * 4))
        dil, group = tuple(n.attrs.get("dilations", (1, 1))), n.attrs.get("group", 1)
        kh, kw = int(wshape[2]), int(wshape[3])
        why = None
        if group != 1:
            why = f"group {group}"
        elif dil != (1, 1):
            why = f"dilation {dil}"
        elif kh != kw or st[0] != st[1] or len(set(pads)) != 1:
            why = "non-square kernel, stride or padding"
        elif x[1] < MIN_VTA_CHANNELS:
            why = f"{x[1]} input channels (stays on the CPU, as ResNet's C1)"
        if why:
            skipped.append(f"{label}: {why}")
            continue
        layers.append(Layer(label, int(x[2]), int(x[3]), int(x[1]), int(wshape[0]), kh,
                            int(pads[0]), int(st[0])))
    if not layers:
        raise DseError(f"{path}: the model has no conv2d or dense layer VTA can run"
                       + (f" (skipped: {'; '.join(skipped)})" if skipped else ""))
    note = f"{len(layers)} layers from {os.path.basename(path)}"
    if skipped:
        note += f"; not on VTA: {'; '.join(skipped)}"
    return layers, note


def load_workload(spec: str) -> tuple[list[Layer], str]:
    """The layers of ``spec`` (``resnet18``, a ``.json`` layer list or a ``.onnx`` model) and a
    one-line description.

    Raises
    ------
    DseError
        unknown workload, unreadable or malformed file (naming the file and the layer).
    """
    if spec == "resnet18":
        from compiler.tuner.workloads import RESNET18
        return ([Layer(l.name, l.hw, l.hw, l.cin, l.cout, l.k, l.pad, l.stride)
                 for l in RESNET18], "ResNet-18 C2-C11 (batch 1 per BATCH row)")
    low = spec.lower()
    if low.endswith(".json"):
        layers = _from_json(spec)
        return layers, f"{len(layers)} layers from {os.path.basename(spec)}"
    if low.endswith(".onnx"):
        return _from_onnx(spec)
    raise DseError(f"--workload must be resnet18, a LAYERS.json or a MODEL.onnx, not {spec!r}")


def workload_id(layers: list[Layer]) -> str:
    """A fingerprint of the layer list (a results database belongs to one workload)."""
    text = json.dumps([l.to_dict() for l in layers], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
