"""The package layout keeps its promises: imports flow one way between packages, and no two
modules of a package import each other (directly or around a longer circle), counting the
imports inside functions too (a lazy import is still a dependency)."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("isa", "vta_sim", "vta_runtime", "compiler", "vta_hw")
# what each package may import from the others (README: isa <- vta_sim <- vta_runtime <-
# compiler, and isa <- vta_hw; the runtime's RTL and board devices reach vta_hw lazily, and
# the `vta` command, at the top of the chain, registers every package's subcommands)
ALLOWED = {
    "isa": set(),
    "vta_sim": {"isa"},
    "vta_hw": {"isa"},
    "vta_runtime": {"isa", "vta_sim", "vta_hw"},
    "compiler": {"isa", "vta_sim", "vta_runtime", "vta_hw"},
}


def _modules():
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            yield ".".join(parts), path, rel.name == "__init__"


def _is_module(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _imports(name: str, path: pathlib.Path, is_pkg: bool) -> set[str]:
    """Every module ``name`` imports, resolved to absolute dotted names."""
    tree = ast.parse(path.read_text(), str(path))
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                stem = base[:len(base) - node.level + 1]
                mod = ".".join(stem + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            subs = {f"{mod}.{a.name}" for a in node.names}   # `from . import x`
            out.update(subs)
            if not all(_is_module(m) for m in subs):      # names from the module itself
                out.add(mod)
    return out


MODULES = {name: (path, is_pkg) for name, path, is_pkg in _modules()}
GRAPH = {name: {m for m in _imports(name, *MODULES[name]) if m in MODULES and m != name}
         for name in MODULES}


@pytest.mark.parametrize("pkg", PACKAGES)
def test_imports_flow_one_way(pkg):
    wrong = sorted(f"{a} imports {b}" for a, deps in GRAPH.items() if a.split(".")[0] == pkg
                   for b in deps
                   if b.split(".")[0] != pkg and b.split(".")[0] not in ALLOWED[pkg])
    assert not wrong, wrong


def _cycle(nodes: set[str]) -> list[str] | None:
    """One import circle among ``nodes`` (package __init__ files excluded: re-exports)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in sorted(GRAPH[n] & nodes):
            if colour.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in colour and (c := visit(m)):
                return c
        stack.pop()
        colour[n] = 2
        return None

    for n in sorted(nodes):
        if n not in colour and (c := visit(n)):
            return c
    return None


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_circles(pkg):
    nodes = {n for n, (_, is_pkg) in MODULES.items() if n.split(".")[0] == pkg and not is_pkg}
    cycle = _cycle(nodes)
    assert cycle is None, " -> ".join(cycle)


def test_the_checks_see_a_circle():
    """The circle finder is not vacuous: a made-up circle is found."""
    GRAPH["isa.insn"].add("isa.encoding")
    GRAPH["isa.encoding"].add("isa.insn")
    try:
        assert _cycle({"isa.insn", "isa.encoding"}) is not None
    finally:
        GRAPH["isa.insn"].discard("isa.encoding")
        GRAPH["isa.encoding"].discard("isa.insn")


def test_vta_hw_groups_its_files():
    """vta_hw shows the architecture: the core's blocks, the runners and the board."""
    flat = sorted(p.name for p in (ROOT / "vta_hw").glob("*.py"))
    assert flat == ["__init__.py", "cli.py", "errors.py"], flat
    for group in ("blocks", "runners", "board"):
        assert (ROOT / "vta_hw" / group / "__init__.py").exists()


# The compiler's layers, bottom to top (README, docs/architecture.md): a module may import its
# own layer and the layers below it, never one above; vta and cpu (the two back ends) share a
# rank and do not import each other.
LAYERS = {"te": 0, "vta": 1, "cpu": 1, "ops": 2, "tuner": 3, "graph": 4, "dse": 5, "cli": 6}


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if parts[0] == "compiler" and len(parts) > 1 else None


def test_compiler_modules_live_in_layers():
    """Nothing sits loose at the top of compiler/: every module belongs to one layer."""
    loose = sorted(n for n, (_, is_pkg) in MODULES.items()
                   if n.startswith("compiler.") and _layer(n) not in LAYERS)
    assert not loose, loose
    assert set(LAYERS) == {p.name for p in (ROOT / "compiler").iterdir()
                           if (p / "__init__.py").exists()}


def test_compiler_layers_flow_one_way():
    wrong = []
    for a, deps in GRAPH.items():
        la = _layer(a)
        if la is None:
            continue
        for b in deps:
            if b == "compiler":
                wrong.append(f"{a} imports names from the compiler package root")
                continue
            lb = _layer(b)
            if lb is not None and lb != la and LAYERS[lb] >= LAYERS[la]:
                wrong.append(f"{a} imports {b} ({la} may not import {lb})")
    assert not wrong, wrong


def test_the_layer_check_sees_a_back_arrow():
    """The layering check is not vacuous: a made-up upward import is reported."""
    GRAPH["compiler.te.expr"].add("compiler.ops.nn")
    try:
        with pytest.raises(AssertionError, match="te may not import ops"):
            test_compiler_layers_flow_one_way()
    finally:
        GRAPH["compiler.te.expr"].discard("compiler.ops.nn")


#: Modules allowed above the cap, each with the reason (none today).
OVER_CAP: dict[str, str] = {}


def test_no_compiler_module_above_600_lines():
    long = sorted(f"{p.relative_to(ROOT)} ({n} lines)" for p in (ROOT / "compiler").rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > 600
                  and str(p.relative_to(ROOT)) not in OVER_CAP)
    assert not long, long


def test_operator_families_do_not_shadow_operator_functions():
    """``compiler.ops.<family>`` (a module) never hides an operator function of the same name
    that ``from compiler import ops`` users call (``ops.dense(...)``)."""
    import compiler.ops as ops
    from compiler.ops import nn, registry
    registry.all_ops()                      # imports every family module
    clash = sorted(f for f in registry.FAMILIES if callable(getattr(nn, f, None)))
    assert not clash, clash
    assert callable(ops.dense) and callable(ops.conv2d)
