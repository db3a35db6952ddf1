// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/audit"
	"github.com/hermeskill/hermeskilld/internal/calibrate"
	"github.com/hermeskill/hermeskilld/internal/certs"
)

// The forensics commands work on files, not on the daemon: `audit verify`,
// `keygen` and `calibrate` run on any host that has the files (a copy
// taken off a compromised machine included). Exit statuses: 0 done, 1
// (exitFailure) the check failed or a file could not be read, 125 bad
// arguments.

func newAudit() *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Check the hash-chained audit log",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newAuditVerify())
	return c
}

func newAuditVerify() *cobra.Command {
	var (
		anchor   string
		noAnchor bool
		pubkey   string
		accept   []uint
		witness  []string
	)
	c := &cobra.Command{
		Use:   "verify [--anchor PATH | --no-anchor] [--pubkey FILE] [--accept SEQ]... [--witness PATH]... FILE...",
		Short: "Verify the hash chain of audit log files, and their anchor",
		Long: `Walk the hash chain of an audit log: every line must carry the sha256 of
the line before it and the next sequence number, so an edited, deleted,
inserted or reordered line is found, and its line number printed.

Several files are verified as one rotated chain, oldest first:
  hermeskilld audit verify audit.jsonl.2 audit.jsonl.1 audit.jsonl

The last file is then checked against its anchor, FILE.anchor (--anchor
PATH for a copy kept elsewhere): the seq and sha256 of its last line and
where its chain starts, kept outside the lines. So a cut tail, an edited
last line, a deleted first line or a line added at the end are found too,
and named. With --pubkey (the signing key's .pub file) the anchor's
signature must verify: then not even someone able to rewrite the log and
the anchor alike goes unseen, unless they hold the key. --no-anchor checks
the chain alone.

A writer that finds the log and its anchor disagreeing (a writer killed
between a line and its anchor, a power loss, or tampering) records what it
found in a line of type anchor_mismatch and goes on. Each such line fails
verification until an operator has explained it and passes its seq to
--accept.

A log put back as it was earlier, with its anchor of that time (a
rollback), verifies on its own: nothing in it is wrong, only old. A
witness finds it: --witness PATH names a head of the chain seen later —
a certificate (each carries the audit log's head of its time, in
audit_anchor), a directory of them (the control plane's copies, say), or
an anchor file copied elsewhere. The log must hold each witness's line,
unchanged: one that ends before it was rolled back, one whose line
differs was rewritten.

A last line cut short (a writer that crashed inside write(2)) is not
tampering: it is ignored with a warning.

Exit status: 0 when every file is intact, 1 when one is not or a file
cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, files []string) error {
			if noAnchor && (anchor != "" || pubkey != "") {
				return usageError("--no-anchor checks the chain alone: it takes neither --anchor nor --pubkey")
			}
			pub, err := loadPubkey(pubkey)
			if err != nil {
				return err
			}
			opts := audit.CheckOptions{PublicKey: pub}
			for _, p := range witness {
				ws, err := readWitnesses(p)
				if err != nil {
					return usageError("--witness %s: %v", p, err)
				}
				opts.Witnesses = append(opts.Witnesses, ws...)
			}
			for _, seq := range accept {
				opts.Accept = append(opts.Accept, uint64(seq))
			}
			if !noAnchor {
				opts.Anchor = anchor
				if anchor == "" {
					opts.Anchor = audit.AnchorPath(files[len(files)-1])
				}
			}
			return auditVerify(c.OutOrStdout(), c.ErrOrStderr(), files, opts)
		},
	}
	c.Flags().StringVar(&anchor, "anchor", "", "the last file's anchor (default FILE.anchor beside it)")
	c.Flags().BoolVar(&noAnchor, "no-anchor", false, "check the hash chain alone, without the anchor")
	c.Flags().StringVar(&pubkey, "pubkey", "", "check the anchor's signature against this public key (the signing key's .pub file)")
	c.Flags().UintSliceVar(&accept, "accept", nil, "seq of a recorded anchor_mismatch line that has been explained (repeatable)")
	c.Flags().StringArrayVar(&witness, "witness", nil, "a later head of the chain the log must hold: a certificate, a directory of them, or an anchor file (repeatable)")
	return c
}

// readWitnesses reads the heads of the chain path holds: a certificate's
// audit_anchor, an anchor file's head, or those of every certificate in a
// directory (those without an anchor are skipped).
func readWitnesses(path string) ([]audit.Witness, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	files := []string{path}
	if fi.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			return nil, err
		}
	}
	var out []audit.Witness
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v struct {
			AuditAnchor *audit.Head `json:"audit_anchor"`
			Seq         uint64      `json:"seq"`
			SHA256      string      `json:"sha256"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			if fi.IsDir() {
				continue
			}
			return nil, fmt.Errorf("not a certificate or an anchor: %w", err)
		}
		h := audit.Head{Seq: v.Seq, SHA256: v.SHA256}
		if v.AuditAnchor != nil {
			h = *v.AuditAnchor
		}
		if h.Seq == 0 || len(h.SHA256) != 64 {
			if fi.IsDir() {
				continue
			}
			return nil, errors.New("holds no head of the audit chain (no audit_anchor, no seq and sha256)")
		}
		out = append(out, audit.Witness{Head: h, Source: f})
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate in it carries an audit_anchor")
	}
	return out, nil
}

