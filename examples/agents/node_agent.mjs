#!/usr/bin/env node
// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0
//
// A Node agent on the hermeskill client (clients/node): a plan/act loop with
// a fake model and a fake tool. It stops cooperatively when hermeskilld says
// STOP: the model call given hk.signal is aborted, the agent saves its work
// and exits 3 within the grace period.
//
//   hermeskilld supervise --heartbeat-timeout 1s --tool-loop 5 -- node examples/agents/node_agent.mjs --loop
//
//   --loop    the model asks for the same tool call again and again: killed by tool_loop
//   --wedge   after three steps the loop awaits something that never comes:
//             the background heartbeat falls silent, killed by heartbeat_timeout
//   --steps N stop by itself after N steps (default 20)

import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '../../clients/node/index.js';

const args = process.argv.slice(2);
const loop = args.includes('--loop');
const wedge = args.includes('--wedge');
const steps = Number(args[args.indexOf('--steps') + 1]) || 20;

const hk = Client.fromEnv(); // a no-op client when not supervised
hk.onWarning((w) => console.error(`agent: warning from hermeskilld: ${w}`));
hk.ready();
hk.startHeartbeat();

// The fake model: 100 ms per answer, cancelled by the signal.
async function model(step, signal) {
  await sleep(100, undefined, { signal });
  return { tokens: 150, costUsd: 0.0004, tool: 'web_search', args: { q: loop ? 'the same query' : `query ${step}` } };
}

let tokens = 0;
let cost = 0;
const done = [];
try {
  for (let step = 1; step <= steps; step++) {
    if (wedge && step > 3) await new Promise(() => setInterval(() => {}, 1000)); // never settles
    const end = hk.extendTimeout(30_000); // a real model call may outlast the heartbeat timeout
    let answer;
    try {
      answer = await model(step, hk.signal);
    } finally {
      end();
    }
    tokens += answer.tokens;
    cost += answer.costUsd;
    hk.usage({ tokens, costUsd: cost });
    hk.toolCall(answer.tool, answer.args); // only the hash of the arguments leaves the agent
    done.push(answer.args.q);
    hk.progress(step);
    hk.status(`step ${step}: ${answer.tool}`);
  }
  hk.stopping();
  console.log(`agent: done after ${done.length} steps`);
} catch (err) {
  if (!hk.stopRequested) throw err;
  const stop = hk.stopError;
  console.error(`agent: stopped by hermeskilld (${stop.check}: ${stop.reason}); saving ${done.length} results, kill event ${stop.killEventId}`);
  process.exitCode = 3;
} finally {
  hk.close();
}
