// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
	"github.com/hermeskill/hermeskilld/internal/control"
)

// held is what keeps agents down across daemon restarts and reboots:
// quarantined agents and the e-stop, written to state_dir/held.json on
// every change (atomically, fsynced) and read at start.
type held struct {
	path string

	mu    sync.Mutex
	Estop *control.Quarantine           `json:"estop,omitempty"`
	Agent map[string]control.Quarantine `json:"quarantined"`
	// Revoked are the standing revocations, in the order they were made.
	Revoked []control.Revocation `json:"revocations,omitempty"`
}

func loadHeld(path string) (*held, error) {
	h := &held{path: path, Agent: map[string]control.Quarantine{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	if err := decodeHeld(data, h); err != nil {
		return nil, fmt.Errorf("%s: %w: %w (move it aside to start with no agent held)", path, ErrCorruptHeld, err)
	}
	if h.Agent == nil {
		h.Agent = map[string]control.Quarantine{}
	}
	return h, nil
}

// decodeHeld decodes exactly what saveLocked writes: one JSON object of
// known keys. An unknown key is refused like any other damage: it may be a
// misspelt "estop" or "quarantined", and ignoring it would start agents
// that were meant to stay down.
func decodeHeld(data []byte, h *held) error {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object") // empty, null, a list…
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// saveLocked writes the file; h.mu is held.
func (h *held) saveLocked() error {
	data, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(h.path, append(data, '\n'), 0o640)
}

func (h *held) quarantine(id, reason, operator string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Agent[id] = control.Quarantine{Since: time.Now().UTC(), Reason: reason, Operator: operator}
	return h.saveLocked()
}

// release reports whether id was quarantined.
func (h *held) release(id string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.Agent[id]; !ok {
		return false, nil
	}
	delete(h.Agent, id)
	return true, h.saveLocked()
}

func (h *held) quarantined(id string) (control.Quarantine, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q, ok := h.Agent[id]
	return q, ok
}

// revoke stores a standing revocation and returns it with its rule id.
func (h *held) revoke(r control.Revocation) (control.Revocation, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, old := range h.Revoked {
		var k int
		if _, err := fmt.Sscanf(old.Rule, "r%d", &k); err == nil {
			n = max(n, k)
		}
	}
	r.Rule, r.Since = fmt.Sprintf("r%d", n+1), time.Now().UTC()
	h.Revoked = append(h.Revoked, r)
	return r, h.saveLocked()
}

// lift removes a rule; it reports whether there was one.
func (h *held) lift(rule string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, r := range h.Revoked {
		if r.Rule == rule {
			h.Revoked = append(h.Revoked[:i:i], h.Revoked[i+1:]...)
			return true, h.saveLocked()
		}
	}
	return false, nil
}

func (h *held) revocations() []control.Revocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]control.Revocation(nil), h.Revoked...)
}

// revokedFor returns the first rule that keeps an agent with these labels
// from starting (a rule by id or by selector; started_before rules match
// runs, never a new start).
func (h *held) revokedFor(id string, labels map[string]string) (control.Revocation, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.Revoked {
		if !r.StartedBefore.IsZero() {
			continue
		}
		if (r.ID != "" && r.ID == id) || (r.ID == "" && r.Selector.Matches(labels)) {
			return r, true
		}
	}
	return control.Revocation{}, false
}

func (h *held) setEstop(q *control.Quarantine) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Estop = q
	return h.saveLocked()
}

func (h *held) estop() (control.Quarantine, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.Estop == nil {
		return control.Quarantine{}, false
	}
	return *h.Estop, true
}
