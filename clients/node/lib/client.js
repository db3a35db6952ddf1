// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// The client of hermeskilld's stream socket (HERMESKILL_STREAM_SOCKET): the
// agent's messages out, the supervisor's directives back, on one Unix
// SOCK_STREAM connection that the kernel authenticates at connect
// (SO_PEERCRED). Nothing here may crash or block the agent: socket errors
// are swallowed, a lost supervisor is reconnected in the background and
// what is written meanwhile is dropped and counted.

import { performance } from 'node:perf_hooks';

import { argsHash, pyFloat } from './canonical.js';
import { Connection } from './connection.js';
import { MAX_TEXT_BYTES, frame, parseDirective, text, usec } from './wire.js';

/** Client.warnings keeps the most recent warnings only. */
export const MAX_WARNINGS = 64;

// sun_path is 108 bytes; keep room for the terminating NUL as Go does.
const SUN_PATH_MAX = 107;
const DEFAULT_BEAT_MS = 1000;
const MIN_BEAT_MS = 1;
// Without WATCHDOG_USEC the heartbeat vouches for this many intervals after a call.
const WINDOW_BEATS = 3;
/** The address in HERMESKILL_STREAM_SOCKET (or given) cannot be used. */
export class ConfigError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * hermeskilld asked the agent to stop: the reason of Client.signal once it is
 * aborted. name is 'HermeskillStop'.
 */
export class StopError extends Error {
  constructor({ check = '', reason = '', graceMs = null, killEventId = null } = {}) {
    let message = 'hermeskilld stopped the agent';
    if (check) message += ` (${check}: ${reason})`;
    else if (reason) message += ': ' + reason;
    if (graceMs !== null) message += `; escalation in ${graceMs / 1000}s`;
    if (killEventId) message += '; kill event ' + killEventId;
    super(message);
    this.name = 'HermeskillStop';
    this.check = check;
    this.reason = reason;
    this.graceMs = graceMs;
    this.killEventId = killEventId;
  }
}

/**
 * The StopError in err: err itself, or its cause, or the cause's cause...
 * (Node's own APIs given the signal, timers/promises and streams, reject
 * with an AbortError whose cause is the signal's reason; fetch rejects with
 * the reason itself). A StopError of another copy of this package counts
 * (by its name). Null when there is none.
 */
export function stopErrorOf(err) {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof StopError || e.name === 'HermeskillStop') return e;
  }
  return null;
}

/** True when err is, or was caused by, hermeskilld's stop (see stopErrorOf). */
export function isStopError(err) {
  return stopErrorOf(err) !== null;
}

/** The 'stop' event: hermeskilld's STOP directive arrived. */
export class StopEvent extends Event {
  constructor(error) {
    super('stop');
    this.error = error;
  }
}

/** The 'warning' event: a WARNING directive, "check: message". */
export class WarningEvent extends Event {
  constructor(warning) {
    super('warning');
    const colon = warning.indexOf(': ');
    this.text = warning;
    this.check = colon < 0 ? '' : warning.slice(0, colon);
    this.message = colon < 0 ? warning : warning.slice(colon + 2);
  }
}

/** The 'connect' and 'disconnect' events; a disconnect carries the socket's error, if any. */
export class ConnectionEvent extends Event {
  constructor(type, error = null) {
    super(type);
    this.error = error;
  }
}

function checkAddress(address) {
  let raw;
  if (address.startsWith('/')) raw = Buffer.from(address, 'utf8');
  else if (address.startsWith('@') && address.length > 1) raw = Buffer.from('\0' + address.slice(1), 'utf8');
  else throw new ConfigError(`hermeskill: socket address ${JSON.stringify(address)} is neither an absolute path nor @abstract`);
  if (raw.length > SUN_PATH_MAX) {
    throw new ConfigError(`hermeskill: socket address ${JSON.stringify(address)} is ${raw.length} bytes, over the ${SUN_PATH_MAX} that sun_path holds`);
  }
  return address.startsWith('@') ? '\0' + address.slice(1) : address;
}

/** WATCHDOG_USEC in ms; null when unset, malformed or another process's (sd_watchdog_enabled(3)). */
function watchdogFromEnv(env) {
  const pid = env.WATCHDOG_PID;
  if (pid && pid !== String(process.pid)) return null;
  const v = env.WATCHDOG_USEC;
  if (!v || !/^[0-9]+$/.test(v)) return null;
  const ms = Number(v) / 1000;
  return ms > 0 ? ms : null;
}

