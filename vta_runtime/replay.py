"""Replay a runtime golden case (``tests/data/runtime_cases/*.json``) and compare it.

:func:`replay_case` allocates the case's buffers on a device, fills them, replays ``calls``
through a :class:`~vta_runtime.command_queue.CommandQueue`, and returns the streams it ran in
the golden format (``dram_base`` normalised to the element offset inside the buffer it points
into, as the cases' README prescribes), the kernel-cache events and the final buffers.
:func:`compare_case` lists every difference from the golden data.

Cases with an ``intended`` key (``uop_ring_eviction``) capture a reference bug: this runtime
emits append-only uop staging there, so the LOAD UOP offsets and fetched uops differ on
purpose, and the final buffers are compared with ``intended`` instead of ``outputs``.  A
replay with ``staging="reference"`` reproduces the capture and is compared exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from isa import INSN_BYTES, MemType, Opcode, decode_stream, decode_uops, encode_stream
from isa.files import InputFileError
from isa.safe_io import parse_json, read_bytes_capped

from .command_queue import CommandQueue
from .device import NullDevice
from .errors import VTARuntimeError
from .kernel import KernelHandle

__all__ = ["replay_case", "compare_case", "load_case", "ReplayResult", "CaseError"]


class CaseError(VTARuntimeError):
    """A malformed golden case (unknown op, missing field, unknown buffer)."""


@dataclass
class ReplayResult:
    """What a replay produced, in the golden case's vocabulary."""
    runs: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    outputs: dict | None = None
    queue: CommandQueue | None = None
    device: object = None
    buffers: dict = field(default_factory=dict)


CASE_FORMAT = "vta-runtime-golden/1"
MAX_CASE_BYTES = 64 << 20            # a case file, JSON text
MAX_CASE_BUFFER = 256 << 20          # one buffer a case allocates


def load_case(case) -> dict:
    """A case dict from a dict, a path, or JSON text (text starts with ``{``).

    A dict built in code is taken as it is (``runs`` may be absent when only the streams
    are wanted); a case read from a file or text must be a complete golden case.

    Raises
    ------
    CaseError
        The file is missing, not UTF-8 JSON, not a runtime case (its ``format`` is not
        ``vta-runtime-golden/1``), or has no ``calls`` or no expected ``runs``.
    """
    where = "case"
    if isinstance(case, (str, os.PathLike)) and not str(case).lstrip().startswith("{"):
        where = str(case)
        try:
            raw = read_bytes_capped(case, MAX_CASE_BYTES, "runtime case (JSON)")
        except InputFileError as e:
            raise CaseError(str(e)) from None
        try:
            case = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CaseError(f"{where}: not a runtime case (binary, not UTF-8 JSON text)") from None
        if not case.strip():
            raise CaseError(f"{where}: empty file, not a runtime case")
    if isinstance(case, dict):
        return case
    if isinstance(case, str):
        try:
            case = parse_json(case, where)
        except InputFileError as e:
            raise CaseError(str(e)) from None
    if not isinstance(case, dict):
        raise CaseError(f"{where}: a runtime case is a JSON object, not {type(case).__name__}")
    if case.get("format") != CASE_FORMAT:
        raise CaseError(f"{where}: not a runtime case (format {case.get('format')!r}, "
                        f"expected {CASE_FORMAT!r})")
    for key in ("calls", "runs"):
        if not isinstance(case.get(key), list) or not case[key]:
            raise CaseError(f"{where}: the case has no {key!r} "
                            f"({'nothing to replay' if key == 'calls' else 'no expected stream'})")
    return case


def _finit(call, mode):
    loops = call.get("uop_loops", [])
    uops = call["uops"]

    def finit(cq, signature):
        for lp in loops:
            extent, dst_f, src_f = lp[0], lp[1], lp[2]
            wgt_f = lp[3] if len(lp) > 3 else 0
            cq.uop_loop_begin(extent, dst_f, src_f, wgt_f)
        for u in uops:
            if mode == 0:
                cq.uop_push(0, call.get("reset", 0), u[0], u[1], u[2] if len(u) > 2 else 0,
                            0, 0, 0)
            else:
                cq.uop_push(1, 0, u[0], u[1], 0, call["alu_opcode"], call["use_imm"],
                            call["imm"])
        for _ in loops:
            cq.uop_loop_end()
        return 0
    return finit


