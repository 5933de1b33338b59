"""The graph IR: a typed dataflow graph of whole-network operators (Relay, reduced).

A :class:`Graph` holds named :class:`Value` s (static shape, dtype, and for quantised int8
values the number of fraction bits ``frac``: real = q * 2**-frac), constant parameters
(numpy arrays, also values) and :class:`Node` s in topological order, each one operator
with attributes and exactly one output.  ``str(graph)`` prints it one node per line;
:func:`verify` checks the invariants; :class:`PassManager` runs passes in order, keeps the
text after each (``show(name)``) and verifies between passes.

Example::

    import numpy as np
    from compiler.graph.ir import Graph, PassManager
    g = Graph("tiny")
    g.add_input("x", (1, 4), "float32")
    g.add_param("w", np.ones((2, 4), np.float32))
    g.add_node("dense", "fc", ["x", "w"], (1, 2), "float32")
    g.outputs.append("fc")
    pm = PassManager([("identity", lambda gr: gr)])
    g = pm.run(g)
    assert "dense" in pm.show("identity")

Raises
------
GraphError
    naming the node (and attribute or value) at fault.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ..ops.errors import GraphError  # noqa: F401 (defined with the operators, re-exported)

DTYPES = ("float32", "int8", "int32", "int64", "bool", "uint8", "int16", "uint16", "uint32",
          "uint64", "float16")


@dataclass
class Value:
    """A named tensor: static shape, dtype, layout ("plain" or "packed") and, for quantised
    integers, ``frac`` fraction bits (real value = integer * 2**-frac)."""
    name: str
    shape: tuple
    dtype: str
    frac: int | None = None
    layout: str = "plain"

    def __str__(self):
        q = f" q{self.frac}" if self.frac is not None else ""
        lay = " packed" if self.layout == "packed" else ""
        return f"{self.dtype}{list(self.shape)}{q}{lay}"


@dataclass
class Node:
    """One operator: ``op`` over ``inputs`` (value names) -> ``output``; ``attrs`` plain data;
    ``target`` "vta" / "cpu" / "" (not placed yet)."""
    op: str
    name: str
    inputs: list
    output: str
    attrs: dict = field(default_factory=dict)
    target: str = ""

    def __str__(self):
        at = ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.attrs.items()))
        tgt = f" @{self.target}" if self.target else ""
        return f"%{self.output} = {self.op}({', '.join('%' + i for i in self.inputs)}" \
               f"{'; ' + at if at else ''}){tgt}"


def _short(v):
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)) and len(v) > 8:
        return f"[{len(v)} items]"
    return repr(v) if isinstance(v, str) else str(v)


class Graph:
    """Values, constant params, nodes (topological), graph inputs and outputs."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.values: dict[str, Value] = {}
        self.params: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []
        self.inputs: list[str] = []
        self.outputs: list[str] = []

    # --------------------------------------------------------------- building
    def add_input(self, name: str, shape, dtype: str = "float32") -> Value:
        v = self._new_value(name, shape, dtype)
        self.inputs.append(name)
        return v

    def add_param(self, name: str, array: np.ndarray, frac: int | None = None) -> Value:
        a = np.ascontiguousarray(array)
        v = self._new_value(name, a.shape, str(a.dtype), frac)
        self.params[name] = a
        return v

    def add_node(self, op: str, output: str, inputs, shape, dtype: str, attrs=None,
                 frac: int | None = None, layout: str = "plain") -> Node:
        v = self._new_value(output, shape, dtype, frac)
        v.layout = layout
        n = Node(op, output, list(inputs), output, dict(attrs or {}))
        self.nodes.append(n)
        return n

    def _new_value(self, name, shape, dtype, frac=None) -> Value:
        if name in self.values:
            raise GraphError(f"value {name!r} defined twice")
        if dtype not in DTYPES:
            raise GraphError(f"value {name!r}: dtype {dtype} not supported ({', '.join(DTYPES)})")
        shape = tuple(int(s) for s in shape)
        v = self.values[name] = Value(name, shape, dtype, frac)
        return v

    def fresh(self, base: str) -> str:
        """A value name not used yet, derived from ``base``."""
        if base not in self.values:
            return base
        i = 1
        while f"{base}_{i}" in self.values:
            i += 1
        return f"{base}_{i}"

    # --------------------------------------------------------------- queries
    def rename(self, old: str, new: str) -> None:
        """Value ``old`` is called ``new`` from now on: its entry, every use, and its
        producer's output and name (callers check ``new`` is free, with their own error)."""
        v = self.values.pop(old)
        v.name = new
        self.values[new] = v
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
            if n.output == old:
                n.output = n.name = new

    def producer(self) -> dict[str, Node]:
        return {n.output: n for n in self.nodes}

    def users(self) -> dict[str, list[Node]]:
        u: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                u.setdefault(i, []).append(n)
        return u

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"no node named {name!r}")

    def copy(self) -> "Graph":
        g = Graph(self.name)
        g.values = copy.deepcopy(self.values)
        g.params = dict(self.params)
        g.nodes = copy.deepcopy(self.nodes)
        g.inputs, g.outputs = list(self.inputs), list(self.outputs)
        return g

    def __str__(self):
        lines = [f"graph {self.name}("
                 + ", ".join(f"%{i}: {self.values[i]}" for i in self.inputs) + ") {"]
        for p, a in self.params.items():
            if any(p in n.inputs for n in self.nodes):
                lines.append(f"  const %{p}: {self.values[p]}")
        for n in self.nodes:
            lines.append(f"  {n}  : {self.values[n.output]}")
        lines.append("  return " + ", ".join("%" + o for o in self.outputs))
        lines.append("}")
        return "\n".join(lines)


