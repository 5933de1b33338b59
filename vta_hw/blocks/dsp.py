"""Registered products for the ``pipelined`` core: ``a * b`` with both operands and the
product registered, so the multiplier runs register to register.

On an ECP5 (``platform.family == "ecp5"``) it is a hand-instantiated ``MULT18X18D`` with its
own input and output registers (``REG_INPUTA_CLK``/``REG_INPUTB_CLK``/``REG_OUTPUT_CLK`` on
``CLK0``): yosys maps ``*`` to a MULT18X18D without registers and does not absorb the fabric
flip-flops around it, so a fabric register -> DSP -> fabric register path pays the routing
into and out of the DSP block twice.  Anywhere else (simulation, ``synth-only``, other
parts) it is the same two register stages written in Amaranth: the same values in the same
cycles, which is what the simulators check.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, Module, Mux, Signal, signed, unsigned

__all__ = ["registered_product", "is_ecp5", "and_add"]


def is_ecp5(platform) -> bool:
    """True when elaborating for a Lattice ECP5 platform (hard MULT18X18D blocks)."""
    return platform is not None and getattr(platform, "family", None) == "ecp5"


def registered_product(m: Module, a, b, width: int, name: str, *, primitive: bool = False,
                       domain: str = "sync", reset_less: bool = False,
                       operand_regs: bool = True) -> Signal:
    """A ``width``-bit signal holding ``a * b`` (low ``width`` bits, signedness taken from
    ``a`` and ``b``, each at most 18 bits wide) two cycles after ``a``/``b``: the operands
    are registered at the first clock edge and their product at the second.

    ``primitive``: one ``MULT18X18D`` with its input A/B and output registers on ``CLK0``
    (operands sign- or zero-extended to 18 bits, ``SIGNEDA``/``SIGNEDB`` tied to their
    signedness); otherwise the same registers in logic.  ``reset_less``: the logic registers
    have no (synchronous) reset (the primitive's registers never reset).

    ``operand_regs=False``: ``a`` and ``b`` are the caller's registers already, so only the
    product is registered (one cycle after ``a``/``b``; the primitive's input registers are
    bypassed, ``REG_INPUTA_CLK``/``REG_INPUTB_CLK`` ``NONE``).  The operand flip-flops then
    stay in the fabric, where the placer can put each beside the logic it also feeds."""
    sa, sb = a.shape().signed, b.shape().signed
    if len(a) > 18 or len(b) > 18 or width > 36:
        raise ValueError(f"{name}: a MULT18X18D takes operands of at most 18 bits and gives "
                         f"36 (got {len(a)} x {len(b)} -> {width})")
    out = Signal(signed(width) if (sa or sb) else unsigned(width), name=name,
                 reset_less=reset_less)
    if not primitive and not operand_regs:
        m.d[domain] += out.eq(a * b)
        return out
    if not primitive:
        ar = Signal(a.shape(), name=f"{name}_a", reset_less=reset_less)
        br = Signal(b.shape(), name=f"{name}_b", reset_less=reset_less)
        m.d[domain] += [ar.eq(a), br.eq(b), out.eq(ar * br)]
        return out
    a18 = Signal(18, name=f"{name}_a18")
    b18 = Signal(18, name=f"{name}_b18")
    p = Signal(36, name=f"{name}_p")
    m.d.comb += [a18.eq(a.as_signed() if sa else a.as_unsigned()),
                 b18.eq(b.as_signed() if sb else b.as_unsigned())]
    ports = {f"i_A{i}": a18[i] for i in range(18)}
    ports.update({f"i_B{i}": b18[i] for i in range(18)})
    ports.update({f"i_C{i}": Const(0) for i in range(18)})
    ports.update({f"o_P{i}": p[i] for i in range(36)})
    in_clk = "CLK0" if operand_regs else "NONE"
    m.submodules[f"{name}_dsp"] = Instance(
        "MULT18X18D",
        p_REG_INPUTA_CLK=in_clk, p_REG_INPUTA_CE="CE0", p_REG_INPUTA_RST="RST0",
        p_REG_INPUTB_CLK=in_clk, p_REG_INPUTB_CE="CE0", p_REG_INPUTB_RST="RST0",
        p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE",
        p_REG_OUTPUT_CLK="CLK0", p_REG_OUTPUT_CE="CE0", p_REG_OUTPUT_RST="RST0",
        p_CLK0_DIV="ENABLED", p_CLK1_DIV="ENABLED", p_CLK2_DIV="ENABLED",
        p_CLK3_DIV="ENABLED", p_HIGHSPEED_CLK="NONE", p_GSR="DISABLED",
        p_CAS_MATCH_REG="FALSE", p_SOURCEB_MODE="B_SHIFT", p_MULT_BYPASS="DISABLED",
        p_RESETMODE="SYNC",
        i_SIGNEDA=Const(int(sa)), i_SIGNEDB=Const(int(sb)), i_SOURCEA=Const(0),
        i_SOURCEB=Const(0), i_CLK0=ClockSignal(domain), i_CE0=Const(1), i_RST0=Const(0),
        **ports)
    m.d.comb += out.eq(p[:width])
    return out


def _and_add_init(neg_a: bool) -> int:
    """CCU2C ``INIT`` of one bit of ``a + b`` with ``a = A & B`` (or ``~(A & B)`` when
    ``neg_a``) and ``b = C & D``: the LUT4 gives the propagate ``a ^ b``; its low nibble
    (``C = D = 0``, where ``b = 0``) is also the half's LUT2 of ``A``/``B``, the generate,
    which is ``a`` -- the carry out when ``a == b``."""
    init = 0
    for i in range(16):
        a_, b_, c_, d_ = i & 1, (i >> 1) & 1, (i >> 2) & 1, (i >> 3) & 1
        a = (a_ & b_) ^ int(neg_a)
        init |= (a ^ (c_ & d_)) << i
    return init


def and_add(m: Module, x, wa, y, wb, width: int, name: str, *, negate_x: bool = False,
            primitive: bool = False) -> Signal:
    """``(x if wa else 0) + (y if wb else 0)`` (``- (x if wa else 0)`` for the first term
    with ``negate_x``) as a ``width``-bit signed signal; ``x``/``y`` signed values that fit
    ``width`` bits (sign-extended), ``wa``/``wb`` single bits, the result must fit too.

    ``primitive``: one ECP5 carry chain (``width / 2`` CCU2C) whose LUTs compute the two
    ANDs as well as the sum bit, so the selects cost no LUT of their own (a radix-4 digit
    ``x * (w0 + 2 w1)`` is ``and_add(x, w0, 2x, w1)``); ``negate_x`` uses ``~(x & wa)`` and a
    carry in of 1.  Otherwise the same sum in logic."""
    out = Signal(signed(width), name=name)
    if not primitive:
        ta = Mux(wa, x, 0)
        m.d.comb += out.eq((-ta if negate_x else ta) + Mux(wb, y, 0))
        return out
    xs = Signal(signed(width), name=f"{name}_x")
    ys = Signal(signed(width), name=f"{name}_y")
    m.d.comb += [xs.eq(x), ys.eq(y)]
    init = _and_add_init(negate_x)
    # ``negate_x``: -(x & wa) = ~(x & wa) + 1, the A/B term inverted in the LUT
    a_in, b_in, c_in, d_in = xs, wa, ys, wb
    carry = Const(int(negate_x), 1)
    for c in range((width + 1) // 2):
        ports = {"i_CIN": carry}
        for h in (0, 1):
            i = 2 * c + h
            if i < width:
                ports.update({f"i_A{h}": a_in[i], f"i_B{h}": b_in, f"i_C{h}": c_in[i],
                              f"i_D{h}": d_in, f"o_S{h}": out[i]})
            else:   # an odd width's last half: inputs tied, output unused
                ports.update({f"i_A{h}": Const(0), f"i_B{h}": Const(0), f"i_C{h}": Const(0),
                              f"i_D{h}": Const(0)})
        nxt = Signal(name=f"{name}_co{c}")
        ports["o_COUT"] = nxt
        m.submodules[f"{name}_ccu{c}"] = Instance(
            "CCU2C", p_INIT0=Const(init, 16), p_INIT1=Const(init, 16), p_INJECT1_0="NO",
            p_INJECT1_1="NO", **ports)
        carry = nxt
    return out
