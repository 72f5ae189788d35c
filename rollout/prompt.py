"""The tool protocol at text and token level (SPEC §2).

Prompt: the chat template renders the system prompt, the tools block (Hermes style, from
`tools=`) and the problem, then the assistant header. Each later turn's prompt is the
previous ids + the model's turn (ending in its end-of-turn token) + the feedback ids
rendered here + a new assistant header, so the model always sees what the chat template
would render for the conversation so far (tests/rollout/test_prompt.py checks this with
both tokenizers). Only the model's own tokens get loss mask 1.
"""

from __future__ import annotations

import json
from typing import Literal

from transformers import PreTrainedTokenizerBase

from rollout.answer import TOOL_CALL
from sandbox.tool_call import TOOL_NAME, parse_tool_call
from sandbox.types import InvalidCall, ToolCall

SYSTEM_PROMPT = (
    "You are a helpful assistant that solves problems step by step. Reason inside <reason> </reason>, "
    "then give exactly one final answer inside <answer> </answer>, with the final result in \\boxed{}, "
    "for example: <reason> ... </reason>\n<answer> The answer is \\boxed{42}. </answer>\n"
    "You can run Python with the tool below to compute or check intermediate results; "
    "what the program prints comes back inside <tool_response> </tool_response>."
)

TOOL_SCHEMA: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run a Python 3 program (numpy, scipy and sympy are available) with the given standard input "
            "and return what it prints. Each call starts from a clean state."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The complete Python program to run."},
                "input": {"type": "string", "description": "Text given to the program on stdin.", "default": ""},
            },
            "required": ["code"],
        },
    },
}

# The authors' release (microsoft/rStar, `rstar2_agent_trainer.yaml`'s chat template, read at
# 73b21b5) words the protocol differently: its system prompt, an instruction ahead of the
# problem, and `<reason>` written after every assistant header, so each turn starts inside a
# reasoning block. `rollout.prompt: release` reproduces them (strings quoted as they are there).
RELEASE_SYSTEM_PROMPT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. "
    "The Assistant first thinks about the reasoning process in the mind and then provides the User with the "
    "answer. The reasoning process is enclosed within <reason> </reason> and answer is enclosed within "
    "<answer> </answer> tags, respectively, i.e., <reason> reasoning process here </reason> "
    "<answer> answer here </answer>."
)
RELEASE_PROBLEM_PREFIX = (
    "You must put your answer inside <answer> </answer> tags, i.e., <answer> answer here </answer>. "
    "And your final answer will be extracted automatically by the \\boxed{} tag.\nThis is the problem:\n"
)
RELEASE_TURN_PREFILL = "<reason>"

_SENTINEL = "\x00ASSISTANT-TURN\x00"  # marks where the model's turn ends when rendering feedback


def tool_call_text(code: str, stdin: str = "") -> str:
    """A call written the way the chat template renders a structured one (for demonstrations, tests)."""
    args = {"code": code, "input": stdin} if stdin else {"code": code}
    return f'<tool_call>\n{{"name": "{TOOL_NAME}", "arguments": {json.dumps(args, ensure_ascii=False)}}}\n</tool_call>'


def extract_tool_calls(turn_text: str, max_calls: int = 8,
                       extra: Literal["invalid", "skip"] = "invalid") -> list[ToolCall | InvalidCall]:
    """Every `<tool_call>` of one assistant turn, in order; never raises.

    A call left open at the end of the turn is still a call (its body runs to the end),
    so the model gets an answer to it. Calls past `max_calls` are answered as invalid
    (`extra="invalid"`), or left out, unanswered, as the release's `max_parallel_calls` does.
    """
    calls: list[ToolCall | InvalidCall] = []
    for i, match in enumerate(TOOL_CALL.finditer(turn_text)):
        body = match.group(1)
        if i >= max_calls:
            if extra == "skip":
                break
            reason = f"Invalid tool call: more than {max_calls} calls in one turn; this one was not run."
            calls.append(InvalidCall(reason=reason, raw=body))
        else:
            calls.append(parse_tool_call(body.strip()))
    return calls


