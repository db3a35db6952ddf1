// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package outbox delivers death certificates to the control plane at least
// once, and pulls the control plane's kill requests ("directives") for the
// agents this host runs.
//
// It owns the wire protocol between hermeskilld and the control plane and
// the durable state that makes delivery survive restarts and outages:
// state_dir/outbox/ (one file per undelivered certificate), its parked/
// subdirectory (certificates the control plane refused), and
// directives-seen.json (the directive ids already acted on).
//
// # Kill events (hermeskilld -> control plane)
//
//	POST {url}/agents/{agent_id}/kill_events
//	Authorization: Bearer <token>        (the token file's content, trimmed; no header without a token file)
//	Idempotency-Key: <cert_id>
//	Content-Type: application/json
//
//	{"trigger_type": "auto", "trigger_reason": "no heartbeat for 30.0s (timeout 30s)",
//	 "triggered_at": "2026-12-02T10:15:03.123456789Z", "terminated_at": "…" | null,
//	 "death_certificate": { …the certificate file, byte for byte… },
//	 "shutdown_log": [ …the certificate's shutdown_log… ]}
//
// {agent_id} is path-escaped. death_certificate is the certificate's JSON
// exactly as written to its file, so its Ed25519 signature still verifies on
// the other side. The token file is read again at every attempt, so a
// rotated token is used without a restart.
//
// The control plane must treat Idempotency-Key as the identity of the event:
// the same key may arrive more than once (a response lost on the way back,
// a crash between the 2xx and the deletion of the file), and the second
// arrival must not create a second event. Responses:
//
//	2xx                          delivered: the file is deleted
//	408, 429, 5xx, 401, 403,     retried with backoff (the item keeps its place)
//	network errors, timeouts
//	any other status (400, 404,  parked: moved to parked/, logged, counted,
//	409, 413, 422, …)            never retried automatically
//
// 401 and 403 are retried rather than parked because they mean a token
// problem that the operator fixes by replacing the token file, not a bad
// certificate: parking would strand every certificate sent meanwhile. To
// retry a parked certificate, move parked/<cert_id>.json back into the
// outbox directory and restart the daemon; parked/<cert_id>.reason says
// what the control plane answered.
//
// # Order and backoff
//
// One goroutine (Run) sends, oldest item first, one request at a time.
// Backoff is global: a retryable failure is taken as "the control plane is
// unreachable", not "this item is bad", so Run waits before its next
// request of any item, and retries the same (oldest) item first. The wait
// after the n-th consecutive failure is "full jitter": a uniformly random
// duration in [0, min(MaxBackoff, MinBackoff·2^(n-1))), but never less than
// the response's Retry-After (capped at MaxBackoff). Any success resets it.
// Enqueue wakes Run at once unless it is backing off. A consequence worth
// knowing: an item the control plane always answers 5xx blocks the ones
// behind it — hermeskill_outbox_pending grows and the failures counter
// climbs, which is what the alerts in docs/metrics.md watch.
//
// # A short-lived sender: supervise
//
// `hermeskilld supervise` uses the same Link for one agent, in
// --state-dir/outbox: it opens it before starting the agent (so what
// earlier runs left is sent first, while the agent runs), polls the
// directives of its one agent, and at exit calls Flush with a bound
// (--flush-timeout): Flush cuts the backoff short and waits until nothing
// is pending. What it leaves stays on disk for the next run using the same
// directory; the lock makes concurrent runs on one directory fail to
// Open (ErrLocked) rather than share it.
//
// # Directives (control plane -> hermeskilld)
//
//	GET {url}/agents/{agent_id}/directives
//	Authorization: Bearer <token>
//	Accept: application/json
//
//	200 {"directives": [{"id": "d1", "action": "kill", "reason": "runaway spend",
//	                     "operator": "alice@cp"}]}
//	204 or 404: no directives for this agent
//
// The poller asks for each agent the daemon (or supervise) runs, every
// poll interval (jittered by ±20%). The control plane may return a directive at every
// poll until it expires on its side; hermeskilld acts once per (agent_id,
// id): ids already acted on are remembered in directives-seen.json (the
// newest MaxSeen of them). Acting comes first and remembering second, so a
// crash between the two repeats the directive once, which for "kill" is
// harmless. Actions:
//
//	kill   stop the agent through the escalation ladder; the certificate is
//	       trigger_type "manual" and is delivered as a kill event like any
//	       other, which is the control plane's acknowledgement
//	revoke a standing revocation of the agent (the daemon's revoke ID): it
//	       is killed as for kill, its LLM gateway access is withdrawn, and
//	       it is kept from starting until an operator lifts the rule
//	       (`hermeskilld revocations lift`); repeating it adds a rule that
//	       matches the same agent, which is harmless
//
// A directive with another action is logged, acknowledged as failed and
// remembered. A directive without id or action is ignored. Fields other
// than these are ignored, so the control plane may add some.
//
// # The host's directives, by long poll
//
//	GET {url}/directives?host={host}&wait=30s
//
//	200 {"directives": [{"id": "d7", "action": "estop", "reason": "…", "operator": "…"},
//	                    {"id": "d8", "action": "kill", "agents": ["a", "b"]}]}
//	204 or 404: none
//
// The control plane may hold the request until it has a directive (a long
// poll: the next request follows at once); one that answers at once, fails
// or refuses ?wait= (400) is polled every poll interval (RunHost). estop
// stops every agent of the host and keeps them down.
//
// # Receipts (hermeskilld -> control plane)
//
// Every directive, of the host's or of an agent's, is acknowledged once it
// is carried out — the runs it ended over, their certificates written and
// queued ahead of it — with a Receipt:
//
//	POST {url}/directives/{id}/receipts
//	Idempotency-Key: receipt-<hash of the agent scope and id>
//
//	{"schema": "hermeskill.directive-receipt.v1", "host": "…", "directive_id": "d7",
//	 "action": "estop", "received_at": "…", "acknowledged_at": "…",
//	 "runs": [{"agent_id": "a", "cert_id": "…", "tree_empty": true, "revoked": true, "reached": "sigterm"}],
//	 "failed": [{"agent_id": "b", "error": "not running"}],
//	 "signature": {"alg": "ed25519", "key_id": "…", "value": "…"} | null}
//
// signed as certificates are (Ed25519 over the canonical JSON without the
// signature; certs.Verify checks it), queued in the outbox like a
// certificate and kept in receipts/, so that a directive sent again is
// acknowledged again with the same bytes and not carried out twice. A
// receipt answered 404 (a control plane without receipts) is dropped.
//
// # fail_closed_after
//
// With control_plane.fail_closed_after, a host whose directive polls have
// not been answered (200, 204, 404) for that long stops every agent
// (Host.FailClosed; the certificates' check is control_plane_unreachable).
// docs/control-plane.md has the whole protocol.
package outbox
