// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/labels"
)

// The endpoints, under /v1/. Each changing one validates its request,
// sets Operator from the caller, and calls Backend.AuditRequest before
// the Backend acts.

func (s *Server) info(w http.ResponseWriter, _ *http.Request, _ Caller) error {
	return writeJSON(w, s.b.Info())
}

// list is GET /v1/agents[?selector=S]: the selector is matched here, by
// the daemon, with the one rule every verb uses (internal/labels).
func (s *Server) list(w http.ResponseWriter, r *http.Request, _ Caller) error {
	agents := s.b.List()
	if q, ok := r.URL.Query()["selector"]; ok {
		sel, err := labels.Parse(strings.Join(q, ","))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		agents = slices.DeleteFunc(agents, func(a AgentInfo) bool { return !sel.Matches(a.Labels) })
	}
	return writeJSON(w, nonNil(agents))
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, _ Caller) error {
	st, err := s.b.Status(r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, st)
}

func (s *Server) kill(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req KillRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	if err := checkSelection(req); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("kill requested", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("id", req.ID),
		zap.Stringer("selector", req.Selector), zap.Time("started_before", req.StartedBefore),
		zap.String("reason", req.Reason), zap.Bool("wait", req.Wait))
	res, err := s.b.Kill(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, nonNil(res))
}

func (s *Server) estop(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req EstopRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkReason(req.Reason); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Warn("e-stop requested", zap.String("caller", c.Name), zap.Int("pid", c.PID),
		zap.String("reason", req.Reason), zap.Bool("wait", req.Wait))
	res, err := s.b.Estop(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, nonNil(res))
}

func (s *Server) release(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req ReleaseRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if (req.ID == "") == !req.Estop {
		return fmt.Errorf("%w: give either an agent id or estop, not both", ErrBadInput)
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("release requested", zap.String("caller", c.Name), zap.Int("pid", c.PID),
		zap.String("id", req.ID), zap.Bool("estop", req.Estop))
	if err := s.b.Release(req); err != nil {
		return err
	}
	res := ReleaseResult{ID: req.ID, Estop: req.Estop}
	if req.ID != "" {
		if st, err := s.b.Status(req.ID); err == nil {
			res.State = st.State
		}
	}
	return writeJSON(w, res)
}

// stop, start and restart act on one agent, named in the body.

func (s *Server) stop(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req StopRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkAgentAction(req.ID, req.Reason); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("stop requested", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("id", req.ID),
		zap.String("reason", req.Reason), zap.Bool("wait", req.Wait))
	res, err := s.b.Stop(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, res)
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req ResumeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkAgentAction(req.ID, ""); err != nil {
		return err
	}
	switch {
	case req.CostUSD < 0 || req.Tokens < 0 || math.IsNaN(req.CostUSD) || math.IsInf(req.CostUSD, 0):
		return fmt.Errorf("%w: a budget is a positive number", ErrBadInput)
	case req.CostUSD == 0 && req.Tokens == 0:
		return fmt.Errorf("%w: give the new budget: max_cost_usd and/or max_tokens", ErrBadInput)
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("resume requested", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("id", req.ID),
		zap.Float64("max_cost_usd", req.CostUSD), zap.Int64("max_tokens", req.Tokens))
	res, err := s.b.Resume(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, res)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req StartRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkAgentAction(req.ID, ""); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("start requested", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("id", req.ID))
	res, err := s.b.Start(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, res)
}

func (s *Server) restart(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req RestartRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkAgentAction(req.ID, req.Reason); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("restart requested", zap.String("caller", c.Name), zap.Int("pid", c.PID), zap.String("id", req.ID),
		zap.String("reason", req.Reason))
	res, err := s.b.Restart(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, res)
}

// checkAgentAction: an agent id is required; a reason is optional but
// bounded.
func checkAgentAction(id, reason string) error {
	if id == "" {
		return fmt.Errorf("%w: name the agent (id)", ErrBadInput)
	}
	if len(reason) > maxReason {
		return fmt.Errorf("%w: the reason is %d bytes, at most %d", ErrBadInput, len(reason), maxReason)
	}
	return nil
}

// logs streams an agent's output log as it is (bytes, not JSON): the
// last ?tail=N lines (default: everything kept), and with ?follow=true
// what the agent writes from then on, until the client goes away or the
// server closes. A follower that stops reading is dropped after
// eventWriteTimeout, as an event subscriber is.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, _ Caller) error {
	req, err := logsQuery(r)
	if err != nil {
		return err
	}
	rd, err := s.b.Logs(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	defer rd.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := rd.Read(buf)
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) //nolint:errcheck // best effort
			if _, err := w.Write(buf[:n]); err != nil {
				s.log.Debug("log reader gone", zap.Error(err))
				return nil
			}
			if req.Follow {
				if err := rc.Flush(); err != nil {
					return nil
				}
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) {
				s.log.Warn("reading an agent's log", zap.String("agent", r.PathValue("id")), zap.Error(rerr))
			}
			return nil
		}
	}
}

