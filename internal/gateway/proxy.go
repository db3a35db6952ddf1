// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/fault"
)

// errIdle is the cause of an upstream request cut for its silence.
var errIdle = errors.New("upstream silent for too long")

// maxPathInRecord bounds the path a refused request leaves in its record.
const maxPathInRecord = 256

// hopHeaders are the hop-by-hop headers: they concern one connection and
// are never forwarded (nor the headers that Connection names).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// dropToUpstream are the agent's headers the upstream never gets: the
// handle (the key replaces it), cookies, what names the agent's
// connection, and Accept-Encoding (the transport asks for gzip itself and
// decompresses, so that responses can be metered).
var dropToUpstream = []string{"Authorization", "X-Api-Key", "Cookie", "Accept-Encoding", "Host",
	"Content-Length", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// dropToAgent are the upstream's headers the agent never gets.
var dropToAgent = []string{"Set-Cookie", "Alt-Svc"}

// copyBufs are the buffers that copy non-streamed bodies.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// serveHTTP is the gateway's one handler: route, authenticate, admit,
// forward, meter, record.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	up := g.upstreams[name]
	if up == nil {
		problem{status: http.StatusNotFound, code: "unknown_upstream",
			msg: "hermeskilld's LLM gateway has no upstream by that name"}.write(w, OpenAI)
		return
	}
	if !g.enter() {
		errShutdown.problem().write(w, up.Style)
		return
	}
	defer g.leave()
	gr := g.authenticate(r)
	if gr == nil {
		g.log.Warn("llm request without a valid handle refused", zap.String("upstream", name), zap.String("remote", r.RemoteAddr))
		problem{status: http.StatusUnauthorized, code: "invalid_api_key",
			msg: "invalid API key: hermeskilld's LLM gateway takes the key of a running agent's grant"}.write(w, up.Style)
		return
	}
	if err := checkPeer(r.Context(), gr); err != nil {
		g.log.Warn("llm request with the handle of another run's process refused", zap.String("agent", gr.agentID),
			zap.String("remote", r.RemoteAddr), zap.Error(err))
		problem{status: http.StatusForbidden, code: "handle_not_yours",
			msg: "this key is honoured only on connections from the processes of the agent run it was given to (hermeskilld)"}.write(w, up.Style)
		return
	}
	defer g.recoverRequest(gr)
	rec := Record{At: start, Upstream: name, Path: truncate(rest, maxPathInRecord)}
	if isWebSocket(r) {
		// The Responses API's WebSocket transport: 426 is the answer its
		// clients take to mean "use HTTP", at once, without retrying.
		g.refuse(w, gr, up, rec, problem{status: http.StatusUpgradeRequired, code: "websocket_unsupported",
			msg: "hermeskilld's LLM gateway meters HTTP requests only: use the HTTP API (WebSocket transport refused)"})
		return
	}
	rt, found, ok := match(up.Style, r.Method, rest)
	if !ok {
		p := problem{status: http.StatusNotFound, code: "unknown_url",
			msg: fmt.Sprintf("hermeskilld's LLM gateway forwards only the %s API's paths, not %s %s", up.Style, r.Method, truncate(rest, maxPathInRecord))}
		if found {
			p.status, p.code = http.StatusMethodNotAllowed, "method_not_allowed"
		}
		g.refuse(w, gr, up, rec, p)
		return
	}
	body, err := g.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			g.refuse(w, gr, up, rec, problem{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
				msg: fmt.Sprintf("request body over %d bytes (hermeskilld's LLM gateway)", tooBig.Limit)})
			return
		}
		g.log.Debug("llm request body unread", zap.String("agent", gr.agentID), zap.Error(err))
		return
	}
	var info reqInfo
	if r.Method == http.MethodPost {
		if info, err = parseRequest(body); err != nil {
			g.refuse(w, gr, up, rec, problem{status: http.StatusBadRequest, code: "duplicate_key",
				msg: "request body has a " + err.Error() + ": hermeskilld's LLM gateway refuses a member named twice"})
			return
		}
	}
	rec.Model = info.model
	if rt.ep == epResponses && info.background {
		g.refuse(w, gr, up, rec, problem{status: http.StatusBadRequest, code: "background_unsupported",
			msg: `"background": true is refused by hermeskilld's LLM gateway: a background response's usage never passes through it; send the request without it`})
		return
	}
	strip := false
	if rt.ep == epChat && info.stream && !info.usageOpt {
		if b, err := withIncludeUsage(body); err == nil {
			body, strip = b, true
		}
	}
	var res *reservation
	if rt.ep != epOther {
		rv := g.reserve(rt.ep, body, info)
		res = &rv
	}

	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	fl := &flight{cancel: cancel}
	if cut := gr.admit(fl); cut != nil {
		g.refuse(w, gr, up, rec, cut.problem())
		return
	}
	defer gr.landed(fl) // when forward panics; landed twice is harmless
	x := &exchange{g: g, w: w, r: r, rc: http.NewResponseController(w), ctx: ctx, cancel: cancel, up: up, ep: rt.ep, strip: strip, res: res, rec: rec,
		agentID: gr.agentID}
	abort := x.forward(rest, body)
	gr.landed(fl)
	x.rec.Duration = time.Since(start)
	g.logRecord(gr, &x.rec)
	gr.report(x.rec)
	if abort {
		// The upstream broke off a response already begun: break the
		// agent's too, as the upstream would have, so that its SDK sees
		// an error rather than a short answer.
		panic(http.ErrAbortHandler)
	}
}

