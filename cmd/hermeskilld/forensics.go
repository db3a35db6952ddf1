package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
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
	return &cobra.Command{
		Use:   "verify FILE...",
		Short: "Verify the hash chain of audit log files",
		Long: `Walk the hash chain of an audit log: every line must carry the sha256 of
the line before it and the next sequence number, so an edited, deleted,
inserted or reordered line is found, and its line number printed.

Several files are verified as one rotated chain, oldest first:
  hermeskilld audit verify audit.jsonl.2 audit.jsonl.1 audit.jsonl

A last line cut short (a writer that crashed inside write(2)) is not
tampering: it is ignored with a warning. What a hash chain cannot show: a
change to the very last line (nothing after it holds its hash), lines cut
off the end, or a file rewritten whole by someone who can recompute every
hash; certificates are signed, and shipped to the control plane, for that.

Exit status: 0 when every chain is intact, 1 when one is broken or a file
cannot be read.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, files []string) error {
			return auditVerify(c.OutOrStdout(), c.ErrOrStderr(), files)
		},
	}
}

// auditVerify verifies files as one chain, oldest first, and prints one
// line per file: "FILE: N lines, chain intact" or "FILE: line N: REASON"
// (then it stops: the files after a break cannot link to it).
func auditVerify(out, errw io.Writer, files []string) error {
	var prev audit.Report
	for i, name := range files {
		rep, err := auditVerifyFile(name, prev)
		var broken *audit.BrokenError
		switch {
		case errors.As(err, &broken):
			fmt.Fprintf(out, "%s: line %d: %s\n", name, broken.Line, broken.Reason)
			return &exitError{code: exitFailure}
		case err != nil:
			return &exitError{code: exitFailure, err: err}
		}
		if rep.TornTail {
			fmt.Fprintf(errw, "hermeskilld: warning: %s: last line torn (%d bytes), ignored\n", name, rep.TornBytes)
		}
		if i == 0 && rep.Lines > 0 && rep.FirstSeq != 1 {
			fmt.Fprintf(errw, "hermeskilld: note: %s begins mid-chain at seq %d (the lines before it are not here to check)\n",
				name, rep.FirstSeq)
		}
		fmt.Fprintf(out, "%s: %d lines, chain intact\n", name, rep.Lines)
		if rep.Lines > 0 {
			prev = rep
		}
	}
	return nil
}

func auditVerifyFile(name string, prev audit.Report) (audit.Report, error) {
	f, err := os.Open(name)
	if err != nil {
		return audit.Report{}, err
	}
	defer f.Close()
	return audit.VerifyFrom(f, prev)
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
