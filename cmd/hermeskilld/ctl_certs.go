// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermeskill/hermeskilld/internal/calibrate"
	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/control"
	"github.com/hermeskill/hermeskilld/internal/display"
	"github.com/hermeskill/hermeskilld/internal/outbox"
)

// certsFlags are the flags of `certs` and its subcommands, and where they
// find certificates: --dir; else the daemon's, through the control socket,
// when it runs; else certs.DefaultDir().
type certsFlags struct {
	ctl ctlFlags
	dir string

	resolved bool
	src      certSource
}

// certSource is where certificates are read: a directory, or the daemon.
type certSource struct {
	dir string          // offline
	cl  *control.Client // the daemon's (then dir is empty)
}

func newCerts() *cobra.Command {
	f := &certsFlags{}
	c := &cobra.Command{
		Use:   "certs",
		Short: "List, show, verify and label death certificates",
		Long: `Work with death certificates: the JSON record written for every kill.

CERT is a certificate file, or a certificate id (or a unique part of it, as
in its file name). Ids are looked up in --dir; without it, among the running
daemon's certificates (through its control socket); without a daemon, in
` + certs.DefaultDir() + `.
A certificate file named on the command line is read directly: these
commands work without a daemon.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	f.ctl.addTo(c)
	c.PersistentFlags().StringVar(&f.dir, "dir", "", "the certificates directory (default: the daemon's when it runs, else "+certs.DefaultDir()+")")
	c.AddCommand(f.newLs(), f.newShow(), f.newVerify(), f.newLabel())
	return c
}

// source finds where certificates are, once per command.
func (f *certsFlags) source(ctx context.Context) (certSource, error) {
	if f.resolved {
		return f.src, nil
	}
	switch {
	case f.dir != "":
		f.src = certSource{dir: f.dir}
	default:
		cl := f.ctl.client()
		_, err := cl.Info(ctx)
		switch {
		case err == nil:
			f.src = certSource{cl: cl}
		case errors.Is(err, control.ErrNoDaemon):
			cl.Close()
			f.src = certSource{dir: certs.DefaultDir()}
		default:
			cl.Close()
			if errors.Is(err, control.ErrForbidden) {
				err = fmt.Errorf("%w (or pass --dir to read a certificates directory directly)", err)
			}
			return certSource{}, ctlError(err, cl.Path())
		}
	}
	f.resolved = true
	return f.src, nil
}

func (f *certsFlags) close() {
	if f.src.cl != nil {
		f.src.cl.Close()
	}
}

// certRow is one certificate listed, or a file that is not one.
type certRow struct {
	control.CertSummary
	err error
}

func (f *certsFlags) newLs() *cobra.Command {
	var agent string
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls",
		Short: "List death certificates, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			defer f.close()
			rows, err := f.list(c.Context(), agent, c.ErrOrStderr())
			if err != nil {
				return err
			}
			if asJSON {
				list := []control.CertSummary{}
				for _, r := range rows {
					if r.err != nil {
						fmt.Fprintf(c.ErrOrStderr(), "hermeskilld: %v\n", r.err)
						continue
					}
					list = append(list, r.CertSummary)
				}
				return writeJSONOut(c.OutOrStdout(), list)
			}
			printCerts(c.OutOrStdout(), rows)
			return nil
		},
	}
	c.Flags().StringVar(&agent, "agent", "", "only this agent's certificates")
	c.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	_ = c.RegisterFlagCompletionFunc("agent", completeAgentFlag(&f.ctl))
	return c
}

func (f *certsFlags) list(ctx context.Context, agent string, errw io.Writer) ([]certRow, error) {
	src, err := f.source(ctx)
	if err != nil {
		return nil, err
	}
	var rows []certRow
	if src.cl != nil {
		list, err := src.cl.Certs(ctx, agent)
		if err != nil {
			return nil, ctlError(err, src.cl.Path())
		}
		for _, s := range list {
			rows = append(rows, certRow{CertSummary: s})
		}
		return rows, nil
	}
	entries, err := certs.List(src.dir)
	if errors.Is(err, fs.ErrNotExist) && f.dir == "" {
		fmt.Fprintf(errw, "hermeskilld: no certificates yet (%s does not exist)\n", src.dir)
		return nil, nil
	}
	if err != nil {
		return nil, &exitError{code: exitFailure, err: err}
	}
	for _, e := range entries {
		switch {
		case e.Err != nil:
			rows = append(rows, certRow{CertSummary: control.CertSummary{Path: e.Path}, err: e.Err})
		case agent == "" || e.Cert.AgentID == agent:
			rows = append(rows, certRow{CertSummary: summaryOf(e.Path, e.Cert)})
		}
	}
	return rows, nil
}

func summaryOf(path string, c *certs.Certificate) control.CertSummary {
	return control.CertSummary{CertID: c.CertID, AgentID: c.AgentID, Path: path, Mode: c.Mode,
		TriggerType: c.TriggerType, TriggerCheck: c.TriggerCheck, Reason: c.TriggerReason,
		Reached: c.Escalation.Reached, TriggeredAt: c.TriggeredAt, Signed: c.Signature != nil}
}

func printCerts(w io.Writer, rows []certRow) {
	tw := newTable(w)
	fmt.Fprintln(tw, "TRIGGERED\tAGENT\tCHECK\tTYPE\tREACHED\tMODE\tSIGNED\tCERT\tREASON")
	for _, r := range rows {
		if r.err != nil {
			fmt.Fprintf(tw, "-\t-\t?\t-\t-\t-\t-\t%s\tunreadable: %s\n", display.Clean(filepath.Base(r.Path)), display.Cut(display.Clean(r.err.Error()), 80))
			continue
		}
		signed := "no"
		if r.Signed {
			signed = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", stampText(r.TriggeredAt), display.Clean(r.AgentID),
			display.Clean(r.TriggerCheck), display.Clean(r.TriggerType), display.OrDash(display.Clean(r.Reached)), display.Clean(r.Mode), signed,
			display.Clean(r.CertID), display.Cut(display.Clean(r.Reason), 60))
	}
	tw.Flush()
}

func (f *certsFlags) newShow() *cobra.Command {
	var asJSON bool
	var pubkey string
	c := &cobra.Command{
		Use:   "show [--json] [--pubkey FILE] CERT...",
		Short: "Show death certificates",
		Long: `Show death certificates for people: why, when and how the agent died, its
symptoms, the ladder's steps, its last state, process tree and last output.
--json prints the certificate file exactly as stored. With --pubkey the
signature is checked too (the status is 1 when it does not verify).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			defer f.close()
			pub, err := loadPubkey(pubkey)
			if err != nil {
				return err
			}
			out, errw := c.OutOrStdout(), c.ErrOrStderr()
			var failed []string
			for i, ref := range args {
				name, data, err := f.load(c.Context(), ref)
				var ee *exitError
				if errors.As(err, &ee) {
					return err // no daemon, forbidden
				}
				if err == nil && !asJSON {
					var cert *certs.Certificate
					if cert, err = certs.Parse(data); err == nil {
						if i > 0 {
							fmt.Fprintln(out)
						}
						err = certs.Render(out, cert)
					}
				} else if err == nil {
					_, err = out.Write(data)
					if err == nil && len(data) > 0 && data[len(data)-1] != '\n' {
						_, err = fmt.Fprintln(out)
					}
				}
				if err == nil && pub != nil {
					if verr := certs.Verify(data, pub); verr != nil {
						fmt.Fprintf(errw, "hermeskilld: %s: signature check FAILED: %v\n", name, verr)
						failed = append(failed, name)
					} else if !asJSON {
						fmt.Fprintf(out, "signature check: valid (key %s)\n", certs.KeyID(pub))
					}
				}
				if err != nil {
					fmt.Fprintf(errw, "hermeskilld: %s: %v\n", name, err)
					failed = append(failed, name)
				}
			}
			if len(failed) > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("failed: %s", strings.Join(failed, ", "))}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the certificate file as stored")
	c.Flags().StringVar(&pubkey, "pubkey", "", "check the signature against this public key (the signing key's .pub file)")
	return c
}

