// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// A slice is a sub-agent's share of a run's budget. The supervise of a
// sub-agent (started inside the run: ParentFromEnv) asks the run's
// gateway for one, with the run's handle, before it starts its agent: it
// gets a handle of its own, good on the run's connections only, whose
// requests are capped at the slice, held and counted in the run too (the
// run pays for its sub-agents: its budget and its certificate's metered
// block include them, its children list says what each spent). The slice
// is never more than the run has left when it is made, and only the run's
// gateway enforces it: nothing the sub-agent does widens it. What a slice
// has not spent stays reserved in the run until the sub-agent's supervise
// gives it back (ReleaseSlice, at its end) or the run ends: a sub-agent
// killed before it could give it back leaves the run less, never more.
//
// The protocol is HTTP on the gateway's own address, outside every
// upstream's path (an upstream's name cannot start with '.'):
//
//	POST   /.hermeskill/v1/slices  Authorization: Bearer RUN-HANDLE  {"run", "max_cost_usd", "max_tokens"}
//	       -> 200 {"handle", "parent_run", "max_cost_usd", "max_tokens"}   (0: no cap)
//	       -> 429 the run has nothing left; 409 the handle is a slice's, revoked or ended
//	DELETE /.hermeskill/v1/slices  Authorization: Bearer SLICE-HANDLE  -> 204

// slicesPrefix is the first segment of the slices' path.
const slicesPrefix = ".hermeskill"

// Errors of Slice.
var (
	// ErrNoBudget: the run has nothing left to give a slice.
	ErrNoBudget = errors.New("the run's budget has nothing left for a sub-agent")
	// ErrNoSlice: the grant cannot be sliced (it is a slice, revoked or
	// ended).
	ErrNoSlice = errors.New("no slice of this grant can be made")
)

