// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// End to end: Node agents on the client under the real `hermeskilld
// supervise`, over its stream socket. The binary is $HERMESKILL_BIN (make
// test-node builds it), else built here from the repository this file is in.

import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { shortTempDir } from './helpers.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..', '..');
const INDEX = path.join(HERE, '..', 'index.js');
const EXAMPLE = path.join(ROOT, 'examples', 'agents', 'node_agent.mjs');

let bin;
let tmp;
before(() => {
  tmp = shortTempDir();
  bin = process.env.HERMESKILL_BIN;
  if (bin) return;
  bin = path.join(tmp.dir, 'hermeskilld');
  try {
    execFileSync('go', ['build', '-o', bin, './cmd/hermeskilld'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
  } catch (err) {
    throw new Error(`building hermeskilld in ${ROOT} failed (set HERMESKILL_BIN to a built one, or install Go): ${err.message}`);
  }
});
after(() => tmp?.cleanup());

// The agent's first lines: the client from the environment, the documented pattern.
const PRELUDE = `
import { Client, stopErrorOf } from ${JSON.stringify(INDEX)};
import { setTimeout as sleep } from 'node:timers/promises';
if (!process.env.HERMESKILL_STREAM_SOCKET) {
  console.error('agent: no HERMESKILL_STREAM_SOCKET: this hermeskilld has no stream socket');
  process.exit(3);
}
const hk = Client.fromEnv();
hk.ready();
hk.startHeartbeat();
`;

// Runs agent (the body after PRELUDE) under supervise with a 1s heartbeat
// timeout (the stops come from the agent's own reports, never from a clock
// that starts before Node does); resolves to its exit status, its time, output and certificates.
// An agent given as [file, ...args] runs as it is.
function supervise(name, agent, ...flags) {
  const dir = fs.mkdtempSync(path.join(tmp.dir, name + '-'));
  const certs = path.join(dir, 'certs');
  let command = agent;
  if (typeof agent === 'string') {
    command = [path.join(dir, 'agent.mjs')];
    fs.writeFileSync(command[0], PRELUDE + agent);
  }
  const env = { ...process.env };
  for (const k of ['HERMESKILL_SOCKET', 'HERMESKILL_STREAM_SOCKET', 'NOTIFY_SOCKET', 'WATCHDOG_USEC']) delete env[k];
  // A generous startup timeout: Node's start on a loaded machine may take a while.
  const argv = ['supervise', '--id', 'node-' + name, '--heartbeat-timeout', '1s', '--startup-timeout', '20s', '--coop-grace', '5s', '--term-grace', '500ms',
    '--certs-dir', certs, ...flags, '--', process.execPath, ...command];
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(bin, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000); // only reached on failure
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const found = fs.existsSync(certs)
        ? fs.readdirSync(certs).filter((f) => f.endsWith('.json')).map((f) => JSON.parse(fs.readFileSync(path.join(certs, f), 'utf8')))
        : [];
      resolve({ code, took: (performance.now() - started) / 1000, stdout, stderr, certs: found });
    });
  });
}

