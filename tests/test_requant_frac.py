"""Power-of-two scales of tiny tensors: a range far below 2^-24 keeps its int8 values, and a
per-channel weight scale coarsens below its own range until the bias fits int32."""
import numpy as np

from compiler.ops.requant import frac_for, qweight, qweight_channels


def test_a_tiny_range_keeps_its_int8_values():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 16)) * 1e-9        # deep random-init activations reach this
    q, f = qweight(w)
    assert f > 24
    assert np.count_nonzero(q) > 0.9 * q.size
    np.testing.assert_allclose(q * 2.0 ** -f, w, atol=2.0 ** -f)


def test_frac_for_is_capped_both_ways():
    assert frac_for(1e300) == -48                  # FRAC_FLOOR (check_range refuses beyond)
    assert frac_for(1e-300) == 48


def test_a_large_bias_coarsens_the_weights_below_their_own_scale():
    rng = np.random.default_rng(1)
    w = rng.uniform(-0.5, 0.5, (4, 9))
    w[:, 0] = 0.5                                   # every row's own scale: 2^-7
    fx = 20
    b = np.full(4, 16.0)                            # 16 * 2^(20 + 7) = 2^31: no int32 room at 2^-7
    q, fwc, mult = qweight_channels(w, b, fx)
    assert fwc.max() < 7
    bound = (np.abs(q.astype(np.int64)).sum(axis=1) * 128 + np.abs(b) * 2.0 ** (fx + fwc) + 1) * mult
    assert bound.max() < 2 ** 30
