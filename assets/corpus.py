"""Deterministic local text the small BPE is trained on (no download).

It mixes what the tiny pipeline's text is made of: English math word problems, short
Python programs, JSON tool calls, the reasoning/answer tags, and whole tool-use
conversations of the synthetic task (datalib/synthetic.py) rendered by the chat
template, the rollout's system prompt and tools block included: the small BPE merges
across words (assets/tokenizer_build.py), and fitted to this text it writes that
constant block in a few dozen tokens instead of ~385.
"""

from __future__ import annotations

import json
import random

from transformers.utils.chat_template_utils import render_jinja_template

from datalib import synthetic
from rollout.chat_template import qwen3_templates

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


def _conversations(n: int, seed: int) -> list[str]:
    """`n` synthetic tool-use conversations as the chat template renders them (own stream, not
    the SFT, RL or eval problems)."""
    problems = synthetic.generate_problems(n, seed, stream="tokenizer-corpus")
    chats = [[m.to_row() for m in synthetic.demonstration(p.problem, p.answer, p.program,
                                                          synthetic.failure_kind(p.id, seed, 0.15))]
             for p in problems]
    rendered, _ = render_jinja_template(chats, tools=list(synthetic.tools()),
                                        chat_template=qwen3_templates()["default"])
    return rendered


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """`n` protocol lines (a third of them whole conversations) followed by the interpreter's
    own docs and sources."""
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        if i % 3 == 0:
            lines.append(_problem(rng))
        elif i % 3 == 1:
            lines.append(_assistant(rng))
    return lines + _conversations(n // 3, seed) + _python_docs()
