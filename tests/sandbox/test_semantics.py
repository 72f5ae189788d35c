"""What a call returns (SPEC §2 feedback, §3 clean state), through the real HTTP service."""

from __future__ import annotations

import pytest

from sandbox.types import InvalidCall, ToolCall


async def run(sb, code: str, stdin: str = ""):
    return await sb.run(ToolCall(code=code, input=stdin))


async def test_stdout_is_the_feedback(sb):
    r = await run(sb, "print('hello')\nprint(6 * 7)")
    assert (r.status, r.feedback, r.stdout_chars, r.stderr_chars) == ("ok", "hello\n42", 9, 0)
    assert r.elapsed_s > 0


@pytest.mark.parametrize(
    ("code", "feedback"),
    [
        ("x = 6\nx * 7", "42"),
        ("'a' + 'b'", "'ab'"),
        ("import numpy as np\nnp.arange(4)", "array([0, 1, 2, 3])"),
        ("import sympy as sp\nx = sp.Symbol('x')\nsp.solve(x**2 - 4, x)", "[-2, 2]"),
        ("{'b': 1, 'a': [1, 2]}", "{'b': 1, 'a': [1, 2]}"),  # insertion order, as IPython 8
        ("list(range(30))", "[0,\n 1,\n 2,"),  # pretty-printed past 79 columns, like IPython
        ("None", "(no output)"),
        ("x = 1", "(no output)"),
        ("6 * 7;", "(no output)"),  # a trailing semicolon hides the value, as in IPython
        ("print('printed')\n6 * 7", "printed"),  # stdout wins over the value
    ],
)
async def test_last_expression_value(sb, code: str, feedback: str):
    r = await run(sb, code)
    assert r.status == "ok"
    assert r.feedback.startswith(feedback)


async def test_traceback_shows_only_user_frames(sb):
    code = "import numpy as np\n\ndef f(m):\n    return np.linalg.inv(m)\n\nf(np.zeros((2, 2)))"
    r = await run(sb, code)
    assert r.status == "error"
    assert r.feedback.startswith("Traceback (most recent call last):\n")
    assert 'File "main.py", line 6, in <module>' in r.feedback and 'File "main.py", line 4, in f' in r.feedback
    assert "site-packages" not in r.feedback and "runner.py" not in r.feedback
    assert r.feedback.endswith("numpy.linalg.LinAlgError: Singular matrix")


async def test_output_before_an_exception_is_kept(sb):
    r = await run(sb, "print('partial')\nraise ValueError('bad')")
    assert r.status == "error"
    assert r.feedback.startswith("partial\nTraceback") and r.feedback.endswith("ValueError: bad")


async def test_syntax_error(sb):
    r = await run(sb, "x = (1,\nprint(x")
    assert r.status == "error"
    assert 'File "main.py"' in r.feedback and "SyntaxError" in r.feedback


async def test_stderr_follows_stdout(sb):
    r = await run(sb, "import sys\nprint('out')\nprint('warn', file=sys.stderr)")
    assert (r.status, r.feedback, r.stderr_chars) == ("ok", "out\nwarn", 5)


async def test_stdin_is_the_input(sb):
    r = await run(sb, "n = int(input())\nprint(sum(map(int, input().split())) * n)", stdin="2\n1 2 3\n")
    assert (r.status, r.feedback) == ("ok", "12")


async def test_long_output_is_cut_in_the_middle_with_the_count(sb, server):
    r = await run(sb, "for i in range(5000):\n    print(f'line {i:04d}')")
    limit = server.cfg.max_output_chars
    assert r.status == "ok" and r.stdout_chars == 5000 * 10
    assert r.feedback.startswith("line 0000\n") and r.feedback.endswith("line 4999")
    assert f"[... {5000 * 10 - limit} characters cut ...]" in r.feedback
    assert len(r.feedback) < limit + 40


