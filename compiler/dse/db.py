"""The results database of ``vta dse``: SQLite, one row per design point, resumable.

A point's row is written as soon as it is measured (success or failure), so an interrupted
sweep loses at most the points in flight and a rerun skips every point already present.  The
``meta`` table pins the workload: a database is never mixed with another workload's points.
Real synthesis of front points goes to the ``synth`` table.

Example::

    import os, tempfile
    from compiler.dse.db import ResultsDB
    db = ResultsDB(os.path.join(tempfile.mkdtemp(), "dse.sqlite"), workload_id="abc")
    db.put({"LOG_BLOCK": 3}, {"status": "ok", "cycles": 100, "layers": [], "seconds": 1})
    print(db.done_keys(), len(db.rows()))
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from .space import DseError, point_key

__all__ = ["ResultsDB"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY, point TEXT NOT NULL, status TEXT NOT NULL, error TEXT,
    cycles INTEGER, cycles_per_image REAL, layers TEXT, seconds REAL, finished REAL,
    luts INTEGER, ffs INTEGER, multipliers INTEGER, brams INTEGER, fmax_mhz REAL,
    inferences_per_s REAL, feasibility TEXT);
CREATE TABLE IF NOT EXISTS synth (
    key TEXT PRIMARY KEY, report TEXT NOT NULL, finished REAL);
"""


class ResultsDB:
    """``path``: the SQLite file (created).  ``workload_id``: the fingerprint of the workload;
    a database made for another one is a :class:`DseError`."""

    def __init__(self, path, workload_id: str, workload_note: str = ""):
        self.path = Path(path)
        try:
            self.con = sqlite3.connect(str(self.path))
            self.con.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise DseError(f"{self.path}: not a DSE results database ({e})") from None
        have = self.meta("workload_id")
        if have is None:
            self.set_meta("workload_id", workload_id)
            self.set_meta("workload", workload_note)
        elif have != workload_id:
            raise DseError(f"{self.path} holds a sweep of another workload "
                           f"({self.meta('workload') or have}); use another --out directory")

    def meta(self, key: str):
        row = self.con.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.con:
            self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def done_keys(self, retry_failed: bool = False) -> set[str]:
        """Keys of the points already measured (failed ones too, unless ``retry_failed``)."""
        q = "SELECT key FROM points" + (" WHERE status='ok'" if retry_failed else "")
        return {r[0] for r in self.con.execute(q)}

    def put(self, point: dict, result: dict) -> None:
        """Store (or replace) one point's measurement."""
        with self.con:
            self.con.execute(
                "INSERT OR REPLACE INTO points (key, point, status, error, cycles, "
                "cycles_per_image, layers, seconds, finished) VALUES (?,?,?,?,?,?,?,?,?)",
                (point_key(point), json.dumps(point, sort_keys=True), result["status"],
                 result.get("error", ""), result.get("cycles"), result.get("cycles_per_image"),
                 json.dumps(result.get("layers", [])), result.get("seconds"), time.time()))

    def set_cost(self, key: str, cost: dict, ips: float | None, feas: dict) -> None:
        with self.con:
            self.con.execute(
                "UPDATE points SET luts=?, ffs=?, multipliers=?, brams=?, fmax_mhz=?, "
                "inferences_per_s=?, feasibility=? WHERE key=?",
                (cost["luts"], cost["ffs"], cost["multipliers"], cost["brams"],
                 cost["fmax_mhz"], ips, json.dumps(feas), key))

    def rows(self) -> list[dict]:
        """Every point as a dict (``point`` and ``layers`` decoded)."""
        cur = self.con.execute("SELECT * FROM points ORDER BY finished")
        names = [d[0] for d in cur.description]
        out = []
        for r in cur:
            d = dict(zip(names, r))
            d["point"] = json.loads(d["point"])
            d["layers"] = json.loads(d["layers"] or "[]")
            d["feasibility"] = json.loads(d["feasibility"]) if d["feasibility"] else None
            out.append(d)
        return out

    def put_synth(self, key: str, report: dict) -> None:
        with self.con:
            self.con.execute("INSERT OR REPLACE INTO synth VALUES (?,?,?)",
                             (key, json.dumps(report), time.time()))

    def synth(self) -> dict[str, dict]:
        return {k: json.loads(v) for k, v in self.con.execute("SELECT key, report FROM synth")}

    def close(self) -> None:
        self.con.close()
