#!/usr/bin/env python3
# Copyright 2026 The hermeskill Authors
# SPDX-License-Identifier: Apache-2.0
"""A research agent under hermeskilld: plan -> act -> observe, with a fake LLM and fake tools.

It runs the same with and without supervision (the client is then a no-op):

    python3 examples/agents/research_agent.py --steps 5 --delay 0

    hermeskilld supervise --heartbeat-timeout 3s --progress-timeout 5s --tool-loop 4 \\
        --max-cost 1.00 -- python3 examples/agents/research_agent.py --stall --out /tmp/r.json

Each failure mode starts at step 3 and is what one hermeskilld check is for:

    --loop       web_search with the same arguments over and over    -> tool_loop
    --overspend  every model call costs 50x as much                   -> cost
    --stall      the main loop blocks in wait_for_upstream forever    -> progress_timeout, heartbeat_timeout
                 (the heartbeat thread runs, but stops vouching for a loop
                 that no longer calls the client)
    --wedge      the main thread spins in plan_next_step_forever,     -> progress_timeout, heartbeat_timeout, cpu_spin
                 ignoring SIGINT and SIGTERM: only SIGKILL ends it;
                 the SIGUSR2 dump shows where it spun

A cooperative stop (hermeskilld's STOP directive, seen by hk.checkpoint(), or its SIGINT)
saves the partial results to --out and exits 0 naming the check that fired.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import socket
import sys
import tempfile
import time
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
import hermeskill  # noqa: E402  (path set just above)

FAILURE_STEP = 3
USD_PER_MILLION_INPUT_TOKENS = 3.0
USD_PER_MILLION_OUTPUT_TOKENS = 15.0
OVERSPEND_FACTOR = 50.0

ASPECTS = [
    "cost per kilogram", "recovery yield", "supply chain", "regulation in the EU",
    "pilot plants", "energy use", "safety incidents", "patent landscape",
]
THOUGHTS = [
    "Little is known about the {aspect} of {topic}; I need a primary source.",
    "Two sources disagree on the {aspect}; a third one should settle it.",
    "I have enough on the basics of {topic}; the {aspect} is the gap now.",
    "That page was mostly marketing. Look for numbers on the {aspect}.",
    "Summarize what is known about the {aspect} before moving on.",
]


class Completion(NamedTuple):
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float


class FakeLLM:
    """A deterministic stand-in for a chat model: same seed, same thoughts, tokens and bill."""

    def __init__(self, topic: str, seed: int) -> None:
        self.topic = topic
        self.rng = random.Random(seed)
        self.price_factor = 1.0
        self.tokens = 0
        self.cost_usd = 0.0

    def complete(self, prompt: str) -> Completion:
        prompt_tokens = len(prompt) // 4 + self.rng.randint(300, 1500)
        completion_tokens = self.rng.randint(40, 400)
        cost = self.price_factor * (
            prompt_tokens * USD_PER_MILLION_INPUT_TOKENS
            + completion_tokens * USD_PER_MILLION_OUTPUT_TOKENS
        ) / 1e6
        self.tokens += prompt_tokens + completion_tokens
        self.cost_usd += cost
        text = self.rng.choice(THOUGHTS).format(aspect=self.rng.choice(ASPECTS), topic=self.topic)
        return Completion(text, prompt_tokens, completion_tokens, cost)


class ToolError(Exception):
    pass


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


def web_search(query: str, max_results: int = 5) -> List[Dict[str, str]]:
    h = _digest(query)
    return [
        {
            "title": "%s (%d)" % (query.title(), h % 1000 + i),
            "url": "https://example.org/%08x/%d" % (h, i),
            "snippet": "Findings on %s, part %d." % (query, i + 1),
        }
        for i in range(max_results)
    ]


def fetch_page(url: str) -> str:
    if _digest(url) % 6 == 0:  # some sites are slow: the client library gives up
        raise ToolError("fetch_page: timeout after 10s: " + url)
    rng = random.Random(url)
    return " ".join(
        "Paragraph %d of %s reports a figure of %.1f." % (i, url, rng.uniform(1, 99)) for i in range(12)
    )


def summarize(text: str, max_words: int = 40) -> str:
    words = text.split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")


TOOLS = {"web_search": web_search, "fetch_page": fetch_page, "summarize": summarize}


def wait_for_upstream() -> bytes:
    """Wait for an upstream answer that never comes (an HTTP call made without a timeout)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        return ours.recv(1)  # nobody ever writes to `theirs`


