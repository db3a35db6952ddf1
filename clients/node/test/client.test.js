// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// The client against a fake supervisor on a real Unix stream socket.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { setTimeout as sleep } from 'node:timers/promises';

import { Client, ConfigError, StopError, isStopError, rawJSON, argsHash, stopErrorOf } from '../index.js';
import { FakeSupervisor, waitFor } from './helpers.js';

let sup;
before(async () => {
  sup = new FakeSupervisor();
  await sup.listen();
});
after(() => sup.close());

// A client of sup, its messages from the first one on.
async function client(options = {}) {
  const c = new Client(sup.path, { env: {}, ...options });
  const from = sup.messages.length;
  assert.equal(c.status('hello'), true);
  const first = await sup.message('STATUS=hello', from);
  const conn = first.conn;
  const mine = () => sup.messages.filter((m) => m.conn === conn).map((m) => m.text);
  return { c, conn, mine, next: (pred) => sup.message((t) => (typeof pred === 'string' ? t === pred : pred(t)), sup.messages.indexOf(first) + 1) };
}

test('unsupervised: a no-op client, every method returns at once', () => {
  const c = Client.fromEnv({ env: {} });
  assert.equal(c.supervised, false);
  assert.equal(c.address, null);
  for (const ok of [c.ready(), c.beat(), c.progress(1), c.usage({ tokens: 1, costUsd: 0.5 }), c.toolCall('t', {}), c.status('s'),
    c.error(new Error('e')), c.stopping(), c.trigger('r')]) {
    assert.equal(ok, false);
  }
  c.startHeartbeat();
  c.extendTimeout(1000)();
  c.checkpoint();
  assert.equal(c.signal.aborted, false);
  assert.equal(c.stopRequested, false);
  c.close();
  c.close();
  assert.equal(Client.fromEnv({ env: { HERMESKILL_STREAM_SOCKET: '' } }).supervised, false);
  assert.equal(Client.fromEnv({ env: { HERMESKILL_SOCKET: '/run/x/notify.sock' } }).supervised, false, 'the datagram socket is not ours');
});

test('misuse throws, supervised or not', () => {
  const c = Client.fromEnv({ env: {} });
  assert.throws(() => c.progress(-1), RangeError);
  assert.throws(() => c.progress(1.5), TypeError);
  assert.throws(() => c.progress('3'), TypeError);
  assert.throws(() => c.usage({ tokens: -1 }), RangeError);
  assert.throws(() => c.usage({ costUsd: NaN }), RangeError);
  assert.throws(() => c.extendTimeout(0), RangeError);
  assert.throws(() => c.extendTimeout(Infinity), RangeError);
  assert.throws(() => c.startHeartbeat(-5), RangeError);
  assert.throws(() => new Client('relative.sock', { env: {} }), ConfigError);
  assert.throws(() => new Client('/' + 'x'.repeat(110), { env: {} }), ConfigError);
  assert.throws(() => new Client('', { env: {}, acknowledge: 'yes' }), TypeError);
});

test('fromEnv reads HERMESKILL_STREAM_SOCKET and WATCHDOG_USEC', () => {
  const env = { HERMESKILL_STREAM_SOCKET: sup.path, WATCHDOG_USEC: '3000000' };
  const c = Client.fromEnv({ env });
  assert.equal(c.supervised, true);
  assert.equal(c.address, sup.path);
  assert.equal(c.watchdogMs, 3000);
  assert.equal(c.heartbeatIntervalMs, 1000);
  c.close();
  const other = Client.fromEnv({ env: { ...env, WATCHDOG_PID: '1' } });
  assert.equal(other.watchdogMs, null, "another process's watchdog");
  assert.equal(other.heartbeatIntervalMs, 1000);
  other.close();
});

