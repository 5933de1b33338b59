"""TVM's TopHub-tuned VTA schedules for ResNet-18, translated into :class:`~compiler.Knobs`.

``data/tophub_vta_v0.10_resnet18.json`` holds the ten ResNet-18 records of TVM's TopHub
log for VTA (``tlc-pack/tophub``, ``tophub/vta_v0.10.log``, commit and section in its
``source``), verbatim.  TVM's ``conv2d_packed.vta`` template (``vta/top/vta_conv2d.py``)
splits the output axes by ``tile_co``/``tile_h``/``tile_w`` ([outer, inner] factors),
orders the outer loops ``b, h, co, w``, reads data and kernel per outer step of
``tile_ci`` (``compute_at`` the reduction's outer loop), and binds ``oc_nthread`` /
``h_nthread`` virtual threads to the outer ``co`` / ``h`` loop.  In our knobs that is
``tile_x = inner factor``, ``order=("b", "h", "co", "w")``, ``inp_at = wgt_at = "ci"``,
``tile_ci = inner factor of tile_ci`` and ``vthreads`` over ``co`` or ``h``.  A record with
both thread counts above one binds threads to two loops at once, as TVM does: ``co`` first,
then ``h`` (``vthread_axes``, what :meth:`Schedule.bind_vthread` twice gives); none of the
ResNet-18 records does.  TVM puts its vthread split outermost (thread t takes one contiguous half of the
tiles); ours interleaves tiles -- same threads, same buffers, a different tile order.

Example::

    from compiler.tuner.tophub import tvm_knobs
    for name, k in tvm_knobs().items():
        print(name, k.tile_co, k.tile_h, k.tile_w, k.vthreads, k.vthread_axis)
"""

from __future__ import annotations

import json
import os

from ..vta.schedule import Knobs, ScheduleError

DATA = os.path.join(os.path.dirname(__file__), "data", "tophub_vta_v0.10_resnet18.json")


def load_records(path: str = DATA) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def translate(entity) -> Knobs:
    """Our knobs for one TopHub ``entity`` list."""
    try:
        e = {name: val for name, _kind, val in entity}
        oc, hn = int(e.get("oc_nthread", 1)), int(e.get("h_nthread", 1))
        tiles = {k: int(e[k][1]) for k in ("tile_b", "tile_co", "tile_h", "tile_w", "tile_ci")}
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise ScheduleError(f"not a conv2d_packed.vta TopHub entity ({type(err).__name__}: "
                            f"{err})") from None
    if oc < 1 or hn < 1:
        raise ScheduleError(f"TopHub knobs oc_nthread={oc} h_nthread={hn}: thread counts "
                            f"must be at least 1")
    two = ((("co", oc), ("h", hn)) if oc > 1 and hn > 1 else ())
    return Knobs(**tiles, vthreads=oc * hn, vthread_axis="h" if hn > 1 and oc == 1 else "co",
                 vthread_axes=two, order=("b", "h", "co", "w"))


def _layer_of(inp) -> str | None:
    from .workloads import RESNET18
    data, kernel, strides, pads = inp[0], inp[1], inp[2], inp[3]
    for l in RESNET18:
        if (data[1] * data[5] == l.cin and data[2] == l.hw and kernel[0] * kernel[4] == l.cout
                and kernel[2] == l.k and strides[0] == l.stride and pads[0] == l.pad):
            return l.name
    return None


def tvm_knobs(path: str = DATA) -> dict:
    """``{"C2": Knobs, ...}``: the TopHub schedule of every ResNet-18 layer C2-C11."""
    out = {}
    for r in load_records(path)["records"]:
        name = _layer_of(r["input"])
        if name is not None:
            out[name] = translate(r["entity"])
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][1:])))


__all__ = ["tvm_knobs", "translate", "load_records", "DATA"]
