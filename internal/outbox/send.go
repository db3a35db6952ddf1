// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// maxBodyLog is how much of a refusing response is kept in the log and in
// parked/<id>.reason.
const maxBodyLog = 1024

// outcome of one delivery attempt.
type outcome int

const (
	delivered outcome = iota
	retry             // the control plane is unreachable or asks to wait
	parkIt            // the control plane refused this item
	gone              // the item's file vanished (delivered and deleted by an earlier run)
	stopped           // the context ended during the attempt
)

// Run is the sender: it delivers pending items, oldest first, until ctx
// ends or the Outbox is closed, then returns nil. Only one Run may be
// active (ErrRunning); after Close it returns ErrClosed. See the package
// comment for the responses and the backoff.
func (o *Outbox) Run(ctx context.Context) error {
	o.mu.Lock()
	switch {
	case o.closed:
		o.mu.Unlock()
		return ErrClosed
	case o.running != nil:
		o.mu.Unlock()
		return ErrRunning
	}
	done := make(chan struct{})
	o.running = done
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.running = nil
		o.mu.Unlock()
		close(done)
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-o.closing:
			cancel()
		case <-ctx.Done():
		}
	}()

	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	failures := 0 // consecutive
	for {
		it := o.head()
		if it == nil {
			select {
			case <-ctx.Done():
				return nil
			case <-o.wake:
			case <-o.flush:
			}
			continue
		}
		res, wait := o.attempt(ctx, it)
		switch res {
		case stopped:
			return nil
		case retry:
			failures++
			wait = max(wait, o.backoff(failures))
			o.log.Debug("control plane delivery: retrying", zap.Duration("in", wait), zap.Int("failures", failures))
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return nil
			case <-timer.C:
			case <-o.flush: // try now, and back off afresh
				failures = 0
				timer.Stop() // no stale tick after Stop (Go 1.23 timers)
			}
		default:
			failures = 0
		}
	}
}

// backoff is the wait after the n-th consecutive failure: full jitter,
// uniform in [0, min(MaxBackoff, MinBackoff·2^(n-1))).
func (o *Outbox) backoff(n int) time.Duration {
	ceil := o.opts.MaxBackoff
	if n-1 < 62 {
		if d := o.opts.MinBackoff << (n - 1); d > 0 && d < ceil {
			ceil = d
		}
	}
	return rand.N(ceil) + 1
}

// attempt sends it once and acts on the answer. wait is the Retry-After
// the control plane asked for (capped at MaxBackoff), for retry.
func (o *Outbox) attempt(ctx context.Context, it *item) (res outcome, wait time.Duration) {
	log := o.log.With(zap.String("cert_id", it.id), zap.String("agent_id", it.agentID))
	what := "certificate"
	if it.directiveID != "" {
		log, what = o.log.With(zap.String("directive_id", it.directiveID)), "directive receipt"
	}
	body, err := os.ReadFile(o.itemPath(it.id))
	if errors.Is(err, fs.ErrNotExist) {
		log.Warn("outbox item vanished; dropping it")
		o.remove(it, func(*Stats) {})
		return gone, 0
	}
	if err != nil {
		log.Error("outbox item unreadable; parking it", zap.Error(err))
		o.parkItem(it, "unreadable: "+err.Error(), log)
		return parkIt, 0
	}
	status, retryAfter, snippet, redirectTo, err := o.post(ctx, it, body)
	if ctx.Err() != nil {
		return stopped, 0 // shutting down: not the control plane's failure
	}
	switch {
	case err != nil:
		log.Warn("control plane unreachable", zap.Error(err))
	case status >= 200 && status < 300:
		o.delivered(it, log)
		log.Info(what+" delivered to the control plane", zap.Int("status", status))
		return delivered, 0
	case isRedirect(status):
		// Never followed: the token and the certificate go to the
		// configured origin only. Kept and retried, as any failure the
		// control plane's operator can fix.
		log.Error("control plane answered with a redirect, which is never followed; will retry",
			zap.Int("status", status), zap.String("location", redirectTo), zap.String("configured", o.base))
	case it.directiveID != "" && status == http.StatusNotFound:
		// A control plane that predates receipts: nothing to retry. The
		// receipt stays in receiptsDir, for a repeat of the directive.
		log.Warn("the control plane takes no directive receipts (HTTP 404); dropped from the outbox")
		o.drop(it, log)
		return delivered, 0
	case retryable(status):
		log.Warn("control plane delivery failed; will retry", zap.Int("status", status), zap.String("body", snippet))
	default:
		reason := fmt.Sprintf("HTTP %d from POST %s: %s", status, o.itemURL(it), snippet)
		log.Error("control plane refused the "+what+"; parked, not retried",
			zap.Int("status", status), zap.String("body", snippet))
		o.parkItem(it, reason, log)
		return parkIt, 0
	}
	o.countFailure()
	return retry, min(retryAfter, o.opts.MaxBackoff)
}