def replay_case(case, device=None, *, staging: str = "append", config=None) -> ReplayResult:
    """Replay a golden case.

    Parameters
    ----------
    case : dict, path or JSON text
    device : Device, optional
        Default :class:`NullDevice` (streams only; ``outputs`` is then None).
    staging : {"append", "reference"}
        Uop staging policy; "reference" reproduces the reference's captured streams even for
        ``uop_ring_eviction``.

    Raises
    ------
    CaseError
        The case is malformed.  Runtime errors of the calls propagate unchanged.
    """
    case = load_case(case)
    executes = device is not None and not isinstance(device, NullDevice)
    dev = device if device is not None else NullDevice(config)
    cq = CommandQueue(dev, keep_history=True, staging=staging)
    res = ReplayResult(queue=cq, device=dev)
    names = {}
    for name, spec in _buffer_specs(case).items():
        buf = dev.alloc(spec["nbytes"], name=name)
        try:
            data = np.asarray(spec.get("data", 0), dtype=np.dtype(spec["dtype"]))
        except (TypeError, ValueError, OverflowError) as e:
            raise CaseError(f"buffer {name!r}: its data is not {spec['dtype']} numbers "
                            f"({e})") from None
        if data.ndim:
            dev.copy_from_host(buf, data)
        res.buffers[name] = buf
        names[id(buf)] = name
    handles: dict[str, KernelHandle] = {}

    def get_buf(call, i):
        try:
            return res.buffers[call["buf"]]
        except KeyError:
            raise CaseError(f"call {i}: unknown buffer {call.get('buf')!r}") from None

    calls = case.get("calls", [])
    if not isinstance(calls, list):
        raise CaseError(f"'calls' must be a JSON array of calls, not {type(calls).__name__}")
    for i, call in enumerate(calls):
        if not isinstance(call, dict):
            raise CaseError(f"call {i}: expected a JSON object, not {type(call).__name__}")
        op = call.get("op")
        runs_before = cq.num_runs
        try:
            if op == "load_buffer_2d":
                cq.load_buffer_2d(get_buf(call, i), call["elem_offset"], call["x_size"],
                                  call["y_size"], call["x_stride"], call["x_pad_before"],
                                  call["y_pad_before"], call["x_pad_after"], call["y_pad_after"],
                                  call["dst_sram_index"], call["dst_memory_type"])
            elif op == "store_buffer_2d":
                cq.store_buffer_2d(call["src_sram_index"], call["src_memory_type"],
                                   get_buf(call, i), call["elem_offset"], call["x_size"],
                                   call["y_size"], call["x_stride"])
            elif op in ("push_gemm_op", "push_alu_op"):
                h = handles.setdefault(call["kernel"], KernelHandle(call["kernel"]))
                before = cq.kernels_recorded
                mode = 0 if op == "push_gemm_op" else 1
                push = cq.push_gemm_op if mode == 0 else cq.push_alu_op
                push(h, _finit(call, mode), call.get("signature"))
                res.kernels.append({"call_index": i, "kernel": call["kernel"],
                                    "recorded": cq.kernels_recorded > before})
            elif op == "dep_push":
                cq.dep_push(call["from"], call["to"])
            elif op == "dep_pop":
                cq.dep_pop(call["from"], call["to"])
            elif op == "synchronize":
                cq.synchronize(call.get("wait_cycles", 1 << 31))
            elif op == "set_debug_mode":
                cq.set_debug_mode(call["flags"])
            else:
                raise CaseError(f"call {i}: unknown op {op!r}")
        except KeyError as e:
            raise CaseError(f"call {i} ({op}): missing field {e}") from None
        except VTARuntimeError:
            raise
        except (TypeError, ValueError, IndexError, OverflowError, AttributeError) as e:
            # a field of the wrong JSON type (a list where a number belongs, ...)
            raise CaseError(f"call {i} ({op}): a field has the wrong type or value "
                            f"({type(e).__name__}: {e})") from None
        for rec in cq.runs[runs_before:]:
            res.runs.append(_normalise(rec, names, i))
    if executes:
        res.outputs = {}
        for name, spec in _buffer_specs(case).items():
            dtype = np.dtype(spec["dtype"])
            shape = spec.get("shape")
            if not isinstance(shape, list) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape) \
                    or int(np.prod(shape)) * dtype.itemsize > spec["nbytes"]:
                raise CaseError(f"buffer {name!r}: shape {shape!r} is not a list of sizes "
                                f"that fits its {spec['nbytes']} bytes")
            shape = tuple(shape)
            res.outputs[name] = dev.copy_to_host(res.buffers[name], dtype=dtype, shape=shape)
    return res


