"""Rewriting through an OpenAI-compatible endpoint (a mock transport: no network)."""

from __future__ import annotations

import json

import httpx

from configs.data import ColdStartConfig, ColdStartSource, RewriteConfig
from data_prep import cold_start
from data_prep.rewriter import PROMPT_INSTRUCTION, Rewriter
from datalib.records import Message, SFTExample


def _endpoint(requests: list[dict], fail_on: str | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        last = body["messages"][-1]["content"]
        if fail_on and fail_on in last:
            return httpx.Response(500, json={"error": "boom"})
        reply = f"REWRITTEN({last})" if body["messages"][0]["content"] == PROMPT_INSTRUCTION else f"ANSWER({last})"
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": reply}}]})
    return httpx.MockTransport(handler)


def _example(source: str, prompt: str) -> SFTExample:
    return SFTExample(f"{source}-0", source, (Message("user", prompt), Message("assistant", "old")))


def test_response_and_prompt_modes(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    requests: list[dict] = []
    cfg = RewriteConfig(endpoint_url="http://endpoint/v1", model="o4-mini")
    rewriter = Rewriter(cfg, transport=_endpoint(requests, fail_on="broken"))
    out = rewriter.rewrite([_example("tulu3", "q1"), _example("nemotron_chat", "q2"), _example("glaive_fc_v2", "q3"),
                            _example("tulu3", "broken")])
    assert [m.content for m in out[0].messages] == ["q1", "ANSWER(q1)"] and out[0].meta["rewritten"] == "response"
    assert [m.content for m in out[1].messages] == ["REWRITTEN(q2)", "ANSWER(REWRITTEN(q2))"]
    assert out[1].meta["rewritten"] == "prompt"
    assert out[2] == _example("glaive_fc_v2", "q3")  # not a configured source
    assert out[3].messages[-1].content == "old" and rewriter.failures == 1  # kept after failed retries
    assert all(r["model"] == "o4-mini" for r in requests)


def test_manifest_records_whether_rewriting_ran(tmp_path, monkeypatch):
    path = tmp_path / "tulu.jsonl"
    path.write_text(json.dumps({"id": "a", "messages": [{"role": "user", "content": "hi"},
                                                        {"role": "assistant", "content": "yo"}]}) + "\n")
    cfg = ColdStartConfig(sources=[ColdStartSource(source="tulu3", location=str(path))])
    metrics = cold_start.run(cfg, {}, tmp_path)
    assert metrics["rewrite_ran"] == 0 and "Did not run" in (tmp_path / "card.md").read_text()

    requests: list[dict] = []
    transport = _endpoint(requests)
    real_init = Rewriter.__init__
    monkeypatch.setattr(Rewriter, "__init__", lambda self, c, transport_=transport: real_init(self, c, transport_))
    cfg = cfg.model_copy(update={"rewrite": RewriteConfig(endpoint_url="http://endpoint/v1")})
    metrics = cold_start.run(cfg, {}, tmp_path)
    assert metrics["rewrite_ran"] == 1 and metrics["rewritten_examples"] == 1 and len(requests) == 1
