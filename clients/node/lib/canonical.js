// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// The canonical JSON of tool arguments and its sha256, the value of
// TOOL_ARGS_SHA256. The form is what Python writes with
// json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
// encoded as UTF-8; the Go client (pkg/client ArgsHash), the Python client
// and hermeskilld's LLM gateway hash the same bytes:
//
//   - object keys sorted by code point, no whitespace;
//   - strings as they are in UTF-8: only '"', '\' and the control characters
//     below U+0020 are escaped (\n \r \t \b \f, else \u00xx in lower case);
//     lone surrogates become U+FFFD, as a JSON decoder reads them;
//   - an integer as its exact digits; any other number as the float64 it
//     reads as, in the shortest digits that read back the same, as Python's
//     repr writes them (1.0, 0.0001, 1e-05, 1e+16).

import { createHash } from 'node:crypto';

const RAW = Symbol('hermeskill.rawJSON');
// Deeper documents are not JSON to Go's decoder either (its limit is 10000).
const MAX_DEPTH = 10000;

/**
 * JSON text to be hashed by value (as Go's json.RawMessage is): the
 * arguments of a tool call as the model wrote them.
 */
export class RawJSON {
  constructor(text) {
    this[RAW] = String(text);
    Object.freeze(this);
  }

  get text() {
    return this[RAW];
  }
}

/** Wraps JSON text so that argsHash and Client.toolCall hash it by value. */
export function rawJSON(text) {
  return new RawJSON(text);
}

/**
 * The hex sha256 of args as canonical JSON. Never throws.
 *
 * A JavaScript value is first seen as JSON.stringify sees it (toJSON, boxed
 * primitives, undefined and functions left out of objects and null in
 * arrays), with three additions: a BigInt is an integer of exact digits, a
 * Map with string keys is an object and a Set an array. A whole number is an
 * integer (JavaScript cannot tell 1 from 1.0; Go's float64 cannot either),
 * NaN and ±Infinity are written NaN and ±Infinity as Python does. A string is
 * hashed as a JSON string, never parsed: wrap JSON text in rawJSON() to hash
 * it by value. A top-level rawJSON that is empty hashes as {}, one that is not
 * JSON as its UTF-8 bytes, as hermeskilld's gateway hashes what a model wrote.
 * A circular value hashes as the JSON string of String(args).
 */
export function argsHash(args) {
  if (args instanceof RawJSON) {
    const text = args.text;
    if (text.trim() === '') return sha256Hex('{}');
    try {
      return sha256Hex(canonicalizeJSON(text));
    } catch {
      return sha256Hex(text);
    }
  }
  let canonical;
  try {
    canonical = canonicalJSON(args);
  } catch {
    let text;
    try {
      text = String(args);
    } catch {
      text = Object.prototype.toString.call(args);
    }
    canonical = quote(text);
  }
  return sha256Hex(canonical);
}

function sha256Hex(text) {
  // Buffer.from turns lone surrogates into U+FFFD, as the other clients do.
  return createHash('sha256').update(Buffer.from(text, 'utf8')).digest('hex');
}

/**
 * The canonical JSON of a JavaScript value (see argsHash). Throws a
 * TypeError for a circular value and a SyntaxError for a rawJSON that is not
 * JSON.
 */
export function canonicalJSON(value) {
  const out = write(value, '', new Set(), true);
  return out === undefined ? 'null' : out;
}

// write returns the canonical JSON of value, or undefined where
// JSON.stringify leaves the value out (undefined, a function, a symbol).
function write(value, key, seen, top) {
  if (value !== null && (typeof value === 'object' || typeof value === 'bigint') && typeof value.toJSON === 'function') {
    value = value.toJSON(key);
  }
  if (value instanceof Number) value = Number(value);
  else if (value instanceof String) value = String(value);
  else if (value instanceof Boolean) value = value.valueOf();
  switch (typeof value) {
    case 'string':
      return quote(value);
    case 'number':
      return number(value);
    case 'bigint':
      return value.toString();
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
    case 'function':
    case 'symbol':
      return top ? 'null' : undefined;
  }
  if (value === null) return 'null';
  if (value instanceof RawJSON) return canonicalizeJSON(value.text);
  if (seen.has(value)) throw new TypeError('hermeskill: tool arguments are circular');
  seen.add(value);
  try {
    if (Array.isArray(value) || value instanceof Set) {
      const parts = [];
      for (const e of value) parts.push(write(e, String(parts.length), seen, false) ?? 'null');
      return '[' + parts.join(',') + ']';
    }
    const entries = [];
    if (value instanceof Map) {
      for (const [k, v] of value) entries.push([String(k), v]);
    } else {
      for (const k of Object.keys(value)) entries.push([k, value[k]]);
    }
    return object(entries.map(([k, v]) => [k, write(v, k, seen, false)]));
  } finally {
    seen.delete(value);
  }
}

// object writes [key, canonical value] pairs, sorted by key, leaving out the
// undefined values; of duplicate keys the last wins, as in JSON decoders.
function object(pairs) {
  const byKey = new Map();
  for (const [k, v] of pairs) {
    if (v === undefined) byKey.delete(k);
    else byKey.set(k, v);
  }
  const keys = [...byKey.keys()].sort(compareCodePoints);
  return '{' + keys.map((k) => quote(k) + ':' + byKey.get(k)).join(',') + '}';
}