test('messages: each framed, in order, on one connection', async () => {
  const { c, mine } = await client();
  c.ready();
  c.beat();
  c.progress(3);
  c.progress(12345678901234567890n);
  c.usage({ tokens: 1200, costUsd: 0.25 });
  c.usage({ costUsd: 1e-7 });
  c.usage({ costUsd: 2 });
  assert.equal(c.usage({}), false, 'nothing to say');
  c.toolCall('web_search', { q: 'a<b', n: 1 });
  c.toolCall('raw', rawJSON('{"q": 1.0}'));
  c.status('line one\nline two');
  c.error(new TypeError('bad thing'));
  c.error('plain');
  c.stopping();
  c.trigger('I am looping');
  c.trigger();
  const end = c.extendTimeout(1500.5);
  end();
  end();
  c.status('last');
  await waitFor(() => mine().includes('STATUS=last'), 'the last message');
  assert.deepEqual(mine(), [
    'STATUS=hello', 'READY=1', 'WATCHDOG=1', 'PROGRESS=3', 'PROGRESS=12345678901234567890',
    'TOKENS=1200\nCOST_USD=0.25', 'COST_USD=1e-07', 'COST_USD=2.0',
    'TOOL=web_search\nTOOL_ARGS_SHA256=6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb',
    'TOOL=raw\nTOOL_ARGS_SHA256=' + argsHash(rawJSON('{"q":1.0}')),
    'STATUS=line one line two', 'ERROR=TypeError: bad thing', 'ERROR=plain', 'STOPPING=1',
    'WATCHDOG=trigger\nSTATUS=I am looping', 'WATCHDOG=trigger', 'EXTEND_TIMEOUT_USEC=1500500', 'STATUS=last',
  ]);
  assert.equal(c.sent, mine().length);
  assert.equal(c.dropped, 0);
  assert.equal(c.connected, true);
  c.close();
  assert.equal(c.status('after close'), false);
});

test('STOP aborts the signal with a StopError and is acknowledged once the signal was read', async () => {
  const { c, conn, mine } = await client();
  const signal = c.signal;
  let seen = null;
  let ackBeforeListener = null;
  signal.addEventListener('abort', () => {
    seen = signal.reason;
    ackBeforeListener = mine().includes('STOPPING=1');
  });
  const stopEvent = new Promise((resolve) => c.addEventListener('stop', resolve, { once: true }));
  // In pieces, the first with a warning before it.
  conn.write('WARNING=memory: tree RSS 1.1GiB over 1GiB\n\nSTOP=1\nCHECK=cost\nREA');
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(signal.aborted, false, 'not before the message ended');
  conn.write('SON=spent 5.10 USD, limit 5\nGRACE_USEC=10000000\nKILL_EVENT_ID=cert-1\n\n');
  const e = await stopEvent;
  assert.equal(signal.aborted, true);
  assert.ok(seen instanceof StopError);
  assert.equal(seen, e.error);
  assert.equal(seen.name, 'HermeskillStop');
  assert.equal(seen.check, 'cost');
  assert.equal(seen.reason, 'spent 5.10 USD, limit 5');
  assert.equal(seen.graceMs, 10000);
  assert.equal(seen.killEventId, 'cert-1');
  assert.match(seen.message, /\(cost: spent 5\.10 USD, limit 5\); escalation in 10s/);
  assert.ok(isStopError(seen));
  assert.equal(c.stopRequested, true);
  assert.equal(c.stopError, seen);
  assert.throws(() => c.checkpoint(), (err) => err === seen);
  await waitFor(() => mine().includes('STOPPING=1'), 'the acknowledgement');
  assert.equal(ackBeforeListener, false, 'the acknowledgement follows the abort');
  assert.deepEqual(c.warnings, ['memory: tree RSS 1.1GiB over 1GiB']);
  // A second STOP changes nothing and is not acknowledged again.
  conn.write('STOP=1\nCHECK=other\n\n');
  c.status('barrier');
  await waitFor(() => mine().includes('STATUS=barrier'), 'the barrier');
  assert.equal(c.stopError.check, 'cost');
  assert.equal(mine().filter((t) => t === 'STOPPING=1').length, 1);
  c.close();
});

