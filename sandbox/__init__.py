"""Code execution service (SPEC §2, §3, §5): isolated, batched Python and answer verification.

Entry points: `sandbox.client.build_sandbox` / `SandboxClient` (async client, starts a
local server when no URL is configured), `sandbox.tool_call.parse_tool_call`, and the
server `python -m sandbox.server`. See sandbox/README.md.

Imports here stay lazy: the zygote imports this package and must not pull in aiohttp.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SandboxClient", "build_sandbox", "parse_tool_call"]


def __getattr__(name: str) -> Any:
    if name in ("SandboxClient", "build_sandbox"):
        from sandbox import client

        return getattr(client, name)
    if name == "parse_tool_call":
        from sandbox.tool_call import parse_tool_call

        return parse_tool_call
    raise AttributeError(name)