// logsQuery reads ?tail= (a count, or "all") and ?follow= (a boolean).
func logsQuery(r *http.Request) (LogsRequest, error) {
	q := r.URL.Query()
	req := LogsRequest{Tail: -1}
	if t := q.Get("tail"); t != "" && t != "all" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return req, fmt.Errorf("%w: tail=%q: a number of lines, or all", ErrBadInput, t)
		}
		req.Tail = n
	}
	if f := q.Get("follow"); f != "" {
		b, err := strconv.ParseBool(f)
		if err != nil {
			return req, fmt.Errorf("%w: follow=%q: true or false", ErrBadInput, f)
		}
		req.Follow = b
	}
	return req, nil
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req RevokeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("revocation requested", zap.String("caller", c.Name), zap.Int("pid", c.PID),
		zap.String("id", req.ID), zap.Stringer("selector", req.Selector), zap.Time("started_before", req.StartedBefore))
	res, err := s.b.Revoke(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, res)
}

func (s *Server) revocations(w http.ResponseWriter, _ *http.Request, _ Caller) error {
	return writeJSON(w, nonNil(s.b.Revocations()))
}

func (s *Server) lift(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req LiftRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Rule == "" {
		return fmt.Errorf("%w: name the rule to lift", ErrBadInput)
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("revocation lift requested", zap.String("caller", c.Name), zap.String("rule", req.Rule))
	if err := s.b.Lift(req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) budgets(w http.ResponseWriter, _ *http.Request, _ Caller) error {
	return writeJSON(w, nonNil(s.b.Budgets()))
}

func (s *Server) liftBudget(w http.ResponseWriter, r *http.Request, c Caller) error {
	var req BudgetLiftRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return fmt.Errorf("%w: name the budget to lift", ErrBadInput)
	}
	req.Operator = c.Name
	s.b.AuditRequest(c, r.Method, r.URL.Path, req)
	s.log.Info("budget lift requested", zap.String("caller", c.Name), zap.String("budget", req.Name))
	if err := s.b.LiftBudget(req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) certs(w http.ResponseWriter, r *http.Request, _ Caller) error {
	list, err := s.b.Certs(r.URL.Query().Get("agent"))
	if err != nil {
		return err
	}
	return writeJSON(w, nonNil(list))
}

func (s *Server) cert(w http.ResponseWriter, r *http.Request, _ Caller) error {
	data, err := s.b.Cert(r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data) //nolint:errcheck // the client went away
	return nil
}

// events streams events as NDJSON, one event a line, flushed as they come,
// with an empty line every heartbeat, until the client goes away, the
// server closes, or the Backend ends the subscription.
func (s *Server) events(w http.ResponseWriter, r *http.Request, _ Caller) error {
	rc := http.NewResponseController(w)
	ch, cancel := s.b.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil
	}
	tick := time.NewTicker(s.heartbeat)
	defer tick.Stop()
	enc := json.NewEncoder(w)
	for {
		var err error
		select {
		case <-r.Context().Done():
			return nil
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) //nolint:errcheck // best effort
			err = enc.Encode(e)
		case <-tick.C:
			rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout)) //nolint:errcheck // best effort
			_, err = io.WriteString(w, "\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			s.log.Debug("event subscriber gone", zap.Error(err))
			return nil
		}
	}
}

// decode reads a JSON request body into v: one object, no unknown fields,
// at most maxBody bytes, within bodyReadTimeout.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout)) //nolint:errcheck // best effort
	defer rc.SetReadDeadline(time.Time{})               //nolint:errcheck // best effort
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %w", ErrBadInput, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: request body: data after the JSON object", ErrBadInput)
	}
	return nil
}

func checkReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return fmt.Errorf("%w: a reason is required", ErrBadInput)
	}
	if len(reason) > maxReason {
		return fmt.Errorf("%w: the reason is %d bytes, at most %d", ErrBadInput, len(reason), maxReason)
	}
	return nil
}

// checkSelection: exactly one of ID or Selector/StartedBefore.
func checkSelection(req KillRequest) error {
	byMatch := !req.Selector.Empty() || !req.StartedBefore.IsZero()
	switch {
	case req.ID == "" && !byMatch:
		return fmt.Errorf("%w: give an agent id, a selector or started_before", ErrBadInput)
	case req.ID != "" && byMatch:
		return fmt.Errorf("%w: give an agent id or a selector/started_before, not both", ErrBadInput)
	}
	return nil
}

// statusOf maps the package's errors to HTTP statuses.
func statusOf(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrBadInput):
		return http.StatusBadRequest
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// errorBody is every error response: {"error": "…"}.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, err error) { writeErrorText(w, statusOf(err), err.Error()) }

func writeErrorText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody{Error: msg}) //nolint:errcheck // the client went away
}

func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n')) //nolint:errcheck // the client went away
	return nil
}

// nonNil makes an empty list [] rather than null on the wire.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
