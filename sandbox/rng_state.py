"""Random state that the zygote's preloaded libraries keep privately, reseeded in every call.

A call is a fork of the zygote, so every generator created at import time starts each call
in the state the zygote left it in: two calls of `sympy.core.random.rng.random()` print the
same number, and a program can learn what the previous one drew. Python's `random` and
numpy's legacy global state are reseeded after a fork by their libraries; the others are
not. The zygote lists, once after its imports, every generator a loaded module holds at
module level (`random.Random` instances such as sympy's `rng` and `_assumptions_rng`, numpy
`RandomState`s and `Generator`s); each call reseeds all of them from the OS before the
program runs.
"""

from __future__ import annotations

import os
import random
import sys

Found = list[object]


def module_generators() -> Found:
    """Every random generator held at module level by a loaded module (deduplicated)."""
    kinds: list[type] = [random.Random]
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        kinds += [numpy_random.RandomState, numpy_random.Generator]
    found: dict[int, object] = {}
    for module in list(sys.modules.values()):
        try:
            values = list(vars(module).values())
        except TypeError:  # a module-like object without __dict__
            continue
        for value in values:
            if isinstance(value, tuple(kinds)) and not isinstance(value, random.SystemRandom):  # no state
                found.setdefault(id(value), value)
    return list(found.values())


def reseed(generators: Found) -> None:
    """New OS entropy for each generator, in place (code holding a reference sees it too)."""
    numpy_random = sys.modules.get("numpy.random")
    for g in generators:
        if isinstance(g, random.Random):
            g.seed(os.urandom(32))
        elif numpy_random is not None and isinstance(g, numpy_random.RandomState):
            g.seed(int.from_bytes(os.urandom(4), "little"))
        elif numpy_random is not None and isinstance(g, numpy_random.Generator):
            g.bit_generator.state = type(g.bit_generator)(int.from_bytes(os.urandom(16), "little")).state