// recoverRequest turns a panic in the handling of one of gr's requests
// (its body, its response's events, its metering) into that run's
// failure: net/http would recover it and go on, the request never metered
// — spend the budgets would not see. The run is told (FaultObserver: it
// is killed for internal_error), and the agent's response is broken off.
func (g *Gateway) recoverRequest(gr *Grant) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler { // the sentinel itself, as net/http compares it
		panic(v)
	}
	e := fault.Recovered(fault.GatewayMeter, v)
	g.log.Error("internal error: the gateway panicked on a request; its run is killed",
		zap.String("agent", gr.agentID), zap.String("panic", e.Panic), zap.String("stack", e.Stack))
	if fo, ok := gr.obs.(FaultObserver); ok {
		fo.Fault(e)
	}
	panic(http.ErrAbortHandler)
}

// refuse answers a request the gateway will not forward and records it.
func (g *Gateway) refuse(w http.ResponseWriter, gr *Grant, up *upstream, rec Record, p problem) {
	p.write(w, up.Style)
	rec.Refused, rec.Status, rec.Priced = true, p.status, true
	rec.Duration = time.Since(rec.At)
	g.logRecord(gr, &rec)
	gr.report(rec)
}

func (g *Gateway) logRecord(gr *Grant, rec *Record) {
	if ce := g.log.Check(zap.DebugLevel, "llm request"); ce != nil {
		ce.Write(zap.String("agent", gr.agentID), zap.String("upstream", rec.Upstream), zap.String("path", rec.Path),
			zap.String("model", rec.Model), zap.Int("status", rec.Status), zap.Bool("stream", rec.Stream),
			zap.Bool("refused", rec.Refused), zap.Duration("duration", rec.Duration), zap.Int64("input_tokens", rec.InputTokens),
			zap.Int64("output_tokens", rec.OutputTokens), zap.Int("tool_calls", len(rec.ToolCalls)), zap.String("err", rec.Err))
	}
}

// readBody reads the agent's request body within MaxRequestBytes and
// RequestTimeout.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(g.cfg.RequestTimeout)) // unsupported: ReadHeaderTimeout still bounds the request
	defer rc.SetReadDeadline(time.Time{})
	return io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxRequestBytes))
}

