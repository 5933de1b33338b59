"""The ResNet-18 layers C2-C11 of the VTA paper's benchmark, and the tuned schedules of them
shipped with the package (the tuner's TopHub baseline, ``vta tune resnet18``, ``vta bench``
and the DSE workloads all use this table)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ConvLayer:
    name: str
    hw: int
    cin: int
    cout: int
    k: int
    pad: int
    stride: int

    def scaled(self, factor: int) -> "ConvLayer":
        """A reduced copy for quick tests: channels / factor, rounded down to whole blocks of
        16 (at least one)."""
        if not isinstance(factor, int) or factor < 1:
            raise ValueError(f"the reduction factor must be a positive integer, not {factor!r}")

        def ch(c):
            return max(16, c // factor // 16 * 16)
        return ConvLayer(self.name, self.hw, ch(self.cin), ch(self.cout), self.k, self.pad,
                         self.stride)


#: The VTA benchmark's ResNet-18 layers (C1, 3 input channels, stays on the CPU).
RESNET18 = [
    ConvLayer("C2", 56, 64, 64, 3, 1, 1), ConvLayer("C3", 56, 64, 128, 3, 1, 2),
    ConvLayer("C4", 56, 64, 128, 1, 0, 2), ConvLayer("C5", 28, 128, 128, 3, 1, 1),
    ConvLayer("C6", 28, 128, 256, 3, 1, 2), ConvLayer("C7", 28, 128, 256, 1, 0, 2),
    ConvLayer("C8", 14, 256, 256, 3, 1, 1), ConvLayer("C9", 14, 256, 512, 3, 1, 2),
    ConvLayer("C10", 14, 256, 512, 1, 0, 2), ConvLayer("C11", 7, 512, 512, 3, 1, 1),
]


#: Tuned schedules of C2-C11 for the default configuration (``vta tune resnet18``), shipped.
TUNED_LOG = os.path.join(os.path.dirname(__file__), "data", "resnet18_1x16x16.jsonl")


class LayerSelectionError(ValueError):
    """``--layers`` names a layer that is not in the benchmark."""


def select_layers(spec: str | None) -> list[ConvLayer]:
    """The layers a comma-separated ``spec`` names (case-insensitive, in benchmark order);
    all of them for None.  An unknown or empty name is an error, never dropped silently."""
    if spec is None:
        return list(RESNET18)
    names = {l.name.upper(): l for l in RESNET18}
    want = [w.strip().upper() for w in spec.split(",")]
    bad = [w or "(empty)" for w in want if w not in names]
    if bad:
        raise LayerSelectionError(f"unknown layer(s) {', '.join(bad)} in --layers "
                                  f"(known: {', '.join(names)})")
    return [l for l in RESNET18 if l.name.upper() in want]