def _buffer_specs(case: dict) -> dict:
    """The case's ``buffers``, checked: each a JSON object with an integer ``nbytes`` in
    [1, MAX_CASE_BUFFER] and a numeric ``dtype``."""
    bufs = case.get("buffers", {})
    if not isinstance(bufs, dict):
        raise CaseError(f"'buffers' must be a JSON object of buffers, not "
                        f"{type(bufs).__name__}")
    for name, spec in bufs.items():
        if not isinstance(spec, dict):
            raise CaseError(f"buffer {name!r}: expected a JSON object, not "
                            f"{type(spec).__name__}")
        n = spec.get("nbytes")
        if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= MAX_CASE_BUFFER:
            raise CaseError(f"buffer {name!r}: nbytes must be an integer between 1 and "
                            f"{MAX_CASE_BUFFER}, not {n!r}")
        try:
            dt = np.dtype(spec.get("dtype"))
        except (TypeError, ValueError):
            dt = None
        if dt is None or dt.kind not in "iuf" or not isinstance(spec.get("dtype"), str):
            raise CaseError(f"buffer {name!r}: dtype must name an integer or float type "
                            f"(e.g. \"int8\"), not {spec.get('dtype')!r}")
    return bufs


def _normalise(rec, names: dict, call_index: int) -> dict:
    """A RunRecord in the golden ``runs`` format."""
    arr = decode_stream(rec.insns, rec.config)
    refs = [None] * len(arr)
    uop_rows = {t[0]: t for t in rec.uop_loads}
    for i, (buf, E) in rec.mem_refs.items():
        off = int(arr.dram_base[i]) - buf.phys // E
        arr.cols["dram_base"][i] = off
        refs[i] = {"buf": names.get(id(buf), buf.name), "elem_offset": off, "elem_bytes": E}
    image = rec.uop_image
    uop_loads = []
    for i, (_, sram, offset, count) in sorted(uop_rows.items()):
        arr.cols["dram_base"][i] -= rec.uop_phys // 4
        refs[i] = {"buf": "uop", "elem_offset": offset, "elem_bytes": 4}
        chunk = image[4 * offset:4 * (offset + count)]
        d, s, w = decode_uops(chunk, rec.config)
        uop_loads.append({"insn_index": i, "sram_base": sram, "uop_offset": offset,
                          "count": count, "uops_hex": chunk.hex(),
                          "uops": [[int(a), int(b), int(c)] for a, b, c in zip(d, s, w)]})
    data = encode_stream(arr)
    return {"call_index": call_index, "insn_count": rec.insn_count,
            "wait_cycles": rec.wait_cycles,
            "insns_hex": [data[k:k + INSN_BYTES].hex() for k in range(0, len(data), INSN_BYTES)],
            "dram_refs": refs, "uop_loads": uop_loads,
            "token_balance": list(rec.token_balance), "stats": rec.stats}


def _is_uop_load(hexstr: str) -> bool:
    b = bytes.fromhex(hexstr)
    word = int.from_bytes(b, "little")
    return (word & 7) == Opcode.LOAD and ((word >> 7) & 7) == MemType.UOP and \
        ((word >> 80) & 0xFFFF) != 0


