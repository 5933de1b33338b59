"""docs/security.md's all-doors probe table (issue 20, "Done means") is there and adds up:
each door's before and after rows split its probes over the categories, and the ``all`` row
is the sum of the doors."""

import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "security.md"
DOORS = {"compile", "run", "tune", "dse", "demo", "bench", "disasm", "asm", "sim", "vector",
         "replay"}


def _table(section: str):
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("*") for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[0] in DOORS | {"all"}:
            before, after = [], []
            for c in cells[1:]:
                b, _, a = c.partition("->")
                before.append(int(b.strip().strip("*")))
                after.append(int((a or b).strip().strip("*")))
            rows[cells[0]] = (before, after)
    return rows


def test_all_doors_table_after_the_compiler_fixes_adds_up():
    text = DOC.read_text()
    m = re.search(r"## Results, all doors, after the compiler fixes\n(.*?)\n## ", text, re.S)
    assert m, "docs/security.md lacks the all-doors before/after table"
    sec = m.group(1)
    assert "5b18dca" in sec and "probe_inputs.py --tree" in sec and "2026-" in sec
    rows = _table(sec)
    assert set(rows) == DOORS | {"all"}
    for door, (before, after) in rows.items():
        for r in (before, after):
            assert r[0] == sum(r[1:]), (door, r)            # tried = the categories
        assert before[0] == after[0]
    for k in (0, 1):
        total = [sum(rows[d][k][i] for d in DOORS) for i in range(9)]
        assert total == rows["all"][k]