def verify(g: Graph, after: str = "") -> None:
    """Check the invariants: every input defined before use, one producer per value, shapes
    and dtypes recorded, graph outputs defined, no cycles (topological order)."""
    where = f" (after pass {after})" if after else ""
    defined = set(g.inputs) | set(g.params)
    for i in g.inputs:
        if i not in g.values:
            raise GraphError(f"graph input {i!r} has no value record{where}")
    seen = set()
    for n in g.nodes:
        if n.name in seen:
            raise GraphError(f"node {n.name!r} defined twice{where}")
        seen.add(n.name)
        for i in n.inputs:
            if i not in defined:
                raise GraphError(f"node {n.name!r} ({n.op}): input {i!r} is not defined before "
                                 f"use{where}")
        if n.output in defined:
            raise GraphError(f"node {n.name!r}: output {n.output!r} defined twice{where}")
        if n.output not in g.values:
            raise GraphError(f"node {n.name!r}: output {n.output!r} has no value record{where}")
        v = g.values[n.output]
        if any(s <= 0 for s in v.shape):
            raise GraphError(f"node {n.name!r}: output shape {v.shape} has an empty or dynamic "
                             f"dimension{where}")
        if v.dtype == "int8" and v.frac is None and n.op.startswith("q"):
            raise GraphError(f"node {n.name!r}: quantised output without a scale{where}")
        defined.add(n.output)
    for o in g.outputs:
        if o not in defined:
            raise GraphError(f"graph output {o!r} is not produced{where}")


class PassManager:
    """Run ``passes`` ((name, fn(graph) -> graph) pairs) in order, verifying after each and
    keeping the printed graph (``show(name)``), like the operator pipeline's ``show``."""

    def __init__(self, passes, verify_each: bool = True):
        self.passes = list(passes)
        self.verify_each = verify_each
        self.stages: dict[str, Graph] = {}

    def run(self, g: Graph) -> Graph:
        verify(g, "import")
        self.stages["import"] = g.copy()
        for name, fn in self.passes:
            g = fn(g)
            if self.verify_each:
                verify(g, name)
            self.stages[name] = g
        return g

    def show(self, name: str) -> str:
        if name not in self.stages:
            raise GraphError(f"no pass named {name!r} (passes: {', '.join(self.stages)})")
        return str(self.stages[name])
