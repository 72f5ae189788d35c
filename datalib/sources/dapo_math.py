"""DAPO-Math-17k (SCHEMAS.md §8), in either published layout.

- `BytedTsinghua-SIA/DAPO-Math-17k`: `prompt` = one user message whose content wraps the
  problem in DAPO's "Solve the following math problem step by step... Answer:" template;
  the label in `reward_model.ground_truth`. 17,917 problems x ~100 copies: the stage's
  dedupe keeps one.
- `open-r1/DAPO-Math-17k-Processed` (what rStar2-Agent loads): `prompt` a plain string,
  the label in `solution`.
We strip DAPO's template: our protocol asks for `\\boxed{}` inside `<answer>` (SPEC §2),
and its "Answer:" instructions would contradict that.
"""

from __future__ import annotations

from datalib.records import MalformedRow, RawProblem, require
from datalib.sources.format import SourceFormat

TEMPLATE_HEAD = "Solve the following math problem step by step."
TEMPLATE_TAIL = 'Remember to put your answer on its own line after "Answer:".'


def strip_template(text: str) -> str:
    s = text.strip()
    if s.startswith(TEMPLATE_HEAD) and "\n\n" in s:
        s = s.split("\n\n", 1)[1]
    return s.removesuffix(TEMPLATE_TAIL).strip()


def user_turn(messages: list) -> str:
    """The problem of a chat prompt: its one user turn, read by role. A system turn before it
    is an instruction, not the problem; several user turns are not one problem."""
    if not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise MalformedRow("wrong_type", "prompt is not a list of {role, content} messages")
    users = [m["content"] for m in messages if m.get("role", "user") == "user"]
    if len(users) != 1:
        roles = [m.get("role") for m in messages]
        raise MalformedRow("not_one_user_turn", f"the prompt has {len(users)} user turns (roles {roles})")
    return users[0]


def normalise(row: dict) -> RawProblem:
    prompt = require(row, "prompt", (str, list))
    if isinstance(prompt, list):
        prompt = user_turn(prompt)
    reward = row.get("reward_model")
    if isinstance(reward, dict) and reward.get("ground_truth") is not None:
        answer = reward["ground_truth"]
    elif row.get("solution") is not None:
        answer = row["solution"]
    else:
        raise MalformedRow("missing_field", "no reward_model.ground_truth and no solution")
    problem = strip_template(prompt)
    if not problem:
        raise MalformedRow("empty_problem", "the prompt holds no problem text")
    return RawProblem(problem, answer)  # a number stays a number: str(1.2345678901234568e+17) would invent digits


FORMAT = SourceFormat(required_fields=("prompt", "reward_model|solution"), normalise=normalise,
                      columns=("prompt", "reward_model", "solution"))
