// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermeskill/hermeskilld/internal/labels"
)

// Where the client finds the control socket.
const (
	DefaultSocketPath = "/run/hermeskill/control.sock"
	EnvSocket         = "HERMESKILL_CONTROL_SOCKET"
)

// Limits of what the client reads.
const (
	maxErrorBody = 64 << 10
	maxCertBody  = 16<<20 + 1 // certs.MaxSize, plus one to see a larger one
	maxEventLine = 4 << 20
)

// SocketPath is the control socket to use: flag (--control-socket) when
// set, else $HERMESKILL_CONTROL_SOCKET, else DefaultSocketPath.
func SocketPath(flag string) string {
	if flag != "" {
		return flag
	}
	if p := os.Getenv(EnvSocket); p != "" {
		return p
	}
	return DefaultSocketPath
}

// NoDaemonError is the client's error when nothing serves the socket: it
// does not exist (or its directory does not), or it refuses connections
// (a stale socket). It matches ErrNoDaemon.
type NoDaemonError struct {
	Path    string
	Refused bool // the socket exists but nobody listens
	Err     error
}

func (e *NoDaemonError) Error() string {
	what := "no socket at " + e.Path
	if e.Refused {
		what = "nothing listens on " + e.Path
	}
	return fmt.Sprintf("%v (%s); set the socket with --control-socket or $%s", ErrNoDaemon, what, EnvSocket)
}

// Is makes errors.Is(err, ErrNoDaemon) true.
func (e *NoDaemonError) Is(target error) bool { return target == ErrNoDaemon }
func (e *NoDaemonError) Unwrap() error        { return e.Err }

// apiError is an error response; it matches the sentinel of its status
// (ErrNotFound, …) and says what the daemon said.
type apiError struct {
	status int
	msg    string
	kind   error // nil for statuses without a sentinel
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.kind }

// Client talks to the daemon over its control socket. Its methods are safe
// for concurrent use; every error is one of: a *NoDaemonError (ErrNoDaemon),
// an error matching ErrForbidden (403, or the socket's permissions refused
// the connection), ErrNotFound (404), ErrConflict (409), ErrBadInput (400
// and 413), the context's error, or another error saying what failed.
type Client struct {
	path string
	hc   *http.Client
}

// NewClient returns a client of the socket at path (see SocketPath). It
// never uses a proxy; requests have no time limit but their context's.
func NewClient(path string) *Client {
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:       2,
		IdleConnTimeout:    30 * time.Second,
		DisableCompression: true,
	}
	return &Client{path: path, hc: &http.Client{Transport: tr}}
}

// Path is the socket the client connects to.
func (c *Client) Path() string { return c.path }

// Close closes idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Info is GET /v1/info.
func (c *Client) Info(ctx context.Context) (DaemonInfo, error) {
	var v DaemonInfo
	return v, c.do(ctx, http.MethodGet, "/v1/info", nil, &v)
}

// List is GET /v1/agents.
func (c *Client) List(ctx context.Context) ([]AgentInfo, error) {
	var v []AgentInfo
	return v, c.do(ctx, http.MethodGet, "/v1/agents", nil, &v)
}

// ListSelected is GET /v1/agents?selector=S: the agents whose labels the
// daemon finds match sel (which must not be empty).
func (c *Client) ListSelected(ctx context.Context, sel labels.Selector) ([]AgentInfo, error) {
	if sel.Empty() {
		return nil, fmt.Errorf("%w: an empty selector", ErrBadInput)
	}
	var v []AgentInfo
	return v, c.do(ctx, http.MethodGet, "/v1/agents?selector="+url.QueryEscape(sel.String()), nil, &v)
}

// Status is GET /v1/agents/{id}.
func (c *Client) Status(ctx context.Context, id string) (AgentStatus, error) {
	var v AgentStatus
	return v, c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(id), nil, &v)
}

