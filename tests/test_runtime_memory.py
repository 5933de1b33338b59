"""Device memory, buffers and tiled layouts."""

import numpy as np
import pytest

from isa import MemType, VTAConfig
from vta_runtime import (PAGE_BYTES, DeviceMemory, DeviceMemoryError, NullDevice, pack_matrix,
                         pack_nchw, pack_oihw, pack_weights, pad_to_multiple, tile_spec,
                         unpack_matrix, unpack_nchw, unpack_oihw, unpack_weights)


class TestDeviceMemory:
    def test_page_aligned_never_zero(self):
        m = DeviceMemory(1 << 20)
        addrs = [m.alloc(n) for n in (1, 4096, 4097, 100)]
        assert all(a > 0 and a % PAGE_BYTES == 0 for a in addrs)
        assert addrs[0] == PAGE_BYTES               # page 0 is never handed out
        assert addrs[2] - addrs[1] == PAGE_BYTES and addrs[3] - addrs[2] == 2 * PAGE_BYTES

    def test_free_coalesces_and_reuses(self):
        m = DeviceMemory(16 * PAGE_BYTES)
        a, b, c = (m.alloc(PAGE_BYTES) for _ in range(3))
        m.free(b)
        m.free(a)
        m.free(c)
        assert m.free_bytes == 15 * PAGE_BYTES
        big = m.alloc(15 * PAGE_BYTES)                # needs all free pages merged again
        assert big == PAGE_BYTES

    def test_exhaustion(self):
        m = DeviceMemory(8 * PAGE_BYTES)
        m.alloc(6 * PAGE_BYTES)
        with pytest.raises(DeviceMemoryError, match="out of device memory"):
            m.alloc(2 * PAGE_BYTES)

    def test_alloc_zeroes(self):
        m = DeviceMemory(8 * PAGE_BYTES)
        a = m.alloc(100)
        m.data[a:a + 100] = 7
        m.free(a)
        b = m.alloc(100)
        assert b == a and not m.data[b:b + 100].any()

    @pytest.mark.parametrize("n", [0, -1, 1.5, True, None])
    def test_bad_sizes(self, n):
        with pytest.raises(DeviceMemoryError, match="positive integer"):
            DeviceMemory(1 << 16).alloc(n)

    def test_max_alloc(self):
        m = DeviceMemory(1 << 20, max_alloc=8192)
        with pytest.raises(DeviceMemoryError, match="VTA_MAX_XFER"):
            m.alloc(8193)

    def test_free_unknown(self):
        m = DeviceMemory(1 << 16)
        with pytest.raises(DeviceMemoryError, match="not the start of a live allocation"):
            m.free(PAGE_BYTES)


