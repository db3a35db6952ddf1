// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/certs"
)

// ReceiptSchema names a directive receipt's JSON: a schema of its own, so
// that a receipt's signature can never pass for a certificate's.
const ReceiptSchema = "hermeskill.directive-receipt.v1"

// receiptsDir, inside the outbox directory, keeps the receipt of every
// directive remembered as acted on, so that a repeated directive is
// acknowledged again with the same signed bytes.
const receiptsDir = "receipts"

// Receipt is a host's acknowledgement of one directive (see the package
// comment for the wire format). Runs are the runs it ended, each with its
// certificate written; Failed what it could not do.
type Receipt struct {
	Schema      string `json:"schema"`
	Host        string `json:"host"`
	DirectiveID string `json:"directive_id"`
	// AgentID is set for a directive polled for one agent
	// (GET {url}/agents/{agent_id}/directives).
	AgentID        string           `json:"agent_id,omitempty"`
	Action         string           `json:"action"`
	ReceivedAt     time.Time        `json:"received_at"`
	AcknowledgedAt time.Time        `json:"acknowledged_at"`
	Runs           []RunEnded       `json:"runs"`
	Failed         []Failure        `json:"failed"`
	Signature      *certs.Signature `json:"signature"`
}

// ParseReceipt parses the bytes of a receipt file (outbox/receipts/*.json,
// or a receipt as the control plane received it). Its signature is not
// checked: certs.Verify does that. Errors: the JSON's, or ErrNotReceipt
// for an object of another schema (a certificate) or without a
// directive_id.
func ParseReceipt(data []byte) (*Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	switch {
	case r.Schema != ReceiptSchema:
		return nil, fmt.Errorf("%w: schema %q", ErrNotReceipt, r.Schema)
	case r.DirectiveID == "":
		return nil, fmt.Errorf("%w: no directive_id", ErrNotReceipt)
	}
	return &r, nil
}

// RunEnded is one run a directive ended: its certificate, whether the
// ladder found its tree empty, and whether its LLM gateway handle is
// withdrawn (revoked at the kill decision; true for a run that had none).
type RunEnded struct {
	AgentID   string `json:"agent_id"`
	CertID    string `json:"cert_id"`
	TreeEmpty bool   `json:"tree_empty"`
	Revoked   bool   `json:"revoked"`
	// Reached is the ladder's last stage (cooperative, sigterm, sigkill).
	Reached string `json:"reached,omitempty"`
}

// Failure is what a directive could not do, for one agent or for the
// whole directive (AgentID empty).
type Failure struct {
	AgentID string `json:"agent_id,omitempty"`
	Error   string `json:"error"`
}

// Acted is what carrying out a directive did (Host.Act).
type Acted struct {
	Runs   []RunEnded
	Failed []Failure
}

// RunOf is the receipt's entry of a run ended with certificate c, its
// ladder having found the tree empty or not: its LLM handle counts as
// revoked when the certificate's shutdown log has the capabilities_revoked
// step, or when the run had no handle (no metered block).
func RunOf(c *certs.Certificate, treeEmpty bool) RunEnded {
	revoked := c.Metered == nil || slices.ContainsFunc(c.ShutdownLog, func(s certs.Step) bool {
		return s.Step == "capabilities_revoked"
	})
	return RunEnded{AgentID: c.AgentID, CertID: c.CertID, TreeEmpty: treeEmpty, Revoked: revoked, Reached: c.Escalation.Reached}
}

// acker carries out directives and acknowledges each with a signed
// receipt queued in the outbox (behind the certificates of the runs it
// ended, which are queued as they are written). A directive in flight or
// already acknowledged is not carried out again.
type acker struct {
	host   string
	signer *certs.Signer // nil: receipts are unsigned
	ob     *Outbox
	dir    string // the outbox's receiptsDir
	max    int    // receipts kept
	act    func(ctx context.Context, d Directive) Acted
	log    *zap.Logger

	mu       sync.Mutex
	inflight map[seenKey]bool
	wg       sync.WaitGroup
}

// receiptKey is the outbox item id (and Idempotency-Key) of the receipt
// of directive id polled in scope ("" for the host's directives, else the
// agent's id): ids are the control plane's, any string.
func receiptKey(scope, id string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + id))
	return "receipt-" + hex.EncodeToString(sum[:16])
}