def _mask_dram(hexstr: str) -> str:
    word = int.from_bytes(bytes.fromhex(hexstr), "little")
    word &= ~(((1 << 32) - 1) << 26)
    return word.to_bytes(16, "little").hex()


def compare_case(case, result: ReplayResult, *, check_outputs: bool = True) -> list[str]:
    """Differences between a replay and the golden case (empty list = identical)."""
    case = load_case(case)
    diffs = []
    # A case with an ``intended`` key captures the reference's staging bug: a replay with
    # append-only staging differs on purpose (LOAD UOP offsets, fetched uops, outputs = the
    # intended math); a replay with staging="reference" must match the capture exactly.
    staging = result.queue._ring.staging if result.queue is not None else "append"
    buggy = "intended" in case and staging == "append"
    gold_runs = case.get("runs", [])
    if len(gold_runs) != len(result.runs):
        diffs.append(f"{len(result.runs)} runs, expected {len(gold_runs)}")
    for r, (g, m) in enumerate(zip(gold_runs, result.runs)):
        for key in ("call_index", "insn_count", "wait_cycles", "token_balance"):
            if list(np.atleast_1d(g[key])) != list(np.atleast_1d(m[key])):
                diffs.append(f"run {r}: {key} = {m[key]}, expected {g[key]}")
        gi, mi = g["insns_hex"], m["insns_hex"]
        for k in range(min(len(gi), len(mi))):
            a, b = gi[k], mi[k]
            if buggy and _is_uop_load(a):
                a, b = _mask_dram(a), _mask_dram(b)
            if a != b:
                text = g.get("insns_text", [""] * len(gi))[k]
                diffs.append(f"run {r} insn {k}: {mi[k]} expected {gi[k]} ({text})")
        if len(gi) != len(mi):
            diffs.append(f"run {r}: {len(mi)} instructions, expected {len(gi)}")
        if g.get("dram_refs") is not None:
            for k, (a, b) in enumerate(zip(g["dram_refs"], m["dram_refs"])):
                if buggy and a is not None and a["buf"] == "uop":
                    a, b = dict(a, elem_offset=None), dict(b or {}, elem_offset=None)
                if a != b:
                    diffs.append(f"run {r} insn {k}: dram ref {b}, expected {a}")
        gl, ml = g.get("uop_loads", []), m["uop_loads"]
        if len(gl) != len(ml):
            diffs.append(f"run {r}: {len(ml)} uop loads, expected {len(gl)}")
        elif not buggy:
            for a, b in zip(gl, ml):
                for key in ("insn_index", "sram_base", "uop_offset", "count", "uops_hex"):
                    if a[key] != b[key]:
                        diffs.append(f"run {r} uop load at insn {a['insn_index']}: {key} = "
                                     f"{b[key]}, expected {a[key]}")
    gk = [(k["call_index"], k["kernel"], k["recorded"]) for k in case.get("kernels", [])]
    mk = [(k["call_index"], k["kernel"], k["recorded"]) for k in result.kernels]
    if gk != mk:
        diffs.append(f"kernel cache events {mk}, expected {gk}")
    if check_outputs and result.outputs is not None:
        want = dict(case.get("outputs", {}))
        if buggy:
            want.update(case.get("intended", {}))
        for name, data in want.items():
            spec = case["buffers"].get(name)
            if spec is None:
                raise CaseError(f"outputs: {name!r} is not a buffer of the case")
            try:
                exp = np.asarray(data, dtype=spec["dtype"])
            except (TypeError, ValueError, OverflowError) as e:
                raise CaseError(f"outputs: {name!r}: the expected data is not "
                                f"{spec['dtype']} numbers ({e})") from None
            got = result.outputs[name]
            if got.shape != exp.shape or not np.array_equal(got, exp):
                bad = int(np.sum(got != exp)) if got.shape == exp.shape else -1
                intended = buggy and name in case.get("intended", {})
                diffs.append(f"output {name}: {bad} elements differ from the "
                             f"{'intended' if intended else 'golden'} result")
    return diffs