class TestBuffer:
    def test_roundtrip_and_views(self):
        dev = NullDevice()
        x = np.arange(-40, 40, dtype=np.int32).reshape(5, 1, 16)
        b = dev.alloc(x.nbytes)
        b.copy_from(x)
        assert np.array_equal(b.copy_to(np.int32, x.shape), x)
        tiles = b.tiles(MemType.ACC)
        assert tiles.shape == (5, 1, 16) and np.array_equal(tiles, x)
        tiles[0, 0, 0] = 99                              # live view writes device memory
        assert b.copy_to(np.int32)[0] == 99
        assert b.numpy(np.int32).shape == (80,)
        b.copy_from(np.array([1, 2], dtype=np.int32), offset=8)
        assert list(b.copy_to(np.int32, (4,))) == [99, -39, 1, 2]

    def test_copy_out_of_range(self):
        dev = NullDevice()
        b = dev.alloc(64)
        with pytest.raises(DeviceMemoryError, match="outside"):
            b.copy_from(np.zeros(65, np.uint8))
        with pytest.raises(DeviceMemoryError, match="outside"):
            b.copy_from(np.zeros(8, np.uint8), offset=60)
        with pytest.raises(DeviceMemoryError, match="outside"):
            b.copy_to(np.int32, (17,))
        with pytest.raises(DeviceMemoryError, match="offset"):
            b.copy_to(offset=-1)

    def test_double_free_and_use_after_free(self):
        dev = NullDevice()
        b = dev.alloc(64)
        dev.free(b)
        with pytest.raises(DeviceMemoryError, match="double free"):
            dev.free(b)
        with pytest.raises(DeviceMemoryError, match="freed"):
            b.copy_from(b"x")

    def test_foreign_handles(self):
        d1, d2 = NullDevice(), NullDevice()
        b = d1.alloc(64)
        with pytest.raises(DeviceMemoryError, match="another device"):
            d2.free(b)
        with pytest.raises(DeviceMemoryError, match="another device"):
            d2.copy_from_host(b, b"x")
        with pytest.raises(DeviceMemoryError, match="Buffer handle"):
            d1.free(b.phys)

    def test_queue_rejects_foreign_buffer(self):
        from vta_runtime import CommandQueue
        d1, d2 = NullDevice(), NullDevice()
        b = d2.alloc(64)
        with pytest.raises(DeviceMemoryError, match="another device"):
            CommandQueue(d1).load_buffer_2d(b, 0, 1, 1, 1, 0, 0, 0, 0, 0, MemType.ACC)


class TestLayouts:
    def test_nchw_roundtrip_and_tile_order(self):
        rng = np.random.default_rng(0)
        x = rng.integers(-128, 128, (2, 32, 3, 5), dtype=np.int8)
        t = pack_nchw(x, 1, 16)
        assert t.shape == (2, 2, 3, 5, 1, 16)
        # tile (n, cb, h, w) holds channels cb*16..cb*16+15 at (n, h, w)
        assert np.array_equal(t[1, 1, 2, 4, 0], x[1, 16:32, 2, 4])
        assert np.array_equal(unpack_nchw(t), x)
        t2 = pack_nchw(x, 2, 16)
        assert t2.shape == (1, 2, 3, 5, 2, 16)
        assert np.array_equal(t2[0, 0, 1, 1, 1], x[1, :16, 1, 1])
        assert np.array_equal(unpack_nchw(t2), x)

    def test_oihw_roundtrip_rows_are_outputs(self):
        rng = np.random.default_rng(1)
        w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
        t = pack_oihw(w, 16, 16)
        assert t.shape == (2, 1, 3, 3, 16, 16)
        assert np.array_equal(t[1, 0, 2, 1], w[16:32, 0:16, 2, 1])
        assert np.array_equal(unpack_oihw(t), w)

    def test_matrix_and_weights(self):
        rng = np.random.default_rng(2)
        x = rng.integers(-128, 128, (4, 48), dtype=np.int8)
        w = rng.integers(-128, 128, (32, 48), dtype=np.int8)
        assert np.array_equal(unpack_matrix(pack_matrix(x, 1, 16)), x)
        tw = pack_weights(w, 16, 16)
        assert tw.shape == (2, 3, 16, 16) and np.array_equal(tw[1, 2], w[16:, 32:])
        assert np.array_equal(unpack_weights(tw), w)

    def test_not_divisible(self):
        with pytest.raises(ValueError, match="C = 20 is not a multiple of the block size 16"):
            pack_nchw(np.zeros((1, 20, 1, 1)), 1, 16)
        x = pad_to_multiple(np.ones((1, 20, 1, 1)), 1, 16)
        assert x.shape == (1, 32, 1, 1) and x[0, 20:].sum() == 0

    def test_tile_spec(self):
        cfg = VTAConfig()
        assert tile_spec(cfg, MemType.WGT)[1:] == ((16, 16), 256)
        assert tile_spec(cfg, MemType.ACC)[0] == np.int32
        with pytest.raises(ValueError, match="no tensor tile"):
            tile_spec(cfg, MemType.UOP)
