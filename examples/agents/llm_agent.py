#!/usr/bin/env python3
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
"""An LLM agent on the standard library alone, to run behind hermeskilld's LLM gateway.

It speaks OpenAI's chat-completions format with urllib, configured the way the
OpenAI SDKs are: OPENAI_BASE_URL (default https://api.openai.com/v1) and
OPENAI_API_KEY. It has no hermeskill code at all: under
`hermeskilld supervise --llm-upstream ...` those two variables point at the
gateway and hold a per-run handle, and hermeskilld reads the spend and the tool
calls from the responses on the wire.

    hermeskilld supervise --llm-upstream openai=https://api.openai.com/v1 \\
        --llm-key-file openai=$HOME/.config/openai.key \\
        --llm-prices examples/config/prices.yaml \\
        --tool-loop 3 -- python3 examples/agents/llm_agent.py --loop

Modes (one of them is required):

    --loop    every turn forces the model to call web_search, answers "no
              results, search again with the same query", and asks again: the
              model calls the same tool with the same arguments again and
              again                                          -> tool_loop
    --spend   every turn asks for a long answer and sends the whole,
              growing conversation back: the tokens and the cost climb
              quickly                                         -> tokens, cost

Other options:

    --model NAME   the model (default: $LLM_MODEL, else gpt-4.1-mini)
    --stream       stream each answer (stream: true; the gateway asks the
                   provider for the usage chunk and hides it from the agent)
    --turns N      stop after N turns (default: never)

Each turn prints one line: the turn, the model that answered, the tool calls
and the tokens the response reported. An HTTP error ends the agent with exit
status 3 and the provider's error message on stderr; after hermeskilld's kill
decision the gateway refuses every request with 403 ("access_revoked") in
OpenAI's own error format, so that is how an agent that ignores the
cooperative stop learns that its access to the model is gone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

DEFAULT_BASE_URL = "https://api.openai.com/v1"
TIMEOUT_S = 120

WEB_SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web and return the results.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "what to search for"}},
            "required": ["query"],
        },
    },
}

LOOP_SYSTEM = (
    "You are a research agent. Always call web_search with the query "
    "'hermeskill kill switch', exactly that, and never answer in text."
)
SPEND_PROMPT = (
    "Write a detailed, 2000-word report on the history of industrial process "
    "control, with sections, examples and a long conclusion."
)


class APIError(Exception):
    """An HTTP error answer: its status and the provider's error message."""

    def __init__(self, status: int, message: str, code: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}" + (f" ({code})" if code else ""))
        self.status, self.message, self.code = status, message, code


def post(base_url: str, key: str, body: Dict[str, Any]) -> urllib.request.addinfourl:
    """POSTs body to BASE/chat/completions as the OpenAI SDKs do."""
    req = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"},
        method="POST",
    )
    try:
        return urllib.request.urlopen(req, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        message, code = e.reason, ""
        try:
            err = json.loads(e.read()).get("error") or {}
            message, code = err.get("message") or message, err.get("code") or ""
        except ValueError:
            pass
        raise APIError(e.code, str(message), str(code)) from None


def complete(base_url: str, key: str, body: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any], str]:
    """One chat completion, not streamed: the message, the usage, the model."""
    with post(base_url, key, body) as resp:
        data = json.loads(resp.read())
    return data["choices"][0]["message"], data.get("usage") or {}, data.get("model", "")


def complete_streamed(base_url: str, key: str, body: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any], str]:
    """One chat completion, streamed (server-sent events): the chunks' deltas
    assembled into a message; the usage if the stream carried it."""
    content: List[str] = []
    calls: Dict[int, Dict[str, Any]] = {}
    usage: Dict[str, Any] = {}
    model = ""
    with post(base_url, key, dict(body, stream=True)) as resp:
        for raw in resp:
            line = raw.decode().rstrip("\r\n")
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:  # an error event: the stream was cut
                err = chunk["error"] or {}
                raise APIError(0, str(err.get("message", "stream error")), str(err.get("code", "")))
            model = chunk.get("model") or model
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                content.append(delta.get("content") or "")
                for tc in delta.get("tool_calls") or []:
                    call = calls.setdefault(tc.get("index", 0), {"id": "", "type": "function",
                                                                 "function": {"name": "", "arguments": ""}})
                    call["id"] = tc.get("id") or call["id"]
                    fn = tc.get("function") or {}
                    call["function"]["name"] += fn.get("name") or ""
                    call["function"]["arguments"] += fn.get("arguments") or ""
    message: Dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, usage, model


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--loop", action="store_true", help="the same tool call again and again")
    mode.add_argument("--spend", action="store_true", help="long answers, a growing conversation")
    ap.add_argument("--model", default=os.environ.get("LLM_MODEL", "gpt-4.1-mini"))
    ap.add_argument("--stream", action="store_true", help="stream each answer")
    ap.add_argument("--turns", type=int, default=0, help="stop after N turns (0: never)")
    args = ap.parse_args(argv)

    base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = os.environ.get("OPENAI_API_KEY")
    if not key:
        print("llm_agent: OPENAI_API_KEY is not set", file=sys.stderr)
        return 2
    if args.loop:
        messages: List[Dict[str, Any]] = [{"role": "system", "content": LOOP_SYSTEM},
                                          {"role": "user", "content": "What is hermeskill?"}]
        extra: Dict[str, Any] = {"tools": [WEB_SEARCH],
                                 "tool_choice": {"type": "function", "function": {"name": "web_search"}}}
    else:
        messages = [{"role": "user", "content": SPEND_PROMPT}]
        extra = {"max_completion_tokens": 4096}
    call = complete_streamed if args.stream else complete

    turn = 0
    while args.turns == 0 or turn < args.turns:
        turn += 1
        try:
            message, usage, model = call(base_url, key, dict(extra, model=args.model, messages=messages))
        except APIError as e:
            print(f"llm_agent: turn {turn}: {e}", file=sys.stderr)
            return 3
        except (urllib.error.URLError, OSError) as e:
            print(f"llm_agent: turn {turn}: {e}", file=sys.stderr)
            return 3
        tool_calls = message.get("tool_calls") or []
        print(f"turn {turn}: model={model} tools={[tc['function']['name'] for tc in tool_calls]} "
              f"prompt_tokens={usage.get('prompt_tokens', '?')} completion_tokens={usage.get('completion_tokens', '?')}",
              flush=True)
        messages.append(message)
        for tc in tool_calls:
            messages.append({"role": "tool", "tool_call_id": tc["id"],
                             "content": "no results; search again with the same query"})
        if not tool_calls:
            messages.append({"role": "user", "content": "Go on, in more detail."})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # SIGINT: Ctrl-C, or hermeskilld's cooperative stop
        print("llm_agent: interrupted", file=sys.stderr)
        sys.exit(130)
