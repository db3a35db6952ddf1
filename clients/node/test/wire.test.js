// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { MAX_MESSAGE, MessageReader, frame, parseDirective, text, usec } from '../lib/wire.js';

const b = (s) => Buffer.from(s, 'utf8');

test('frame: lines, then an empty line', () => {
  assert.equal(frame(['READY=1']), 'READY=1\n\n');
  assert.equal(frame(['WATCHDOG=1', 'PROGRESS=3']), 'WATCHDOG=1\nPROGRESS=3\n\n');
});

test('MessageReader: several messages in one chunk, one message in many', () => {
  const r = new MessageReader();
  assert.deepEqual(r.push(b('STOP=1\nCHECK=cost\n\nWARNING=memory: high\n\nSTA')), [['STOP=1', 'CHECK=cost'], ['WARNING=memory: high']]);
  assert.deepEqual(r.push(b('TUS=x\n')), []);
  assert.deepEqual(r.push(b('\n')), [['STATUS=x']]);
  // One byte at a time, a character cut between two chunks, CRLF lines.
  const bytes = b('REASON=東京 😀\r\nSTOP=1\r\n\r\n');
  const got = [];
  for (const byte of bytes) got.push(...r.push(Buffer.from([byte])));
  assert.deepEqual(got, [['REASON=東京 😀', 'STOP=1']]);
});

test('MessageReader: empty lines with no message before them are ignored', () => {
  const r = new MessageReader();
  assert.deepEqual(r.push(b('\n\n\r\nA=1\n\n\n\nB=2\n\n')), [['A=1'], ['B=2']]);
});

test('MessageReader: a message over 8 KiB is skipped, the next one is read', () => {
  const r = new MessageReader();
  const big = 'WARNING=' + 'x'.repeat(MAX_MESSAGE) + '\n';
  assert.deepEqual(r.push(b(big.slice(0, 5000))), []);
  assert.deepEqual(r.push(b(big.slice(5000) + 'A=1\n\nB=2\n\n')), [['B=2']]);
  assert.deepEqual(r.push(b(('L=' + 'y'.repeat(100) + '\n').repeat(100) + '\n')), [], 'many lines over the limit');
  assert.deepEqual(r.push(b('C=3\n\n')), [['C=3']]);
  r.push(b('D=4\n'));
  r.reset();
  assert.deepEqual(r.push(b('E=5\n\n')), [['E=5']], 'reset forgets the unfinished message');
});

test('parseDirective: STOP with its fields, the first of duplicates wins', () => {
  assert.deepEqual(parseDirective(['STOP=1', 'CHECK=cost', 'REASON=spent 5.10 USD, limit 5', 'GRACE_USEC=10000000', 'KILL_EVENT_ID=k1', 'CHECK=other']), {
    stop: { check: 'cost', reason: 'spent 5.10 USD, limit 5', graceMs: 10000, killEventId: 'k1' },
  });
  assert.deepEqual(parseDirective(['STOP=1']), { stop: { check: '', reason: '', graceMs: null, killEventId: null } });
  assert.deepEqual(parseDirective(['STOP=1', 'GRACE_USEC=abc', 'REASON=a=b']).stop, { check: '', reason: 'a=b', graceMs: null, killEventId: null });
  assert.deepEqual(parseDirective(['STOP=0', 'junk']), {});
  assert.deepEqual(parseDirective(['WARNING=memory: tree RSS 1.1GiB over 1GiB']), { warning: 'memory: tree RSS 1.1GiB over 1GiB' });
});

test('text: one line of at most 1 KiB, cut on a character boundary', () => {
  assert.equal(text('a\nb\rc\0d'), 'a b c d');
  assert.equal(text(42), '42');
  const cut = text('é'.repeat(1000)); // 2000 bytes
  assert.equal(Buffer.byteLength(cut), 1024);
  assert.equal(cut, 'é'.repeat(512));
  const odd = text('a' + '😀'.repeat(400));
  assert.ok(Buffer.byteLength(odd) <= 1024);
  assert.ok(!odd.includes('\ufffd'));
});

test('usec: ms as whole µs, rounded up, at most 2^64-1', () => {
  assert.equal(usec(1), '1000');
  assert.equal(usec(0.0001), '1');
  assert.equal(usec(1.0000001), '1001');
  assert.equal(usec(1e30), '18446744073709551615');
});