// SliceRequest asks for a slice: run names the sub-agent's run (its agent
// id); the amounts are what it wants at most (0: as much as is left).
type SliceRequest struct {
	Run        string  `json:"run"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	MaxTokens  int64   `json:"max_tokens"`
}

// SliceGrant is a slice made: its handle and its caps (0: none).
type SliceGrant struct {
	Handle     string  `json:"handle"`
	ParentRun  string  `json:"parent_run"`
	MaxCostUSD float64 `json:"max_cost_usd"`
	MaxTokens  int64   `json:"max_tokens"`
}

// Slice makes a slice of gr for a sub-agent's run: what want asks, never
// more than gr's budget leaves now (spent, held by requests in flight and
// reserved by other slices); where gr has no cap, want's (0: none).
func (gr *Grant) Slice(run string, want Budget) (*Grant, Budget, error) {
	gr.mu.Lock()
	defer gr.mu.Unlock()
	if gr.parent != nil || gr.revoked != nil || gr.closed {
		return nil, Budget{}, ErrNoSlice
	}
	out := gr.outstanding()
	var got Budget
	if b := gr.budget.CostUSD; b > 0 {
		left := b - gr.spent.usd - gr.held.usd - out.usd
		if left <= budgetSlack {
			return nil, Budget{}, fmt.Errorf("%w: $%.4f of $%.4f spent, held or given to sub-agents", ErrNoBudget, b-max(left, 0), b)
		}
		got.CostUSD = left
		if want.CostUSD > 0 {
			got.CostUSD = min(want.CostUSD, left)
		}
	} else {
		got.CostUSD = want.CostUSD
	}
	if b := gr.budget.Tokens; b > 0 {
		left := b - gr.spent.tokens - gr.held.tokens - out.tokens
		if left <= 0 {
			return nil, Budget{}, fmt.Errorf("%w: %d of %d tokens spent, held or given to sub-agents", ErrNoBudget, b-max(left, 0), b)
		}
		got.Tokens = left
		if want.Tokens > 0 {
			got.Tokens = min(want.Tokens, left)
		}
	} else {
		got.Tokens = want.Tokens
	}
	var raw [handleLen]byte
	_, _ = rand.Read(raw[:])
	handle := "hk-" + base64.RawURLEncoding.EncodeToString(raw[:])
	s := &Grant{g: gr.g, agentID: run, handle: handle, sum: sha256.Sum256([]byte(handle)), mu: gr.mu, parent: gr,
		budget: got, inflight: map[*flight]struct{}{}, models: map[string]*certs.ModelUsage{}}
	gr.slices = append(gr.slices, s)
	gr.g.mu.Lock()
	gr.g.grants[s.sum] = s
	gr.g.mu.Unlock()
	return s, got, nil
}

// outstanding is what gr's open slices have reserved and not spent or
// held yet (gr.mu held).
func (gr *Grant) outstanding() spend {
	var out spend
	for _, s := range gr.slices {
		if s.closed {
			continue
		}
		out.add(s.unused())
	}
	return out
}

// unused is what the slice gr may still spend: its caps less its spent
// and held (0 where it has no cap).
func (gr *Grant) unused() spend {
	var u spend
	if gr.budget.CostUSD > 0 {
		u.usd = max(0, gr.budget.CostUSD-gr.spent.usd-gr.held.usd)
	}
	if gr.budget.Tokens > 0 {
		u.tokens = max(0, gr.budget.Tokens-gr.spent.tokens-gr.held.tokens)
	}
	return u
}

// credit is what of res the slice gr has reserved in its run already: the
// run's check does not count it twice.
func (gr *Grant) credit(res *reservation) spend {
	u := gr.unused()
	return spend{usd: min(u.usd, res.usd), tokens: min(u.tokens, res.in+res.out)}
}

func (s *spend) add(o spend) {
	s.usd += o.usd
	s.tokens += o.tokens
}

// root is the run's own grant: gr, or the grant gr is a slice of.
func (gr *Grant) root() *Grant {
	if gr.parent != nil {
		return gr.parent
	}
	return gr
}

// maxSliceRequest bounds a slice request's body.
const maxSliceRequest = 4 << 10

// serveSlices answers the slices' protocol (rest: the path after the
// prefix).
func (g *Gateway) serveSlices(w http.ResponseWriter, r *http.Request, rest string) {
	if rest != "v1/slices" {
		sliceAnswer(w, http.StatusNotFound, "no such path of hermeskilld's slices")
		return
	}
	gr := g.authenticate(r)
	if gr == nil {
		sliceAnswer(w, http.StatusUnauthorized, "invalid API key: a slice is asked for with the run's handle")
		return
	}
	if err := checkPeer(r.Context(), gr); err != nil {
		sliceAnswer(w, http.StatusForbidden, "this key is honoured only on connections from the processes of the agent run it was given to (hermeskilld)")
		return
	}
	switch r.Method {
	case http.MethodPost:
		var req SliceRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSliceRequest))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || !validRun(req.Run) || req.MaxCostUSD < 0 || req.MaxTokens < 0 {
			sliceAnswer(w, http.StatusBadRequest, "want {\"run\": ID, \"max_cost_usd\": USD, \"max_tokens\": N}")
			return
		}
		s, got, err := gr.Slice(req.Run, Budget{CostUSD: req.MaxCostUSD, Tokens: req.MaxTokens})
		switch {
		case errors.Is(err, ErrNoBudget):
			sliceAnswer(w, http.StatusTooManyRequests, err.Error())
			return
		case err != nil:
			sliceAnswer(w, http.StatusConflict, err.Error())
			return
		}
		g.log.Info("sub-agent slice", zap.String("agent", gr.agentID), zap.String("sub_agent", req.Run),
			zap.Float64("max_cost_usd", got.CostUSD), zap.Int64("max_tokens", got.Tokens))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(SliceGrant{Handle: s.handle, ParentRun: gr.agentID, MaxCostUSD: got.CostUSD, MaxTokens: got.Tokens})
	case http.MethodDelete:
		if gr.parent == nil {
			sliceAnswer(w, http.StatusConflict, "not a slice's handle")
			return
		}
		gr.Close()
		w.WriteHeader(http.StatusNoContent)
	default:
		sliceAnswer(w, http.StatusMethodNotAllowed, "POST or DELETE")
	}
}

// validRun accepts a run id: printable ASCII without spaces, at most 128
// bytes.
func validRun(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

func sliceAnswer(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
}

// slicesURL is the slices' URL of the gateway that serves base (an
// upstream's base URL: its scheme and host).
func slicesURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("parent gateway %q: not a URL", base)
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/" + slicesPrefix + "/v1/slices"}).String(), nil
}

// RequestSlice asks the gateway serving base (the parent run's) for a
// slice, with the run's handle.
func RequestSlice(ctx context.Context, base, handle string, req SliceRequest) (SliceGrant, error) {
	target, err := slicesURL(base)
	if err != nil {
		return SliceGrant{}, err
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, sliceTimeout)
	defer cancel()
	resp, err := sliceCall(ctx, http.MethodPost, target, handle, body)
	if err != nil {
		return SliceGrant{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return SliceGrant{}, sliceError(resp)
	}
	var got SliceGrant
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSliceRequest)).Decode(&got); err != nil || got.Handle == "" {
		return SliceGrant{}, fmt.Errorf("parent gateway: a slice answer that is not one")
	}
	return got, nil
}

// ReleaseSlice gives a slice back to the gateway serving base: what it did
// not spend is the run's again, and its handle ends.
func ReleaseSlice(ctx context.Context, base, sliceHandle string) error {
	target, err := slicesURL(base)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sliceTimeout)
	defer cancel()
	resp, err := sliceCall(ctx, http.MethodDelete, target, sliceHandle, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return sliceError(resp)
	}
	return nil
}

// sliceTimeout bounds one call of the slices' protocol.
const sliceTimeout = 10 * time.Second

func sliceCall(ctx context.Context, method, target, handle string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+handle)
	req.Header.Set("Content-Type", "application/json")
	// Loopback only, never through a proxy of the environment; one call,
	// its connection closed with its body.
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("parent gateway: %w", err)
	}
	return resp, nil
}

// sliceError is the parent gateway's refusal, in its words.
func sliceError(resp *http.Response) error {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxSliceRequest)).Decode(&e)
	if e.Error.Message == "" {
		e.Error.Message = resp.Status
	}
	return fmt.Errorf("parent gateway (HTTP %d): %s", resp.StatusCode, e.Error.Message)
}
