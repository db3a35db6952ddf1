// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package supervisor

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/config"
	"github.com/hermeskill/hermeskilld/internal/egress"
)

// network: allowlist gives the agent, in its namespace of its own, an
// egress proxy of hermeskilld's: its listener is a loopback socket opened
// in the namespace, the proxy dials out from ours. The agent's proxy
// variables point at it; its own loopback (where the gateway listens)
// goes direct.

// proxyVars are the variables clients read a proxy from, both cases:
// curl and Python read the lower-case ones first (curl reads no
// upper-case HTTP_PROXY at all), Go and most SDKs either.
var proxyVars = []string{"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"}

// noProxy is the agent's own loopback: the gateway, and anything the agent
// serves itself, are reached without the proxy.
const noProxy = "localhost,127.0.0.1,::1"

// proxyEnv is env with the proxy variables pointing at proxyURL (those it
// had are replaced).
func proxyEnv(env []string, proxyURL string) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(proxyVars, k) || k == "NO_PROXY" || k == "no_proxy"
	})
	for _, k := range proxyVars {
		env = append(env, k+"="+proxyURL)
	}
	return append(env, "NO_PROXY="+noProxy, "no_proxy="+noProxy)
}

// openEgress serves the agent's egress proxy in its namespace.
func (r *Run) openEgress(a *config.Agent) error {
	allow, err := egress.Parse(a.Allow)
	if err != nil {
		return fmt.Errorf("network: allowlist: %w", err)
	}
	ln, err := r.net.ns.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("network: allowlist: the egress proxy in the agent's namespace: %w", err)
	}
	r.egressQ = newEgressQueue()
	r.net.proxy = egress.New(egress.Config{Allow: allow, Observer: r.egressQ, Log: r.log})
	r.net.proxy.Serve(ln)
	r.net.proxyURL = "http://" + ln.Addr().(*net.TCPAddr).String()
	return nil
}

// egressQueue hands the proxy's refusals and bytes to the run's loop. The
// proxy calls it on its connections' goroutines and must never wait: the
// refusals are queued (bounded: beyond maxQueued only counted), the bytes
// summed, and the loop kicked.
type egressQueue struct {
	mu       sync.Mutex
	refusals []egress.Refusal
	dropped  int // refusals beyond maxQueued since the last take
	moved    int64
	movedAt  time.Time
	ready    chan struct{}
}

const maxQueued = 1024

func newEgressQueue() *egressQueue { return &egressQueue{ready: make(chan struct{}, 1)} }

var _ egress.Observer = (*egressQueue)(nil)

func (q *egressQueue) Refused(r egress.Refusal) {
	q.mu.Lock()
	if len(q.refusals) < maxQueued {
		q.refusals = append(q.refusals, r)
	} else {
		q.dropped++
	}
	q.mu.Unlock()
	q.kick()
}

func (q *egressQueue) Moved(out, in int64, at time.Time) {
	q.mu.Lock()
	q.moved += out + in
	q.movedAt = at
	q.mu.Unlock()
	q.kick()
}

func (q *egressQueue) kick() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns what was queued so far: the refusals, in order, with the
// last one repeated for those dropped, and the bytes.
func (q *egressQueue) take() (refusals []egress.Refusal, moved int64, at time.Time) {
	if q == nil {
		return nil, 0, time.Time{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	refusals, moved, at = q.refusals, q.moved, q.movedAt
	for range q.dropped {
		refusals = append(refusals, refusals[len(refusals)-1])
	}
	q.refusals, q.dropped, q.moved = nil, 0, 0
	return refusals, moved, at
}

// readyC is the queue's kick; nil without a proxy.
func (q *egressQueue) readyC() <-chan struct{} {
	if q == nil {
		return nil
	}
	return q.ready
}

// maxRefusalEvents bounds the refusal events of a run: the first refusal
// of each destination is one (an audit line), up to this many
// destinations; the counts are in the certificate.
const maxRefusalEvents = 64

// egressEvents applies what the proxy did to the engine: each refusal
// (the first of each destination an event too), then the bytes.
func (l *loop) egressEvents() {
	refusals, moved, at := l.egressQ.take()
	for _, rf := range refusals {
		if !l.refusedSeen[rf.Destination] && len(l.refusedSeen) < maxRefusalEvents {
			if l.refusedSeen == nil {
				l.refusedSeen = map[string]bool{}
			}
			l.refusedSeen[rf.Destination] = true
			r := rf
			l.log.Info("egress refused", zap.String("destination", rf.Destination), zap.String("reason", rf.Reason))
			l.eff.emit(Event{Type: EventEgressRefused, Egress: &r, Time: rf.At})
		}
		l.handle(l.engine.EgressRefused(rf.Destination, rf.Reason, l.at(rf.At)))
	}
	if moved > 0 {
		l.handle(l.engine.EgressMoved(moved, l.at(at)))
	}
}

// certTopDestinations is how many destinations the certificate lists.
const certTopDestinations = 20

// certEgress is the certificate's egress block: the proxy's figures, its
// top destinations by bytes, then by refusals.
func certEgress(s egress.Stats) *certs.Egress {
	e := &certs.Egress{Allow: s.Allow, Passed: s.Passed, Failed: s.Failed, Refused: s.Refused, OverCap: s.OverCap,
		BytesOut: s.BytesOut, BytesIn: s.BytesIn, TunnelsCut: s.Cut, Revoked: s.Revoked, LastByteAt: s.LastByteAt,
		Destinations: []certs.EgressDestination{}}
	for i, d := range s.Destinations {
		if i == certTopDestinations {
			e.DestinationsOmitted = len(s.Destinations) - i
			break
		}
		e.Destinations = append(e.Destinations, certs.EgressDestination{Destination: d.Destination, Passed: d.Passed, Failed: d.Failed,
			Refused: d.Refused, RefusedReason: d.Reason, BytesOut: d.BytesOut, BytesIn: d.BytesIn})
	}
	return e
}