test('what fetch and Node APIs given the signal reject with leads to the StopError', async () => {
  const { c, conn } = await client();
  const signal = c.signal;
  conn.write('STOP=1\nCHECK=cost\nREASON=over\n\n');
  await waitFor(() => signal.aborted, 'the abort');
  const stop = c.stopError;
  await assert.rejects(fetch('http://127.0.0.1:9/', { signal }), (err) => err === stop && isStopError(err));
  await assert.rejects(sleep(10_000, undefined, { signal }), (err) => {
    assert.equal(err.name, 'AbortError');
    assert.equal(err.cause, stop);
    return isStopError(err) && stopErrorOf(err) === stop;
  });
  assert.equal(stopErrorOf(new Error('other')), null);
  assert.equal(stopErrorOf('HermeskillStop'), null);
  assert.equal(isStopError(new Error('x', { cause: new Error('y') })), false);
  const foreign = Object.assign(new Error('from another copy'), { name: 'HermeskillStop' });
  assert.equal(stopErrorOf(new Error('wrapped', { cause: foreign })), foreign);
  c.close();
});

test('STOP is acknowledged within a few ms of its arrival', async () => {
  const { c, conn, mine } = await client();
  c.signal;
  const t0 = performance.now();
  conn.write('STOP=1\nCHECK=heartbeat_timeout\n\n');
  await waitFor(() => mine().includes('STOPPING=1'), 'the acknowledgement');
  assert.ok(performance.now() - t0 < 1000, 'far within hermeskilld ack_wait (250ms) on an idle machine');
  c.close();
});

test('STOP without anyone watching is not acknowledged: the agent gets the cooperative signal', async () => {
  const { c, conn, mine } = await client();
  conn.write('STOP=1\nCHECK=cost\n\n');
  await waitFor(() => c.stopRequested, 'the stop');
  c.status('barrier');
  await waitFor(() => mine().includes('STATUS=barrier'), 'the barrier');
  assert.ok(!mine().includes('STOPPING=1'));
  // Read afterwards, the signal is already aborted.
  assert.equal(c.signal.aborted, true);
  assert.equal(c.signal.reason.check, 'cost');
  c.close();
});

test("a 'stop' listener or onStop counts as watching; acknowledge forces either way", async () => {
  for (const [how, options, arm, acked] of [
    ['onStop', {}, (c) => c.onStop(() => {}), true],
    ['addEventListener', {}, (c) => c.addEventListener('stop', () => {}), true],
    ['acknowledge: true', { acknowledge: true }, () => {}, true],
    ['acknowledge: false', { acknowledge: false }, (c) => c.signal, false],
  ]) {
    const { c, conn, mine } = await client(options);
    arm(c);
    conn.write('STOP=1\n\n');
    await waitFor(() => c.stopRequested, 'the stop');
    c.status('barrier');
    await waitFor(() => mine().includes('STATUS=barrier'), 'the barrier');
    assert.equal(mine().includes('STOPPING=1'), acked, how);
    c.close();
  }
});

test('onStop after the stop is called at once; onWarning and its errors', async () => {
  const { c, conn, mine } = await client();
  const warnings = [];
  const printed = [];
  const orig = console.error;
  console.error = (...a) => printed.push(a.join(' '));
  try {
    c.onWarning((w) => warnings.push(w));
    const off = c.onWarning(() => {
      throw new Error('listener bug');
    });
    let event;
    c.addEventListener('warning', (e) => (event = e));
    conn.write('WARNING=tool_loop: web_search called 5 times with the same arguments\n\n');
    await waitFor(() => warnings.length === 1, 'the warning');
    assert.equal(event.check, 'tool_loop');
    assert.equal(event.message, 'web_search called 5 times with the same arguments');
    assert.equal(printed.length, 1);
    off();
    conn.write('WARNING=no colon\n\nSTOP=1\n\n');
    await waitFor(() => c.stopRequested, 'the stop');
    assert.deepEqual(warnings, ['tool_loop: web_search called 5 times with the same arguments', 'no colon']);
    assert.equal(printed.length, 1);
  } finally {
    console.error = orig;
  }
  const got = await new Promise((resolve) => c.onStop(resolve));
  assert.equal(got, c.stopError);
  assert.equal(mine().includes('STOPPING=1'), false, 'onStop after the STOP came too late to acknowledge');
  c.close();
});

