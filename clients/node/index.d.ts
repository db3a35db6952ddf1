// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

/**
 * hermeskill: the Node client of hermeskilld, the out-of-process kill switch
 * for AI agents. It speaks hermeskilld's stream socket
 * (`HERMESKILL_STREAM_SOCKET`): heartbeats, progress, spend and tool calls
 * out; the STOP directive back, as an AbortSignal.
 *
 * ```ts
 * import { Client, isStopError } from 'hermeskill';
 *
 * const hk = Client.fromEnv();          // a no-op client when not supervised
 * hk.ready();
 * hk.startHeartbeat();                  // vouches only while the loop calls hk
 * for (let step = 1; ; step++) {
 *   const res = await fetch(url, { signal: hk.signal });   // aborted on STOP
 *   hk.toolCall('web_search', { q });   // only a hash of the arguments leaves
 *   hk.usage({ tokens, costUsd });      // cumulative totals
 *   hk.progress(step);
 * }
 * ```
 *
 * @packageDocumentation
 */

/** Options of {@link Client}. */
export interface ClientOptions {
  /** The environment to read (HERMESKILL_STREAM_SOCKET, WATCHDOG_USEC, WATCHDOG_PID); default `process.env`. */
  env?: Record<string, string | undefined>;
  /**
   * Milliseconds between beats of {@link Client.startHeartbeat}; default a
   * third of WATCHDOG_USEC, or 1000 when it is unset.
   */
  heartbeatIntervalMs?: number;
  /**
   * When to answer STOP with STOPPING=1, after which hermeskilld withholds
   * its cooperative signal (SIGINT by default):
   * - `'auto'` (default): when the agent watches the stop, i.e. it read
   *   {@link Client.signal}, added a `'stop'` listener or called
   *   {@link Client.onStop} before the STOP arrived;
   * - `true`: always (the agent polls {@link Client.stopRequested} or
   *   {@link Client.checkpoint} and must not be cut short by SIGINT);
   * - `false`: never (the agent relies on its own SIGINT handler).
   */
  acknowledge?: 'auto' | boolean;
  /** Called with the text of each WARNING directive ("check: message"). Errors it throws are printed. */
  onWarning?: (warning: string) => void;
}

/** Fields of a STOP directive. */
export interface StopInit {
  check?: string;
  reason?: string;
  graceMs?: number | null;
  killEventId?: string | null;
}

/**
 * hermeskilld asked the agent to stop (the cooperative stage of its
 * escalation): the `reason` of {@link Client.signal} once it is aborted, so
 * `fetch` and SDKs given the signal reject with it. Save what is worth saving
 * and exit: after {@link graceMs} hermeskilld escalates to SIGTERM, then
 * SIGKILL.
 */
export class StopError extends Error {
  constructor(init?: StopInit);
  /** Always `'HermeskillStop'`. */
  readonly name: 'HermeskillStop';
  /** The check that fired, e.g. `"cost"`, `"heartbeat_timeout"`; `""` when not given. */
  readonly check: string;
  /** Its message, e.g. `"spent 5.10 USD, limit 5"`; `""` when not given. */
  readonly reason: string;
  /** Milliseconds until SIGTERM (GRACE_USEC); null when not given. */
  readonly graceMs: number | null;
  /** The cert_id of the death certificate that will record this kill (KILL_EVENT_ID); null when not given. */
  readonly killEventId: string | null;
}

/**
 * The {@link StopError} in `err`: `err` itself, or its `cause`, or the
 * cause's cause... Node's own APIs given the signal (`timers/promises`,
 * streams, `child_process`) reject with an `AbortError` whose `cause` is the
 * signal's reason; `fetch` rejects with the reason itself. A StopError of
 * another copy of this package counts (by its name). Null when there is none.
 */
export function stopErrorOf(err: unknown): StopError | null;

/** True when `err` is, or was caused by, hermeskilld's stop (see {@link stopErrorOf}). */
export function isStopError(err: unknown): boolean;

/** The address (HERMESKILL_STREAM_SOCKET or given) is not an absolute path or @abstract name that fits sun_path. */
export class ConfigError extends Error {
  readonly name: 'ConfigError';
}

/** `'stop'`: the STOP directive arrived (once). */
export class StopEvent extends Event {
  readonly type: 'stop';
  readonly error: StopError;
}

/** `'warning'`: a WARNING directive. */
export class WarningEvent extends Event {
  readonly type: 'warning';
  /** The whole text, `"check: message"`. */
  readonly text: string;
  /** The check's name, `""` when the text has no `": "`. */
  readonly check: string;
  readonly message: string;
}

/** `'connect'` and `'disconnect'`: the connection to hermeskilld came up, or went down (or an attempt to make it failed). */
export class ConnectionEvent extends Event {
  readonly type: 'connect' | 'disconnect';
  /** The socket's error that ended the connection, if any. */
  readonly error: Error | null;
}