def plan_next_step_forever() -> None:
    """A planning bug: pure-Python spinning that holds the GIL and ignores polite signals."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        pass


class ResearchAgent:
    def __init__(self, topic: str, llm: FakeLLM, hk: hermeskill.Client, mode: argparse.Namespace) -> None:
        self.topic = topic
        self.llm = llm
        self.hk = hk
        self.mode = mode
        self.step = 0  # the step under way
        self.completed = 0
        self.urls = []  # type: List[str]
        self.page = None  # type: Optional[str]
        self.findings = []  # type: List[Dict[str, Any]]
        self.sources = []  # type: List[str]
        self.errors = 0

    def run(self, steps: int, delay: float) -> None:
        for step in range(1, steps + 1):
            self.hk.checkpoint()  # hermeskilld said STOP: HermeskillTerminated, handled in main()
            self.step = step
            if step == FAILURE_STEP and self.mode.overspend:
                self.llm.price_factor = OVERSPEND_FACTOR  # a silent switch to a far pricier model
            tool, args = self.plan(step)
            self.hk.status("step %d/%d: %s" % (step, steps, tool))
            observation = self.act(tool, args)
            self.observe(tool, args, observation)
            self.hk.usage(tokens=self.llm.tokens, cost_usd=self.llm.cost_usd)
            self.hk.progress(step)
            self.completed = step
            time.sleep(delay)

    def plan(self, step: int) -> Tuple[str, Dict[str, Any]]:
        thought = self.llm.complete("Topic: %s\nFindings so far: %d\nWhat next?" % (self.topic, len(self.findings)))
        print("step %d: thinking: %s" % (step, thought.text), flush=True)
        if self.mode.wedge and step >= FAILURE_STEP:
            plan_next_step_forever()
        if self.mode.loop and step >= FAILURE_STEP:
            # The model keeps "refining" a search whose results it never reads.
            return "web_search", {"query": self.topic + " latest figures", "max_results": 5}
        if self.page is not None:
            return "summarize", {"text": self.page, "max_words": 40}
        if self.urls:
            return "fetch_page", {"url": self.urls.pop(0)}
        aspect = ASPECTS[(step // 3) % len(ASPECTS)]
        return "web_search", {"query": "%s %s" % (self.topic, aspect), "max_results": 3}

    def act(self, tool: str, args: Dict[str, Any]) -> Any:
        self.hk.tool_call(tool, args)  # only a hash of args leaves the process
        if self.mode.stall and self.step >= FAILURE_STEP:
            wait_for_upstream()
        try:
            return TOOLS[tool](**args)
        except ToolError as e:
            self.errors += 1
            self.hk.error(e)
            return e

    def observe(self, tool: str, args: Dict[str, Any], observation: Any) -> None:
        if isinstance(observation, ToolError):
            print("step %d: %s failed: %s" % (self.step, tool, observation), flush=True)
            return
        if tool == "web_search":
            self.urls = [r["url"] for r in observation[:2]]
        elif tool == "fetch_page":
            self.page = observation
            self.sources.append(args["url"])
        elif tool == "summarize":
            self.page = None
            note = self.llm.complete("Extract the key claim from: " + observation)
            self.findings.append({"step": self.step, "summary": observation, "note": note.text})
        print(
            "step %d: %s done (tokens %d, cost $%.4f)" % (self.step, tool, self.llm.tokens, self.llm.cost_usd),
            flush=True,
        )

    def results(self, finished: bool, stopped_by: Optional[Dict[str, str]]) -> Dict[str, Any]:
        return {
            "topic": self.topic,
            "finished": finished,
            "steps_completed": self.completed,
            "stopped_by": stopped_by,
            "findings": self.findings,
            "sources": self.sources,
            "tool_errors": self.errors,
            "tokens": self.llm.tokens,
            "cost_usd": round(self.llm.cost_usd, 6),
        }


def save_json(path: str, data: Dict[str, Any]) -> None:
    """Write atomically: a temp file in the same directory, fsync, rename."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".research-", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def stopped_early(agent: ResearchAgent, out: Optional[str], stop: Optional[hermeskill.HermeskillTerminated]) -> int:
    """Save the partial results; 0 for hermeskilld's cooperative stop, 130 for a plain Ctrl-C."""
    agent.hk.stopping()
    if stop is not None:
        why = "stopped by hermeskilld (check %s: %s)" % (stop.check, stop.reason)
        stopped_by = {"check": stop.check, "reason": stop.reason}
    else:
        why = "interrupted (SIGINT)"
        stopped_by = {"check": "", "reason": "SIGINT"}
    where = "not saved (no --out)"
    if out:
        save_json(out, agent.results(False, stopped_by))
        where = "saved to " + out
    print(
        "research_agent: %s after %d steps; %d partial findings %s"
        % (why, agent.completed, len(agent.findings), where),
        file=sys.stderr,
        flush=True,
    )
    return 0 if stop is not None else 130