def _end_of_turn(tokenizer: PreTrainedTokenizerBase) -> str:
    """The token the chat template closes an assistant turn with (<|im_end|> for Qwen3).

    Read from the template, not `eos_token`: Qwen3-Base's tokenizer names <|endoftext|>
    as its eos while its template still ends turns with <|im_end|>.
    """
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    after = text[text.index(_SENTINEL) + len(_SENTINEL) :]
    special = sorted((t for t in tokenizer.get_added_vocab() if after.startswith(t)), key=len)
    if special:
        return special[-1]
    if tokenizer.eos_token is None:
        raise ValueError("the chat template closes no assistant turn with a special token and there is no eos_token")
    return tokenizer.eos_token


class ChatFormat:
    """Renders prompts and feedback turns with one tokenizer's chat template.

    `problem_prefix` goes ahead of the problem in the user turn; `turn_prefill` after every
    assistant header (in the prompt and in each feedback turn, so mask 0: the model's turn
    continues it).
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, system_prompt: str = SYSTEM_PROMPT, tools: list[dict] | None = None,
        problem_prefix: str = "", turn_prefill: str = "",
    ) -> None:
        self.tokenizer = tokenizer
        self.system_prompt = system_prompt
        self.tools = [TOOL_SCHEMA] if tools is None else tools
        self.problem_prefix = problem_prefix
        self.turn_prefill = turn_prefill
        self.end_of_turn = _end_of_turn(tokenizer)
        self.end_of_turn_id: int = tokenizer.convert_tokens_to_ids(self.end_of_turn)
        # Generation stops on the end of turn and on the tokenizer's own eos (Qwen3-Base:
        # <|endoftext|>), as SGLang does; the engines add the model's generation-config ids.
        stops = {self.end_of_turn_id, tokenizer.eos_token_id} - {None}
        self.stop_token_ids: tuple[int, ...] = tuple(sorted(stops))

    def messages(self, problem: str) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt},
                {"role": "user", "content": self.problem_prefix + problem}]

    def prompt_text(self, problem: str) -> str:
        return self.tokenizer.apply_chat_template(
            self.messages(problem), tools=self.tools, add_generation_prompt=True, tokenize=False
        ) + self.turn_prefill

    def prompt_ids(self, problem: str) -> list[int]:
        return self.encode(self.prompt_text(problem))

    def feedback_text(self, feedbacks: list[str]) -> str:
        """What follows the model's end-of-turn token: the tool-response user turn + assistant header.

        Cut out of the template's rendering of a conversation in which an assistant turn is
        followed by these tool messages, so it is byte-identical to a full render.
        """
        messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
        messages += [{"role": "tool", "content": text} for text in feedbacks]
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        after = text[text.index(_SENTINEL) + len(_SENTINEL) :]
        if not after.startswith(self.end_of_turn):
            raise ValueError(f"chat template does not close an assistant turn with {self.end_of_turn!r}")
        return after[len(self.end_of_turn) :] + self.turn_prefill

    def feedback_ids(self, feedbacks: list[str]) -> list[int]:
        return self.encode(self.feedback_text(feedbacks))

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        """Text of ids with the special tokens kept (tags and turn markers are part of the protocol)."""
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def chat_format(tokenizer: PreTrainedTokenizerBase, protocol: Literal["project", "release"] = "project") -> ChatFormat:
    """The prompt wording of `rollout.prompt`: ours, or the authors' release's."""
    if protocol == "release":
        return ChatFormat(tokenizer, RELEASE_SYSTEM_PROMPT, problem_prefix=RELEASE_PROBLEM_PREFIX,
                          turn_prefill=RELEASE_TURN_PREFILL)
    return ChatFormat(tokenizer)