test('a dropped connection is reconnected; messages meanwhile are dropped, never thrown', async () => {
  const { c, conn } = await client();
  const events = [];
  c.addEventListener('disconnect', () => events.push('disconnect'));
  c.addEventListener('connect', () => events.push('connect'));
  conn.destroy();
  await waitFor(() => !c.connected, 'the disconnection');
  for (let i = 0; i < 5; i++) c.beat(); // lost or queued, never an exception
  await waitFor(() => c.connected, 'the reconnection');
  const from = sup.messages.length;
  c.status('again');
  const m = await sup.message('STATUS=again', from);
  assert.notEqual(m.conn, conn);
  assert.deepEqual(events, ['disconnect', 'connect']);
  c.close();
});

test('a supervisor that is not there: nothing throws, attempts stop, messages are counted as dropped', async () => {
  const gone = new Client(sup.path + '.absent', { env: {} });
  const attempts = [];
  gone.addEventListener('disconnect', (e) => attempts.push(e.error?.code));
  for (let i = 0; i < 10; i++) assert.equal(typeof gone.beat(), 'boolean');
  gone.startHeartbeat(5);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(gone.connected, false);
  assert.ok(gone.dropped >= 10, `dropped ${gone.dropped}`);
  assert.equal(gone.sent, 0);
  gone.close();
});

test('the heartbeat vouches while the work loop calls the client, then falls silent', async () => {
  const { c, mine } = await client({ heartbeatIntervalMs: 20 }); // window: 3 intervals
  c.startHeartbeat();
  c.startHeartbeat(); // once
  const beats = () => mine().filter((t) => t === 'WATCHDOG=1').length;
  // A live loop: a call every 10 ms.
  for (let i = 0; i < 15; i++) {
    c.progress(i);
    await new Promise((r) => setTimeout(r, 10));
  }
  const live = beats();
  assert.ok(live >= 3, `${live} beats while live`);
  // The loop wedges (awaits forever): one window (60 ms) after its last
  // call the beats stop.
  await new Promise((r) => setTimeout(r, 250));
  const silent = beats();
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(beats(), silent, 'no beat without the work loop');
  // A declared wait is vouched for with EXTEND_TIMEOUT_USEC, for its time only.
  const declared = performance.now();
  const end = c.extendTimeout(300);
  await waitFor(() => mine().filter((t) => t.startsWith('EXTEND_TIMEOUT_USEC=')).length >= 3, 'extensions');
  const extensions = mine().filter((t) => t.startsWith('EXTEND_TIMEOUT_USEC='));
  assert.equal(extensions[0], 'EXTEND_TIMEOUT_USEC=300000', 'the declaration');
  for (const e of extensions.slice(1)) assert.ok(Number(e.split('=')[1]) <= 60000, `at most the window: ${e}`);
  await new Promise((r) => setTimeout(r, Math.max(0, declared + 400 - performance.now())));
  const n = mine().length;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(mine().length, n, 'nothing once the declared wait is over');
  end(); // activity: the beats come back
  await waitFor(() => beats() > silent, 'a beat after the wait ended');
  c.close();
});

test('the client keeps no process alive', async () => {
  const index = fileURLToPath(new URL('../index.js', import.meta.url));
  const script = `
    import { Client } from ${JSON.stringify(index)};
    const c = Client.fromEnv();
    c.ready();
    c.startHeartbeat(10);
    c.signal.addEventListener('abort', () => {});
    console.log('started');
  `;
  const t0 = Date.now();
  const from = sup.messages.length;
  const out = await new Promise((resolve, reject) => {
    execFile(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, HERMESKILL_STREAM_SOCKET: sup.path }, timeout: 10000,
    }, (err, stdout) => (err ? reject(err) : resolve(stdout)));
  });
  assert.equal(out.trim(), 'started');
  assert.ok(Date.now() - t0 < 5000);
  const ready = await sup.message('READY=1', from);
  assert.ok(ready, "the child's READY was sent before it exited");
});
