// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package symptoms

import (
	"fmt"
	"strings"
	"time"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// Egress is the egress check's name (network: allowlist).
const Egress Check = "egress"

// The egress check counts what the agent's egress proxy did: the requests
// it refused (a destination not listed, a listed name that resolved into
// a private range, any request after the revocation) and the bytes it
// passed, both ways. Over the run when checks.egress.per is 0, else within
// a sliding window kept as the rates' are. Like a rate it only rises when
// something is added, so it is judged then, and at a Reconfigure.

// egressMeters are the egress check's windows (per > 0) and the last
// refusal, for the message.
type egressMeters struct {
	refusals, bytes window
	lastDest        string
	lastReason      string
}

func (m *egressMeters) resize(c *config.Egress, origin, now time.Time) {
	var per time.Duration
	if c != nil {
		per = c.Per
	}
	m.refusals.resize(per, origin, now)
	m.bytes.resize(per, origin, now)
}

// EgressRefused applies one request the egress proxy refused at now, to
// destination dest (host:port as asked) for reason.
func (e *Engine) EgressRefused(dest, reason string, now time.Time) []Symptom {
	out := e.Tick(now)
	e.st.EgressRefusals++
	e.egress.lastDest, e.egress.lastReason = dest, reason
	c := e.cfg.Egress
	if c == nil {
		return out
	}
	v := float64(e.st.EgressRefusals)
	if c.Per > 0 {
		v = e.egress.refusals.add(1, now)
	}
	return append(out, e.egressRefusals(c, v, now)...)
}

// EgressMoved applies n bytes the egress proxy passed (both directions
// summed), at now.
func (e *Engine) EgressMoved(n int64, now time.Time) []Symptom {
	if n <= 0 {
		return nil
	}
	out := e.Tick(now)
	e.st.EgressBytes += uint64(n)
	c := e.cfg.Egress
	if c == nil {
		return out
	}
	v := float64(e.st.EgressBytes)
	if c.Per > 0 {
		v = e.egress.bytes.add(float64(n), now)
	}
	return append(out, e.egressBytes(c, v, now)...)
}

// egressNow judges the check as it stands at now (after Reconfigure).
func (e *Engine) egressNow(now time.Time) []Symptom {
	c := e.cfg.Egress
	if c == nil {
		return nil
	}
	refusals, bytes := float64(e.st.EgressRefusals), float64(e.st.EgressBytes)
	if c.Per > 0 {
		refusals, bytes = e.egress.refusals.at(now), e.egress.bytes.at(now)
	}
	return append(e.egressRefusals(c, refusals, now), e.egressBytes(c, bytes, now)...)
}

func (e *Engine) egressRefusals(c *config.Egress, v float64, now time.Time) []Symptom {
	n := int64(v)
	switch {
	case c.Refusals > 0 && n > c.Refusals:
		return e.fire(e.egressRefusalSymptom(c, Terminal, n, c.Refusals, now))
	case c.RefusalsWarn > 0 && n > c.RefusalsWarn:
		return e.warn(e.egressRefusalSymptom(c, Warning, n, c.RefusalsWarn, now))
	}
	return nil
}

func (e *Engine) egressBytes(c *config.Egress, v float64, now time.Time) []Symptom {
	n := int64(v)
	switch {
	case c.Bytes > 0 && n > c.Bytes:
		return e.fire(e.egressBytesSymptom(c, Terminal, n, c.Bytes, now))
	case c.BytesWarn > 0 && n > c.BytesWarn:
		return e.warn(e.egressBytesSymptom(c, Warning, n, c.BytesWarn, now))
	}
	return nil
}

// egressRefusalSymptom says it: "the egress proxy refused 21 requests,
// over the limit of 20; the last: evil.example:443 (is not in this
// agent's allowlist)".
func (e *Engine) egressRefusalSymptom(c *config.Egress, sev Severity, n, limit int64, now time.Time) Symptom {
	observed, threshold := count(n)+" refused", count(limit)
	in := ""
	if c.Per > 0 {
		w := config.FormatDuration(c.Per)
		observed += " in " + w
		threshold += " per " + w
		in = " in the last " + w
	}
	return Symptom{At: now, Check: Egress, Severity: sev, Observed: observed, Threshold: threshold,
		Message: fmt.Sprintf("the egress proxy refused %d requests%s, over the %s of %s; the last: %s (%s)",
			n, in, limitWord(sev), threshold, e.egress.lastDest, e.egress.lastReason)}
}

// egressBytesSymptom says it: "the egress proxy passed 1.2GiB, over the
// limit of 1GiB".
func (e *Engine) egressBytesSymptom(c *config.Egress, sev Severity, n, limit int64, now time.Time) Symptom {
	observed, threshold := config.FormatSize(n), config.FormatSize(limit)
	if observed == threshold {
		// Rounded alike: the bytes say which is more.
		observed, threshold = count(n)+" bytes", count(limit)+" bytes"
	}
	in := ""
	if c.Per > 0 {
		w := config.FormatDuration(c.Per)
		observed += " in " + w
		threshold += " per " + w
		in = " in the last " + w
	}
	return Symptom{At: now, Check: Egress, Severity: sev, Observed: observed, Threshold: threshold,
		Message: fmt.Sprintf("the egress proxy passed %s%s, over the %s of %s", strings.TrimSuffix(observed, " in "+config.FormatDuration(c.Per)), in, limitWord(sev), threshold)}
}

func limitWord(sev Severity) string {
	if sev == Warning {
		return "warning threshold"
	}
	return "limit"
}
