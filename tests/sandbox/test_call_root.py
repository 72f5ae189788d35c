"""A call sees nothing of the host (issue 22, points 1 and 2): its filesystem is built from an
allowlist (sandbox/call_root.py), and it sees no process but its own."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from sandbox.call_root import DEVICES
from sandbox.tool_call import ToolCall

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="an allowlisted root needs a root service (mounts)")

# Walk the whole tree a call sees, except the allowlisted trees themselves and /proc: what is
# left must be exactly the skeleton call_root builds.
_WALK = """
import json, os
trees = set(json.loads(input()))
seen = []
for top, dirs, files in os.walk("/"):
    if top in trees or top == "/proc":
        dirs[:] = []
        continue
    for name in dirs + files:
        path = os.path.join(top, name)
        kind = "link" if os.path.islink(path) else "dir" if os.path.isdir(path) else "other"
        seen.append((path, kind))
        if path in trees or path == "/proc":
            dirs[:] = [d for d in dirs if d != name]
print(json.dumps(seen))
"""


def _ancestors(path: str) -> set[str]:
    parts = path.strip("/").split("/")
    return {"/" + "/".join(parts[:i]) for i in range(1, len(parts))}


async def test_a_call_sees_only_the_allowlisted_root(server, tmp_path):
    facts = server.health()["isolation"]
    assert facts["allowlisted_root"] and facts["proc_hidepid"], facts
    trees = facts["root_trees"]
    async with server.client() as sb:
        r = await sb.run(ToolCall(_WALK, input=json.dumps(trees)))
    assert r.status == "ok", r.feedback
    seen = dict(json.loads(r.feedback))
    allowed = set(trees) | {"/proc", "/tmp", "/tmp/work", "/etc", "/dev"} | set().union(*map(_ancestors, trees))
    allowed |= {f"/etc/{f}" for f in ("passwd", "group", "hosts", "ld.so.cache")}
    allowed |= {f"/dev/{d}" for d in (*DEVICES, "fd", "stdin", "stdout", "stderr")}
    allowed |= set().union(*(_ancestors(p) for p, kind in seen.items() if kind == "link"))  # links' folders
    stray = {p: kind for p, kind in seen.items() if p not in allowed and kind != "link"}
    assert not stray, f"a call sees host paths outside the allowlist: {sorted(stray)[:20]}"
    # The trees are the Python installation and library directories, never the checkout or data.
    repo = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    for tree in trees:  # none holds the checkout; inside it, only its virtualenv is Python
        assert not repo.startswith(tree + "/") and (not tree.startswith(repo + "/") or "venv" in tree), tree
    secret = tmp_path / "answers.jsonl"
    secret.write_text('{"answer": 42}\n')
    probes = [str(secret), f"{repo}/README.md", f"{repo}/.git/HEAD", f"{os.path.dirname(repo)}/shared/SPEC.md",
              "/etc/shadow", "/etc/hostname", "/run", "/var/run", "/sys/class", "/home", "/usr/bin/env"]
    async with server.client() as sb:
        r = await sb.run(ToolCall(f"import os\nprint([p for p in {probes!r} if os.path.exists(p)])"))
    assert r.feedback == "[]", r.feedback


async def test_a_call_sees_no_process_but_its_own(server):
    async with server.client() as sb:
        sleeper = asyncio.ensure_future(sb.run(ToolCall("import os, time\nprint(os.getpid(), flush=True)\n"
                                                        "time.sleep(1.5)")))
        await asyncio.sleep(0.5)
        r = await sb.run(ToolCall("import os, json\nprint(json.dumps([os.getpid(), "
                                  "sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), "
                                  "open('/proc/net/tcp').read().count(chr(10)) - 1]))"))
        other = await sleeper
    me, pids, sockets = json.loads(r.feedback)
    assert pids == [me], f"a call sees processes {pids} besides itself ({me})"
    assert int(other.feedback.split()[0]) not in pids
    assert sockets == 0  # the host's connections (the server's own port) are not in its network table


async def test_a_call_has_devices_for_programs_and_none_of_the_hosts(server):
    async with server.client() as sb:
        r = await sb.run(ToolCall("import os\nprint(sorted(os.listdir('/dev')))\n"
                                  "print(len(open('/dev/urandom', 'rb').read(8)), open('/dev/null').read() == '')"))
    listing, check = r.feedback.splitlines()
    assert listing == str(sorted((*DEVICES, "fd", "stdin", "stdout", "stderr")))  # no GPU, tty or shm
    assert check == "8 True"


async def test_without_the_allowlisted_root_paths_are_still_hidden_and_health_says_so(start_extra_server):
    """The fallback (a mount namespace, no pivot_root): the host's tree with holes punched in it."""
    from configs.sandbox import SandboxConfig

    srv = start_extra_server(SandboxConfig(timeout_s=10, exec_workers=1, verify_workers=1, allowlisted_root=False))
    facts = srv.health()["isolation"]
    assert not facts["allowlisted_root"] and not facts["proc_hidepid"] and facts["private_tmp"], facts
    repo = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    async with srv.client() as sb:
        r = await sb.run(ToolCall(f"import os, numpy\nprint(os.path.exists({repo + '/README.md'!r}), "
                                  "os.listdir('/tmp'), numpy.arange(3).sum())"))
    assert r.feedback == "False ['work'] 3", r.feedback