def stop_directive(hk: hermeskill.Client, wait: float = 0.5) -> Optional[hermeskill.HermeskillTerminated]:
    """After a SIGINT: hermeskilld sends its STOP directive alongside it; give it a moment."""
    deadline = time.monotonic() + wait
    while hk.supervised and not hk.stop_requested and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        hk.checkpoint()
    except hermeskill.HermeskillTerminated as stop:
        return stop
    return None


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="research steps to run (default 20)")
    p.add_argument("--delay", type=float, default=0.2, help="seconds of pause per step (default 0.2)")
    p.add_argument("--topic", default="solid-state battery recycling")
    p.add_argument("--seed", type=int, default=7, help="seed of the fake LLM")
    p.add_argument("--out", metavar="PATH", help="write the (partial) results here as JSON")
    p.add_argument("--loop", action="store_true", help="from step 3, repeat one web_search forever")
    p.add_argument("--overspend", action="store_true", help="from step 3, model calls cost 50x")
    p.add_argument("--stall", action="store_true", help="from step 3, block forever in wait_for_upstream")
    p.add_argument("--wedge", action="store_true",
                   help="from step 3, spin in plan_next_step_forever ignoring SIGINT/SIGTERM")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    hk = hermeskill.Client.from_env()
    agent = ResearchAgent(args.topic, FakeLLM(args.topic, args.seed), hk, args)
    try:
        with hk:
            hk.ready()
            hk.start_heartbeat()
            try:
                agent.run(args.steps, args.delay)
            except hermeskill.HermeskillTerminated as stop:
                return stopped_early(agent, args.out, stop)
            except KeyboardInterrupt:  # hermeskilld's cooperative SIGINT, or Ctrl-C
                return stopped_early(agent, args.out, stop_directive(hk))
            hk.stopping()
            if args.out:
                save_json(args.out, agent.results(True, None))
            print(
                "research_agent: done: %d steps, %d findings, %d tokens, $%.4f%s"
                % (agent.step, len(agent.findings), agent.llm.tokens, agent.llm.cost_usd,
                   "; results in " + args.out if args.out else ""),
                flush=True,
            )
            return 0
    finally:
        if hk.supervised:  # messages lost to a full supervisor queue show up here
            print("research_agent: hermeskill sent %d messages, dropped %d" % (hk.sent, hk.dropped),
                  file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
