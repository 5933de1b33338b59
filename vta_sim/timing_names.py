"""The instructions' short names of a timed run (``TimingResult.names``: "LOAD INP",
"GEMM RESET", "ALU SHR imm", ...), computed on first use: the statistics never need them."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LazyNames", "insn_names"]


class LazyNames(Sequence):
    """The instructions' short names, computed on first use (the statistics never need them)."""

    def __init__(self, arr):
        self._arr, self._list = arr, None

    def _get(self) -> list[str]:
        if self._list is None:
            self._list = insn_names(self._arr)
        return self._list

    def __getitem__(self, i):
        return self._get()[i]

    def __len__(self):
        return len(self._arr)

    def __eq__(self, other):
        return list(self) == list(other)


def insn_names(arr) -> list[str]:
    """One short name per instruction of the decoded program ``arr``."""
    c = arr.cols
    mt_names = {0: "UOP", 1: "WGT", 2: "INP", 3: "ACC", 4: "OUT", 5: "ACC_8BIT"}
    alu_names = {0: "MIN", 1: "MAX", 2: "ADD", 3: "SHR", 4: "MUL"}
    out = []
    for op, mt, x, r, a, imm in zip(c["opcode"].tolist(), c["memory_type"].tolist(),
                                    c["x_size"].tolist(), c["reset"].tolist(),
                                    c["alu_opcode"].tolist(), c["use_imm"].tolist()):
        if op in (0, 1):
            out.append("NOP" if x == 0 else ("LOAD " if op == 0 else "STORE ")
                       + mt_names.get(mt, str(mt)))
        elif op == 2:
            out.append("GEMM RESET" if r else "GEMM")
        elif op == 4:
            out.append(f"ALU {alu_names.get(a, a)}{' imm' if imm else ''}")
        else:
            out.append("FINISH")
    return out
