"""Hostile programs (issue 3, point 5). Each must be answered with a status, be followed by
a normal call answered correctly, and leave no process, file or busy slot behind."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sandbox.types import ToolCall

REPO = Path(__file__).resolve().parents[2]
SECRET = Path("/opt/rstar-sandbox-test-secret")

# (id, code, stdin, allowed statuses, regex the feedback must match)
CASES = [
    ("infinite_loop", "while True:\n    pass", "", {"resource_limit"}, r"CPU time limit"),
    ("sleep_forever", "import time\ntime.sleep(10**6)", "", {"timeout"}, r"^Timeout: .* 4 s wall-clock limit"),
    # Filling memory costs CPU too: whichever limit comes first stops it.
    ("memory_bomb", "a = []\nwhile True:\n    a.append(bytearray(10**7))", "", {"resource_limit"},
     r"MemoryError|CPU time limit"),
    ("memory_bomb_untouched", "import numpy as np\na = [np.empty(10**8) for _ in range(100)]", "",
     {"resource_limit"}, r"(?s)MemoryError.*Memory limit: .* 512 MB"),
    ("numpy_memory_bomb", "import numpy as np\nnp.ones((10**6, 10**6))", "", {"resource_limit"}, r"Memory limit"),
    ("fork_bomb", "import os\nwhile True:\n    os.fork()", "", {"error", "resource_limit", "timeout"}, r"."),
    ("fork_bomb_swallowing_errors", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
     "        pass", "", {"error", "resource_limit", "timeout"}, r"."),
    ("output_100mb", "import sys\nsys.stdout.write('x' * 100_000_000)", "", {"resource_limit"},
     r"(?s)^x+\n\[\.\.\. \d+ characters cut \.\.\.\]\n.*Output limit: .* 8 MB"),
    ("deep_recursion", "def f(n):\n    return f(n + 1)\nf(0)", "", {"error"},
     r"(?s)Previous line repeated \d+ more times.*RecursionError"),
    ("deep_recursion_raised_limit", "import sys\nsys.setrecursionlimit(10**7)\ndef f(n):\n    return f(n + 1)\nf(0)",
     "", {"error", "timeout", "resource_limit"}, r"."),
    ("segfault", "import ctypes\nctypes.string_at(0)", "", {"error"}, r"SIGSEGV"),
    ("os_exit", "print('bye', flush=True)\nimport os\nos._exit(7)", "", {"error"}, r"^bye\nProcess exited with code 7"),
    ("sys_exit", "import sys\nsys.exit(5)", "", {"error"}, r"exited with code 5"),
    ("kill_parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", "", {"error"}, r"PermissionError"),
    ("kill_own_group", "import os, signal\nos.killpg(0, signal.SIGKILL)", "", {"error"}, r"SIGKILL"),
    # kill(-1) reaches only the slot's own uid (the caller excepted): other calls survive.
    ("kill_everything", "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('alone')", "", {"ok"}, r"^alone$"),
    ("connect_loopback", "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)", "",
     {"error"}, r"(?s)OSError|Network is unreachable|ConnectionRefused"),
    ("connect_public", "import socket\nsocket.create_connection(('1.1.1.1', 443), timeout=2)", "", {"error"},
     r"(?s)OSError|Network is unreachable"),
    ("dns_lookup", "import socket\nsocket.getaddrinfo('pypi.org', 443)", "", {"error"}, r"gaierror|OSError"),
    ("write_tmp", "open('/tmp/escape.txt', 'w').write('x')", "", {"error"}, r"PermissionError|Read-only"),
    ("write_project", f"open('{REPO}/escape.txt', 'w').write('x')", "", {"error"}, r"PermissionError|Read-only"),
    # The repository and ../shared are hidden: no data or reference answers on disk either.
    ("read_project_data", f"import os\nprint(os.listdir('{REPO}'), os.path.exists('{REPO.parent}/shared/SPEC.md'))",
     "", {"ok"}, r"^\['.venv'\] False$"),
    ("write_etc", "open('/etc/escape.txt', 'w').write('x')", "", {"error"}, r"PermissionError|Read-only"),
    ("write_dev_shm", "open('/dev/shm/escape.txt', 'w').write('x')", "", {"error"},
     r"Read-only|PermissionError|No such file"),
    ("read_root_600", f"print(open('{SECRET}').read())", "", {"error"}, r"PermissionError|No such file"),
    # /root is hidden; only the Python installation (pyenv) is mounted back inside it.
    ("read_root_home", "import os\nprint([n for n in os.listdir('/root') if n != '.pyenv'])", "", {"ok"},
     r"^\[\]$"),
    # Calls have Python, not a shell or coreutils (sandbox/call_root.py): daemons are Pythons.
    ("daemon_subprocess", "import subprocess, sys\nsleep = [sys.executable, '-c', 'import time; time.sleep(1000)']\n"
     "subprocess.Popen(sleep, start_new_session=True)\nsubprocess.Popen(sleep)\nprint('started')", "", {"ok"},
     r"^started$"),
    ("daemon_fork_setsid", "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\n"
     "print('parent done')", "", {"ok"}, r"^parent done$"),
    ("outliving_thread", "import threading, time\nthreading.Thread(target=time.sleep, args=(1000,)).start()\n"
     "print('thread started')", "", {"ok"}, r"^thread started$"),
    ("replace_builtins_and_print", "import builtins\nbuiltins.print = lambda *a, **k: None\nbuiltins.len = None\n"
     "print('hidden')\n41 + 1", "", {"ok"}, r"^42$"),
    ("break_runner_helpers", "import os, json, sys\nos._exit = os.write = json.dumps = None\nsys.stdout = None\n"
     "'still answered'", "", {"ok"}, r"^'still answered'$"),
    ("huge_unicode", "print('é漢🙂' * 400_000)", "", {"ok"}, r"^[é漢🙂]+\n\[\.\.\. 1198001 characters cut"),
    ("invalid_unicode_print", "print('\\ud800')", "", {"error"}, r"UnicodeEncodeError"),
    ("invalid_utf8_bytes", "import sys\nsys.stdout.buffer.write(b'\\xff\\xfeok')", "", {"ok"}, r"^\ufffd\ufffdok$"),
    ("surrogate_in_source", "x = '\ud800'\nprint(len(x))", "", {"ok", "error"}, r"."),
    ("stdin_beyond_input", "import sys\nprint(repr(sys.stdin.read()))\ninput()", "only this\n", {"error"},
     r"(?s)^'only this\\n'\n.*EOFError"),
    ("stdin_fd_read", "import os\nprint(os.read(0, 100), os.read(0, 100))", "ab", {"ok"}, r"^b'ab' b''$"),
]


@pytest.fixture(scope="module")
def root_secret():
    SECRET.write_text("reference answer: 42\n")
    os.chmod(SECRET, 0o600)
    yield SECRET
    SECRET.unlink(missing_ok=True)


@pytest.mark.parametrize(("code", "stdin", "statuses", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_hostile_program_is_contained(sb, server, clean, root_secret, code, stdin, statuses, pattern):
    port = server.url.rsplit(":", 1)[1]
    r = await sb.run(ToolCall(code=code.replace("{port}", port), input=stdin))
    assert r.status in statuses, r
    assert re.search(pattern, r.feedback), r.feedback[:2000]
    assert len(r.feedback) <= server.cfg.max_output_chars + 200
    after = await sb.run(ToolCall(code="import numpy as np\nprint(int(np.int64(6) * 7))"))
    assert (after.status, after.feedback) == ("ok", "42")
    clean()
    for escaped in (Path("/tmp/escape.txt"), REPO / "escape.txt", Path("/etc/escape.txt")):
        assert not escaped.exists()


async def test_many_hostile_programs_at_once(sb, server, clean):
    """Slots are shared: a burst of hostile calls must not starve or corrupt normal ones."""
    hostile = [c[1] for c in CASES if c[0] in ("fork_bomb", "memory_bomb", "segfault", "daemon_subprocess", "os_exit")]
    calls = [ToolCall(code) for code in hostile] + [ToolCall(f"print({i} * 2)") for i in range(20)]
    results = await sb.run_batch(calls)
    assert [r.feedback for r in results[len(hostile) :]] == [str(i * 2) for i in range(20)]
    clean()
