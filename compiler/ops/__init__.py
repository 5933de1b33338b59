"""The operator library: one module per operator family.

- :mod:`.nn` convolutions (plain, grouped, transposed), dense, broadcasts and epilogues in
  VTA's packed layouts, with independent numpy references;
- :mod:`.eltwise` element-wise (ALU-only) operators; :mod:`.pool` pooling.

This package re-exports them (``from compiler import ops; ops.conv2d_nchw(...)``).
"""

from .nn import *  # noqa: F401,F403 - the operator functions are the package's namespace
from .nn import _conv_geometry  # noqa: F401