// withoutRedirects is c (or a new client) that never follows a redirect:
// the bearer token must reach the configured origin and nothing else —
// not another port, host or scheme — and a certificate is delivered only
// there. The 3xx answer itself is returned, for the caller to report.
func withoutRedirects(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	out.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &out
}

func isRedirect(status int) bool { return status >= 300 && status < 400 }

// retryable says whether a non-2xx status is worth retrying.
func retryable(status int) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests,
		status == http.StatusUnauthorized, status == http.StatusForbidden:
		return true
	default:
		return status >= 500
	}
}

func (o *Outbox) eventURL(agentID string) string {
	return o.base + "/agents/" + url.PathEscape(agentID) + "/kill_events"
}

// itemURL is where it is POSTed: a receipt to its directive's receipts, a
// certificate to its agent's kill events.
func (o *Outbox) itemURL(it *item) string {
	if it.directiveID != "" {
		return o.base + "/directives/" + url.PathEscape(it.directiveID) + "/receipts"
	}
	return o.eventURL(it.agentID)
}

// post sends one request and returns the status, the Retry-After it asked
// for, the start of the response body, and where a redirect pointed.
func (o *Outbox) post(ctx context.Context, it *item, body []byte) (status int, after time.Duration, snippet, location string, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.itemURL(it), bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", it.id)
	if err := setToken(req, o.opts.TokenFile); err != nil {
		return 0, 0, "", "", err
	}
	resp, err := o.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, 0, "", "", err
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyLog))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), strings.TrimSpace(string(head)),
		cut(resp.Header.Get("Location"), maxBodyLog), nil
}

// setToken adds the bearer token read from file; "" adds nothing.
func setToken(req *http.Request, file string) error {
	if file == "" {
		return nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return fmt.Errorf("read token: %s is empty", file)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// retryAfter parses a Retry-After header: seconds or an HTTP date; 0 when
// absent or unparsable.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// delivered deletes the item's file and forgets it. The deletion need not
// be durable: an item that comes back after a crash is sent again and the
// control plane dedups it by its Idempotency-Key.
func (o *Outbox) delivered(it *item, log *zap.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Under the lock: an Enqueue of the same certificate must not rewrite
	// the file between its deletion and the item leaving the queue.
	if err := os.Remove(o.itemPath(it.id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("delivered outbox item not removed; it will be sent again after a restart", zap.Error(err))
	}
	o.dropLocked(it)
	o.stats.Delivered++
	if it.directiveID != "" {
		o.stats.Receipts.Sent++
	}
	o.changed()
}

// drop deletes the item's file and forgets it, undelivered.
func (o *Outbox) drop(it *item, log *zap.Logger) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := os.Remove(o.itemPath(it.id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("outbox item not removed; it will be sent again after a restart", zap.Error(err))
	}
	o.dropLocked(it)
	if it.directiveID != "" {
		o.stats.Receipts.Dropped++
	}
	o.changed()
}

// parkItem moves it to parked/ and forgets it. When even that fails the
// item is forgotten until the next Open, which tries again: nothing is
// retried in a loop.
func (o *Outbox) parkItem(it *item, reason string, log *zap.Logger) {
	if err := o.park(it.id, reason); err != nil {
		log.Error("outbox item not moved to parked/; it stays in the outbox until restart", zap.Error(err))
	}
	o.remove(it, func(s *Stats) {
		s.Failures++
		s.Parked = countParked(filepath.Join(o.opts.Dir, parkedDir))
		if it.directiveID != "" {
			s.Receipts.Parked++
		}
	})
}
