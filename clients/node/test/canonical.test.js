// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { test } from 'node:test';

import { argsHash, canonicalJSON, rawJSON } from '../index.js';
import { compareCodePoints, pyFloat } from '../lib/canonical.js';

const sha256 = (s) => createHash('sha256').update(Buffer.from(s, 'utf8')).digest('hex');
// The vectors the Go and Python clients' tests read too.
const { vectors } = JSON.parse(fs.readFileSync(new URL('../../testdata/canonical-args.json', import.meta.url), 'utf8'));

test('the shared vectors: every JSON text hashes as in the Go and Python clients', () => {
  assert.ok(vectors.length > 10);
  for (const v of vectors) {
    assert.equal(sha256(v.canonical), v.sha256, v.name);
    for (const text of v.json) {
      assert.equal(argsHash(rawJSON(text)), v.sha256, `${v.name}: ${text}`);
    }
  }
});

test('JavaScript values hash as the same arguments do in Go and Python', () => {
  // The values of clients/python/test_hermeskill.py's SHARED_HASHES and
  // pkg/client/argshash_test.go's table.
  const cases = [
    [{ q: 'a<b', n: 1 }, '6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb'],
    [{ city: 'Zürich', q: '東京 café 😀', sep: '\u2028' }, 'c97cb19630ee6d7f6e09e87a9697336b6db877794915e562547770f4e43130ff'],
    ['SELECT * FROM users', 'a0e1e8e603cc0f07843bfd4ce0f218626ce3ad45b764f44db419b1c390e1eece'],
    ['naïve résumé — 東京', '81af71ed60efb1ec771e47673552799c29fcfa0c899c66051bd71fe9f7e93476'],
    ['{"q":1}', 'cf83cef24c44460dd65f58ac435b11ca1d752ccd2aa2e4da82698923408f01c6'],
    ['tab\tnl\nnul\x00del\x7f', 'e657e99fddbd08831d6ff78450dbec66961df7179abf69b9f56e982f16854d3e'],
    [{ half: 0.5, small: 1e-7, big: 1e21, n: -3 }, '7b7253cc734685bcf9f0e7c88df27d717ba158e03744289eb1c7b445669a11fa'],
    ['\ud800', '568601070314e0f4489c9944b3c151d5251d379330008293bb7e1a826a22a845'],
    ['\ufffd', '568601070314e0f4489c9944b3c151d5251d379330008293bb7e1a826a22a845'],
  ];
  for (const [args, want] of cases) assert.equal(argsHash(args), want, JSON.stringify(args));
  for (const v of vectors) {
    // Where JSON.parse keeps what the text says (no 1.0, no integers past 2^53, no duplicates).
    if (/floats|zeros|positional|out of range|integers|duplicate/.test(v.name)) continue;
    assert.equal(argsHash(JSON.parse(v.json[0])), v.sha256, v.name);
  }
});

test('canonical form of JavaScript values', () => {
  assert.equal(canonicalJSON({ b: [1, { y: 2, x: 'é' }], a: null }), '{"a":null,"b":[1,{"x":"é","y":2}]}');
  assert.equal(canonicalJSON(undefined), 'null', 'no arguments: null, as None and nil are');
  assert.equal(canonicalJSON([undefined, () => 1, Symbol('s')]), '[null,null,null]');
  assert.equal(canonicalJSON({ u: undefined, f() {}, k: 1 }), '{"k":1}');
  assert.equal(canonicalJSON({ d: new Date(0), s: new String('x'), n: new Number(2), t: new Boolean(true) }),
    '{"d":"1970-01-01T00:00:00.000Z","n":2,"s":"x","t":true}');
  assert.equal(canonicalJSON({ big: 12345678901234567890123n }), '{"big":12345678901234567890123}');
  assert.equal(canonicalJSON(new Map([['z', 1], ['a', new Set([2, 3])]])), '{"a":[2,3],"z":1}');
  assert.equal(canonicalJSON([1, 1.5, -0, 1e16, 1e21, 1e-7, 123.456]), '[1,1.5,0,10000000000000000,1e+21,1e-07,123.456]');
  assert.equal(canonicalJSON([NaN, Infinity, -Infinity]), '[NaN,Infinity,-Infinity]', "Python's json.dumps");
  assert.equal(canonicalJSON({ nested: rawJSON('{"b":1.0,"a":2}') }), '{"nested":{"a":2,"b":1.0}}');
  assert.equal(canonicalJSON('<>&\u2028'), '"<>&\u2028"', 'no HTML or JavaScript escaping');
});

test('keys are ordered by code point, not by UTF-16 unit', () => {
  assert.equal(canonicalJSON({ '\uffff': 1, '😀': 2, a: 3 }), '{"a":3,"\uffff":1,"😀":2}');
  assert.ok(compareCodePoints('\uffff', '😀') < 0);
  assert.ok(compareCodePoints('a', 'ab') < 0);
  assert.equal(compareCodePoints('x', 'x'), 0);
});

test('floats as Python repr writes them', () => {
  const cases = [
    [1, '1.0'], [0.1, '0.1'], [1.5, '1.5'], [100, '100.0'], [0.0001, '0.0001'], [0.00001, '1e-05'],
    [1e16, '1e+16'], [1e15, '1000000000000000.0'], [123456789012345678, '1.2345678901234568e+17'],
    [-2.5e-10, '-2.5e-10'], [-0, '-0.0'], [0, '0.0'], [5e-324, '5e-324'], [1.7976931348623157e308, '1.7976931348623157e+308'],
    [Infinity, 'Infinity'], [-Infinity, '-Infinity'],
  ];
  for (const [x, want] of cases) assert.equal(pyFloat(x), want, String(x));
});

test('awkward arguments never throw', () => {
  const circular = [];
  circular.push(circular);
  const throwing = { toJSON() { throw new Error('no'); } };
  for (const args of [circular, throwing, Symbol('s'), () => 1, Object.create(null), new Uint8Array([1, 2])]) {
    assert.match(argsHash(args), /^[0-9a-f]{64}$/);
  }
  assert.equal(argsHash(rawJSON('')), sha256('{}'), 'empty arguments are {}, as in the gateway');
  assert.equal(argsHash(rawJSON('  \n')), sha256('{}'));
  assert.equal(argsHash(rawJSON('{"q": ')), sha256('{"q": '), 'not JSON: its bytes, as in the gateway');
  assert.equal(argsHash(rawJSON('[1] [2]')), sha256('[1] [2]'));
  assert.equal(argsHash(rawJSON('[01]')), sha256('[01]'));
  assert.equal(argsHash(rawJSON('"\x01"')), sha256('"\x01"'), 'raw control characters are not JSON');
});
