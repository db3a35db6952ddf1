// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
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

// dropToUpstream are the agent's headers the upstream never gets: the
// handle (the key replaces it), cookies, what names the agent's
// connection, and Accept-Encoding (the transport asks for gzip itself and
// decompresses, so that responses can be metered).
var dropToUpstream = []string{"Authorization", "X-Api-Key", "Cookie", "Accept-Encoding", "Host",
	"Content-Length", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"}

// dropToAgent are the upstream's headers the agent never gets.
var dropToAgent = []string{"Set-Cookie", "Alt-Svc"}

// copyBufs are the reverse proxy's buffers, that copy response bodies;
// streamBufs those of event streams. A stream's copy buffer is held as
// long as the stream is open (with 1,000 streams open, each KiB of it is a
// MiB); the relay reads the upstream into it (it has no read buffer of its
// own), and the events of one read go out in one write.
var (
	copyBufs   = &bufPool{size: 32 << 10}
	streamBufs = &bufPool{size: relayBufSize}
)

type bufPool struct {
	size int
	p    sync.Pool
}

func (bp *bufPool) Get() []byte {
	if b, ok := bp.p.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, bp.size)
}

func (bp *bufPool) Put(b []byte) { bp.p.Put(&b) }

// exchangeBufs is an exchange's httputil.BufferPool: the proxy asks for a
// buffer once the response's headers came (ModifyResponse ran), so a
// stream gets one of streamBufs.
type exchangeBufs struct{ x *exchange }

func (eb exchangeBufs) Get() []byte {
	if eb.x.body != nil && eb.x.body.relay != nil {
		return streamBufs.Get()
	}
	return copyBufs.Get()
}

func (eb exchangeBufs) Put(b []byte) {
	if len(b) == streamBufs.size {
		streamBufs.Put(b)
		return
	}
	copyBufs.Put(b)
}

// discardLog is the reverse proxy's log: what it would say of an error is
// in the request's record.
var discardLog = log.New(io.Discard, "", 0)

// serveHTTP is the gateway's one handler: route, authenticate, admit
// (prepare), forward, meter, record. Its own frame is small: a stream's
// handler goroutine sits in it for as long as the stream is open, and the
// runtime shrinks a goroutine's stack at a GC only to twice what is in use
// (runtime.shrinkstack); the request's parsing and admission run in
// prepare, whose larger frame is gone by then.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if name == slicesPrefix {
		g.serveSlices(w, r, rest)
		return
	}
	gr, up := g.front(w, r, name)
	if gr == nil {
		return
	}
	defer g.recoverRequest(gr)
	x := g.prepare(w, r, gr, up, name, rest, start)
	if x == nil {
		return
	}
	defer x.cancel(nil)
	defer gr.release(x.fl) // when forward panics; a no-op once reported
	defer gr.landed(x.fl)  // when forward panics; landed twice is harmless
	abort := x.forward(x.path, x.reqBody)
	gr.landed(x.fl)
	x.report(start)
	if abort {
		// The upstream broke off a response already begun: break the
		// agent's too, as the upstream would have, so that its SDK sees
		// an error rather than a short answer.
		panic(http.ErrAbortHandler)
	}
}

// front finds the request's upstream and grant, and checks that the
// connection is the grant's; it answers the request and returns nil when
// it goes no further.
func (g *Gateway) front(w http.ResponseWriter, r *http.Request, name string) (*Grant, *upstream) {
	up := g.upstreams[name]
	if up == nil {
		problem{status: http.StatusNotFound, code: "unknown_upstream",
			msg: "hermeskilld's LLM gateway has no upstream by that name"}.write(w, OpenAI)
		return nil, nil
	}
	if g.ctx.Err() != nil { // shutting down: Serve or Close began
		errShutdown.problem().write(w, up.Style)
		return nil, nil
	}
	gr := g.authenticate(r)
	if gr == nil {
		g.log.Warn("llm request without a valid handle refused", zap.String("upstream", name), zap.String("remote", r.RemoteAddr))
		problem{status: http.StatusUnauthorized, code: "invalid_api_key",
			msg: "invalid API key: hermeskilld's LLM gateway takes the key of a running agent's grant"}.write(w, up.Style)
		return nil, nil
	}
	if err := checkPeer(r.Context(), gr); err != nil {
		g.log.Warn("llm request with the handle of another run's process refused", zap.String("agent", gr.agentID),
			zap.String("remote", r.RemoteAddr), zap.Error(err))
		problem{status: http.StatusForbidden, code: "handle_not_yours",
			msg: "this key is honoured only on connections from the processes of the agent run it was given to (hermeskilld)"}.write(w, up.Style)
		return nil, nil
	}
	return gr, up
}