// Kill is POST /v1/kill. With req.Wait it returns once the agents are
// dead; cancelling ctx stops the waiting, not the kills.
func (c *Client) Kill(ctx context.Context, req KillRequest) ([]KillResult, error) {
	var v []KillResult
	return v, c.do(ctx, http.MethodPost, "/v1/kill", req, &v)
}

// Estop is POST /v1/estop.
func (c *Client) Estop(ctx context.Context, req EstopRequest) ([]KillResult, error) {
	var v []KillResult
	return v, c.do(ctx, http.MethodPost, "/v1/estop", req, &v)
}

// Release is POST /v1/release.
func (c *Client) Release(ctx context.Context, req ReleaseRequest) (ReleaseResult, error) {
	var v ReleaseResult
	return v, c.do(ctx, http.MethodPost, "/v1/release", req, &v)
}

// Stop is POST /v1/stop. With req.Wait it returns once the run has
// ended; cancelling ctx stops the waiting, not the stop.
func (c *Client) Stop(ctx context.Context, req StopRequest) (ActionResult, error) {
	var v ActionResult
	return v, c.do(ctx, http.MethodPost, "/v1/stop", req, &v)
}

// Resume is POST /v1/resume: it returns once the run runs again.
func (c *Client) Resume(ctx context.Context, req ResumeRequest) (ResumeResult, error) {
	var v ResumeResult
	return v, c.do(ctx, http.MethodPost, "/v1/resume", req, &v)
}

// Start is POST /v1/start: it returns once the agent has started (or
// failed to).
func (c *Client) Start(ctx context.Context, req StartRequest) (ActionResult, error) {
	var v ActionResult
	return v, c.do(ctx, http.MethodPost, "/v1/start", req, &v)
}

// Restart is POST /v1/restart: it returns once the agent has started again.
func (c *Client) Restart(ctx context.Context, req RestartRequest) (ActionResult, error) {
	var v ActionResult
	return v, c.do(ctx, http.MethodPost, "/v1/restart", req, &v)
}

// Logs is GET /v1/agents/{id}/logs: it copies the agent's output to w,
// as it is. Without req.Follow it returns nil at the end of the log;
// with it, it returns when ctx ends (ctx.Err()) or the daemon ends the
// stream (an error matching io.EOF). An error writing to w ends it too.
func (c *Client) Logs(ctx context.Context, id string, req LogsRequest, w io.Writer) error {
	q := url.Values{}
	if req.Tail >= 0 {
		q.Set("tail", strconv.Itoa(req.Tail))
	}
	if req.Follow {
		q.Set("follow", "true")
	}
	p := "/v1/agents/" + url.PathEscape(id) + "/logs"
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	resp, err := c.send(ctx, http.MethodGet, p, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(writerOnly{w}, resp.Body)
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var we *sinkError
	if errors.As(err, &we) {
		return we.err
	}
	if err != nil {
		return fmt.Errorf("log of %s: %w", id, err)
	}
	if req.Follow {
		return fmt.Errorf("log of %s: the daemon closed the stream: %w", id, io.EOF)
	}
	return nil
}

// writerOnly hides a writer's ReadFrom (io.Copy then reads in its own
// buffer) and marks its errors, so that Logs tells them from the
// connection's.
type writerOnly struct{ w io.Writer }

type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }

func (w writerOnly) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		return n, &sinkError{err}
	}
	return n, nil
}

// Revoke is POST /v1/revoke.
func (c *Client) Revoke(ctx context.Context, req RevokeRequest) (RevokeResult, error) {
	var v RevokeResult
	return v, c.do(ctx, http.MethodPost, "/v1/revoke", req, &v)
}

// Revocations is GET /v1/revocations.
func (c *Client) Revocations(ctx context.Context) ([]Revocation, error) {
	var v []Revocation
	return v, c.do(ctx, http.MethodGet, "/v1/revocations", nil, &v)
}

// Lift is POST /v1/revocations/lift.
func (c *Client) Lift(ctx context.Context, req LiftRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/revocations/lift", req, nil)
}