func (f *certsFlags) newVerify() *cobra.Command {
	var pubkey string
	c := &cobra.Command{
		Use:   "verify --pubkey FILE CERT|RECEIPT|DIR...",
		Short: "Verify the signatures of death certificates and directive receipts",
		Long: `Verify the Ed25519 signature of each certificate (every *.json file of a
DIR) against --pubkey, the public half of the daemon's signing key. A
control plane directive receipt (state_dir/outbox/receipts/*.json, signed
with the same key) is verified the same way, and named as one. Prints OK or
FAIL for each; the status is 1 when any file is unsigned, signed by another
key, altered, or unreadable.`,
		Example: `  hermeskilld certs verify --pubkey /etc/hermeskill/signing.key.pub /var/lib/hermeskill/certs
  hermeskilld certs verify --pubkey /etc/hermeskill/signing.key.pub /var/lib/hermeskill/outbox/receipts`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			defer f.close()
			if pubkey == "" {
				return usageError("--pubkey FILE is required: the public half of the signing key (e.g. /etc/hermeskill/signing.key.pub)")
			}
			pub, err := loadPubkey(pubkey)
			if err != nil {
				return err
			}
			out, errw := c.OutOrStdout(), c.ErrOrStderr()
			var failed []string
			var n verifyCount
			check := func(name string, data []byte, err error) {
				r, rerr := outbox.ParseReceipt(data)
				n.add(rerr == nil)
				if err == nil {
					err = certs.Verify(data, pub)
				}
				switch {
				case err != nil && r != nil:
					fmt.Fprintf(errw, "FAIL  %s: %s\n", name, receiptFailure(r, err, pub))
					failed = append(failed, name)
				case err != nil:
					fmt.Fprintf(errw, "FAIL  %s: %v\n", name, err)
					failed = append(failed, name)
				case r != nil:
					fmt.Fprintf(out, "OK    %s (receipt of directive %s, %s)\n", name, display.Clean(r.DirectiveID), display.Clean(r.Action))
				default:
					fmt.Fprintf(out, "OK    %s\n", name)
				}
			}
			for _, ref := range args {
				if fi, err := os.Stat(ref); err == nil && fi.IsDir() {
					entries, err := certs.List(ref)
					if err != nil {
						return &exitError{code: exitFailure, err: err}
					}
					if len(entries) == 0 {
						fmt.Fprintf(errw, "FAIL  %s: no certificates or receipts in this directory\n", ref)
						failed = append(failed, ref)
					}
					for _, e := range entries {
						if e.Err != nil {
							// Not a certificate: a receipt, or a file that is neither.
							if data, err := certs.ReadFile(e.Path); err == nil {
								if _, err := outbox.ParseReceipt(data); err == nil {
									check(e.Path, data, nil)
									continue
								}
							}
							check(e.Path, nil, e.Err)
							continue
						}
						data, err := certs.ReadFile(e.Path)
						check(e.Path, data, err)
					}
					continue
				}
				name, data, err := f.load(c.Context(), ref)
				var ee *exitError
				if errors.As(err, &ee) {
					return err
				}
				check(name, data, err)
			}
			if len(failed) > 0 {
				return &exitError{code: exitFailure, err: fmt.Errorf("%d of %s FAILED verification: %s",
					len(failed), n, strings.Join(failed, ", "))}
			}
			fmt.Fprintf(out, "%s verified with key %s\n", n, certs.KeyID(pub))
			return nil
		},
	}
	c.Flags().StringVar(&pubkey, "pubkey", "", "the signing key's public half (PEM, as `.pub` next to the key; or raw, hex or base64)")
	return c
}

