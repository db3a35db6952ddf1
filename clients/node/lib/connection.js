// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// One client's connection to hermeskilld's stream socket, kept up in the
// background: made at once, retried when it fails or drops, never thrown
// from, never keeping the process alive. What is written while it is down is
// dropped and counted; while it is being made, queued.

import net from 'node:net';
import { performance } from 'node:perf_hooks';

import { MessageReader } from './wire.js';

// This many attempts in a row, the delay doubling from the first; then one
// attempt, started by a message, at most every LAZY_RECONNECT_MS. A
// connection counts as having worked (and the count starts again) once it
// lived CONNECTION_WORKED_MS: one closed at once (refused by hermeskilld's
// peer check) must not be retried in a hot loop.
export const RECONNECT_ATTEMPTS = 5;
export const RECONNECT_FIRST_MS = 50;
const LAZY_RECONNECT_MS = 1000;
const CONNECTION_WORKED_MS = 1000;
// Messages kept while a connection is being made, and bytes the socket may
// hold unsent (hermeskilld reads promptly; one that does not loses ours).
export const MAX_PENDING = 64;
const MAX_BUFFERED = 64 << 10;

export class Connection {
  #address;
  #on; // { message(lines, socket), connect(), disconnect(error) }
  #closed = false;
  // 'connecting' | 'up' | 'waiting' (a retry is due) | 'down'.
  #state = 'down';
  #socket = null;
  #connectedAt = 0;
  #attempts = 0;
  #lastAttempt = -Infinity;
  #retry = null;
  #pending = [];
  #reader = new MessageReader();
  sent = 0;
  dropped = 0;

  /** Connects to address at once. on: the callbacks, called from the event loop. */
  constructor(address, on) {
    this.#address = address;
    this.#on = on;
    this.#connect();
  }

  get up() {
    return this.#state === 'up';
  }

  /**
   * Writes one framed message: true when written or queued for the
   * connection being made, false when dropped (down, buffer full, closed).
   */
  send(msg) {
    if (this.#closed) return false;
    switch (this.#state) {
      case 'up':
        return this.#write(this.#socket, msg);
      case 'down':
        if (performance.now() - this.#lastAttempt < LAZY_RECONNECT_MS) break;
        this.#connect();
      // fallthrough: queued for the connection being made
      case 'connecting':
        if (this.#pending.length >= MAX_PENDING) break;
        this.#pending.push(msg);
        return true;
    }
    this.dropped++;
    return false;
  }

  /** Writes msg on socket only if it is still the live connection (an answer to what came on it). */
  answer(socket, msg) {
    return !this.#closed && this.#state === 'up' && this.#socket === socket && this.#write(socket, msg);
  }

  /** Ends the connection once what was written is sent; no more attempts. Idempotent. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#retry);
    this.dropped += this.#pending.length;
    this.#pending = [];
    this.#socket?.end();
  }

  #write(sock, msg) {
    if (sock.writableLength > MAX_BUFFERED) {
      this.dropped++;
      return false;
    }
    try {
      sock.write(msg);
    } catch {
      this.dropped++;
      return false;
    }
    this.sent++;
    return true;
  }

  #connect() {
    this.#state = 'connecting';
    this.#lastAttempt = performance.now();
    let sock;
    try {
      sock = net.createConnection({ path: this.#address });
    } catch {
      this.#lost(null, null);
      return;
    }
    this.#socket = sock;
    sock.unref(); // the client never keeps the agent's process alive
    let error = null;
    sock.on('connect', () => {
      if (this.#socket !== sock) return;
      this.#state = 'up';
      this.#connectedAt = performance.now();
      const pending = this.#pending;
      this.#pending = [];
      for (const msg of pending) this.#write(sock, msg);
      this.#on.connect();
    });
    sock.on('data', (chunk) => {
      if (this.#socket !== sock || this.#closed) return;
      for (const lines of this.#reader.push(chunk)) this.#on.message(lines, sock);
    });
    sock.on('error', (err) => {
      error = err; // swallowed: a lost supervisor never throws into the agent
    });
    sock.on('close', () => {
      if (this.#socket === sock) this.#lost(sock, error);
    });
  }

  #lost(sock, error) {
    const wasUp = this.#state === 'up';
    this.#socket = null;
    this.#reader.reset();
    this.dropped += this.#pending.length;
    this.#pending = [];
    if (wasUp && performance.now() - this.#connectedAt >= CONNECTION_WORKED_MS) this.#attempts = 0;
    this.#state = 'down';
    if (sock) this.#on.disconnect(error);
    if (this.#closed || this.#attempts >= RECONNECT_ATTEMPTS) return;
    const delay = RECONNECT_FIRST_MS * 2 ** this.#attempts;
    this.#attempts++;
    this.#state = 'waiting';
    this.#retry = setTimeout(() => {
      this.#retry = null;
      if (!this.#closed) this.#connect();
    }, delay);
    this.#retry.unref();
  }
}