// Budgets is GET /v1/budgets.
func (c *Client) Budgets(ctx context.Context) ([]Budget, error) {
	var v []Budget
	return v, c.do(ctx, http.MethodGet, "/v1/budgets", nil, &v)
}

// LiftBudget is POST /v1/budgets/lift.
func (c *Client) LiftBudget(ctx context.Context, req BudgetLiftRequest) error {
	return c.do(ctx, http.MethodPost, "/v1/budgets/lift", req, nil)
}

// Certs is GET /v1/certs: every certificate, or an agent's when agentID is
// not empty.
func (c *Client) Certs(ctx context.Context, agentID string) ([]CertSummary, error) {
	p := "/v1/certs"
	if agentID != "" {
		p += "?" + url.Values{"agent": {agentID}}.Encode()
	}
	var v []CertSummary
	return v, c.do(ctx, http.MethodGet, p, nil, &v)
}

// Cert is GET /v1/certs/{id}: the certificate file's bytes, unchanged (so
// that its signature can be verified).
func (c *Client) Cert(ctx context.Context, certID string) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/certs/"+url.PathEscape(certID), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxCertBody))
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", certID, err)
	}
	if len(data) >= maxCertBody {
		return nil, fmt.Errorf("certificate %s: larger than %d bytes", certID, maxCertBody-1)
	}
	return data, nil
}

// Events is GET /v1/events: it calls fn with each event, in order, until
// ctx ends (it returns ctx.Err()) or the daemon ends the stream (an error
// matching io.EOF).
func (c *Client) Events(ctx context.Context, fn func(Event)) error {
	resp, err := c.send(ctx, http.MethodGet, "/v1/events", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == ':' { // heartbeat
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		fn(e)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("event stream: %w", err)
	}
	return fmt.Errorf("event stream: the daemon closed it: %w", io.EOF)
}

// do sends a request with in as its JSON body (nil: none) and decodes the
// response into out (nil: discarded).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) //nolint:errcheck // reuse of the connection only
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: response: %w", method, path, err)
	}
	return nil
}

// send sends a request and returns a successful response, or the error.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://hermeskilld"+path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.connError(ctx, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	return resp, nil
}

// connError classifies an error of http.Client.Do.
func (c *Client) connError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
			return &NoDaemonError{Path: c.path, Err: err}
		case errors.Is(err, syscall.ECONNREFUSED):
			return &NoDaemonError{Path: c.path, Refused: true, Err: err}
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
			return fmt.Errorf("%w: cannot connect to %s%s", ErrForbidden, c.path, socketAccessHint(c.path))
		}
	}
	return fmt.Errorf("control socket %s: %w", c.path, err)
}

// socketAccessHint says which group may open the socket at path.
func socketAccessHint(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	gid := strconv.FormatUint(uint64(st.Gid), 10)
	group := "gid " + gid
	if g, err := user.LookupGroupId(gid); err == nil {
		group = "group " + g.Name
	}
	if st.Gid == 0 {
		return fmt.Sprintf(" (mode %#o, %s: only root may connect)", fi.Mode().Perm(), group)
	}
	return fmt.Sprintf(" (mode %#o, %s): ask to be added to that group", fi.Mode().Perm(), group)
}

// responseError turns an error response into an error matching the
// sentinel of its status.
func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb errorBody
	msg := ""
	if json.Unmarshal(data, &eb) == nil && eb.Error != "" {
		msg = eb.Error
	} else {
		msg = strings.TrimSpace(string(data))
	}
	e := &apiError{status: resp.StatusCode, msg: msg}
	switch resp.StatusCode {
	case http.StatusNotFound:
		e.kind = ErrNotFound
	case http.StatusConflict:
		e.kind = ErrConflict
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		e.kind = ErrBadInput
	case http.StatusForbidden:
		e.kind = ErrForbidden
	}
	if e.msg == "" {
		e.msg = fmt.Sprintf("daemon answered %s", resp.Status)
	} else if e.kind == nil {
		e.msg = fmt.Sprintf("daemon answered %s: %s", resp.Status, e.msg)
	}
	return e
}
