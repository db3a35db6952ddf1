// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package certs owns hermeskilld's death certificate: the forensic record
// written once per death — its schema as Go types, its file (name,
// directory, atomic write, recovery after a crash, read, listing), its
// Ed25519 signature (keys, canonical form, sign, verify) and its rendering
// for people (`hermeskilld certs show`).
//
// It records; it never decides or signals. The supervisor fills a
// Certificate, and Write stores it with atomicfile.WriteFile.
//
// # The environment is never recorded
//
// A certificate has no field for the agent's environment, and none may be
// added: secrets live there. Tool arguments appear nowhere either (the audit
// log keeps only their hashes).
//
// # Fields (schema "hermeskill.death-certificate.v1")
//
// Times are RFC 3339 with nanoseconds in UTC ("2026-12-02T10:15:03.123456789Z");
// a time that is unknown is null. Lists are never null: an empty one is [].
//
//   - schema: always "hermeskill.death-certificate.v1" (Schema).
//   - cert_id: unique id of this certificate, a UUIDv7 (NewID); the control
//     plane uses it as the Idempotency-Key. For a kill it is made when the
//     kill is decided and sent to the agent's clients with the STOP
//     directive (KILL_EVENT_ID), so an agent can name the certificate that
//     will record its death.
//   - agent_id: the agent's id (--id, or the agent file's id).
//   - host: the host name of the machine the agent ran on.
//   - mode: "enforce" (the agent was killed) or "shadow" (a terminal symptom
//     fired in shadow mode and nothing was signalled).
//   - labels: the agent's labels from its agent file (omitted when none).
//   - command: the agent's argv.
//   - pid: the pid of the agent's main process.
//   - containment: how the tree was held: "cgroup" (its own cgroup v2) or
//     "pgroup" (process group plus descendants found in /proc); omitted when
//     unknown.
//   - confinement: what held the agent's reach, joined by "+": "signals"
//     (it could not signal or trace a process outside its tree,
//     hermeskilld and its keeper among them: Landlock), "files" (it could
//     write only beneath its writable paths: Landlock), "network" (its own
//     network namespace with only loopback and the gateway); "none" when
//     nothing did (a kernel without Landlock signal scoping, and neither
//     writable paths nor gateway-only); omitted when unknown.
//   - denials: what the confinement refused the agent, from the kernel's
//     audit log (Landlock's records, Linux 6.15 and later, with auditing
//     on): count, by_blocker (the count by what refused it: "fs.make_reg",
//     "fs.write_file", "scope.signal", …) and recent (the last eight:
//     blockers, target — the path, or "pid N (comm)" of the process
//     signalled —, pid of the process that tried); omitted when not
//     counted.
//   - started_at: when the agent was started.
//   - triggered_at: when the death was decided: the terminal symptom, the
//     operator's request, or, for an external death, when the exit was seen.
//   - terminated_at: when the agent's tree was gone (null in shadow mode).
//   - trigger_type: "auto" (a terminal symptom), "manual" (an operator, a
//     signal to hermeskilld, the e-stop file, the control plane) or
//     "external" (died by a signal hermeskilld did not send, e.g. the OOM
//     killer).
//   - trigger_check: the check that fired (the stable names of the checks:
//     heartbeat_timeout, memory, … , manual, internal_error), "external",
//     or "supervisor_lost": hermeskilld died (SIGKILL, the OOM killer)
//     while the agent ran; its keeper killed the agent, and the next start
//     on the same state wrote this certificate from the run journal
//     (internal/runjournal). Then triggered_at and terminated_at are the
//     keeper's kill (or, with no record of it, the journal's last write and
//     the recovery: the death lies between), exit is unknown (null), and
//     final_state is as of the journal's last write.
//   - trigger_reason: one line saying why, with the observed value and the
//     threshold ("no heartbeat for 30.0s (timeout 30s)").
//   - operator: who asked for a manual kill (the control socket's caller,
//     "signal:SIGTERM" for a signal to hermeskilld, "daemon-shutdown", …);
//     null otherwise.
//   - operator_reason: the reason the operator gave; null when none.
//   - escalation: how far the ladder went — reached ("none", "cooperative",
//     "sigterm" or "sigkill": the last stage started before the tree was
//     gone), coop_signal (the cooperative signal, "SIGINT", or "none"),
//     coop_grace_ms and term_grace_ms (the configured graces, ms).
//   - exit: how the main process ended — code (its exit code, null when a
//     signal ended it), signal ("SIGKILL", …, null when it exited) and
//     core_dumped.
//   - symptoms_log: every warning and the terminal symptom, in order; each
//     has at, check, severity ("warning" or "terminal"), observed and
//     threshold (as text with units: "1.2GiB", "30s") and message.
//   - shutdown_log: each step of the ladder as carried out, in order
//     (dump_signal_sent, directive_sent, coop_signal_sent, coop_wait,
//     sigterm_sent, term_wait, sigkill_sent, main_exited, reaped,
//     reap_timeout: the steps of package escalate);
//     each has step, at (wall time), duration_ms (how long the step took)
//     and detail (step-specific facts, omitted when none).
//   - final_state: what was last known of the agent — status (its last
//     STATUS text), progress (last PROGRESS), tokens, cost_usd, last_tool,
//     last_heartbeat_at (null if it never beat), heartbeats (count),
//     peak_rss_bytes (of the tree), cpu_user_s and cpu_sys_s (CPU seconds of
//     the tree), procs_killed (processes signalled), errors (count of ERROR
//     reports) and errno (its last ERRNO, omitted when none).
//   - process_tree: the agent's processes when the kill began; each has pid,
//     ppid, cmdline, state (the one-letter state of proc(5)), rss_bytes,
//     cpu_s, threads and fds.
//   - last_output: the last 64 KiB of the agent's stderr and stdout when
//     hermeskilld captured them (stack traces of the "last words" land
//     here); omitted when not captured. Invalid UTF-8 is replaced by U+FFFD.
//   - survivors: processes still alive when hermeskilld stopped waiting (for
//     example in D state); each has pid, state and cmdline. Usually [].
//   - survivors_unknown: present when the survivors could not all be
//     listed or read (hermeskilld out of descriptors, say): why. Then
//     survivors is what could be seen ("?" for a process that could not be
//     read), an empty list proves nothing, and the keeper, which does not
//     share hermeskilld's descriptors, kills what is left.
//   - metered: present when the agent's LLM traffic went through
//     hermeskilld's gateway — what was counted on the wire: requests,
//     refused (after the revocation, or outside the API), errors, tokens,
//     cost_usd, usage_unknown (present when not 0: the requests whose
//     usage was never read, charged at their reservation), streams_cut,
//     overshoot_tokens and overshoot_usd (present when not 0: the streams
//     the gateway cut at the budget, and what they cost past it), cost_known
//     (false when a model had no price or a usage was unknown), models
//     (each with model, requests, input_tokens, output_tokens,
//     cached_input_tokens, cost_usd, priced, usage_unknown), first_request_at,
//     last_request_at and revoked_at (null when not revoked). The tokens and
//     cost checks used these figures; final_state keeps what the agent
//     reported about itself.
//   - egress: present for a network: allowlist agent — what its egress
//     proxy did: allow (its allowlist), passed (tunnels and plain requests
//     made), failed (allowed but not resolved or reached: 502), refused
//     (403: not listed, a listed name resolving to a private range, or
//     after the revocation), over_cap (503: the tunnels at their bound),
//     bytes_out and bytes_in (from and to the agent), tunnels_cut (closed
//     by the revocation), revoked, last_byte_at (when a byte last passed
//     either way; null: none), and destinations: the top 20 by bytes,
//     then refusals (each with destination as the client asked for it,
//     host:port, passed, failed, refused, refused_reason of the last
//     refusal, bytes_out, bytes_in); destinations_omitted counts the rest.
//   - audit_anchor: the head of the audit log when the certificate was
//     made — seq (of the log's last line) and sha256 (of that line, as the
//     next line's prev_sha256 carries it); omitted when there is no audit
//     log. Once the certificate is signed or delivered, the log cannot lose
//     or change that line unnoticed.
//   - internal_error: present when hermeskilld's own code serving the run
//     panicked (check internal_error; the run was killed for it, or the
//     kill already climbing finished with SIGKILL) — component (run_loop,
//     ladder, slot, gateway_meter), panic (the value) and stack (the
//     panicking goroutine's, its top 8 KiB).
//   - signature: present when a signing key is configured — alg ("ed25519"),
//     key_id (KeyID of the public key) and value (base64 of the signature).
//
// # Files
//
// One file per certificate, named by FileName (time first, so names sort
// by time), mode 0640 in a 0750 directory (DefaultDir unless configured),
// written with atomicfile: temporary file in the same directory, fsync,
// rename, fsync of the directory. Marshal's output is stable: the same
// certificate always gives the same bytes.
//
// A writer killed between its write and its rename leaves the temporary
// file (".NAME.json.RANDOM.tmp", hidden from List). Recover, called when a
// supervisor starts, completes the rename of every whole certificate so
// left and removes the rest; it never replaces a file already at the final
// name, and never touches a file another process is still writing.
//
// # Signatures
//
// With a key (LoadSigner, GenerateKey), Sign signs the canonical JSON of the
// certificate without its signature field (Canonical: parsed with numbers
// kept as their text, "signature" removed, re-encoded compactly with sorted
// keys). The signature therefore covers content, not layout: a certificate
// re-indented or with its keys reordered still verifies; a change to any key
// or value does not. Verify distinguishes ErrUnsigned, ErrKeyMismatch and
// ErrBadSignature. Keys are named by KeyID: "ed25519:" and 16 hex digits of
// the SHA-256 of the public key. The same key signs the audit log's anchor
// (Signer.SignMessage), whose JSON carries a schema of its own.
package certs