// verifyCount counts the files verify checked, by kind.
type verifyCount struct{ certs, receipts int }

func (n *verifyCount) add(receipt bool) {
	if receipt {
		n.receipts++
	} else {
		n.certs++
	}
}

// String is "3 certificate(s)", "1 receipt(s)", "3 certificate(s) and 1
// receipt(s)".
func (n verifyCount) String() string {
	switch {
	case n.receipts == 0:
		return fmt.Sprintf("%d certificate(s)", n.certs)
	case n.certs == 0:
		return fmt.Sprintf("%d receipt(s)", n.receipts)
	}
	return fmt.Sprintf("%d certificate(s) and %d receipt(s)", n.certs, n.receipts)
}

// receiptFailure words the failure err of receipt r's verification
// against pub: certs.Verify's errors speak of certificates.
func receiptFailure(r *outbox.Receipt, err error, pub ed25519.PublicKey) string {
	switch {
	case errors.Is(err, certs.ErrUnsigned):
		return "receipt is not signed"
	case errors.Is(err, certs.ErrKeyMismatch):
		return fmt.Sprintf("receipt signed by another key: signed by %q, key given is %q", r.Signature.KeyID, certs.KeyID(pub))
	case errors.Is(err, certs.ErrBadSignature):
		return "receipt content does not match its signature"
	}
	return "receipt: " + err.Error()
}

