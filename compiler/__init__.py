"""The VTA compiler: tensor expressions and schedules, lowering to VTA (tensorize, DMA, ALU,
latency hiding through virtual threads), CPU code through llvmlite, graph passes and the
schedule tuner.  ``compiler.cli`` is the ``vta`` command."""
