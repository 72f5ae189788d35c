"""Optional rewriting of cold-start examples by any OpenAI-compatible endpoint (SPEC §8).

The paper rewrote Tulu 3 responses and Llama-Nemotron chat prompts with o4-mini. Modes,
per source (`data.cold_start.rewrite.modes`):
- `response`: the final assistant turn is regenerated from the conversation before it;
- `prompt`: the last user turn is rewritten, then the response is regenerated for the
  rewritten prompt (a new prompt with the old answer would no longer match).
Off by default (`endpoint_url: null`). A request that fails after retries leaves the
example as it was and is counted; the stage records in its metrics and data card whether
rewriting ran and how many examples it changed. The API key is read from the environment
variable the config names, never from the config itself.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from tqdm import tqdm

from configs.data import RewriteConfig
from datalib.records import Message, SFTExample

log = logging.getLogger(__name__)

PROMPT_INSTRUCTION = (
    "Rewrite the user's request below so that it is clear, specific and self-contained. Keep its intent, "
    "language and every constraint it states. Reply with the rewritten request only."
)
_ATTEMPTS = 3


class Rewriter:
    def __init__(self, cfg: RewriteConfig, transport: httpx.BaseTransport | None = None):
        if cfg.endpoint_url is None:
            raise ValueError("data.cold_start.rewrite.endpoint_url is not set")
        self.cfg = cfg
        key = os.environ.get(cfg.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=cfg.endpoint_url.rstrip("/"), headers=headers,
                                    timeout=cfg.timeout_s, transport=transport)
        self.failures = 0

    def _complete(self, messages: list[dict]) -> str:
        body = {"model": self.cfg.model, "messages": messages}
        for attempt in range(_ATTEMPTS):
            try:
                response = self._client.post("/chat/completions", json=body)
                response.raise_for_status()
                return response.json()["choices"][0]["message"]["content"].strip()
            except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as e:
                if attempt == _ATTEMPTS - 1:
                    raise
                log.warning("rewrite request failed (%s); retrying", e)
                time.sleep(2**attempt)
        raise AssertionError("unreachable")

    def _rewrite_one(self, example: SFTExample, mode: str) -> SFTExample:
        messages = list(example.messages)
        last_assistant = max(i for i, m in enumerate(messages) if m.role == "assistant")
        context = messages[:last_assistant]
        if mode == "prompt":
            last_user = max(i for i, m in enumerate(context) if m.role == "user")
            new_prompt = self._complete([{"role": "system", "content": PROMPT_INSTRUCTION},
                                         {"role": "user", "content": context[last_user].content}])
            context[last_user] = Message("user", new_prompt)
        plain = [{"role": m.role, "content": m.content} for m in context]
        answer = self._complete(plain)
        new = (*context, Message("assistant", answer), *messages[last_assistant + 1:])
        return dataclasses.replace(example, messages=new, meta={**example.meta, "rewritten": mode})

    def _safe(self, example: SFTExample) -> SFTExample:
        mode = self.cfg.modes.get(example.source)
        if mode is None:
            return example
        try:
            return self._rewrite_one(example, mode)
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as e:
            self.failures += 1
            log.warning("rewrite of %s failed, keeping the original: %s", example.id, e)
            return example

    def rewrite(self, examples: list[SFTExample]) -> list[SFTExample]:
        """Examples in order, those of the configured sources rewritten."""
        with ThreadPoolExecutor(self.cfg.max_concurrent_requests) as pool:
            return list(tqdm(pool.map(self._safe, examples), total=len(examples), desc="rewrite", leave=False,
                             disable=None))

    def close(self) -> None:
        self._client.close()
