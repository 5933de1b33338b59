"""The ``vta`` command and every compiler subcommand, in one place.

- :mod:`.command` the entry point: subcommands registered by each package's ``cli`` module;
- :mod:`.demo` ``vta demo`` / ``vta bench`` (:mod:`.bench`: the ResNet-18 C2-C11 benchmark);
- :mod:`.graph` ``vta compile`` / ``vta run``; :mod:`.tune` ``vta tune``; :mod:`.dse`
  ``vta dse``.
"""

from .command import UserError, main  # noqa: F401
