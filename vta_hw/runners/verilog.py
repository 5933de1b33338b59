"""Verilog of the core (``vta hw verilog``), cached per configuration."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from isa import VTAConfig

__all__ = ["TOPLEVEL", "generate_verilog", "cached_verilog", "config_key", "DUMP_MODULE"]

TOPLEVEL = "vta_core"
DUMP_MODULE = "vta_vcd_dump"

_DUMP_SOURCE = f"""// Dumps a VCD when the simulator is run with +vcd=<file>.
module {DUMP_MODULE}();
  reg [8*1024-1:0] fname;
  initial begin
    if ($value$plusargs("vcd=%s", fname)) begin
      $dumpfile(fname);
      $dumpvars(0, {TOPLEVEL});
    end
  end
endmodule
"""


#: the core's HDL: every block of ``vta_hw/blocks`` (its sources name a build-cache entry)
HDL_DIR = Path(__file__).resolve().parent.parent / "blocks"


_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend\S+) += 0;")


def icarus_fixup(text: str) -> str:
    """Make Yosys's ``always @*`` start-up trigger fire under Icarus.

    Yosys declares ``reg \\$auto$verilog_backend...  = 0;`` and reads it in every
    ``always @*`` block so the blocks evaluate once at time 0; Icarus applies the initialiser
    before the blocks wait on it, so combinational outputs of blocks whose inputs never
    change stay X.  Assign the trigger with ``#0`` delay instead."""
    return _TRIGGER.sub(lambda mt: f"reg {mt.group(1)} ;\n  initial #0 {mt.group(1)} = 1'b0;",
                        text)


def config_key(cfg: VTAConfig, **core_kw) -> str:
    """A short hash naming a configuration (plus core options) for build caches."""
    text = json.dumps([cfg.to_dict(), sorted(core_kw.items())], sort_keys=True)
    h = hashlib.sha256(text.encode())
    for p in sorted(HDL_DIR.glob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def generate_verilog(cfg: VTAConfig | None = None, **core_kw) -> str:
    """The Verilog text of :class:`VTACore` for ``cfg`` (top module ``vta_core``)."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import verilog

    from ..blocks.core import VTACore
    core = VTACore(cfg or VTAConfig(), **core_kw)
    return verilog.convert(core, name=TOPLEVEL, emit_src=False)


def cached_verilog(cfg: VTAConfig, build_root: str | os.PathLike, **core_kw) -> Path:
    """Generate (once) ``<build_root>/<key>/vta_core.v`` plus the VCD dump module; return the
    directory."""
    d = Path(build_root) / config_key(cfg, **core_kw)
    v = d / f"{TOPLEVEL}.v"
    if not v.exists():
        d.mkdir(parents=True, exist_ok=True)
        text = generate_verilog(cfg, **core_kw)
        tmp = d / f"{TOPLEVEL}.v.tmp{os.getpid()}"
        tmp.write_text(text)
        (d / f"{TOPLEVEL}_icarus.v").write_text(icarus_fixup(text))
        (d / f"{DUMP_MODULE}.v").write_text(_DUMP_SOURCE)
        cfg.to_json(d / "config.json")
        os.replace(tmp, v)
    return d