describe('under hermeskilld supervise', { concurrency: true }, () => {
  test('an agent that works lives past the heartbeat timeout', async () => {
    const r = await supervise('lives', `
      for (let step = 1; step <= 25; step++) {   // 2.5s: more than two heartbeat timeouts
        await sleep(100, undefined, { signal: hk.signal });
        hk.toolCall('web_search', { q: 'step ' + step });
        hk.usage({ tokens: step * 100, costUsd: step * 0.001 });
        hk.progress(step);
      }
      hk.stopping();
      console.log('done');
    `);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'done', r.stderr);
    assert.deepEqual(r.certs, [], r.stderr);
    assert.ok(r.took > 2.5, `took ${r.took}s`);
  });

  test('an agent whose loop stops passing through the client dies of heartbeat_timeout', async () => {
    const r = await supervise('wedged', `
      hk.progress(1);
      setInterval(() => {}, 1000);   // the process lives on, its event loop turns...
      await new Promise(() => {});   // ...but the work loop awaits something that never comes
    `);
    assert.notEqual(r.code, 0, r.stderr);
    assert.equal(r.certs.length, 1, r.stderr);
    const [cert] = r.certs;
    assert.equal(cert.trigger_check, 'heartbeat_timeout', r.stderr);
    assert.equal(cert.final_state.progress, 1);
    // Vouched for one timeout after its last call, killed one timeout later, plus the ladder.
    assert.ok(r.took > 1.5 && r.took < 15, `took ${r.took}s`);
  });

  test('a stop arrives as the abort of hk.signal, acknowledged: no SIGINT cuts the handler short', async () => {
    const r = await supervise('stopped', `
      let step = 0;
      try {
        for (;;) {
          await sleep(100, undefined, { signal: hk.signal });   // a model call, say
          hk.progress(++step);
        }
      } catch (err) {
        const stop = stopErrorOf(err);   // the AbortError of timers/promises has it as its cause
        if (!stop) throw err;
        // The handler saves its work; a SIGINT now would end the process with 130.
        await sleep(300);
        console.log('stopped: ' + stop.check + ' after ' + step + ' steps; kill event ' + stop.killEventId);
        process.exit(42);
      }
    `, '--max-steps', '5');
    assert.equal(r.code, 42, r.stderr);
    assert.match(r.stdout, /^stopped: steps after \d+ steps; kill event \S+$/m, r.stderr);
    assert.equal(r.certs.length, 1, r.stderr);
    const [cert] = r.certs;
    assert.equal(cert.trigger_check, 'steps');
    assert.equal(cert.escalation.reached, 'cooperative');
    assert.equal(cert.exit.code, 42);
    assert.ok(r.stdout.includes(cert.cert_id), 'KILL_EVENT_ID is the certificate');
    const steps = cert.shutdown_log.map((s) => s.step);
    const directive = cert.shutdown_log.find((s) => s.step === 'directive_sent');
    assert.ok(directive, steps.join(' '));
    assert.equal(directive.detail.acknowledged, true, JSON.stringify(directive));
    assert.equal(directive.detail.withheld, 'SIGINT', JSON.stringify(directive));
    assert.ok(!steps.includes('coop_signal_sent'), steps.join(' '));
    assert.ok(!steps.includes('sigterm_sent'), steps.join(' '));
  });

  test('an agent that does not watch the signal is not acknowledged: it gets SIGINT', async () => {
    const r = await supervise('sigint', `
      process.on('SIGINT', () => {
        console.log('SIGINT; stop requested: ' + hk.stopRequested);
        process.exit(43);
      });
      for (let step = 1; ; step++) {
        await sleep(100);
        hk.progress(step);
      }
    `, '--max-steps', '5');
    assert.equal(r.code, 43, r.stderr);
    assert.equal(r.stdout.trim(), 'SIGINT; stop requested: true', r.stderr);
    const [cert] = r.certs;
    const directive = cert.shutdown_log.find((s) => s.step === 'directive_sent');
    assert.equal(directive.detail.acknowledged, false, JSON.stringify(directive));
    assert.ok(cert.shutdown_log.some((s) => s.step === 'coop_signal_sent'), JSON.stringify(cert.shutdown_log));
  });

  test('the example agent: distinct tool calls live, the same call again and again dies of tool_loop', async () => {
    const [fine, looping] = await Promise.all([
      supervise('example', [EXAMPLE, '--steps', '8'], '--tool-loop', '5'),
      supervise('looping', [EXAMPLE, '--loop'], '--tool-loop', '5'),
    ]);
    assert.equal(fine.code, 0, fine.stderr);
    assert.equal(fine.stdout.trim(), 'agent: done after 8 steps', fine.stderr);
    assert.deepEqual(fine.certs, [], fine.stderr);

    assert.equal(looping.code, 3, looping.stderr);
    assert.match(looping.stderr, /agent: stopped by hermeskilld \(tool_loop: /, looping.stderr);
    const [cert] = looping.certs;
    assert.equal(cert.trigger_check, 'tool_loop');
    assert.equal(cert.escalation.reached, 'cooperative');
    assert.equal(cert.final_state.last_tool, 'web_search');
    assert.ok(cert.final_state.progress >= 4, 'killed at the fifth same call, not before');
  });

  test('an agent spinning in synchronous code neither sees nor acknowledges the STOP: SIGINT ends it', async () => {
    const r = await supervise('spinning', `
      hk.signal.addEventListener('abort', () => process.exit(44));   // never runs: the loop never yields
      while (!hk.connected) await sleep(5);   // the connection is made when the event loop turns
      hk.progress(5);                         // over --max-steps 4: written at once, the loop spinning or not
      for (;;) {}
    `, '--max-steps', '4');
    assert.equal(r.code, 130, r.stderr);
    const [cert] = r.certs;
    assert.equal(cert.trigger_check, 'steps');
    assert.equal(cert.exit.signal, 'SIGINT');
    const directive = cert.shutdown_log.find((s) => s.step === 'directive_sent');
    assert.equal(directive.detail.acknowledged, false, JSON.stringify(directive));
  });
});