// prepare reads and checks the request and admits it: the exchange to
// forward, or nil when the request was refused or the agent went away
// (answered and recorded).
func (g *Gateway) prepare(w http.ResponseWriter, r *http.Request, gr *Grant, up *upstream, name, rest string, start time.Time) *exchange {
	gr.arrived(start)
	rec := Record{At: start, Upstream: name, Path: truncate(rest, maxPathInRecord)}
	if isWebSocket(r) {
		// The Responses API's WebSocket transport: 426 is the answer its
		// clients take to mean "use HTTP", at once, without retrying.
		g.refuse(w, gr, up, rec, problem{status: http.StatusUpgradeRequired, code: "websocket_unsupported",
			msg: "hermeskilld's LLM gateway meters HTTP requests only: use the HTTP API (WebSocket transport refused)"})
		return nil
	}
	rt, found, ok := match(up.Style, r.Method, rest)
	if !ok {
		p := problem{status: http.StatusNotFound, code: "unknown_url",
			msg: fmt.Sprintf("hermeskilld's LLM gateway forwards only the %s API's paths, not %s %s", up.Style, r.Method, truncate(rest, maxPathInRecord))}
		if found {
			p.status, p.code = http.StatusMethodNotAllowed, "method_not_allowed"
		}
		g.refuse(w, gr, up, rec, p)
		return nil
	}
	body, err := g.readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			g.refuse(w, gr, up, rec, problem{status: http.StatusRequestEntityTooLarge, code: "request_too_large",
				msg: fmt.Sprintf("request body over %d bytes (hermeskilld's LLM gateway)", tooBig.Limit)})
			return nil
		}
		g.log.Debug("llm request body unread", zap.String("agent", gr.agentID), zap.Error(err))
		gr.gone(time.Now())
		return nil
	}
	var info reqInfo
	if r.Method == http.MethodPost {
		if info, err = parseRequest(body); err != nil {
			g.refuse(w, gr, up, rec, problem{status: http.StatusBadRequest, code: "duplicate_key",
				msg: "request body has a " + err.Error() + ": hermeskilld's LLM gateway refuses a member named twice"})
			return nil
		}
	}
	rec.Model, rec.RequestModel = info.model, info.model
	if rt.ep == epResponses && info.background {
		g.refuse(w, gr, up, rec, problem{status: http.StatusBadRequest, code: "background_unsupported",
			msg: `"background": true is refused by hermeskilld's LLM gateway: a background response's usage never passes through it; send the request without it`})
		return nil
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
	admitted := false
	defer func() {
		if !admitted {
			cancel(nil)
		}
	}()
	fl := &flight{cancel: cancel}
	for {
		cut, wait, paused := gr.admit(fl, res)
		if cut != nil {
			if cut.budget != "" {
				rec.Err = cut.msg
				if !cut.slice { // a slice's refusal stops its sub-agent, not this run
					rec.OverBudget, rec.Budget = cut.budget, cut.pool
				}
			}
			g.refuse(w, gr, up, rec, cut.problem())
			return nil
		}
		if wait == nil {
			break
		}
		if po, ok := gr.obs.(PauseObserver); ok && paused != nil {
			po.Paused(*paused)
		}
		// Held: neither refused nor forwarded until the pause ends. The
		// agent's SDK sees a slow answer; one that gives up closes its
		// connection, and the request is gone.
		select {
		case <-wait:
		case <-r.Context().Done(): // the agent went away, or the gateway shuts down
			gr.unwait(res, wait)
			gr.gone(time.Now())
			return nil
		}
	}
	admitted = true
	return &exchange{g: g, w: w, r: r, rc: http.NewResponseController(w), ctx: ctx, cancel: cancel, up: up, ep: rt.ep, strip: strip, res: res, rec: rec,
		agentID: gr.agentID, gr: gr, fl: fl, agentUsage: info.usageOpt, path: rest, reqBody: body}
}