function checkInterval(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw new RangeError(`hermeskill: an interval is a finite number of ms above 0, not ${String(ms)}`);
  }
}

function count(name, n) {
  if (typeof n === 'bigint') {
    if (n < 0n) throw new RangeError(`hermeskill: ${name} must be >= 0, not ${n}`);
    return n.toString();
  }
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) {
    throw new TypeError(`hermeskill: ${name} must be an integer, not ${String(n)}`);
  }
  if (n < 0) throw new RangeError(`hermeskill: ${name} must be >= 0, not ${n}`);
  return String(n);
}

// cost writes USD as Python's repr of a float does, as the Python client sends it.
function cost(x) {
  if (typeof x !== 'number' || !Number.isFinite(x) || x < 0) {
    throw new RangeError(`hermeskill: costUsd must be a finite number >= 0, not ${String(x)}`);
  }
  return pyFloat(x);
}

/**
 * The client of hermeskilld's stream socket. Created from the environment
 * with Client.fromEnv(); a no-op client when the agent is not supervised.
 */
export class Client extends EventTarget {
  #address; // '' for the no-op client
  #closed = false;
  #watchdogMs;
  #beatMs;
  #ack; // 'auto' | true | false

  #conn = null; // a Connection; null for the no-op client

  // What the heartbeat knows of the work loop (performance.now() ms): its
  // last call (creating the client counts) and the ends of the open waits.
  #active = performance.now();
  #waits = [];
  #heartbeat = null;

  #controller = new AbortController();
  #stopError = null;
  #watched = false; // the agent read signal or listens for 'stop'
  #warnings = [];