async def test_timeout_is_one_line_naming_the_limit(sb, server):
    r = await run(sb, "import time\nprint('before', flush=True)\ntime.sleep(60)")
    assert r.status == "timeout"
    assert r.feedback == "Timeout: the program did not finish within the 4 s wall-clock limit and was stopped."
    assert r.extra["limit"] == "wall" and r.elapsed_s < server.cfg.timeout_s + 2


async def test_exit_codes(sb):
    assert (await run(sb, "import sys\nprint('x')\nsys.exit(0)")).status == "ok"
    r = await run(sb, "import sys\nsys.exit(3)")
    assert (r.status, r.feedback) == ("error", "Process exited with code 3.")
    r = await run(sb, "raise SystemExit('stopped here')")
    assert (r.status, r.feedback) == ("error", "stopped here")


async def test_libraries_are_importable(sb):
    # scipy submodules are not preloaded by default: this import costs ~0.5 s of CPU here.
    code = (
        "import numpy, scipy, sympy\nfrom scipy import optimize\n"
        "print(round(optimize.brentq(lambda x: x**2 - 2, 0, 2), 6), numpy.int64(7) * 6, sympy.factorint(360))"
    )
    r = await run(sb, code)
    assert (r.status, r.feedback) == ("ok", "1.414214 42 {2: 3, 3: 2, 5: 1}")


async def test_each_call_starts_clean(sb, server):
    dirty = """
import builtins, math, os, signal, threading, time, sys, json
GLOBAL_MARK = 1
builtins.MARK = 1
math.pi = 3
json.dumps = None
sys.path.insert(0, '/nowhere')
os.environ['MARK'] = '1'
signal.signal(signal.SIGTERM, lambda *a: None)
open('left_behind.txt', 'w').write('x')
threading.Thread(target=time.sleep, args=(60,), daemon=False).start()
print(os.getcwd())
"""
    check = """
import builtins, math, os, signal, threading, sys, json
assert 'GLOBAL_MARK' not in globals() and not hasattr(builtins, 'MARK')
assert math.pi > 3.14 and json.dumps is not None and '/nowhere' not in sys.path
assert 'MARK' not in os.environ
assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
assert threading.active_count() == 1
assert os.listdir('.') == [], os.listdir('.')
print('clean', os.getcwd())
"""
    first = await run(sb, dirty)
    assert first.status == "ok" and first.feedback == "/tmp/work"
    # Ready children are used round-robin: 2 x slots calls reach every slot after the dirty one.
    for _ in range(2 * server.cfg.exec_workers):
        r = await run(sb, check)
        assert (r.status, r.feedback[:5]) == ("ok", "clean"), r.feedback


async def test_invalid_calls_are_answered_in_order_without_running(sb, server):
    before = server.health()["counters"].get("calls", 0)
    calls = [ToolCall("print(1)"), InvalidCall(reason="Invalid tool call: missing \"name\"."), ToolCall("print(2)")]
    results = await sb.run_batch(calls)
    assert [r.status for r in results] == ["ok", "invalid_call", "ok"]
    assert [r.feedback for r in results] == ["1", 'Invalid tool call: missing "name".', "2"]
    assert server.health()["counters"]["calls"] == before + 2


async def test_every_random_state_a_library_keeps_is_fresh_in_every_call(sb):
    """Issue 22: sympy keeps generators of its own (`rng`, `_assumptions_rng`), which a fork
    of the zygote handed to every call in the same state: a call could see what the one
    before drew. Every module-level generator of a loaded library is now reseeded per call."""
    code = ("import random, numpy, sympy, sympy.core.random as sr\n"
            "print(random.random(), numpy.random.rand(), sr.rng.random(), sr._assumptions_rng.random(),"
            " sr.random(), sympy.randprime(10**6, 10**7))")
    outs = [(await run(sb, code)).feedback.split() for _ in range(4)]
    for column in zip(*outs, strict=True):
        assert len(set(column)) == 4, outs