// auditVerify verifies files as one chain, oldest first, the last against
// opts.Anchor, and prints one line per file: "FILE: N lines, chain intact"
// (", anchored at seq N" when the anchor matches), or "FILE: line N: REASON"
// and "FILE: REASON" for what does not hold (then it stops: the files after
// a break cannot link to it).
func auditVerify(out, errw io.Writer, files []string, opts audit.CheckOptions) error {
	results, err := audit.Check(files, opts)
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	failed := false
	for i, r := range results {
		name := r.Path
		if !r.OK() {
			failed = true
		}
		var broken *audit.BrokenError
		var anchorErr *audit.AnchorError
		switch {
		case errors.As(r.Err, &broken):
			fmt.Fprintf(out, "%s: line %d: %s\n", name, broken.Line, broken.Reason)
			continue
		case errors.As(r.Err, &anchorErr) && anchorErr.Line > 0:
			fmt.Fprintf(out, "%s: line %d: %s\n", name, anchorErr.Line, anchorErr.Reason)
			continue
		case errors.As(r.Err, &anchorErr):
			fmt.Fprintf(out, "%s: %s\n", name, anchorErr.Reason)
			continue
		case errors.Is(r.Err, audit.ErrNoAnchor):
			fmt.Fprintf(out, "%s: %v (--anchor PATH if it is kept elsewhere, --no-anchor to check the chain alone)\n", name, r.Err)
			continue
		case errors.Is(r.Err, audit.ErrBadAnchor), errors.Is(r.Err, audit.ErrAnchorUnsigned), errors.Is(r.Err, audit.ErrAnchorSignature):
			fmt.Fprintf(out, "%s: %v\n", name, r.Err)
			continue
		case r.Err != nil:
			return &exitError{code: exitFailure, err: r.Err}
		}
		rep := r.Report
		if rep.TornTail {
			fmt.Fprintf(errw, "hermeskilld: warning: %s: last line torn (%d bytes), ignored\n", name, rep.TornBytes)
		}
		if i == 0 && rep.Lines > 0 && rep.FirstSeq != 1 {
			fmt.Fprintf(errw, "hermeskilld: note: %s begins mid-chain at seq %d (the lines before it are not here to check)\n",
				name, rep.FirstSeq)
		}
		for _, m := range rep.Mismatches {
			if !slices.ContainsFunc(r.Mismatches, func(u audit.Mismatch) bool { return u.Seq == m.Seq }) {
				fmt.Fprintf(errw, "hermeskilld: note: %s: line %d: anchor mismatch recorded (seq %d), accepted: %s\n",
					name, m.Line, m.Seq, m.Data)
			}
		}
		for _, m := range r.Mismatches {
			fmt.Fprintf(out, "%s: line %d: anchor mismatch recorded: %s; once explained, pass --accept %d\n",
				name, m.Line, m.Data, m.Seq)
		}
		summary := fmt.Sprintf("%s: %d lines, chain intact", name, rep.Lines)
		if a := r.Anchor; a != nil {
			summary += fmt.Sprintf(", anchored at seq %d", a.Seq)
			switch {
			case opts.PublicKey != nil:
				summary += ", signed by " + certs.KeyID(opts.PublicKey)
			case a.Signature != nil:
				fmt.Fprintf(errw, "hermeskilld: note: %s: the anchor is signed by %s; --pubkey checks it\n", name, a.Signature.KeyID)
			}
		}
		if n := len(r.Mismatches); n > 0 {
			summary += fmt.Sprintf("; %d anchor mismatch(es) recorded", n)
		}
		fmt.Fprintln(out, summary)
	}
	if failed {
		return &exitError{code: exitFailure}
	}
	return nil
}

