// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package audit owns hermeskilld's audit log: an append-only, hash-chained JSONL file with one
// line per event (agent started or exited, symptom, ladder step, certificate written, operator
// request), the anchor file that holds the chain's head outside the lines, and the verifier
// that walks the chain and compares it with the anchor.
//
// # Line format
//
// Every line is one JSON object followed by "\n", written by encoding/json from a struct, so the
// keys always come in this order (fields marked * are left out when empty or zero):
//
//	{"seq":3,"time":"2025-01-02T03:04:05.123456789Z","type":"symptom","agent_id":"bot",
//	 "data":{…},"torn_bytes":41,"prev_sha256":"9f86…"}
//
//	seq          1 for the first line of a chain, then +1 per line, across rotated files too
//	time         when the line was written, RFC 3339 with nanoseconds, UTC
//	type         what happened: a short snake_case word, as the writer names its events
//	agent_id *   the agent the event is about; absent for daemon-level events
//	data *       the event's own fields, whatever encoding/json makes of Event.Data (struct
//	             fields in declaration order, map keys sorted)
//	torn_bytes * how many bytes of a torn tail (a crashed writer's partial line) were cut off
//	             the file just before this line was appended; see "Crashes" below
//	prev_sha256  lowercase hex SHA-256 of the previous line's bytes, without its "\n";
//	             64 zeros on the first line of a fresh chain
//
// Operator requests carry the caller's uid in data ({"uid":1000,…}). The package knows nothing
// about tools: callers must put only hashes of tool arguments in data, never the arguments.
// Two types are written by the package itself: "rotated" (see "Rotation") and
// "anchor_mismatch" (see "The anchor").
//
// # Writing
//
// Append builds the whole line and hands it to the kernel in one write(2) on a file opened with
// O_APPEND (mode 0640, its directory created 0750), so a line is never interleaved with another
// writer's. Several Logs, in one process or several (two `hermeskilld supervise --audit-log
// same.jsonl`), may append to one file: each append holds flock(2) LOCK_EX on FILE.lock, a
// companion file that rotation never moves, while it reads the previous line's hash, writes
// its own line and then the anchor. A writer that finds the file changed since its last
// append re-reads the last line and the anchor. flock, unlike fcntl locks, excludes two Logs
// of the same process from each other. Writers that bypass this package (echo >> FILE) are not
// excluded and will break the chain; NFS is not supported (O_APPEND is not atomic there).
//
// Append fsyncs the file before it returns when the event asks for it (Event.Sync: a
// certificate's events do), or always with Options.SyncEvery. Other lines reach the disk when the
// kernel writes them back: a power loss may lose the lines written since the last fsync, or
// leave the last of them torn.
//
// # The anchor
//
// A hash chain cannot vouch for its own end: drop the last lines, or edit the last one, and
// what is left is a valid chain. So every writer keeps the chain's head outside the lines, in
// FILE.anchor (AnchorPath; mode 0640, never rotated), rewritten after every line under the
// same lock. It is one JSON object padded with spaces to 1024 bytes, the last a "\n":
//
//	{"schema":"hermeskill.audit-anchor.v1","seq":42,"sha256":"…","first_seq":37,
//	 "first_prev_sha256":"…","signature":{"alg":"ed25519","key_id":"ed25519:…","value":"…"}}
//
//	seq, sha256        the file's last line: its seq and the sha256 of its bytes (what the
//	                   next line's prev_sha256 will be)
//	first_seq,         the file's first line: its seq and prev_sha256 (1 and 64 zeros for a
//	first_prev_sha256  fresh chain; after a rotation, the seq after FILE.1's last line and
//	                   that line's hash), so a deleted first line is found too
//	signature *        with Options.Signer: Ed25519 over the object's other members, keys
//	                   sorted, without spaces: the canonical JSON certificates are signed
//	                   over (certs.Verify accepts an anchor's bytes)
//
// Every update is one pwrite(2) of the same 1024 bytes at offset 0, within one page: no reader
// holding the lock sees half of one, and none leaves an older content's bytes behind. Log.Head
// and Async.Head return the head (seq, sha256) without waiting for the lock or the disk, for
// certificates to carry (their audit_anchor).
//
// Durability follows the line's: the anchor is written after the line, into the page cache,
// and when the line is fsynced, the anchor is fdatasync(2)ed after it. That costs one pwrite
// per append (two fsyncs instead of one for a synced append), and a signature when there is a
// key; BenchmarkAppend* measure it. It is consistent across a process crash, since the page
// cache survives the process: a writer killed between its line and its anchor leaves exactly
// one line past the anchor. A power loss may leave any state of the unsynced lines and
// anchor: lines past the anchor, or an anchor past the log, or a torn anchor.
//
// A writer (Open, or an Append that finds the file changed) compares the anchor with the
// chain's end before it writes. When they disagree it never trusts either silently: it appends
// a line of type "anchor_mismatch", fsynced, whose data (MismatchData) records the cause, the
// anchor it found and the log's last line, and re-anchors the chain from there, so the log
// goes on. The causes: lines_past_anchor (the anchored line is in the file and lines follow
// it: a killed writer, or lines added by hand), anchor_past_log (lines cut, or lost to a power
// loss), anchor_diverged (the line at the anchor's seq is another), no_anchor (a log from
// before anchors, or a deleted anchor), bad_anchor (unreadable, or not signed by the writer's
// key). The record stays in the chain, and Check reports it as a failure until an operator
// who has explained it lists its seq in CheckOptions.Accept: a crash and a forgery look the
// same to a writer, so only a person can tell them apart.
//
// # Crashes
//
// A writer that dies inside write(2), a full disk or a power loss can leave a torn tail: bytes
// after the last "\n", and before them at most one complete line that is not an audit record.
// The next writer (Open, or an Append that finds the file changed) cuts the torn tail off,
// links to the last good line, and records the count in torn_bytes of the next line it appends
// (a writer that closes before appending again leaves the cut unrecorded). A writer whose own
// write(2) fails part way cuts its partial line off at once. A torn line was never anchored,
// so the anchor still names the line before it. Damage further up is never repaired: Check
// reports it, and Open refuses a file whose last two lines are bad.
//
// # Rotation
//
// With Options.MaxBytes set, a line that would take FILE past MaxBytes first rotates it:
// FILE.(Keep-1) → FILE.Keep, …, FILE.1 → FILE.2, FILE → FILE.1, and the new FILE starts with a
// line of type "rotated" whose prev_sha256 is the hash of FILE.1's last line and whose seq
// follows it, so the chain continues across files. Check verifies that continuity. The
// anchor stays FILE.anchor and follows: its first_seq and first_prev_sha256 become the
// "rotated" line's, which also anchors FILE.1's last line.
//
// # Verifying
//
// Check walks files as one chain, oldest first, and compares the last with its anchor (and the
// anchor's signature with a public key): a *BrokenError says where the chain breaks, an
// *AnchorError where the chain holds but disagrees with the anchor (a cut tail, an edited
// line, lines past the anchor, a first line missing or changed), and recorded mismatches are
// listed. On a live log Check takes FILE.lock
// shared while it opens the files and reads the anchor, so a writer is never caught between a
// line and its anchor.
//
// # Guarantees and their limits
//
// The chain finds an edited, deleted, inserted or reordered line anywhere before the last line:
// each line's hash is in the next one, and seq numbers each line. The anchor adds the ends: a
// cut tail (which seqs are missing), an edited last line, a deleted first line, and lines
// appended after the anchored one, whether by hand or by a writer killed before its anchor.
// Torn tails are told apart: a writer killed inside write(2) leaves bytes after the anchored
// line, not a missing one.
//
// What they do not find:
//   - the wholesale rewrite of the log and its anchor alike, every hash recomputed, by someone
//     able to write both (the user hermeskilld runs as, or root). Without a key nothing on the
//     host can tell such a rewrite from the truth. With Options.Signer the anchor is signed:
//     whoever lacks the key cannot produce an anchor that `audit verify --pubkey` accepts, and
//     a writer with the key records an anchor it cannot verify instead of signing over it. But
//     a key stored on the same host is readable by root, who can then sign anything: the
//     signature protects only as far as the key is kept off the host (or out of the attacker's
//     reach). Certificates already delivered to the control plane carry the head (seq,
//     sha256) as it was, signed: a rewrite that drops or changes those lines is exposed there
//     whatever happened on the host since;
//   - lines removed from, or the whole of, a rotated file older than the files checked, and a
//     rotated file deleted together with everything after it: the anchor covers the newest
//     file (and through its first line, FILE.1's last line); older files are checked only by
//     the chain that links them;
//   - whether a recorded mismatch was a crash or a forgery: lines appended by hand that a
//     writer then re-anchored are recorded as past the anchor (and the record cannot be
//     removed without breaking the chain), exactly as a killed writer's line is;
//   - events that were never written: a writer that is killed, or an Async queue that drops
//     events when the disk is stuck (Async.Dropped), leaves no line behind.
package audit