// report records the exchange, forwarded at start.
func (x *exchange) report(start time.Time) {
	x.rec.Duration = time.Since(start)
	x.g.logRecord(x.gr, &x.rec)
	x.gr.report(x.rec, x.fl)
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
	if fo, ok := gr.root().obs.(FaultObserver); ok {
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
	gr.report(rec, nil)
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
	body   *meteredBody // the upstream's response body; nil until its headers came
	// agentID is the grant's agent.
	agentID string
	gr      *Grant
	fl      *flight
	// agentUsage: the agent asked for a chat stream's usage chunk.
	agentUsage bool
	cut        *streamCut // the stream was cut at the budget; nil: not
	// path is the request's under the upstream's URL, reqBody the body
	// forwarded
	path    string
	reqBody []byte
}

// errSwitched is an upstream that answered 101: the gateway forwards HTTP
// requests only and never asks for a protocol switch.
var errSwitched = errors.New("switched protocols unasked")

// forward sends the request upstream through a reverse proxy and relays
// the response, filling the record. abort is true when the agent's
// response must be broken off.
func (x *exchange) forward(path string, body []byte) (abort bool) {
	rp, aw := x.reverseProxy(path, body)
	if rp == nil {
		return false
	}
	defer x.rc.SetWriteDeadline(time.Time{})
	defer func() {
		if x.body != nil {
			x.body.Close() // when the proxy panics; closing twice is harmless
		}
	}()
	abort = proxy(rp, aw, x.r.WithContext(x.ctx))
	if x.body != nil {
		x.settle(aw.err)
	}
	return abort
}

// reverseProxy is the reverse proxy of the exchange and the agent's writer
// it writes to; nil when the upstream request cannot be made (answered).
// Apart from forward, so that forward's frame, under a stream's copy for
// as long as it is open, stays small.
func (x *exchange) reverseProxy(path string, body []byte) (*httputil.ReverseProxy, *agentWriter) {
	target, err := url.Parse(x.up.URL + "/" + path)
	if err != nil { // the path is checked and the URL valid: not expected
		x.answer(x.w, problem{status: http.StatusBadGateway, code: "bad_upstream_request", msg: "hermeskilld could not build the upstream request"})
		x.rec.Err = err.Error()
		return nil, nil
	}
	target.RawQuery = x.r.URL.RawQuery
	// The agent's Upgrade is not forwarded (Rewrite drops it): removed
	// here, the reverse proxy does not look for a protocol switch either.
	x.r.Header.Del("Upgrade")
	aw := &agentWriter{ResponseWriter: x.w, rc: x.rc, timeout: x.g.cfg.AgentWriteTimeout}
	return &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { x.rewrite(pr, target, body) },
		Transport: x.g.transport,
		// FlushInterval 0: the proxy flushes each write of an event stream
		// (as isEventStream tells one) and of a body of unknown length, so
		// a stream goes event by event; a body of known length is not
		// flushed, so that its last bytes reach the agent only once its
		// record is made, as the handler returns.
		FlushInterval:  0,
		BufferPool:     exchangeBufs{x},
		ModifyResponse: x.modifyResponse,
		ErrorHandler:   x.proxyError,
		ErrorLog:       discardLog, // every error ends in the request's record
	}, aw
}

// proxy serves r through rp. abort is true when rp broke the response off
// (it panics with http.ErrAbortHandler when relaying the body fails): the
// caller records the request first, then breaks the response off itself.
func proxy(rp *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) (abort bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { // the sentinel itself, as net/http compares it
				panic(v)
			}
			abort = true
		}
	}()
	rp.ServeHTTP(w, r)
	return false
}

// rewrite makes the upstream request: to target, with the checked body,
// without what dropToUpstream lists, with the upstream's key. The reverse
// proxy has removed the hop-by-hop headers (and those Connection names)
// and the forwarding ones, and adds none: SetXForwarded is not called.
func (x *exchange) rewrite(pr *httputil.ProxyRequest, target *url.URL, body []byte) {
	out := pr.Out
	out.URL, out.Host = target, ""
	for _, k := range dropToUpstream {
		out.Header.Del(k)
	}
	// The reverse proxy puts back an agent's "Te: trailers"; trailers are
	// not forwarded, so it is not passed on.
	out.Header.Del("Te")
	out.TransferEncoding, out.Trailer = nil, nil
	out.ContentLength = int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.Body, _ = out.GetBody()
	if len(body) == 0 {
		out.Body, out.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	switch {
	case x.up.key == "":
	case x.up.Style == Anthropic:
		out.Header.Set("X-Api-Key", x.up.key)
	default:
		out.Header.Set("Authorization", "Bearer "+x.up.key)
	}
}

// modifyResponse takes the upstream's response headers (the reverse proxy
// has removed the hop-by-hop ones) and wraps its body in the meter.
func (x *exchange) modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errSwitched
	}
	for _, k := range dropToAgent {
		resp.Header.Del(k)
	}
	resp.Trailer = nil // the upstream's trailers are not forwarded (nor announced)
	x.rec.Status = resp.StatusCode
	x.rec.Stream = isEventStream(resp.Header.Get("Content-Type"))
	if x.rec.Stream {
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	}
	x.body = x.newBody(resp)
	resp.Body = x.body
	return nil
}

