// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// A fake supervisor for the client's tests: a real Unix stream socket in a
// short temporary directory, with its own reading of the framing (not the
// client's), so that a mistake in one is not hidden by the same in the other.

import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A directory short enough for sun_path; removed by the returned cleanup. */
export function shortTempDir() {
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/tmp') ? '/tmp' : os.tmpdir(), 'hk-node-'));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** Resolves once predicate() is true, polling; rejects after timeoutMs. */
export async function waitFor(predicate, what = 'condition', timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = predicate();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export class FakeSupervisor {
  constructor() {
    const { dir, cleanup } = shortTempDir();
    this.path = path.join(dir, 'stream.sock');
    this.cleanup = cleanup;
    this.conns = [];
    this.messages = []; // each: { conn, text } with text the lines joined by \n
    this.server = net.createServer((conn) => this.#accept(conn));
  }

  listen() {
    return new Promise((resolve) => this.server.listen(this.path, resolve));
  }

  #accept(conn) {
    this.conns.push(conn);
    let buf = '';
    conn.setEncoding('utf8');
    conn.on('data', (chunk) => {
      buf += chunk;
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        this.messages.push({ conn, text: buf.slice(0, end) });
        buf = buf.slice(end + 2);
      }
    });
    conn.on('error', () => {});
  }

  /** The texts of the messages received so far. */
  texts() {
    return this.messages.map((m) => m.text);
  }

  /** Waits for a message whose text satisfies pred (a string: equal), after the first `from`. */
  async message(pred, from = 0) {
    const match = typeof pred === 'string' ? (t) => t === pred : pred;
    return waitFor(() => this.messages.slice(from).find((m) => match(m.text)), `a message ${pred}`);
  }

  /** Writes raw bytes to the newest connection (waiting for one). */
  async send(data) {
    const conn = await waitFor(() => this.conns.at(-1), 'a connection');
    conn.write(data);
    return conn;
  }

  /** Hangs up every connection. */
  dropAll() {
    for (const c of this.conns) c.destroy();
    this.conns = [];
  }

  async close() {
    this.dropAll();
    await new Promise((resolve) => this.server.close(resolve));
    this.cleanup();
  }
}
