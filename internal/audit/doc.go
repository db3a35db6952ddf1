// Package audit owns hermeskilld's audit log: an append-only, hash-chained JSONL file with one
// line per event (agent started or exited, symptom, ladder step, certificate written, operator
// request), and the verifier that walks the chain (DESIGN.md §8).
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
//	type         what happened: one of the Type constants, or another short snake_case word
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
//
// # Writing
//
// Append builds the whole line and hands it to the kernel in one write(2) on a file opened with
// O_APPEND (mode 0640, its directory created 0750), so a line is never interleaved with another
// writer's. Several Logs, in one process or several (two `hermeskilld supervise --audit-log
// same.jsonl`), may append to one file: each append holds flock(2) LOCK_EX on FILE.lock, a
// companion file that rotation never moves, while it reads the previous line's hash and writes
// its own. A writer that finds the file changed since its last append re-reads the last line.
// flock, unlike fcntl locks, excludes two Logs of the same process from each other. Writers that
// bypass this package (echo >> FILE) are not excluded and will break the chain; NFS is not
// supported (O_APPEND is not atomic there).
//
// Append fsyncs the file before it returns when the event asks for it (Event.Sync), when its type
// is TypeCertificate, or always with Options.SyncEvery. Other lines reach the disk when the
// kernel writes them back: a power loss may lose the lines written since the last fsync, or
// leave the last of them torn.
//
// # Crashes
//
// A writer that dies inside write(2), a full disk or a power loss can leave a torn tail: bytes
// after the last "\n", and before them at most one complete line that is not an audit record.
// The next writer (Open, or an Append that finds the file changed) cuts the torn tail off,
// links to the last good line, and records the count in torn_bytes of the next line it appends
// (a writer that closes before appending again leaves the cut unrecorded). A writer whose own
// write(2) fails part way cuts its partial line off at once. Damage further up is never
// repaired: Verify reports it, and Open refuses a file whose last two lines are bad.
//
// # Rotation
//
// With Options.MaxBytes set, a line that would take FILE past MaxBytes first rotates it:
// FILE.(Keep-1) → FILE.Keep, …, FILE.1 → FILE.2, FILE → FILE.1, and the new FILE starts with a
// line of type "rotated" whose prev_sha256 is the hash of FILE.1's last line and whose seq
// follows it, so the chain continues across files. VerifyFrom checks that continuity.
//
// # Guarantees and their limits
//
// Verify finds an edited, deleted, inserted or reordered line anywhere before the last line:
// each line's hash is in the next one, and seq numbers each line. It does not find:
//   - a change to the last line: no line after it holds its hash. Report.LastHash, kept
//     somewhere else, closes that gap;
//   - lines cut off the end, or off the start of a file read on its own: the rest is a valid
//     chain. The first line's seq and prev_sha256 (Report.FirstSeq, Report.FirstPrev) say
//     whether the file starts a chain, and VerifyFrom links rotated files;
//   - the wholesale replacement of the file by someone able to write it and recompute every
//     hash. A hash chain is tamper-evident only against an attacker who cannot rewrite it all;
//     signing lines with a key the attacker lacks, or shipping them off the host as they are
//     written (the certificates' Ed25519 signatures and the control plane do this for deaths),
//     address that.
package audit