// proxyError answers a request whose response never came: the round trip
// failed, or the upstream switched protocols.
func (x *exchange) proxyError(w http.ResponseWriter, _ *http.Request, err error) {
	if !notSent(err) {
		x.chargeReservation() // the upstream may have begun, and bill it
	}
	cut, gone := x.failure(err)
	switch {
	case cut != nil:
		x.answer(w, cut.problem())
	case gone:
	default:
		p := problem{status: http.StatusBadGateway, code: "upstream_unreachable",
			msg: fmt.Sprintf("hermeskilld's LLM gateway could not reach upstream %s", x.up.Name)}
		var timeout interface{ Timeout() bool }
		if errors.Is(context.Cause(x.ctx), errIdle) || errors.As(err, &timeout) && timeout.Timeout() {
			p.status, p.code, p.msg = http.StatusGatewayTimeout, "upstream_timeout", fmt.Sprintf("upstream %s did not answer in time", x.up.Name)
		}
		x.answer(w, p)
	}
}

// meteredBody is the upstream's response body as the agent gets it: read
// within the idle timeout, a stream through the relay (which meters it
// event by event), any other body held up to MaxResponseBytes to be
// metered at its end. A stream the gateway cuts ends with the provider's
// error event.
type meteredBody struct {
	x       *exchange
	resp    *http.Response
	body    io.ReadCloser // the upstream's
	timer   *time.Timer   // the idle timer
	src     io.Reader     // body through the idle timer, and the relay for a stream
	relay   *relay        // nil: not a stream
	meter   streamMeter   // nil: a stream not metered
	metered bool          // spend is read from this response
	held    bytes.Buffer  // a non-streamed metered body, until over
	over    bool          // it passed MaxResponseBytes: not metered
	ended   bool          // src reached its end or failed
	err     error         // src's read error; nil at its end
	cut     bool          // the gateway cut the stream: it ends with tail, not err
	tail    []byte        // the error event ending a cut stream, still to read
}

func (x *exchange) newBody(resp *http.Response) *meteredBody {
	b := &meteredBody{x: x, resp: resp, body: resp.Body, metered: x.ep != epOther && x.rec.Status/100 == 2}
	d := x.g.cfg.StreamIdleTimeout
	b.timer = time.AfterFunc(d, func() { x.cancel(errIdle) })
	b.src = &idleReader{r: resp.Body, t: b.timer, d: d}
	if x.rec.Stream {
		if b.metered {
			b.meter = newStreamMeter(x.ep, x.g.cfg.MaxToolArgsBytes, x.strip)
			if cs, ok := b.meter.(*chatStream); ok {
				cs.agentUsage = x.agentUsage
			}
		}
		b.relay = &relay{src: b.src, maxEvent: x.g.cfg.MaxEventBytes, meter: b.meter}
		if b.meter != nil && x.fl != nil {
			b.relay.limit = (&limiter{x: x, meter: b.meter}).check
		}
		b.src = b.relay
	}
	return b
}

func (b *meteredBody) Read(p []byte) (int, error) {
	if b.ended {
		return b.readEnded(p)
	}
	n, err := b.src.Read(p)
	if b.metered && b.relay == nil && !b.over && n > 0 {
		b.hold(p[:n])
	}
	if err == nil {
		return n, nil
	}
	b.end(err)
	if n > 0 {
		return n, nil
	}
	return b.readEnded(p)
}

// hold keeps what was read of a non-streamed body, to meter it at its end.
func (b *meteredBody) hold(p []byte) {
	if int64(b.held.Len()+len(p)) > b.x.g.cfg.MaxResponseBytes {
		b.over, b.held = true, bytes.Buffer{}
		return
	}
	b.held.Write(p)
}

// end takes the end of src: io.EOF, or its read error.
func (b *meteredBody) end(err error) {
	b.ended = true
	if b.x.cut != nil {
		// Cut at the budget: the upstream is told at once (its connection
		// closed), not when the proxy closes the body.
		b.body.Close()
	}
	if err != io.EOF {
		b.err = err
		var cut *cutError
		if b.relay != nil && errors.As(context.Cause(b.x.ctx), &cut) {
			// A stream the gateway cut ends in good order with the cut's
			// error event: the agent's SDK raises that error.
			b.cut, b.tail = true, cut.problem().event(b.x.up.Style)
		}
	}
}

