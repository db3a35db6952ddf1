// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermeskill/hermeskilld/internal/atomicfile"
)

// seenSet is the directive ids already acted on, oldest first, bounded,
// and kept in a file rewritten atomically at each addition:
//
//	{"seen":[{"agent_id":"bot","id":"d1","at":"2026-12-02T10:15:03Z"}, …]}
//
// agent_id is "" for the host's directives. The agents' poll and the
// host's long poll share it from their goroutines.
type seenSet struct {
	mu    sync.Mutex
	path  string
	max   int
	list  []seenEntry
	index map[seenKey]struct{}
}

type seenKey struct{ agent, id string }

type seenEntry struct {
	AgentID string    `json:"agent_id"`
	ID      string    `json:"id"`
	At      time.Time `json:"at"`
}

// loadSeen reads path; a missing file is an empty set. On a bad file it
// returns an empty set and the error.
func loadSeen(path string, max int) (*seenSet, error) {
	s := &seenSet{path: path, max: max, index: map[seenKey]struct{}{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	var f struct {
		Seen []seenEntry `json:"seen"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range f.Seen {
		s.insert(e)
	}
	return s, nil
}

func (s *seenSet) has(agent, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.index[seenKey{agent, id}]
	return ok
}

// add remembers (agent, id) in memory, then on disk; the error is the
// disk's (the memory keeps it either way).
func (s *seenSet) add(agent, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.insert(seenEntry{AgentID: agent, ID: id, At: now.UTC()})
	data, err := json.Marshal(struct {
		Seen []seenEntry `json:"seen"`
	}{s.list})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), dirMode); err != nil {
		return err
	}
	return atomicfile.WriteFile(s.path, data, 0o600)
}

func (s *seenSet) insert(e seenEntry) {
	k := seenKey{e.AgentID, e.ID}
	if _, ok := s.index[k]; ok {
		return
	}
	s.list = append(s.list, e)
	s.index[k] = struct{}{}
	for len(s.list) > s.max {
		delete(s.index, seenKey{s.list[0].AgentID, s.list[0].ID})
		s.list = s.list[1:]
	}
}
