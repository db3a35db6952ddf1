// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// An agent with one tool (web_search), on one of the TypeScript SDKs npm
// serves, configured by nothing but the environment the SDKs read by
// default (OPENAI_BASE_URL, OPENAI_API_KEY): no hermeskill client, nothing
// of hermeskill's. internal/gateway/sdktest/node_test.go runs it under
// `hermeskilld supervise` with the LLM gateway.
//
//   node agent.mjs --sdk openai|agents|ai|ai-stream --report FILE [--tasks N] [--model M]
//
// --sdk openai     the openai package: chat completions with tools, its own tool loop
//       agents     @openai/agents: an Agent with a tool, run() (the Responses API)
//       ai         ai + @ai-sdk/openai: generateText with a tool (openai(model): the Responses API)
//       ai-stream  ai + @ai-sdk/openai: streamText with a tool (openai.chat(model): chat completions, streamed)
//
// It does --tasks tasks one after the other, each a conversation of up to
// 50 model calls that ends when the model answers in text. It writes to
// FILE one JSON line with its environment, then one per task ({"n", "ok",
// "tools"}) and, on an error, one with the error ({"ok": false, "status",
// "err"}) before exiting 1. A task done by all: exit 0.

import { appendFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    sdk: { type: 'string' },
    report: { type: 'string' },
    tasks: { type: 'string', default: '1' },
    model: { type: 'string', default: 'gpt-4.1-mini' },
  },
});
const report = (v) => appendFileSync(opt.report, JSON.stringify(v) + '\n');
writeFileSync(opt.report, JSON.stringify({ env: Object.entries(process.env).map(([k, v]) => `${k}=${v}`) }) + '\n');

// Loopback only: the test's provider is there, and nothing else may be
// reached (an SDK's telemetry, say: @openai/agents posts traces to
// api.openai.com unless OPENAI_AGENTS_DISABLE_TRACING=1). A request
// elsewhere is refused and reported ({"egress": URL}). Every SDK here
// sends its requests with the global fetch.
const realFetch = globalThis.fetch;
globalThis.fetch = async (input, init) => {
  const url = new URL(input instanceof Request ? input.url : String(input));
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
    report({ egress: url.origin + url.pathname });
    throw new TypeError(`agent.mjs: ${url.origin} is not loopback: refused`);
  }
  return realFetch(input, init);
};

const MAX_STEPS = 50;
const PROMPT = 'Find what hermeskill is.';
const search = async ({ query }) => `3 results for ${query}`;

// Each runner does one task and returns the number of tool calls it ran.
const runners = {
  async openai() {
    const { default: OpenAI } = await import('openai');
    const client = new OpenAI(); // OPENAI_API_KEY, OPENAI_BASE_URL
    const tools = [{
      type: 'function',
      function: {
        name: 'web_search', description: 'Search the web.',
        parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
      },
    }];
    const messages = [{ role: 'user', content: PROMPT }];
    let ran = 0;
    for (let step = 0; step < MAX_STEPS; step++) {
      const res = await client.chat.completions.create({ model: opt.model, messages, tools });
      const msg = res.choices[0].message;
      if (!msg.tool_calls?.length) return ran;
      messages.push(msg);
      for (const call of msg.tool_calls) {
        messages.push({ role: 'tool', tool_call_id: call.id, content: await search(JSON.parse(call.function.arguments)) });
        ran++;
      }
    }
    throw new Error(`no answer in ${MAX_STEPS} steps`);
  },

  async agents() {
    const { Agent, run, tool } = await import('@openai/agents');
    const { z } = await import('zod');
    const agent = new Agent({
      name: 'researcher', instructions: 'Use web_search, then answer.', model: opt.model,
      tools: [tool({ name: 'web_search', description: 'Search the web.', parameters: z.object({ query: z.string() }), execute: search })],
    });
    const result = await run(agent, PROMPT, { maxTurns: MAX_STEPS });
    return result.newItems.filter((i) => i.type === 'tool_call_item').length;
  },

  async ai() {
    const { generateText, tool, stepCountIs } = await import('ai');
    const { openai } = await import('@ai-sdk/openai');
    const { z } = await import('zod');
    const { steps } = await generateText({
      model: openai(opt.model), prompt: PROMPT, stopWhen: stepCountIs(MAX_STEPS),
      tools: { web_search: tool({ description: 'Search the web.', inputSchema: z.object({ query: z.string() }), execute: search }) },
    });
    return steps.flatMap((s) => s.toolCalls).length;
  },

  async 'ai-stream'() {
    const { streamText, tool, stepCountIs } = await import('ai');
    const { openai } = await import('@ai-sdk/openai');
    const { z } = await import('zod');
    const result = streamText({
      model: openai.chat(opt.model), prompt: PROMPT, stopWhen: stepCountIs(MAX_STEPS),
      tools: { web_search: tool({ description: 'Search the web.', inputSchema: z.object({ query: z.string() }), execute: search }) },
    });
    for await (const part of result.fullStream) {
      if (part.type === 'error') throw part.error;
    }
    return (await result.steps).flatMap((s) => s.toolCalls).length;
  },
};

const runner = runners[opt.sdk];
if (!runner) {
  console.error(`agent.mjs: --sdk ${opt.sdk}: not one of ${Object.keys(runners).join(', ')}`);
  process.exit(2);
}
for (let n = 1; n <= Number(opt.tasks); n++) {
  try {
    const tools = await runner();
    if (n === 1 || n === Number(opt.tasks)) console.log(`task ${n} done, ${tools} tool calls`);
    report({ n, ok: true, tools });
  } catch (e) {
    // The SDKs' error for an HTTP status carries it as .status (openai,
    // @openai/agents) or .statusCode (the AI SDK's APICallError, also as
    // the cause of its RetryError).
    const status = e?.status ?? e?.statusCode ?? e?.lastError?.statusCode ?? e?.cause?.statusCode ?? 0;
    report({ n, ok: false, status, err: String(e?.message ?? e).slice(0, 500) });
    console.error(`agent.mjs: task ${n}: ${e?.message ?? e}`);
    process.exit(1);
  }
}