// readEnded reads once src ended: the rest of a cut stream's tail, then
// src's error or io.EOF.
func (b *meteredBody) readEnded(p []byte) (int, error) {
	if len(b.tail) > 0 {
		n := copy(p, b.tail)
		b.tail = b.tail[n:]
		return n, nil
	}
	if b.err != nil && !b.cut {
		return 0, b.err
	}
	return 0, io.EOF
}

// Close closes the upstream's body and stops the idle timer. The
// transport sets the response's trailers as the body ends; they are
// dropped here, before the reverse proxy would pass them on.
func (b *meteredBody) Close() error {
	b.timer.Stop()
	err := b.body.Close()
	b.resp.Trailer = nil
	return err
}

// settle fills the record from what the body read, once the proxy is
// done with it. werr is the write to the agent that failed, if one did.
func (x *exchange) settle(werr error) {
	b := x.body
	err := b.err // when the upstream failed, the relay stopped on it
	if err == nil {
		err = werr
	}
	var rd reading
	if b.relay != nil {
		if b.meter != nil {
			rd = b.meter.result()
			rd.incomplete = rd.incomplete || b.relay.skipped || !rd.done
		}
		if x.cut != nil {
			x.settleCut(&rd)
		}
		if err == nil && b.meter != nil && !rd.done && x.cut == nil {
			x.rec.Err = "the upstream's stream ended before its final event"
		}
		if rd.upstreamErr != "" && x.rec.Err == "" {
			x.rec.Err = rd.upstreamErr
		}
	} else if b.metered {
		if err == nil && !b.over && b.held.Len() > 0 {
			rd = meterBody(x.ep, b.held.Bytes(), x.g.cfg.MaxToolArgsBytes)
		} else {
			rd.incomplete = true
		}
	}
	x.fill(rd, b.metered)
	if err != nil {
		x.failure(err)
	}
}

// agentWriter is the agent's response as the reverse proxy writes it:
// each write and flush within AgentWriteTimeout, the first failure kept
// for the record, and no informational (1xx) response passed on (the
// proxy would pass the upstream's with their headers unfiltered).
type agentWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error // the first failed write or flush, an *agentError
}

func (w *agentWriter) WriteHeader(status int) {
	if status >= 100 && status <= 199 {
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *agentWriter) Write(b []byte) (int, error) {
	w.deadline()
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		return n, w.fail(err)
	}
	return n, nil
}

// FlushError is what http.ResponseController.Flush calls.
func (w *agentWriter) FlushError() error {
	w.deadline()
	if err := w.rc.Flush(); err != nil {
		return w.fail(err)
	}
	return nil
}

// Unwrap gives http.ResponseController the agent's writer.
func (w *agentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *agentWriter) deadline() {
	if w.timeout > 0 {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout)) // unsupported: the server's own timeouts apply
	}
}

func (w *agentWriter) fail(err error) error {
	ae := &agentError{err}
	if w.err == nil {
		w.err = ae
	}
	return ae
}

// fill completes the record from what the meter read.
func (x *exchange) fill(rd reading, metered bool) {
	fault.Inject(fault.GatewayMeter, x.agentID)
	if rd.model != "" {
		x.rec.Model = rd.model
	}
	x.rec.InputTokens, x.rec.OutputTokens, x.rec.CachedInputTokens = rd.in, rd.out, rd.cached
	if !rd.usage {
		// The output counted from a stream's deltas, when its usage never
		// came: at least that much was generated.
		x.rec.OutputTokens = max(rd.out, rd.counted)
	}
	x.rec.ToolCalls = rd.tools
	x.rec.FinishReasons = rd.finish
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

// failure records why the exchange failed: cut is the gateway's cut of
// it, gone is true when the agent went away.
func (x *exchange) failure(err error) (cut *cutError, gone bool) {
	var agent *agentError
	cause := context.Cause(x.ctx)
	switch {
	case errors.As(cause, &cut):
		x.rec.Cut, x.rec.Err = true, cut.msg
		return cut, false
	case errors.As(err, &agent), x.r.Context().Err() != nil:
		x.rec.Err = "the agent went away"
		return nil, true
	case errors.Is(cause, errIdle):
		x.rec.Err = fmt.Sprintf("upstream silent for %s", x.g.cfg.StreamIdleTimeout)
	default:
		x.rec.Err = "upstream: " + err.Error()
	}
	return nil, false
}

// answer writes the gateway's own error response and records its status.
func (x *exchange) answer(w http.ResponseWriter, p problem) {
	p.write(w, x.up.Style)
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
