"""The docs a newcomer follows must run: every ```python block of the README and docs/, and every
``Example::`` / ``Typical use::`` block of the packages' docstrings, executed as written
(a clean namespace: an example defines every name it uses)."""

import ast
import contextlib
import importlib
import io
import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("isa", "vta_sim", "vta_runtime", "compiler", "vta_hw")


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def readme_blocks():
    """Every ```python block of the README and of the guides in docs/."""
    out = []
    for path in DOCS:
        text = path.read_text()
        out += [pytest.param(b, id=f"{path.stem}-{k}")
                for k, b in enumerate(re.findall(r"```python\n(.*?)```", text, re.S))]
    return out


def _literal_blocks(doc: str):
    """The indented blocks after a line ending in ``::`` (reST literal blocks)."""
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        body = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and not nxt.startswith((" ", "\t")):
                break
            body.append(nxt)
        code = textwrap.dedent("\n".join(body)).strip("\n")
        if code:
            yield code


def docstring_blocks():
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            mod = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            mod = mod.removesuffix(".__init__")
            doc = ast.get_docstring(ast.parse(path.read_text()))
            for k, code in enumerate(_literal_blocks(doc or "")):
                try:
                    ast.parse(code)
                except SyntaxError:
                    continue            # a shell example (vta ...), not Python
                out.append(pytest.param(code, id=f"{mod}-{k}"))
    return out


def _run(code: str, name: str):
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, name, "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("code", readme_blocks())
def test_readme_python_blocks_run(code):
    _run(code, "README.md")


@pytest.mark.parametrize("code", docstring_blocks())
def test_docstring_examples_run(code):
    _run(code, "docstring example")


def test_the_examples_are_found():
    # the docs this test promises to check exist (an empty list would pass vacuously)
    assert len(readme_blocks()) >= 1
    for guide in ("operators", "cpu", "networks"):
        assert any(p.id.startswith(guide + "-") for p in readme_blocks()), guide
    ids = {p.id for p in docstring_blocks()}
    assert {"compiler-0", "vta_runtime-0"} <= ids, ids


def test_every_package_imports_without_heavy_dependencies():
    for pkg in PACKAGES:
        importlib.import_module(pkg)