export interface ClientEventMap {
  stop: StopEvent;
  warning: WarningEvent;
  connect: ConnectionEvent;
  disconnect: ConnectionEvent;
}

/** A listener of the client's events (the DOM's EventListenerOrEventListenerObject, without needing lib.dom). */
export type Listener<E extends Event> = ((ev: E) => void) | { handleEvent(ev: E): void };

/** The options of addEventListener (the DOM's AddEventListenerOptions). */
export interface ListenerOptions {
  capture?: boolean;
  once?: boolean;
  passive?: boolean;
  signal?: AbortSignal;
}

/** Ends a wait declared with {@link Client.extendTimeout}; calls after the first do nothing. */
export interface EndWait {
  (): void;
  [Symbol.dispose](): void;
}

/**
 * The client of hermeskilld's stream socket. Thread-free and non-blocking:
 * every method returns at once, never throws for socket trouble (a lost
 * supervisor is reconnected in the background; messages meanwhile are
 * dropped and counted in {@link dropped}), and the client keeps no process
 * alive. Misuse (a negative progress, a bad interval) does throw, supervised
 * or not, so it shows in development.
 *
 * Every message method returns true when the message was written to the
 * connection (or queued for the connection being made), false when it was
 * dropped or the client is a no-op or closed. Each call, like
 * {@link checkpoint} and {@link extendTimeout}, counts as activity of the
 * work loop (see {@link startHeartbeat}).
 */
export class Client extends EventTarget {
  /**
   * @param address the stream socket, `"/path"` or `"@abstract"`; undefined
   *   reads HERMESKILL_STREAM_SOCKET; empty: a no-op client.
   * @throws {ConfigError} for an unusable address.
   */
  constructor(address?: string | null, options?: ClientOptions);

  /** The client for HERMESKILL_STREAM_SOCKET; a no-op one when it is unset or empty. */
  static fromEnv(options?: ClientOptions): Client;

  /** True when an address was configured (false for the no-op client). */
  readonly supervised: boolean;
  /** The stream socket's address; null for the no-op client. */
  readonly address: string | null;
  /** True while the connection to hermeskilld is up. */
  readonly connected: boolean;
  /** Messages written to the connection. */
  readonly sent: number;
  /** Messages lost: disconnected, the connection failed, or its buffer full. */
  readonly dropped: number;
  /** The heartbeat timeout (WATCHDOG_USEC) in ms; null when unset. */
  readonly watchdogMs: number | null;
  /** The interval of {@link startHeartbeat} when it is given none, in ms. */
  readonly heartbeatIntervalMs: number;

  /**
   * Aborted when hermeskilld says STOP, with a {@link StopError} as its
   * `reason`. Pass it to `fetch`, your model SDK (`{ signal }`), child
   * processes and your loop. Reading it tells the client the agent watches
   * it: the STOP is then acknowledged (see {@link ClientOptions.acknowledge}).
   * The no-op client's signal never aborts.
   */
  readonly signal: AbortSignal;
  /** True once a STOP directive arrived. */
  readonly stopRequested: boolean;
  /** The STOP directive's error; null before one arrived. */
  readonly stopError: StopError | null;
  /** The most recent warnings ({@link MAX_WARNINGS}), `"check: message"`, oldest first. */
  readonly warnings: string[];

  /** READY=1: startup is done; the heartbeat deadline starts. */
  ready(): boolean;
  /** WATCHDOG=1: a heartbeat from the work loop itself. */
  beat(): boolean;
  /**
   * PROGRESS=n: the monotonic step counter; an increase resets the
   * no-progress clock and the error streak.
   * @throws {TypeError} unless n is a safe integer or a bigint; {RangeError} when negative.
   */
  progress(n: number | bigint): boolean;
  /**
   * TOKENS / COST_USD: cumulative totals so far (not increments), in one
   * message; with neither, nothing is sent (false).
   * @throws {TypeError|RangeError} for a negative or non-integer count, a negative or non-finite cost.
   */
  usage(totals: { tokens?: number | bigint | null; costUsd?: number | null }): boolean;
  /**
   * TOOL=name + TOOL_ARGS_SHA256: one tool call begins. The arguments never
   * leave the agent: only {@link argsHash}(args) does. Pass the model's JSON
   * text as `rawJSON(text)` to hash it as hermeskilld's gateway does.
   */
  toolCall(name: string, args?: unknown): boolean;
  /** ERROR=text: one error happened (an Error gives `"Name: message"`). */
  error(err: unknown): boolean;
  /** STATUS=text: shown by `hermeskilld ps`, kept in the certificate (one line, at most 1 KiB). */
  status(text: string): boolean;
  /** STOPPING=1: the agent is shutting down by itself (heartbeat checks pause). */
  stopping(): boolean;
  /** WATCHDOG=trigger (+ STATUS=reason): ask hermeskilld to kill this agent now (check self_reported). */
  trigger(reason?: string): boolean;
  /**
   * Throws the {@link StopError} once STOP arrived; else returns. Counts as
   * activity: call it once per step of a loop whose awaits are not given the
   * signal. (The STOP is read when the event loop turns: synchronous code
   * that never yields does not see it.)
   */
  checkpoint(): void;
  /**
   * EXTEND_TIMEOUT_USEC: the work loop is about to wait up to `ms` in a call
   * that cannot report meanwhile (a model request of minutes, a long tool).
   * While the wait lasts and the loop is silent the background heartbeat
   * vouches with EXTEND_TIMEOUT_USEC, never past the declared time;
   * hermeskilld bounds extensions by its max_extension. Waits may overlap;
   * the longest open one counts. Declaring and ending a wait count as activity.
   *
   * ```ts
   * const end = hk.extendTimeout(300_000);
   * try { answer = await llm(prompt, { signal: hk.signal }); } finally { end(); }
   * // or: using _ = hk.extendTimeout(300_000);
   * ```
   * @throws {RangeError} unless ms is a finite number above 0.
   */
  extendTimeout(ms: number): EndWait;

