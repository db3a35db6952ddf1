// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hermeskill/hermeskilld/internal/certs"
)

// Receipts is the outbox side of one foreground run (supervise): it queues
// the run's certificates and remembers them, so that at exit Finish can say
// what became of each. A host of many agents enqueues into the Outbox
// directly and keeps no such list.
type Receipts struct {
	ob       *Outbox
	stateDir string

	mu        sync.Mutex
	queued    []string // cert ids, queued
	notQueued []error  // certificates the outbox refused
}

// NewReceipts records the certificates of one run queued in ob, whose
// state directory (named in the summary) is stateDir.
func NewReceipts(ob *Outbox, stateDir string) *Receipts {
	return &Receipts{ob: ob, stateDir: stateDir}
}

// Enqueue queues a certificate of the run (a recorder sink) and remembers
// it.
func (r *Receipts) Enqueue(c *certs.Certificate, raw []byte) error {
	err := r.ob.Enqueue(c, raw)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.notQueued = append(r.notQueued, err)
	} else {
		r.queued = append(r.queued, c.CertID)
	}
	return err
}

// Finish flushes the outbox until it is empty or ctx ends (Outbox.Flush)
// and sums up what became of the run's certificates and of those earlier
// runs left.
func (r *Receipts) Finish(ctx context.Context) *Summary {
	st := r.ob.Flush(ctx)
	s := &Summary{StateDir: r.stateDir, OutboxDir: r.ob.Dir(), Pending: st.Pending}
	r.mu.Lock()
	s.Own, s.NotQueued = len(r.queued), r.notQueued
	for _, id := range r.queued {
		switch {
		case r.ob.IsPending(id):
			s.OwnPending++
		case r.ob.IsParked(id):
			s.OwnParked++
		default:
			s.OwnDelivered++
		}
	}
	r.mu.Unlock()
	s.EarlierDelivered = max(int(st.Delivered)-s.OwnDelivered, 0)
	return s
}

// Summary is what became of a run's certificates at its exit.
type Summary struct {
	StateDir, OutboxDir string
	Own                 int // the run's certificates queued
	OwnDelivered        int
	OwnPending          int
	OwnParked           int
	NotQueued           []error // the run's certificates the outbox refused (full, disk)
	EarlierDelivered    int     // left by earlier runs, delivered by this one
	Pending             int     // undelivered in the outbox now, the run's and earlier ones
}

// String is the control plane's part of the run's exit line, one line;
// "" when there is nothing to say (no certificate, nothing left by
// earlier runs).
func (s *Summary) String() string {
	if s == nil {
		return ""
	}
	var parts []string
	retry := fmt.Sprintf("will be retried by the next run using %s", s.StateDir)
	switch {
	case s.Own == 0:
	case s.OwnDelivered == s.Own:
		parts = append(parts, certsN(s.Own)+" delivered to the control plane")
	case s.OwnPending == s.Own:
		parts = append(parts, fmt.Sprintf("%s queued for the control plane (%d undelivered, %s)", certsN(s.Own), s.Pending, retry))
	default:
		var ps []string
		if s.OwnDelivered > 0 {
			ps = append(ps, fmt.Sprintf("%d delivered", s.OwnDelivered))
		}
		if s.OwnPending > 0 {
			ps = append(ps, fmt.Sprintf("%d queued (%d undelivered, %s)", s.OwnPending, s.Pending, retry))
		}
		if s.OwnParked > 0 {
			ps = append(ps, fmt.Sprintf("%d refused", s.OwnParked))
		}
		parts = append(parts, fmt.Sprintf("%s for the control plane: %s", certsN(s.Own), strings.Join(ps, ", ")))
	}
	if s.OwnParked > 0 {
		parts = append(parts, fmt.Sprintf("refused by the control plane: see %s", filepath.Join(s.OutboxDir, parkedDir)))
	}
	if n := len(s.NotQueued); n > 0 {
		parts = append(parts, fmt.Sprintf("%s not queued for the control plane (%v); only in the certificates directory", certsN(n), s.NotQueued[0]))
	}
	if s.EarlierDelivered > 0 {
		parts = append(parts, earlierN(s.EarlierDelivered)+" delivered to the control plane")
	}
	if earlier := s.Pending - s.OwnPending; earlier > 0 && s.OwnPending == 0 {
		parts = append(parts, fmt.Sprintf("%s still queued for the control plane (%d undelivered, %s)", earlierN(earlier), s.Pending, retry))
	}
	return strings.Join(parts, "; ")
}

// earlierN is "1 certificate of an earlier run", "N certificates of
// earlier runs".
func earlierN(n int) string {
	if n == 1 {
		return "1 certificate of an earlier run"
	}
	return fmt.Sprintf("%d certificates of earlier runs", n)
}

// certsN is "certificate" for one, "N certificates" otherwise.
func certsN(n int) string {
	if n == 1 {
		return "certificate"
	}
	return fmt.Sprintf("%d certificates", n)
}
