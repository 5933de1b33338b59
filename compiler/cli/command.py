"""The ``vta`` command.

The command sits above every package, so it lives at the top of the import chain; each
package contributes its own subcommands through a ``register(subparsers)`` function in its
``cli`` module, imported only when needed so that ``vta asm`` does not load Amaranth.

Errors that are the user's (bad input files, bad programs) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

# (module, subcommands it registers) — modules are imported lazily.
_PROVIDERS = [
    ("isa.cli", ("asm", "disasm")),
    ("vta_sim.cli", ("sim", "vector")),
    ("vta_hw.cli", ("hw", "rtl", "board")),
    ("vta_runtime.cli", ("replay",)),
    ("compiler.cli.demo", ("demo", "bench")),
    ("compiler.cli.graph", ("compile", "run", "eval")),
    ("compiler.cli.tune", ("tune",)),
    ("compiler.cli.dse", ("dse",)),
]


class UserError(Exception):
    """An error caused by the user's input: reported as one line, exit status 2."""


_user_errors: list[type[BaseException]] = []

# Each package's base class of user errors ("module:Class"), used when that module was loaded.
_ERROR_BASES = ("vta_sim.errors:SimError", "vta_runtime.errors:VTARuntimeError",
                "vta_hw.errors:HwError", "compiler:CompilerError")


def _loaded_error_bases() -> list[type[BaseException]]:
    out = []
    for spec in _ERROR_BASES:
        module, name = spec.split(":")
        mod = sys.modules.get(module)
        if mod is not None and isinstance(getattr(mod, name, None), type):
            out.append(getattr(mod, name))
    return out


class _Parser(argparse.ArgumentParser):
    """A usage error (a bad flag value, a missing argument) is one line too, exit 2:
    "vta compile: error: argument --percentile: ... (vta compile --help)"."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help)\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(prog="vta", description="The VTA co-design stack.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module, commands in _PROVIDERS:
        if only is not None and only not in commands:
            # Cheap placeholder so `vta --help` lists every command without importing it.
            for c in commands:
                sub.add_parser(c, help=f"(see vta {c} --help)", add_help=False)
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name and (e.name == module or module.startswith(e.name + ".")):
                continue  # that package does not provide a CLI yet
            raise
        mod.register(sub)
        _user_errors.extend(getattr(mod, "USER_ERRORS", ()))
    return parser


def _one_line_warnings(command: str):
    """Warnings meant for the user (configuration defaults) print as one line each."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"vta {command}: warning: {message}", file=sys.stderr)
    return show


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(only=command)
    args = parser.parse_args(argv)
    from isa import ConfigDefaultsWarning, ConfigError, IsaError
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", ConfigDefaultsWarning)
            warnings.showwarning = _one_line_warnings(args.command)
            return int(args.func(args) or 0)
    except BrokenPipeError:
        # `vta demo | head`: the reader closed the pipe; that is not an error.  Point stdout
        # at /dev/null so the interpreter's final flush does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (UserError, IsaError, ConfigError, OSError, *_user_errors,
            *_loaded_error_bases()) as e:
        print(f"vta {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
