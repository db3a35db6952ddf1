// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// The stream socket's framing: a message is KEY=VALUE lines, each ended by
// "\n", and the message by an empty line. hermeskilld reads "\r\n" as "\n",
// ignores empty lines with no message before them and closes a connection
// that sends a message over MAX_MESSAGE bytes.

import { StringDecoder } from 'node:string_decoder';

/** hermeskilld drops a message over this many bytes (and the stream connection with it). */
export const MAX_MESSAGE = 8 << 10;
/** Text values (STATUS, ERROR, TOOL, ...) are cut to this many UTF-8 bytes. */
export const MAX_TEXT_BYTES = 1024;

/** lines as one message on the stream. */
export function frame(lines) {
  return lines.join('\n') + '\n\n';
}

/**
 * text as one value of at most MAX_TEXT_BYTES UTF-8 bytes, cut on a character
 * boundary: newlines would start a new line of the message, a NUL is refused.
 */
export function text(value) {
  const s = String(value).replace(/[\r\n\0]/g, ' ');
  const raw = Buffer.from(s, 'utf8');
  if (raw.length <= MAX_TEXT_BYTES) return raw.toString('utf8');
  let end = MAX_TEXT_BYTES;
  while (end > 0 && (raw[end] & 0xc0) === 0x80) end--; // not inside a character
  return raw.subarray(0, end).toString('utf8');
}

/**
 * Splits the bytes of a connection into messages, whatever the chunks: a
 * message may come in pieces, several in one chunk, a character cut between
 * two. A message over MAX_MESSAGE bytes is skipped up to its end.
 */
export class MessageReader {
  #decoder = new StringDecoder('utf8');
  #line = ''; // the unfinished line
  #lines = []; // the finished lines of the unfinished message
  #bytes = 0; // of the unfinished message, approximately (UTF-16 units)
  #oversize = false;

  /** Returns the messages that chunk completes, each as its lines. */
  push(chunk) {
    const out = [];
    const parts = (this.#line + this.#decoder.write(chunk)).split('\n');
    this.#line = parts.pop();
    for (let line of parts) {
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (this.#lines.length > 0 && !this.#oversize) out.push(this.#lines);
        this.#lines = [];
        this.#bytes = 0;
        this.#oversize = false;
        continue;
      }
      this.#add(line.length + 1);
      if (!this.#oversize) this.#lines.push(line);
    }
    if (this.#line.length > MAX_MESSAGE) {
      this.#add(this.#line.length);
      this.#line = '';
    }
    return out;
  }

  #add(n) {
    this.#bytes += n;
    if (this.#bytes > MAX_MESSAGE + 1) {
      this.#oversize = true;
      this.#lines = [];
    }
  }

  /** Forgets an unfinished message (the connection ended). */
  reset() {
    this.#decoder = new StringDecoder('utf8');
    this.#line = '';
    this.#lines = [];
    this.#bytes = 0;
    this.#oversize = false;
  }
}

/**
 * The fields of one message: the first of duplicate keys wins, lines without
 * '=' are ignored, as on hermeskilld's side.
 */
export function fields(lines) {
  const out = new Map();
  for (const line of lines) {
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const key = line.slice(0, eq);
    if (!out.has(key)) out.set(key, line.slice(eq + 1));
  }
  return out;
}

/**
 * The directive in one message: { stop } when STOP=1 is present (check,
 * reason, graceMs or null, killEventId or null), { warning } for a WARNING.
 */
export function parseDirective(lines) {
  const f = fields(lines);
  const d = {};
  if (f.get('STOP') === '1') {
    d.stop = {
      check: f.get('CHECK') ?? '',
      reason: f.get('REASON') ?? '',
      graceMs: graceMs(f.get('GRACE_USEC')),
      killEventId: f.get('KILL_EVENT_ID') || null,
    };
  }
  if (f.has('WARNING')) d.warning = f.get('WARNING');
  return d;
}

function graceMs(usec) {
  if (usec === undefined || !/^[0-9]+$/.test(usec)) return null;
  return Number(usec) / 1000;
}

/** µs for ms, rounded up (a wait is never of 0 µs), at most 2^64-1, as text. */
export function usec(ms) {
  const us = BigInt(Math.max(1, Math.ceil(ms * 1000)));
  const max = (1n << 64n) - 1n;
  return String(us > max ? max : us);
}
