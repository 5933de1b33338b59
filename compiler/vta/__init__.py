"""The VTA back end: tensor expressions -> VTA instruction streams.

- recognition: :mod:`.intrin` (the GEMM intrinsic and ALU op table, structural tensorize
  check), :mod:`.workload` (a graph as a GEMM workload), :mod:`.host_layout` (the host-side
  packing of operands);
- schedules: :mod:`.schedule` (knobs as plain data, TVM-style primitives),
  :mod:`.default_schedule` (the cost-model search), :mod:`.dispatch` (the tuning-log hook);
- lowering: :mod:`.tiling` (bounds inference), :mod:`.lower` (schedule -> loop IR),
  :mod:`.passes` (storage flattening, vthreads, uop folding, DMA inference, verifier),
  :mod:`.program` (unrolling, dependency tokens), :mod:`.codegen` (runtime calls),
  :mod:`.kernel` (the op program's last passes, the kernel base class);
- kernels: :mod:`.pipeline` (``build``: GEMM kernels, and the dispatch to the others),
  :mod:`.eltwise` / :mod:`.eltwise_tree` / :mod:`.alu_program` (ALU-only element-wise
  kernels), :mod:`.pool` (pooling), :mod:`.transpose` (phase-split transposed convolution);
- :mod:`.timing` the PYNQ board's timing parameters for the simulator.

It imports :mod:`compiler.te` and the runtime, never the operator library, the tuner or
the graph layers above it (``tests/test_layout.py``).
"""