// handle carries out d (new to the poller) on a goroutine of its own and
// acknowledges it; ctx is detached from shutdown by the caller.
func (a *acker) handle(ctx context.Context, scope string, d Directive) {
	k := seenKey{scope, d.ID}
	a.mu.Lock()
	if a.inflight[k] {
		a.mu.Unlock()
		return
	}
	a.inflight[k] = true
	a.mu.Unlock()
	received := time.Now()
	if scope != "" {
		d.Agents = []string{scope} // polled for this agent: about it alone
	}
	a.wg.Go(func() {
		defer func() {
			a.mu.Lock()
			delete(a.inflight, k)
			a.mu.Unlock()
		}()
		var acted Acted
		switch d.Action {
		case ActionKill, ActionRevoke, ActionEstop:
			acted = a.act(ctx, d)
		default:
			acted.Failed = []Failure{{Error: fmt.Sprintf("unknown action %q: nothing done", d.Action)}}
		}
		a.acknowledge(scope, d, received, acted)
	})
}

// repeat acknowledges again a directive the poller remembers as acted on:
// with its stored receipt; not at all while it is in flight (its receipt
// follows); with a receipt saying it was not carried out again when it
// was received before a restart and its receipt was never stored.
func (a *acker) repeat(scope string, d Directive) {
	k := seenKey{scope, d.ID}
	a.mu.Lock()
	busy := a.inflight[k]
	a.mu.Unlock()
	if busy {
		return
	}
	key := receiptKey(scope, d.ID)
	raw, err := os.ReadFile(filepath.Join(a.dir, key+itemExt))
	if err == nil {
		if a.ob.IsPending(key) {
			return // the same bytes are on their way
		}
		if err := a.ob.enqueue(&item{id: key, directiveID: d.ID}, raw); err != nil {
			a.log.Error("directive receipt not queued again", zap.String("directive_id", d.ID), zap.Error(err))
		}
		return
	}
	if !errors.Is(err, fs.ErrNotExist) {
		a.log.Error("stored directive receipt unreadable", zap.String("directive_id", d.ID), zap.Error(err))
	}
	a.acknowledge(scope, d, time.Now(), Acted{Failed: []Failure{{Error: "received before hermeskilld restarted and " +
		"not carried out again; the certificates delivered since record the runs it ended"}}})
}

// acknowledge builds, signs, stores and queues the receipt of d.
func (a *acker) acknowledge(scope string, d Directive, received time.Time, acted Acted) {
	log := a.log.With(zap.String("directive_id", d.ID), zap.String("action", d.Action))
	r := Receipt{Schema: ReceiptSchema, Host: a.host, DirectiveID: d.ID, AgentID: scope, Action: d.Action,
		ReceivedAt: received.UTC(), AcknowledgedAt: time.Now().UTC(), Runs: acted.Runs, Failed: acted.Failed}
	if r.Runs == nil {
		r.Runs = []RunEnded{}
	}
	if r.Failed == nil {
		r.Failed = []Failure{}
	}
	raw, err := a.sign(&r)
	if err != nil {
		log.Error("directive receipt not made", zap.Error(err))
		a.ob.receiptDropped()
		return
	}
	key := receiptKey(scope, d.ID)
	if err := a.store(key, raw); err != nil {
		log.Error("directive receipt not stored; a repeat of the directive will not find it", zap.Error(err))
	}
	if err := a.ob.enqueue(&item{id: key, directiveID: d.ID}, raw); err != nil {
		log.Error("directive receipt not queued for the control plane", zap.Error(err))
		return
	}
	log.Info("directive acknowledged", zap.Int("runs", len(r.Runs)), zap.Int("failed", len(r.Failed)),
		zap.Bool("signed", r.Signature != nil))
}

// sign returns the receipt's JSON, signed over its canonical form when a
// key is configured.
func (a *acker) sign(r *Receipt) ([]byte, error) {
	r.Signature = nil
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if a.signer == nil {
		return append(b, '\n'), nil
	}
	if r.Signature, err = a.signer.SignJSON(b); err != nil {
		return nil, err
	}
	b, err = json.Marshal(r)
	return append(b, '\n'), err
}

// store keeps raw as the receipt key for repeats, and forgets the oldest
// receipts beyond max.
func (a *acker) store(key string, raw []byte) error {
	if err := os.MkdirAll(a.dir, dirMode); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(a.dir, key+itemExt), raw, fileMode); err != nil {
		return err
	}
	ents, err := os.ReadDir(a.dir)
	if err != nil || len(ents) <= a.max {
		return err
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var all []aged
	for _, de := range ents {
		if fi, err := de.Info(); err == nil && strings.HasSuffix(de.Name(), itemExt) {
			all = append(all, aged{de.Name(), fi.ModTime()})
		}
	}
	slices.SortFunc(all, func(x, y aged) int { return x.mod.Compare(y.mod) })
	for _, e := range all[:max(0, len(all)-a.max)] {
		os.Remove(filepath.Join(a.dir, e.name))
	}
	return nil
}

// wait waits for the directives in flight.
func (a *acker) wait() { a.wg.Wait() }
