"""The tensor-expression layer: the language and its target-neutral machinery.

- :mod:`.expr` the expression language (placeholder, compute, reductions, casts; this package
  re-exports it, so ``from compiler import te; te.compute(...)`` reads as in TVM);
- :mod:`.evaluate` its numpy reference semantics (bit-exact integer wrapping);
- :mod:`.ir` the loop IR both back ends lower to, and its printer;
- :mod:`.loop_nest` per-stage schedules (split, tile, fuse, reorder, unroll, vectorize,
  parallel) lowered to that IR, with an interpreter;
- :mod:`.nn` the compute declarations the back ends build on (conv2d and dense, plain and
  in VTA's blocked layouts);
- :mod:`.errors` :data:`CompilerError`, the base classes of the compiler's user errors.

Nothing here imports a back end: ``compiler.vta`` and ``compiler.cpu`` build on it.
"""

from .expr import *  # noqa: F401,F403 - the language is the package's namespace
from .expr import TEError, Tensor, max, min, sum  # noqa: F401,A004 - te.sum/max/min, like TVM