  /**
   * Beats every `intervalMs` (default {@link heartbeatIntervalMs}) until
   * {@link close}, on an unref'd timer, starting at once. It proves only
   * that the event loop turns, so it vouches only for a work loop that passes
   * through the client: WATCHDOG=1 when a method was called within the
   * heartbeat timeout (WATCHDOG_USEC, or three intervals when unset); else,
   * while a wait declared with {@link extendTimeout} lasts,
   * EXTEND_TIMEOUT_USEC; else nothing, and hermeskilld's heartbeat timeout
   * kills a wedged agent. A second call while it runs does nothing.
   * @throws {RangeError} for an interval that is not a finite number above 0.
   */
  startHeartbeat(intervalMs?: number): void;
  /** Stops {@link startHeartbeat}'s beats. */
  stopHeartbeat(): void;

  /** Calls fn with each warning's text; returns the function that unsubscribes. */
  onWarning(fn: (warning: string) => void): () => void;
  /**
   * Calls fn once STOP arrives (soon after, if it has); returns the function
   * that unsubscribes. Counts as watching the stop, as reading
   * {@link signal} does.
   */
  onStop(fn: (err: StopError) => void): () => void;

  addEventListener<K extends keyof ClientEventMap>(type: K, listener: Listener<ClientEventMap[K]> | null, options?: ListenerOptions | boolean): void;
  addEventListener(type: string, listener: Listener<Event> | null, options?: ListenerOptions | boolean): void;
  removeEventListener<K extends keyof ClientEventMap>(type: K, listener: Listener<ClientEventMap[K]> | null, options?: { capture?: boolean } | boolean): void;
  removeEventListener(type: string, listener: Listener<Event> | null, options?: { capture?: boolean } | boolean): void;

  /** Stops the heartbeat and closes the connection once what was written is sent. Sends nothing. Idempotent. */
  close(): void;
  [Symbol.dispose](): void;
}

/** JSON text to hash by value, as Go's json.RawMessage: the arguments a model wrote. */
export class RawJSON {
  constructor(text: string);
  readonly text: string;
}

/** Wraps JSON text so that {@link argsHash} and {@link Client.toolCall} hash it by value. */
export function rawJSON(text: string): RawJSON;

/**
 * The hex sha256 of `args` as canonical JSON, the value of TOOL_ARGS_SHA256:
 * the bytes Python's `json.dumps(args, sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False)` writes, as the Go and Python clients and hermeskilld's
 * gateway hash them (keys sorted by code point, no whitespace, UTF-8 as it
 * is, integers exact, other numbers as Python's repr of the float).
 *
 * A value is seen as JSON.stringify sees it (toJSON, boxed primitives,
 * undefined left out of objects), plus: a bigint is an exact integer, a Map
 * an object, a Set an array; a whole number is an integer (write 1.0 through
 * rawJSON). A string is hashed as a JSON string, never parsed. A top-level
 * rawJSON that is empty hashes as `{}`, one that is not JSON as its bytes.
 * Never throws.
 */
export function argsHash(args: unknown): string;

/**
 * The canonical JSON of a value (see {@link argsHash}).
 * @throws {TypeError} for a circular value; {SyntaxError} for a rawJSON that is not JSON.
 */
export function canonicalJSON(value: unknown): string;

/** hermeskilld drops a message over this many bytes (8 KiB). */
export const MAX_MESSAGE: number;
/** Text values (STATUS, ERROR, TOOL) are cut to this many UTF-8 bytes. */
export const MAX_TEXT_BYTES: number;
/** {@link Client.warnings} keeps this many. */
export const MAX_WARNINGS: number;
/** This package's version. */
export const VERSION: string;