// compareCodePoints orders strings by code point, as Python orders str and
// Go orders UTF-8 bytes. JavaScript's default sort compares UTF-16 code
// units, which puts U+10000 and above (surrogate pairs) before U+E000-U+FFFF.
export function compareCodePoints(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codeUnitRank(x) - codeUnitRank(y);
  }
  return a.length - b.length;
}

function codeUnitRank(u) {
  if (u >= 0xe000) return u - 0x800;
  if (u >= 0xd800) return u + 0x2000;
  return u;
}

const ESCAPES = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

// eslint-disable-next-line no-control-regex
const NEEDS_ESCAPE = /["\\\u0000-\u001f]/g;

function quote(s) {
  return '"' + s.replace(NEEDS_ESCAPE, (c) => ESCAPES[c] ?? '\\u00' + c.charCodeAt(0).toString(16).padStart(2, '0')) + '"';
}

// number writes a JavaScript number as the other clients write the value:
// JSON.stringify's digits (those of Go's encoding/json) when they are an
// integer, else the float in Python's repr.
function number(x) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity';
  const text = JSON.stringify(x);
  return /[.eE]/.test(text) ? pyFloat(x) : text;
}

/** x as Python's repr writes a float (json.dumps writes floats with it). */
export function pyFloat(x) {
  if (Number.isNaN(x)) return 'NaN';
  if (!Number.isFinite(x)) return x > 0 ? 'Infinity' : '-Infinity';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const sign = x < 0 ? '-' : '';
  // toExponential() without digits gives the shortest that read back as x.
  const [mantissa, expText] = Math.abs(x).toExponential().split('e');
  const digits = mantissa.replace('.', '');
  const exp = Number(expText);
  // point: where the decimal point falls in digits. repr is positional for
  // -4 < point <= 16.
  const point = exp + 1;
  let body;
  if (point <= -4 || point > 16) {
    const frac = digits.length > 1 ? '.' + digits.slice(1) : '';
    body = digits[0] + frac + 'e' + (exp < 0 ? '-' : '+') + String(Math.abs(exp)).padStart(2, '0');
  } else if (point <= 0) {
    body = '0.' + '0'.repeat(-point) + digits;
  } else if (point >= digits.length) {
    body = digits + '0'.repeat(point - digits.length) + '.0';
  } else {
    body = digits.slice(0, point) + '.' + digits.slice(point);
  }
  return sign + body;
}

// canonicalizeJSON parses JSON text and writes it in canonical form, each
// number from its own digits (so 1.0 stays a float, big integers exact).
// Throws a SyntaxError for text that is not one JSON value.
export function canonicalizeJSON(text) {
  const p = { s: text, i: 0 };
  const out = parseValue(p, 0);
  skipSpace(p);
  if (p.i !== text.length) syntax(p);
  return out;
}

function syntax(p) {
  throw new SyntaxError(`hermeskill: not JSON at offset ${p.i}`);
}

function skipSpace(p) {
  const s = p.s;
  while (p.i < s.length) {
    const c = s.charCodeAt(p.i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    p.i++;
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
// A JSON string token: no raw control characters, valid escapes.
// eslint-disable-next-line no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;

function parseValue(p, depth) {
  if (depth > MAX_DEPTH) syntax(p);
  skipSpace(p);
  const s = p.s;
  const c = s[p.i];
  if (c === '{') {
    p.i++;
    const pairs = [];
    skipSpace(p);
    if (s[p.i] === '}') {
      p.i++;
      return '{}';
    }
    for (;;) {
      skipSpace(p);
      const key = parseString(p);
      skipSpace(p);
      if (s[p.i] !== ':') syntax(p);
      p.i++;
      pairs.push([key, parseValue(p, depth + 1)]);
      skipSpace(p);
      if (s[p.i] === ',') {
        p.i++;
        continue;
      }
      if (s[p.i] === '}') {
        p.i++;
        return object(pairs);
      }
      syntax(p);
    }
  }
  if (c === '[') {
    p.i++;
    const parts = [];
    skipSpace(p);
    if (s[p.i] === ']') {
      p.i++;
      return '[]';
    }
    for (;;) {
      parts.push(parseValue(p, depth + 1));
      skipSpace(p);
      if (s[p.i] === ',') {
        p.i++;
        continue;
      }
      if (s[p.i] === ']') {
        p.i++;
        return '[' + parts.join(',') + ']';
      }
      syntax(p);
    }
  }
  if (c === '"') return quote(parseString(p));
  for (const word of ['true', 'false', 'null']) {
    if (s.startsWith(word, p.i)) {
      p.i += word.length;
      return word;
    }
  }
  NUMBER.lastIndex = p.i;
  const m = NUMBER.exec(s);
  if (m === null) syntax(p);
  p.i = NUMBER.lastIndex;
  if (m[1] === undefined && m[2] === undefined) return m[0] === '-0' ? '0' : m[0];
  return pyFloat(Number(m[0])); // out of range: ±Infinity, as Python reads it
}

function parseString(p) {
  STRING.lastIndex = p.i;
  const m = STRING.exec(p.s);
  if (m === null) syntax(p);
  p.i = STRING.lastIndex;
  return JSON.parse(m[0]);
}
