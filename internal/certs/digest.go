// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package certs

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/hermeskill/hermeskilld/internal/display"
)

// DigestMax is the most of a container's termination message Kubernetes
// keeps (4096 bytes; it cuts the rest).
const DigestMax = 4096

// digestReasonMax bounds each agent-supplied text in a digest, so that
// the certificate's id and the spend always fit beside it.
const digestReasonMax = 1024

// digestPrefix says who speaks, in a message among the kubelet's.
const digestPrefix = "hermeskilld: "

// Digest is c in a few lines, for a container's termination message: the
// headline `certs show` starts with (who, why, how far the ladder went,
// the exit, how long it ran), the certificate's id and where it was
// written (path, "" when it could not be), and what the run spent, as the
// gateway metered it and as the agent reported it. Kubernetes shows it in
// `kubectl describe pod` and the pod's status. It is at most DigestMax
// bytes: a long reason is cut, the certificate's id never is.
func Digest(c *Certificate, path string) []byte {
	short := *c
	short.TriggerReason = cut(c.TriggerReason, digestReasonMax)
	if c.OperatorReason != nil {
		s := cut(*c.OperatorReason, digestReasonMax)
		short.OperatorReason = &s
	}
	if c.Operator != nil {
		s := cut(*c.Operator, digestReasonMax)
		short.Operator = &s
	}
	var head bytes.Buffer
	(&renderer{b: &head, c: &short}).headline()

	var tail bytes.Buffer
	fmt.Fprintf(&tail, "certificate: %s", display.Clean(c.CertID))
	if path != "" {
		fmt.Fprintf(&tail, " (%s)", display.Clean(path))
	}
	tail.WriteByte('\n')
	if s := spendText(c); s != "" {
		fmt.Fprintf(&tail, "spend: %s\n", s)
	}

	h := bytes.TrimRight(head.Bytes(), "\n")
	if room := DigestMax - len(digestPrefix) - tail.Len() - 1; len(h) > room {
		h = []byte(cut(string(h), room))
	}
	out := make([]byte, 0, len(digestPrefix)+len(h)+1+tail.Len())
	out = append(out, digestPrefix...)
	out = append(out, h...)
	out = append(out, '\n')
	return append(out, tail.Bytes()...)
}

// spendText is what the run spent, "" when nothing was counted.
func spendText(c *Certificate) string {
	f := c.FinalState
	reported := ""
	if f.Tokens != 0 || f.CostUSD != 0 {
		reported = fmt.Sprintf("%d tokens, $%s", f.Tokens, strconv.FormatFloat(f.CostUSD, 'f', 4, 64))
	}
	m := c.Metered
	if m == nil {
		if reported == "" {
			return ""
		}
		return reported + " (reported by the agent)"
	}
	s := fmt.Sprintf("%d LLM requests, %d tokens, $%s metered", m.Requests, m.Tokens,
		strconv.FormatFloat(m.CostUSD, 'f', 4, 64))
	if !m.CostKnown {
		s += " (cost incomplete: an unpriced model or a request whose usage was not read)"
	}
	if reported != "" {
		s += "; the agent reported " + reported
	}
	return s
}

// cut is s in at most n bytes, ended by "…" when it was cut, never in the
// middle of a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	i := n - len(ellipsis)
	if i < 0 {
		return ""
	}
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ellipsis
}