func (f *certsFlags) newLabel() *cobra.Command {
	var verdict, note string
	c := &cobra.Command{
		Use:   "label CERT --verdict true-positive|false-positive [--note TEXT]",
		Short: "Record whether a kill was right, for calibration",
		Long: `Record an operator's verdict on a certificate's kill: true-positive (the
agent had to die) or false-positive (the check fired on a healthy agent).
The certificate itself is never modified (its signature covers it): the
label is appended as one JSON line to labels.jsonl in the certificate's
directory. ` + "`hermeskilld calibrate`" + ` turns the labels into precision per check.`,
		Example: `  hermeskilld certs label 0193a5c2 --verdict false-positive --note "slow API, not a wedge"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			defer f.close()
			if verdict != calibrate.TruePositive && verdict != calibrate.FalsePositive {
				return usageError("--verdict must be %s or %s", calibrate.TruePositive, calibrate.FalsePositive)
			}
			s, err := f.summary(c.Context(), args[0])
			if err != nil {
				return err
			}
			dir := filepath.Dir(s.Path)
			l := calibrate.Label{CertID: s.CertID, AgentID: s.AgentID, TriggerCheck: s.TriggerCheck,
				Verdict: verdict, Note: note, At: time.Now(), By: control.CallerName(os.Getuid())}
			if err := calibrate.AppendLabel(dir, l); err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			fmt.Fprintf(c.OutOrStdout(), "certificate %s (agent %s, %s) labelled %s in %s\n", display.Clean(s.CertID),
				display.Clean(s.AgentID), display.Clean(s.TriggerCheck), verdict, filepath.Join(dir, calibrate.LabelsFile))
			return nil
		},
	}
	c.Flags().StringVar(&verdict, "verdict", "", "true-positive or false-positive (required)")
	c.Flags().StringVar(&note, "note", "", "why, for whoever tunes the thresholds")
	return c
}

// summary finds a certificate's summary, with its file's path: from the
// file, the directory, or the daemon.
func (f *certsFlags) summary(ctx context.Context, ref string) (control.CertSummary, error) {
	if isPathRef(ref) {
		data, err := certs.ReadFile(ref)
		if err != nil {
			return control.CertSummary{}, &exitError{code: exitFailure, err: err}
		}
		c, err := certs.Parse(data)
		if err != nil {
			return control.CertSummary{}, &exitError{code: exitFailure, err: fmt.Errorf("%s: %w", ref, err)}
		}
		return summaryOf(ref, c), nil
	}
	rows, err := f.list(ctx, "", io.Discard)
	if err != nil {
		return control.CertSummary{}, err
	}
	var found []control.CertSummary
	for _, r := range rows {
		if r.err == nil {
			found = append(found, r.CertSummary)
		}
	}
	i, err := match(ref, found, f.where())
	if err != nil {
		return control.CertSummary{}, &exitError{code: exitFailure, err: err}
	}
	return found[i], nil
}

// load returns a certificate file's bytes and a name for it: a file named
// by ref, or the certificate with that id in the directory or the daemon.
func (f *certsFlags) load(ctx context.Context, ref string) (name string, data []byte, err error) {
	if isPathRef(ref) {
		data, err := certs.ReadFile(ref)
		return ref, data, err
	}
	src, err := f.source(ctx)
	if err != nil {
		return ref, nil, err
	}
	if src.cl != nil {
		data, err := src.cl.Cert(ctx, ref)
		if err != nil && !errors.Is(err, control.ErrNotFound) && !errors.Is(err, control.ErrBadInput) {
			err = ctlError(err, src.cl.Path())
		}
		return "certificate " + ref, data, err
	}
	entries, err := certs.List(src.dir)
	if err != nil {
		return ref, nil, err
	}
	var found []control.CertSummary
	for _, e := range entries {
		if e.Cert != nil {
			found = append(found, summaryOf(e.Path, e.Cert))
		}
	}
	i, err := match(ref, found, src.dir)
	if err != nil {
		return ref, nil, err
	}
	data, err = certs.ReadFile(found[i].Path)
	return found[i].Path, data, err
}

func (f *certsFlags) where() string {
	if f.src.cl != nil {
		return "the daemon's certificates"
	}
	return f.src.dir
}

// match finds the certificate ref names in found (certs.Match: its cert_id,
// else a unique part of its file name); where names the place for errors.
func match(ref string, found []control.CertSummary, where string) (int, error) {
	i, n := certs.Match(ref, found, func(s control.CertSummary) (string, string) { return s.CertID, s.Path })
	switch n {
	case 1:
		return i, nil
	case 0:
		return 0, fmt.Errorf("no certificate %q in %s", ref, where)
	default:
		return 0, fmt.Errorf("%q matches %d certificates in %s; give more of the id", ref, n, where)
	}
}

// isPathRef: ref names a file (it has a slash or ends in .json, or such a
// file exists) rather than a certificate id.
func isPathRef(ref string) bool {
	if strings.ContainsRune(ref, filepath.Separator) || strings.HasSuffix(ref, ".json") {
		return true
	}
	fi, err := os.Stat(ref)
	return err == nil && fi.Mode().IsRegular()
}

func loadPubkey(path string) (ed25519.PublicKey, error) {
	if path == "" {
		return nil, nil
	}
	pub, err := certs.LoadPublicKey(path)
	if err != nil {
		return nil, &exitError{code: exitFailure, err: err}
	}
	return pub, nil
}
