"""The VTA JIT runtime: device memory, the command queue that turns runtime calls into
instruction streams, micro-kernel recording and caching, dependency push/pop, synchronisation;
devices for the simulator and RTL simulation."""