// withIncludeUsage sets stream_options.include_usage in a chat
// completion request, keeping its other stream options.
func withIncludeUsage(body []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := req["stream_options"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &opts); err != nil {
			return nil, err
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	var err error
	if req["stream_options"], err = marshalNoEscape(opts); err != nil {
		return nil, err
	}
	return marshalNoEscape(req)
}

// marshalNoEscape is json.Marshal without HTML escaping (the prompt's
// '<', '>' and '&' stay as they were) and without the trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// exchange is one request forwarded upstream and its response relayed.
type exchange struct {
	g      *Gateway
	w      http.ResponseWriter
	r      *http.Request
	rc     *http.ResponseController
	ctx    context.Context // the upstream request's: cancelled by a cut, the agent leaving, the idle timer
	cancel context.CancelCauseFunc
	up     *upstream
	ep     endpoint
	strip  bool         // stream_options.include_usage was added: drop the usage-only chunk
	res    *reservation // what the request is charged when its usage is not read; nil: unmetered
	rec    Record
	// agentID is the grant's agent.
	agentID string
}

// forward sends the request upstream and relays the response, filling
// the record. abort is true when the agent's response must be broken off.
func (x *exchange) forward(path string, body []byte) (abort bool) {
	out, err := http.NewRequestWithContext(x.ctx, x.r.Method, x.up.URL+"/"+path, bytes.NewReader(body))
	if err != nil { // the path is checked and the URL valid: not expected
		x.answer(problem{status: http.StatusBadGateway, code: "bad_upstream_request", msg: "hermeskilld could not build the upstream request"})
		x.rec.Err = err.Error()
		return false
	}
	out.URL.RawQuery = x.r.URL.RawQuery
	copyHeaders(out.Header, x.r.Header, dropToUpstream)
	switch {
	case x.up.key == "":
	case x.up.Style == Anthropic:
		out.Header.Set("X-Api-Key", x.up.key)
	default:
		out.Header.Set("Authorization", "Bearer "+x.up.key)
	}
	resp, err := x.g.transport.RoundTrip(out)
	if err != nil {
		if !notSent(err) {
			x.chargeReservation() // the upstream may have begun, and bill it
		}
		x.failed(err, false)
		return false
	}
	defer resp.Body.Close()

	h := x.w.Header()
	copyHeaders(h, resp.Header, dropToAgent)
	x.rec.Status = resp.StatusCode
	x.rec.Stream = isEventStream(resp.Header.Get("Content-Type"))
	metered := x.ep != epOther && resp.StatusCode/100 == 2
	timer := time.AfterFunc(x.g.cfg.StreamIdleTimeout, func() { x.cancel(errIdle) })
	defer timer.Stop()
	src := &idleReader{r: resp.Body, t: timer, d: x.g.cfg.StreamIdleTimeout}
	defer x.rc.SetWriteDeadline(time.Time{})

	var rd reading
	if x.rec.Stream {
		h.Del("Content-Length")
		x.w.WriteHeader(resp.StatusCode)
		var meter streamMeter
		if metered {
			meter = newStreamMeter(x.ep, x.g.cfg.MaxToolArgsBytes, x.strip)
		}
		rl := &relay{src: bufio.NewReaderSize(src, relayBufSize), w: x.w, rc: x.rc,
			writeTimeout: x.g.cfg.AgentWriteTimeout, maxEvent: x.g.cfg.MaxEventBytes, meter: meter}
		if err := x.rc.Flush(); err != nil {
			x.rec.Err = (&agentError{err}).Error()
			return false
		}
		err = rl.run()
		if meter != nil {
			rd = meter.result()
			rd.incomplete = rd.incomplete || rl.skipped || !rd.done
		}
		if err == nil && meter != nil && !rd.done {
			x.rec.Err = "the upstream's stream ended before its final event"
		}
		if rd.upstreamErr != "" && x.rec.Err == "" {
			x.rec.Err = rd.upstreamErr
		}
	} else {
		x.w.WriteHeader(resp.StatusCode)
		var held []byte
		held, err = x.copyBody(src, metered)
		if metered {
			if held != nil && err == nil {
				rd = meterBody(x.ep, held, x.g.cfg.MaxToolArgsBytes)
			} else {
				rd.incomplete = true
			}
		}
	}
	x.fill(rd, metered)
	if err != nil {
		return x.failed(err, true)
	}
	return false
}

// copyBody forwards a non-streamed body and, when metered, holds it (up
// to MaxResponseBytes: held is nil for a larger one).
func (x *exchange) copyBody(src io.Reader, metered bool) (held []byte, err error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var hold bytes.Buffer
	over := false
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if metered && !over {
				if int64(hold.Len()+n) > x.g.cfg.MaxResponseBytes {
					over = true
					hold = bytes.Buffer{}
				} else {
					hold.Write(buf[:n])
				}
			}
			_ = x.rc.SetWriteDeadline(time.Now().Add(x.g.cfg.AgentWriteTimeout))
			if _, werr := x.w.Write(buf[:n]); werr != nil {
				return nil, &agentError{werr}
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	if !metered || over {
		return nil, nil
	}
	return hold.Bytes(), nil
}

// fill completes the record from what the meter read.
func (x *exchange) fill(rd reading, metered bool) {
	fault.Inject(fault.GatewayMeter, x.agentID)
	if rd.model != "" {
		x.rec.Model = rd.model
	}
	x.rec.InputTokens, x.rec.OutputTokens, x.rec.CachedInputTokens = rd.in, rd.out, rd.cached
	x.rec.ToolCalls = rd.tools
	x.rec.Incomplete = metered && (rd.incomplete || !rd.usage)
	x.rec.Priced = true
	if x.rec.Tokens() > 0 {
		x.rec.CostUSD, x.rec.Priced = x.g.cfg.Prices.Cost(x.rec.Model, rd.in, rd.out, rd.cached)
	}
	if metered && !rd.usage {
		x.chargeReservation()
	}
}

// chargeReservation charges a request whose usage was not read at its
// reservation: the larger of what was read and the reservation, for input
// and output tokens alike, priced at the model's price.
func (x *exchange) chargeReservation() {
	if x.res == nil {
		return
	}
	x.rec.UsageUnknown = true
	x.rec.InputTokens = max(x.rec.InputTokens, x.res.in)
	x.rec.OutputTokens = max(x.rec.OutputTokens, x.res.out)
	x.rec.CostUSD, x.rec.Priced = x.g.cfg.Prices.Cost(x.rec.Model, x.rec.InputTokens, x.rec.OutputTokens, x.rec.CachedInputTokens)
}

// notSent is a round trip that failed before the request left: the
// upstream could not be dialled.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// failed records why the exchange failed and answers the agent: with an
// error response when none has begun (started false), else with the
// provider's error event for a stream that was cut. abort is true when the
// agent's response must be broken off.
func (x *exchange) failed(err error, started bool) (abort bool) {
	var cut *cutError
	var agent *agentError
	cause := context.Cause(x.ctx)
	switch {
	case errors.As(cause, &cut):
		x.rec.Cut, x.rec.Err = true, cut.msg
		if !started {
			x.answer(cut.problem())
			return false
		}
		if x.rec.Stream {
			rl := relay{w: x.w, rc: x.rc, writeTimeout: x.g.cfg.AgentWriteTimeout}
			_ = rl.write(cut.problem().event(x.up.Style), true) // the agent may be gone too
			return false
		}
		return true
	case errors.As(err, &agent), x.r.Context().Err() != nil:
		x.rec.Err = "the agent went away"
		return false
	case errors.Is(cause, errIdle):
		x.rec.Err = fmt.Sprintf("upstream silent for %s", x.g.cfg.StreamIdleTimeout)
	default:
		x.rec.Err = "upstream: " + err.Error()
	}
	if started {
		return true
	}
	p := problem{status: http.StatusBadGateway, code: "upstream_unreachable",
		msg: fmt.Sprintf("hermeskilld's LLM gateway could not reach upstream %s", x.up.Name)}
	var timeout interface{ Timeout() bool }
	if errors.Is(cause, errIdle) || errors.As(err, &timeout) && timeout.Timeout() {
		p.status, p.code, p.msg = http.StatusGatewayTimeout, "upstream_timeout", fmt.Sprintf("upstream %s did not answer in time", x.up.Name)
	}
	x.answer(p)
	return false
}

// answer writes the gateway's own error response and records its status.
func (x *exchange) answer(p problem) {
	p.write(x.w, x.up.Style)
	x.rec.Status = p.status
}

// idleReader resets the idle timer after each read that got bytes.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.t.Reset(ir.d)
	}
	return n, err
}

func isEventStream(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "text/event-stream"
}

// copyHeaders copies src to dst but for the hop-by-hop headers, those
// Connection names, and drop.
func copyHeaders(dst, src http.Header, drop []string) {
	skip := func(k string) bool {
		for _, d := range drop {
			if k == d {
				return true
			}
		}
		for _, d := range hopHeaders {
			if k == d {
				return true
			}
		}
		for _, v := range src["Connection"] {
			for _, f := range strings.Split(v, ",") {
				if textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(f)) == k {
					return true
				}
			}
		}
		return false
	}
	for k, vv := range src {
		if !skip(k) {
			dst[k] = append([]string(nil), vv...)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