func newKeygen() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen PATH",
		Short: "Create an Ed25519 key pair for signing death certificates",
		Long: `Create an Ed25519 key pair: the private key at PATH (PEM, mode 0600) and the
public key at PATH.pub (mode 0644). Neither file may exist already. Point
signing_key in hermeskilld.yaml at PATH; give PATH.pub to whoever checks
certificates (hermeskilld certs verify --pubkey PATH.pub CERT).

Prints the public key's path and its key id, the name certificates carry in
signature.key_id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			pubPath, err := certs.GenerateKey(args[0])
			if errors.Is(err, fs.ErrExist) {
				return &exitError{code: exitFailure, err: fmt.Errorf("%w (keygen never replaces a key)", err)}
			}
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			pub, err := certs.LoadPublicKey(pubPath)
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			fmt.Fprintf(c.OutOrStdout(), "public key: %s\nkey id: %s\n", pubPath, certs.KeyID(pub))
			return nil
		},
	}
}

func newCalibrate() *cobra.Command {
	var (
		dir    string
		since  time.Duration
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "calibrate",
		Short: "Per-check kill statistics and precision from labelled certificates",
		Long: `Read the death certificates and the operators' labels (hermeskilld certs
label) in the certificates directory and print, per check: kills (enforce
mode), shadow kills, how many are labelled, true and false positives, the
precision TP/(TP+FP), the median time from detection to death, and how far
the escalation ladder went. Labels on shadow-mode certificates count: that
is how a threshold is tuned before it is enforced. Deaths hermeskilld did
not cause (trigger_type external) are left out.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var from time.Time
			if since > 0 {
				from = time.Now().Add(-since)
			}
			return calibrateRun(c.OutOrStdout(), c.ErrOrStderr(), dir, from, asJSON)
		},
	}
	c.Flags().StringVar(&dir, "dir", certs.DefaultDir(), "the certificates directory")
	c.Flags().Var(durationValue{&since}, "since", "only certificates triggered in this last duration (e.g. 720h; default: all)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the statistics as JSON")
	return c
}

func calibrateRun(out, errw io.Writer, dir string, since time.Time, asJSON bool) error {
	entries, err := certs.List(dir)
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	var unreadable []certs.Entry
	for _, e := range entries {
		if e.Err != nil {
			unreadable = append(unreadable, e)
		}
	}
	if n := len(unreadable); n > 0 {
		fmt.Fprintf(errw, "hermeskilld: warning: %d file(s) in %s skipped, not certificates (first: %v)\n",
			n, dir, unreadable[0].Err)
	}
	labels, err := calibrate.ReadLabels(dir)
	var bad *calibrate.BadLinesError
	switch {
	case errors.As(err, &bad):
		fmt.Fprintf(errw, "hermeskilld: warning: %v; those lines are skipped\n", err)
	case err != nil:
		return &exitError{code: exitFailure, err: err}
	}
	stats := calibrate.Compute(entries, labels, since)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(stats) // [] when there are none
	}
	if len(stats) == 0 {
		window := ""
		if !since.IsZero() {
			window = " since " + since.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "no kills recorded in %s%s\n", dir, window)
		return nil
	}
	if err := calibrate.RenderTable(out, stats); err != nil {
		return err
	}
	if unlabelled := calibrateUnlabelled(stats); unlabelled > 0 {
		fmt.Fprintf(out, "\n%d kill(s) not labelled yet: hermeskilld certs label CERT --verdict true-positive|false-positive\n", unlabelled)
	}
	return nil
}

func calibrateUnlabelled(stats []calibrate.CheckStats) int {
	n := 0
	for _, s := range stats {
		n += s.Kills + s.ShadowKills - s.Labelled
	}
	return n
}
