"""The operator library (TVM's topi and Relay's op strategy in one place): one module per
operator family, each holding for its operators the ONNX import and shape rule, the numpy
reference (float and integer), the quantisation rule, the placement rule and the VTA and
CPU kernels, registered in :mod:`.registry` (the graph layers look operators up there).

- :mod:`.conv` Conv (and the 2-D window helpers), :mod:`.gemm` Gemm / MatMul,
  :mod:`.requant` the integer epilogue both share, :mod:`.batchnorm`;
- :mod:`.eltwise` Add / Mul / Relu / Clip (and the element-wise tensor expressions in VTA's
  packed layouts), :mod:`.pool` Max / Average / GlobalAverage pooling (and their tensor
  expressions);
- :mod:`.shape` Flatten / Reshape / Concat and the import-time folds, :mod:`.softmax`,
  :mod:`.argmax`, :mod:`.typecast`, :mod:`.qdq` (quantize / dequantize, QDQ models),
  :mod:`.qfixed` (integer operators at a QDQ model's own, non-power-of-two scales),
  :mod:`.layout` (pack / unpack), :mod:`.lut` (int8 lookup tables: the integer form of
  element-wise activations), :mod:`.sigmoid`, :mod:`.hardsigmoid`, :mod:`.hardswish`;
- forms lowered onto the operators above at import: :mod:`.window_nd` (1-D Conv / pooling
  through height 1, 3-D pooling as two separable 2-D pools), :mod:`.matmul_nd` (MatMul of
  an N-D activation by a constant as a dense layer), :mod:`.control` (If on a condition that
  folds at compile time; the exact ``copy`` of a value passed straight to an output);
- :mod:`.nn` convolutions (plain, grouped, transposed), dense, broadcasts and epilogues as
  tensor expressions in VTA's packed layouts, with independent numpy references.

This package re-exports the tensor-expression operators
(``from compiler import ops; ops.conv2d_nchw(...)``).
"""

from . import registry  # noqa: F401
from .nn import *  # noqa: F401,F403 - the operator functions are the package's namespace
from .nn import _conv_geometry  # noqa: F401
