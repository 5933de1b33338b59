"""Loads and stores of the CPU code generator (:class:`MemoryAccess`, a part of
:class:`compiler.cpu.codegen.StageEmitter`): row-major offsets, scalar accesses, unit-stride
vector loads and stores (masked under a per-lane guard), whole-span loads for strided or
guarded vector reads, and per-lane accesses for the rest; and the LLVM types of values
and array elements.

Example::

    from compiler.cpu.vecmem import llvm_type, mem_type
    assert str(llvm_type("float32")) == "float" and str(mem_type("bool")) == "i8"
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..te import DTYPES, Tensor, is_float
from .indexing import bounds, simplify, vstride

I1, I8, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()
MAX_SPAN_STRIDE = 4      # strided vector loads up to this stride read the whole span


def llvm_type(dtype: str | None):
    """The LLVM type of a value of ``dtype`` (None: an index, i64)."""
    if dtype is None:
        return I64
    if is_float(dtype):
        return F32
    return ir.IntType(DTYPES[dtype])


def mem_type(dtype: str):
    """The LLVM type of an array element (bool is stored as a byte, like numpy)."""
    return I8 if dtype == "bool" else llvm_type(dtype)


def _nbytes(t) -> int:
    return 4 if isinstance(t, ir.FloatType) else max(1, t.width // 8)


class MemoryAccess:
    """Array accesses of a stage function; the emitter provides ``b`` (the IR builder),
    ``ptr`` (tensor -> argument), ``env``, ``vec``, ``lanes``, ``mask`` and the helpers
    ``c``, ``splat``, ``match``, ``intrinsic``, ``ranges``, ``_in_bounds``, ``index``
    and ``fail``."""

    def flat_index(self, t: Tensor, indices, clamp: bool):
        """The row-major element offset (i64, a vector inside a vectorized loop)."""
        flat, stride = None, 1
        for d in reversed(range(len(indices))):
            i = self.index(indices[d])
            n = t.shape[d]
            if clamp and not self._in_bounds(indices[d], n):
                i = self.intrinsic("llvm.smax", [i, self.c(i.type, 0)])
                i = self.intrinsic("llvm.smin", [i, self.c(i.type, n - 1)])
            if stride != 1:
                i = self.b.mul(i, self.c(i.type, stride), flags=["nsw"])
            if flat is None:
                flat = i
            else:
                flat, i = self.match(flat, i)
                flat = self.b.add(flat, i, flags=["nsw"])
            stride *= n
        return flat if flat is not None else ir.Constant(I64, 0)

    def access(self, t: Tensor, indices, clamp: bool, value=None):
        """Load ``t[indices]`` (``value`` None) or store ``value`` there.  In a vectorized
        loop: one vector access for unit stride, else one scalar access per lane."""
        if t not in self.ptr:
            self.fail(t, f"tensor {t.name} is not an argument of this stage")
        ety = mem_type(t.dtype)
        ranges = self.ranges()
        indices = [simplify(i, ranges) for i in indices]
        flat = self.flat_index(t, indices, clamp)
        b = self.b
        if not isinstance(flat.type, ir.VectorType):
            ptr = b.gep(self.ptr[t], [flat], inbounds=True, source_etype=ety)
            if value is None:
                return b.load(ptr, typ=ety)
            if isinstance(value.type, ir.VectorType) and self.mask is None:
                # every lane writes this element: the last one wins, as in the loop
                value = b.extract_element(value, ir.Constant(ir.IntType(32), self.lanes - 1))
            elif isinstance(value.type, ir.VectorType):
                for lane in range(self.lanes):
                    k = ir.Constant(ir.IntType(32), lane)
                    with b.if_then(b.extract_element(self.mask, k)):
                        b.store(b.extract_element(value, k), ptr)
                return None
            return b.store(value, ptr)
        n = flat.type.count
        vty = ir.VectorType(ety, n)
        i32 = ir.IntType(32)
        mask = self.mask
        if not clamp and self._unit_stride(t, indices):
            lane0 = b.extract_element(flat, ir.Constant(i32, 0))
            ptr = b.gep(self.ptr[t], [lane0], inbounds=True, source_etype=ety)
            al = _nbytes(ety)
            if mask is None:
                if value is None:
                    return b.load(ptr, typ=vty, align=al)
                return b.store(self.splat(value, n), ptr, align=al)
            if value is None:
                return self.intrinsic("llvm.masked.load", [ptr, ir.Constant(i32, al), mask,
                                      ir.Constant(vty, ir.Undefined)], ret=vty,
                                      overload=[vty, PTR])
            return self.intrinsic("llvm.masked.store", [self.splat(value, n), ptr,
                                  ir.Constant(i32, al), mask], ret=ir.VoidType(),
                                  overload=[vty, PTR])
        step = self._vec_stride(t, indices)
        if value is None and step is not None and 1 <= step <= MAX_SPAN_STRIDE:
            return self.span_load(t, indices, step, n, ety)
        return self.lane_access(t, flat, ety, n, value)

    def span_load(self, t: Tensor, indices, step: int, n: int, ety):
        """A vector load whose lanes are ``step`` elements apart (a guarded unit-stride
        read, or a strided one such as a stride-2 pooling window): one contiguous load of
        ``n * step`` elements and a shuffle that keeps every ``step``-th, when that span
        lies inside the array (proved from the index bounds, else checked at run time:
        lanes a guard discards may point outside their row, never outside the array);
        otherwise a gather at the indices clamped into the array (the lanes outside it
        are ones the guard discards)."""
        b = self.b
        i32 = ir.IntType(32)
        size = int(np.prod(t.shape))
        span = n * step
        raw = self.flat_index(t, indices, clamp=False)
        lane0 = b.extract_element(raw, ir.Constant(i32, 0))
        al = _nbytes(ety)

        def wide():
            ptr = b.gep(self.ptr[t], [lane0], inbounds=True, source_etype=ety)
            v = b.load(ptr, typ=ir.VectorType(ety, span), align=al)
            if step == 1:
                return v
            return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(
                ir.VectorType(i32, n), [k * step for k in range(n)]))
        lo, hi = self._flat_bounds(t, indices)
        if lo is not None and lo >= 0 and hi + step - 1 < size:
            return wide()
        ok = b.and_(b.icmp_signed(">=", lane0, ir.Constant(I64, 0)),
                    b.icmp_signed("<=", lane0, ir.Constant(I64, size - span)))
        with b.if_else(ok) as (then, otherwise):
            with then:
                fast, fast_bb = wide(), b.block
            with otherwise:
                slow, slow_bb = self.gather(t, raw, ety, n), b.block
        phi = b.phi(fast.type)
        phi.add_incoming(fast, fast_bb)
        phi.add_incoming(slow, slow_bb)
        return phi

    def gather(self, t: Tensor, flat, ety, n: int):
        """One gather of the lanes at ``flat`` clamped into the array (``llvm.masked.
        gather``, all lanes on: compact code for the rare path of :meth:`span_load`)."""
        b = self.b
        size = int(np.prod(t.shape))
        flat = self.intrinsic("llvm.smax", [flat, self.c(flat.type, 0)])
        flat = self.intrinsic("llvm.smin", [flat, self.c(flat.type, size - 1)])
        base = b.ptrtoint(self.ptr[t], I64)
        addr = b.add(self.splat(base, n), b.mul(flat, self.c(flat.type, _nbytes(ety))))
        pvec = b.inttoptr(addr, ir.VectorType(PTR, n))
        vty = ir.VectorType(ety, n)
        return self.intrinsic("llvm.masked.gather", [
            pvec, ir.Constant(ir.IntType(32), _nbytes(ety)),
            ir.Constant(ir.VectorType(I1, n), [1] * n), ir.Constant(vty, ir.Undefined)],
            ret=vty, overload=[vty, pvec.type])

    def lane_access(self, t: Tensor, flat, ety, n: int, value):
        """One scalar load or store per lane at the lanes' indices ``flat``."""
        b = self.b
        i32 = ir.IntType(32)
        vty = ir.VectorType(ety, n)
        mask = self.mask
        if mask is not None and value is None:           # disabled lanes may be anywhere
            size = int(np.prod(t.shape))
            flat = self.intrinsic("llvm.smax", [flat, self.c(flat.type, 0)])
            flat = self.intrinsic("llvm.smin", [flat, self.c(flat.type, size - 1)])
        out = ir.Constant(vty, ir.Undefined) if value is None else None
        value = self.splat(value, n) if value is not None else None
        for lane in range(n):
            k = ir.Constant(i32, lane)
            ptr = b.gep(self.ptr[t], [b.extract_element(flat, k)], inbounds=True,
                        source_etype=ety)
            if value is None:
                out = b.insert_element(out, b.load(ptr, typ=ety), k)
            elif mask is None:
                b.store(b.extract_element(value, k), ptr)
            else:
                with b.if_then(b.extract_element(mask, k)):
                    b.store(b.extract_element(value, k), ptr)
        return out

    def _unit_stride(self, t, indices) -> bool:
        return self._vec_stride(t, indices) == 1

    def _vec_stride(self, t, indices):
        """Elements between neighbouring lanes of the access (None: not linear)."""
        total, stride = 0, 1
        for d in reversed(range(len(indices))):
            st = vstride(indices[d], self.vec)
            if st is None:
                return None
            total += st * stride
            stride *= t.shape[d]
        return total

    def _flat_bounds(self, t, indices):
        """The interval of the unclamped row-major offset over every lane and every
        iteration of the enclosing loops, or (None, None)."""
        ranges = self.ranges()
        lo = hi = 0
        stride = 1
        for d in reversed(range(len(indices))):
            r = bounds(indices[d], ranges)
            if r is None:
                return None, None
            lo, hi = lo + r[0] * stride, hi + r[1] * stride
            stride *= t.shape[d]
        return lo, hi
