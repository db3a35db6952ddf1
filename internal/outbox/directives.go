// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Directive actions hermeskilld acts on.
const (
	// ActionKill stops the agents named through the escalation ladder.
	ActionKill = "kill"
	// ActionRevoke is a standing revocation of the agent: killed, its LLM
	// access withdrawn, and kept from starting until an operator lifts it.
	ActionRevoke = "revoke"
	// ActionEstop stops every agent of the host and keeps them down (the
	// daemon's e-stop), from the host's directives only.
	ActionEstop = "estop"
)

// Defaults of pollerOptions.
const (
	defaultPollInterval = 10 * time.Second
	defaultMaxSeen      = 10000
)

// maxDirectivesBody bounds a directives response.
const maxDirectivesBody = 1 << 20

// Directive is one request from the control plane (see the package
// comment for the wire format).
type Directive struct {
	ID       string `json:"id"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
	Operator string `json:"operator"`
	// Agents are the agents a host's kill or revoke directive names; a
	// directive polled for one agent is about that agent alone.
	Agents []string `json:"agents,omitempty"`
}

// pollerOptions configure a poller. URL, Dir, Agents and Handle are
// required.
type pollerOptions struct {
	URL       string // the control plane's base URL, as Options.URL
	TokenFile string // as Options.TokenFile
	// Dir keeps seenFile (the outbox directory).
	Dir string
	// Interval between polls of all agents (default 10s), jittered ±20%.
	Interval time.Duration
	// Timeout bounds one request (default 10s).
	Timeout time.Duration
	// MaxSeen bounds the remembered directive ids (default 10000); the
	// oldest are forgotten first.
	MaxSeen    int
	HTTPClient *http.Client
	// Agents returns the ids of the agents to poll for, at each poll.
	Agents func() []string
	// Handle is called once per new directive (with an id and an
	// action), on the poller's goroutine: it should hand the work off, not
	// wait for a kill to finish. agentID is the agent it was polled for,
	// "" for the host's directives.
	Handle func(agentID string, d Directive)
	// Repeat, when set, is called for a directive already handed over
	// that the control plane sends again.
	Repeat func(agentID string, d Directive)
	// OnContact, when set, is called when the control plane answered a
	// poll (a contact, for the dead-man's switch).
	OnContact func()
	Log       *zap.Logger
}

// poller pulls directives from the control plane. Run (or PollOnce) is
// called from one goroutine at a time.
type poller struct {
	opts pollerOptions
	base string
	log  *zap.Logger
	seen *seenSet
}

// newPoller loads the remembered directive ids from Dir/seenFile (an
// unreadable file is logged and started afresh: at worst a directive is
// acted on twice) and returns a poller.
func newPoller(opts pollerOptions) (*poller, error) {
	if opts.URL == "" || opts.Dir == "" || opts.Agents == nil || opts.Handle == nil {
		return nil, errors.New("new poller: URL, Dir, Agents and Handle are required")
	}
	opts.Interval = cmp.Or(opts.Interval, defaultPollInterval)
	opts.Timeout = cmp.Or(opts.Timeout, defaultTimeout)
	opts.MaxSeen = cmp.Or(opts.MaxSeen, defaultMaxSeen)
	opts.HTTPClient = withoutRedirects(opts.HTTPClient)
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	seen, err := loadSeen(filepath.Join(opts.Dir, seenFile), opts.MaxSeen)
	if err != nil {
		opts.Log.Error("directive ids seen before are lost; starting afresh", zap.Error(err))
	}
	return &poller{opts: opts, base: strings.TrimRight(opts.URL, "/"), log: opts.Log, seen: seen}, nil
}

// Run polls every interval until ctx ends, then returns nil. The first poll
// is after one (jittered) interval.
func (p *poller) Run(ctx context.Context) error {
	t := time.NewTimer(p.jittered())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		p.PollOnce(ctx)
		t.Reset(p.jittered())
	}
}

func (p *poller) jittered() time.Duration {
	d := p.opts.Interval
	return d - d/5 + rand.N(2*d/5+1)
}

// PollOnce asks once for the directives of every agent Agents returns and
// hands the new ones to Handle. Failures are logged (the next poll tries
// again); it returns how many directives were handed over.
func (p *poller) PollOnce(ctx context.Context) int {
	n := 0
	for _, id := range p.opts.Agents() {
		if ctx.Err() != nil {
			break
		}
		ds, err := p.fetch(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("control plane directives not fetched", zap.String("agent_id", id), zap.Error(err))
			}
			continue
		}
		for _, d := range ds {
			if p.handle(id, d) {
				n++
			}
		}
	}
	return n
}

// handle acts on d once, then remembers it.
func (p *poller) handle(agentID string, d Directive) bool {
	log := p.log.With(zap.String("agent_id", agentID), zap.String("directive_id", d.ID),
		zap.String("action", d.Action), zap.String("operator", d.Operator))
	if d.ID == "" || d.Action == "" {
		log.Warn("control plane directive without id or action ignored")
		return false
	}
	if p.seen.has(agentID, d.ID) {
		if p.opts.Repeat != nil {
			p.opts.Repeat(agentID, d)
		}
		return false
	}
	acted := false
	switch d.Action {
	case ActionKill, ActionRevoke, ActionEstop:
		log.Info("control plane directive", zap.String("reason", d.Reason), zap.Strings("agents", d.Agents))
		acted = true
	default:
		log.Warn("control plane directive with an unknown action: nothing done (acknowledged as failed)")
	}
	p.opts.Handle(agentID, d)
	if err := p.seen.add(agentID, d.ID, time.Now()); err != nil {
		log.Error("directive id not remembered on disk; it may be acted on again after a restart", zap.Error(err))
	}
	return acted
}

func (p *poller) directivesURL(agentID string) string {
	return p.base + "/agents/" + url.PathEscape(agentID) + "/directives"
}

func (p *poller) fetch(ctx context.Context, agentID string) ([]Directive, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.directivesURL(agentID), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if err := setToken(req, p.opts.TokenFile); err != nil {
		return nil, err
	}
	return p.do(req)
}

// do sends a directives request and reads the answer (200 with
// directives; 204 or 404: none). Any answer of the control plane's
// other than a redirect is a contact (OnContact).
func (p *poller) do(req *http.Request) ([]Directive, error) {
	resp, err := p.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDirectivesBody+1))
	if err != nil {
		return nil, fmt.Errorf("read directives: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNoContent, resp.StatusCode == http.StatusNotFound:
		p.contact()
		return nil, nil
	case isRedirect(resp.StatusCode):
		return nil, fmt.Errorf("GET %s: HTTP %d to %q: redirects are never followed (the token goes to the configured origin only)",
			req.URL, resp.StatusCode, cut(resp.Header.Get("Location"), maxBodyLog))
	case resp.StatusCode != http.StatusOK:
		return nil, &statusError{url: req.URL.String(), status: resp.StatusCode, body: cut(string(body), maxBodyLog)}
	case len(body) > maxDirectivesBody:
		return nil, fmt.Errorf("GET %s: response over %d bytes", req.URL, maxDirectivesBody)
	}
	var r struct {
		Directives []Directive `json:"directives"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL, err)
	}
	p.contact()
	return r.Directives, nil
}

// statusError is a directives request answered with an unexpected status.
type statusError struct {
	url    string
	status int
	body   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP %d: %s", e.url, e.status, e.body)
}

func (p *poller) contact() {
	if p.opts.OnContact != nil {
		p.opts.OnContact()
	}
}

func cut(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