  /**
   * address: the stream socket ("/path" or "@abstract"); undefined reads
   * HERMESKILL_STREAM_SOCKET from options.env (default process.env); empty:
   * a no-op client. Throws ConfigError for an unusable address.
   */
  constructor(address = undefined, options = {}) {
    super();
    const env = options.env ?? process.env;
    if (address === undefined || address === null) address = env.HERMESKILL_STREAM_SOCKET ?? '';
    this.#address = address ? checkAddress(String(address)) : '';
    this.#watchdogMs = watchdogFromEnv(env);
    const beat = options.heartbeatIntervalMs ?? (this.#watchdogMs === null ? DEFAULT_BEAT_MS : Math.max(this.#watchdogMs / 3, MIN_BEAT_MS));
    checkInterval(beat);
    this.#beatMs = beat;
    const ack = options.acknowledge ?? 'auto';
    if (ack !== 'auto' && ack !== true && ack !== false) {
      throw new TypeError(`hermeskill: acknowledge is 'auto', true or false, not ${String(ack)}`);
    }
    this.#ack = ack;
    if (options.onWarning) this.onWarning(options.onWarning);
    if (this.#address) {
      this.#conn = new Connection(this.#address, {
        message: (lines, socket) => this.#onMessage(lines, socket),
        connect: () => this.dispatchEvent(new ConnectionEvent('connect')),
        disconnect: (error) => this.dispatchEvent(new ConnectionEvent('disconnect', error)),
      });
    }
  }

  /** The client for HERMESKILL_STREAM_SOCKET; a no-op one when it is unset or empty. */
  static fromEnv(options = {}) {
    return new Client(undefined, options);
  }

  // -- state ------------------------------------------------------------------

  /** True when an address was configured (false for the no-op client). */
  get supervised() {
    return this.#address !== '';
  }

  /** The stream socket's address, null for the no-op client. */
  get address() {
    if (!this.#address) return null;
    return this.#address.startsWith('\0') ? '@' + this.#address.slice(1) : this.#address;
  }

  /** True while a connection to hermeskilld is up. */
  get connected() {
    return this.#conn?.up ?? false;
  }

  /** Messages written to the connection. */
  get sent() {
    return this.#conn?.sent ?? 0;
  }

  /** Messages lost: disconnected, connection failed, or the socket's buffer full. */
  get dropped() {
    return this.#conn?.dropped ?? 0;
  }

  /** The heartbeat timeout from WATCHDOG_USEC, in ms; null when unset. */
  get watchdogMs() {
    return this.#watchdogMs;
  }

  /** The interval of startHeartbeat() when it is given none, in ms. */
  get heartbeatIntervalMs() {
    return this.#beatMs;
  }

  /**
   * Aborted when hermeskilld says STOP, with a StopError as its reason.
   * Reading it tells the client that the agent watches it: the client then
   * acknowledges a STOP (see the README), and hermeskilld withholds its
   * cooperative signal (SIGINT), which would end a Node process at once.
   */
  get signal() {
    this.#watched = true;
    return this.#controller.signal;
  }

  /** True once a STOP directive arrived. */
  get stopRequested() {
    return this.#stopError !== null;
  }

  /** The StopError of the STOP directive; null before one arrived. */
  get stopError() {
    return this.#stopError;
  }

  /** The last MAX_WARNINGS warnings ("check: text"), oldest first. */
  get warnings() {
    return [...this.#warnings];
  }

  addEventListener(type, listener, options) {
    if (type === 'stop' && listener) this.#watched = true;
    super.addEventListener(type, listener, options);
  }

  /** Calls fn(text) on each warning; returns the function that unsubscribes. Errors of fn are printed. */
  onWarning(fn) {
    const listener = (e) => {
      try {
        fn(e.text);
      } catch (err) {
        console.error('hermeskill: onWarning callback threw:', err);
      }
    };
    super.addEventListener('warning', listener);
    return () => super.removeEventListener('warning', listener);
  }

  /**
   * Calls fn(stopError) once STOP arrives (at once if it has); returns the
   * function that unsubscribes. Counts as watching, as reading signal does.
   * Errors of fn are printed.
   */
  onStop(fn) {
    this.#watched = true;
    const call = () => {
      try {
        fn(this.#stopError);
      } catch (err) {
        console.error('hermeskill: onStop callback threw:', err);
      }
    };
    if (this.#stopError) {
      queueMicrotask(call);
      return () => {};
    }
    super.addEventListener('stop', call, { once: true });
    return () => super.removeEventListener('stop', call);
  }

  // -- messages (agent -> hermeskilld) -------------------------------------------
  // Each returns true when its message was written (or queued for the
  // connection being made), false when it was dropped or the client is a
  // no-op or closed. Each counts as activity of the work loop.

  /** READY=1: startup is done; the heartbeat deadline starts. */
  ready() {
    return this.#send(['READY=1']);
  }

  /** WATCHDOG=1: one heartbeat from the work loop (unlike startHeartbeat's). */
  beat() {
    return this.#send(['WATCHDOG=1']);
  }

  /** PROGRESS=n: the monotonic step counter. Throws for a negative or non-integer n. */
  progress(n) {
    return this.#send(['PROGRESS=' + count('progress', n)]);
  }

  /** TOKENS / COST_USD: cumulative totals so far, in one message; nothing when neither is given. */
  usage({ tokens, costUsd } = {}) {
    const lines = [];
    if (tokens !== undefined && tokens !== null) lines.push('TOKENS=' + count('tokens', tokens));
    if (costUsd !== undefined && costUsd !== null) lines.push('COST_USD=' + cost(costUsd));
    if (lines.length === 0) {
      this.#touch();
      return false;
    }
    return this.#send(lines);
  }

  /** TOOL=name + TOOL_ARGS_SHA256: one tool call begins. Only the hash of args leaves the agent. */
  toolCall(name, args) {
    this.#touch();
    if (!this.#address) return false; // do not even hash them
    return this.#send(['TOOL=' + text(name), 'TOOL_ARGS_SHA256=' + argsHash(args)]);
  }

  /** ERROR=text: one error happened (an Error gives "Name: message"). */
  error(err) {
    if (err instanceof Error) err = err.message ? `${err.name}: ${err.message}` : err.name;
    return this.#send(['ERROR=' + text(err)]);
  }

  /** STATUS=text: shown by `hermeskilld ps`, kept in the certificate. */
  status(value) {
    return this.#send(['STATUS=' + text(value)]);
  }

  /** STOPPING=1: the agent is shutting down by itself. */
  stopping() {
    return this.#send(['STOPPING=1']);
  }

  /** WATCHDOG=trigger: ask hermeskilld to kill this agent now (check self_reported). */
  trigger(reason = '') {
    const lines = ['WATCHDOG=trigger'];
    if (reason) lines.push('STATUS=' + text(reason));
    return this.#send(lines);
  }

  /**
   * Throws the StopError once STOP arrived; else returns. Counts as activity:
   * call it once per step of a synchronous loop.
   */
  checkpoint() {
    this.#touch();
    if (this.#stopError) throw this.#stopError;
  }

  /**
   * EXTEND_TIMEOUT_USEC: the work loop is about to wait up to ms in a call
   * that cannot report meanwhile. Returns the function that ends the wait
   * (also a Disposable where Symbol.dispose exists). Throws RangeError
   * unless ms is a finite number above 0.
   */
  extendTimeout(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
      throw new RangeError(`hermeskill: extendTimeout takes a finite number of ms above 0, not ${String(ms)}`);
    }
    let ended = !this.#address;
    const end = () => {
      if (ended) return;
      ended = true;
      const i = this.#waits.indexOf(until);
      if (i >= 0) this.#waits.splice(i, 1);
      this.#touch();
    };
    if (Symbol.dispose) end[Symbol.dispose] = end;
    if (ended) return end;
    const until = performance.now() + ms;
    this.#waits.push(until);
    this.#send(['EXTEND_TIMEOUT_USEC=' + usec(ms)]);
    return end;
  }

  // -- heartbeat --------------------------------------------------------------

  /**
   * Beats every intervalMs (default heartbeatIntervalMs) until close(), on a
   * timer that does not keep the process alive. Beats once at once. It
   * vouches only for a work loop that passes through the client: WATCHDOG=1
   * when a method was called within the heartbeat timeout (WATCHDOG_USEC, or
   * three intervals), else EXTEND_TIMEOUT_USEC while a wait declared with
   * extendTimeout lasts, else nothing. A second call while it runs does
   * nothing.
   */
  startHeartbeat(intervalMs = undefined) {
    if (intervalMs !== undefined) checkInterval(intervalMs);
    if (!this.#address || this.#closed || this.#heartbeat) return;
    const every = intervalMs ?? this.#beatMs;
    const window = this.#watchdogMs ?? WINDOW_BEATS * every;
    this.#vouch(window);
    this.#heartbeat = setInterval(() => this.#vouch(window), every);
    this.#heartbeat.unref();
  }

  /** Stops startHeartbeat()'s beats. */
  stopHeartbeat() {
    clearInterval(this.#heartbeat);
    this.#heartbeat = null;
  }

  #vouch(window) {
    const now = performance.now();
    if (now - this.#active < window) {
      this.#send(['WATCHDOG=1'], false);
      return;
    }
    const until = Math.max(0, ...this.#waits);
    if (now < until) this.#send(['EXTEND_TIMEOUT_USEC=' + usec(Math.min(window, until - now))], false);
  }

  #touch() {
    this.#active = performance.now();
  }

  // -- lifecycle --------------------------------------------------------------

  /**
   * Stops the heartbeat and closes the connection after what was written.
   * Sends nothing. Idempotent.
   */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    this.stopHeartbeat();
    this.#conn?.close();
  }

  [Symbol.dispose ?? Symbol.for('nodejs.dispose')]() {
    this.close();
  }

  // -- the connection -----------------------------------------------------------

  #send(lines, activity = true) {
    if (activity) this.#touch();
    if (!this.#conn || this.#closed) return false;
    return this.#conn.send(frame(lines));
  }

  #onMessage(lines, socket) {
    const d = parseDirective(lines);
    if (d.stop && !this.#stopError) this.#onStop(socket, d.stop);
    if (d.warning !== undefined) this.#onWarning(d.warning);
  }

  #onStop(sock, stop) {
    const err = new StopError(stop);
    this.#stopError = err;
    const ack = this.#ack === true || (this.#ack === 'auto' && this.#watched);
    // abort() runs the signal's listeners now: the agent's stop path is armed
    // when it returns, and only then is the STOP acknowledged.
    this.#controller.abort(err);
    this.dispatchEvent(new StopEvent(err));
    // On the connection the STOP came on: hermeskilld counts it only there.
    if (ack) this.#conn.answer(sock, frame(['STOPPING=1']));
  }

  #onWarning(warning) {
    this.#warnings.push(warning);
    if (this.#warnings.length > MAX_WARNINGS) this.#warnings.shift();
    this.dispatchEvent(new WarningEvent(warning));
  }
}

export { MAX_TEXT_BYTES };
