"""Deterministic local text the small BPE is trained on (no download).

It mixes what the tiny pipeline's text is made of: English math word problems, short
Python programs, JSON tool calls, the reasoning/answer tags and Qwen's chat markup.
"""

from __future__ import annotations

import json
import random

_WORDS = (
    "the a an of to and in is that for it as with be on by this are or from at which what how many "
    "number numbers integer sum product value compute find let suppose given each every total result "
    "remainder divided when digits smallest largest positive prime primes square cube root answer "
    "problem solve write program python code call tool output input print use we first then so "
    "therefore reason step check error fix again final because equal equals greater less than "
    "between count ways set list string function return true false none if else for while range "
    "modulo mod times plus minus over under"
).split()

_CODE = (
    "print({a} * {b} + {c})",
    "x = {a}\ny = {b}\nprint(x ** 2 + y)",
    "total = 0\nfor i in range({a}):\n    total += i * {b}\nprint(total)",
    "import math\nprint(math.gcd({a}, {b}))",
    "from sympy import isprime\nprint(sum(p for p in range({a}) if isprime(p)))",
    "import numpy as np\nprint(int(np.sum(np.arange({a}) % {b})))",
    "n = int(input())\nprint(n * {c})",
    "def f(n):\n    return n * (n + 1) // 2\n\nprint(f({a}))",
)


def _problem(rng: random.Random) -> str:
    a, b = rng.randint(2, 99999), rng.randint(2, 9999)
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 18)))
    return f"{words.capitalize()} {a} and {b}? Compute {a} * {b} mod {rng.randint(7, 997)}."


def _assistant(rng: random.Random) -> str:
    code = rng.choice(_CODE).format(a=rng.randint(2, 9999), b=rng.randint(2, 999), c=rng.randint(2, 99))
    call = json.dumps({"name": "execute_python_code_with_standard_io", "arguments": {"code": code, "input": ""}})
    value = rng.randint(0, 10**7)
    return (
        f"<reason>I will write a program to compute it.</reason>\n<tool_call>\n{call}\n</tool_call>"
        f"\n<tool_response>\n{value}\n</tool_response>\n"
        f"<reason>The program printed {value}.</reason>\n<answer>The answer is \\boxed{{{value}}}.</answer>"
    )


def _python_docs() -> list[str]:
    # English prose and Python code that ship with the interpreter itself: local, no download.
    import inspect
    import pydoc_data.topics

    texts = list(pydoc_data.topics.topics.values())
    for name in ("fractions", "statistics", "textwrap", "json.decoder", "heapq", "bisect"):
        texts.append(inspect.getsource(__import__(name, fromlist=["_"])))
    return [line for text in texts for line in text.splitlines() if line.strip()]


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """`n` synthetic protocol lines followed by the interpreter's own docs and sources."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            lines.append(_problem(rng))
        elif kind == 1:
            lines.append(_assistant(rng))
        else:
            lines.append("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
                         + _problem(rng) + "<|im_end|>\n<|im_start|>assistant\n")
    return lines + _python_docs()
