"""The CPU backend: tensor expressions -> loop IR -> LLVM IR (llvmlite) -> native code.

The host half of a heterogeneous program: every operator VTA does not run (the first
3-channel convolution, pooling, softmax, quantisation, layout packing) compiles from the
same tensor expressions and the same stage schedules (:class:`compiler.loop_nest.
StageSchedule`: split, tile, reorder, fuse, unroll, vectorize, parallel) for the machine
it runs on, and runs on numpy arrays without copies.

Example::

    import numpy as np
    from compiler import te
    from compiler.cpu import cpu_build, ops
    x = te.placeholder((1, 8, 12, 12), "int8", "x")
    y = ops.max_pool2d(x, 3, 2, 1)
    k = cpu_build(y)
    xv = np.random.default_rng(0).integers(-128, 128, (1, 8, 12, 12)).astype(np.int8)
    assert k.run({x: xv}).shape == (1, 8, 6, 6)
    assert "define void @s0" in k.show("llvm")
"""

from .errors import CpuError
from .jit import CpuTarget, clear_memory_cache, host_target
from .kernel import CpuKernel, cpu_build
from . import ops

__all__ = ["cpu_build", "CpuKernel", "CpuError", "CpuTarget", "host_target",
           "clear_memory_cache", "ops"]
