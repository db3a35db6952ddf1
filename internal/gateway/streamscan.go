// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"bytes"
	"slices"
)

// The meters' scan of the events that only add text: each reads what
// event would read of such an event, without decoding it (jsonScan), and
// returns false — nothing read, event decodes it — for any event that
// can carry more (usage, a tool call, an error, a response or message
// object) or that the scan cannot read exactly as encoding/json would.

// maxScanChoices bounds the choices of a chat chunk the scan reads.
const maxScanChoices = 4

// scan reads a chunk of text deltas: id, created, model and choices of
// content, refusal or reasoning, without usage, error or tool calls.
func (m *chatStream) scan(data []byte) bool {
	s := jsonScan{b: data}
	var id, created, model []byte
	var choices [maxScanChoices]int
	var n int
	var counted int64
	var seen members
	ok := s.object(func(k []byte) bool {
		switch {
		case is(k, "id"):
			seen.once(&s, 1)
			id = s.value()
		case is(k, "created"):
			seen.once(&s, 2)
			created = s.value()
		case is(k, "model"):
			seen.once(&s, 4)
			if model = s.value(); len(model) == 0 || model[0] != '"' {
				return false
			}
		case is(k, "choices"):
			seen.once(&s, 8)
			if s.peek() != '[' {
				return false
			}
			for more := s.open('['); more; more = s.next(']') {
				if n == maxScanChoices {
					return false
				}
				idx, c, ok := scanChatChoice(&s)
				if !ok {
					return false
				}
				choices[n], counted, n = idx, counted+c, n+1
			}
		case is(k, "usage"), is(k, "error"):
			return false
		default:
			s.skip(0)
		}
		return true
	})
	if !ok || !s.end() {
		return false
	}
	if m.r.model == "" && model != nil {
		str, ok := plainString(model)
		if !ok {
			return false
		}
		m.r.model = string(str)
	}
	if m.id == nil {
		m.id, m.created = bytes.Clone(id), bytes.Clone(created)
	}
	m.r.counted += counted
	for _, i := range choices[:n] {
		if !slices.Contains(m.choices, i) && len(m.choices) < maxToolCalls {
			m.choices = append(m.choices, i)
		}
	}
	return true
}

// scanChatChoice reads one choice of a chunk: its index and the tokens of
// its delta's text.
func scanChatChoice(s *jsonScan) (index int, counted int64, ok bool) {
	var seen members
	ok = s.object(func(k []byte) bool {
		var ok bool
		switch {
		case is(k, "index"):
			seen.once(s, 1)
			index, ok = scanInt(s.value())
			return ok
		case is(k, "delta"):
			seen.once(s, 2)
			counted, ok = scanChatDelta(s)
			return ok
		case is(k, "finish_reason"):
			seen.once(s, 4)
			if v := s.value(); s.bad || string(v) != "null" {
				return false // a choice's end: the full decode keeps its reason
			}
		default:
			s.skip(0)
		}
		return true
	})
	return index, counted, ok
}

// scanChatDelta reads a delta without tool calls: the tokens of its text.
func scanChatDelta(s *jsonScan) (counted int64, ok bool) {
	var seen members
	ok = s.object(func(k []byte) bool {
		switch {
		case is(k, "content"):
			seen.once(s, 1)
			counted += scanDeltaTokens(s.value())
		case is(k, "refusal"):
			seen.once(s, 2)
			counted += scanDeltaTokens(s.value())
		case is(k, "reasoning_content"):
			seen.once(s, 4)
			counted += scanDeltaTokens(s.value())
		case is(k, "reasoning"):
			seen.once(s, 8)
			counted += scanDeltaTokens(s.value())
		case is(k, "tool_calls"), is(k, "function_call"):
			return false
		default:
			s.skip(0)
		}
		return true
	})
	return counted, ok
}

// scan reads an output delta (response.output_text.delta and the other
// *.delta events): its sequence number and the tokens of its delta.
func (m *responsesStream) scan(data []byte) bool {
	s := jsonScan{b: data}
	var typ, seq, delta []byte
	var seen members
	ok := s.object(func(k []byte) bool {
		switch {
		case is(k, "type"):
			seen.once(&s, 1)
			typ = s.value()
		case is(k, "sequence_number"):
			seen.once(&s, 2)
			seq = s.value()
		case is(k, "delta"):
			seen.once(&s, 4)
			delta = s.value()
		case is(k, "output_index"):
			seen.once(&s, 8)
			s.skip(0)
		case is(k, "item"), is(k, "response"):
			return false
		default:
			s.skip(0)
		}
		return true
	})
	if !ok || !s.end() {
		return false
	}
	t, ok := plainString(typ)
	if !ok || !bytes.HasSuffix(t, []byte(".delta")) {
		return false
	}
	n, ok := scanInt(seq)
	if !ok {
		n = int(rawInt(seq))
	}
	m.seq = max(m.seq, int64(n))
	m.r.counted += scanDeltaTokens(delta)
	return true
}

// scan reads a content_block_delta of text or thinking (not a tool's
// input), and a ping.
func (m *messagesStream) scan(data []byte) bool {
	s := jsonScan{b: data}
	var typ []byte
	var counted int64
	var seen members
	ok := s.object(func(k []byte) bool {
		switch {
		case is(k, "type"):
			seen.once(&s, 1)
			typ = s.value()
		case is(k, "index"):
			seen.once(&s, 2)
			if _, ok := scanInt(s.value()); !ok {
				return false
			}
		case is(k, "delta"):
			seen.once(&s, 4)
			var ok bool
			if counted, ok = scanMessagesDelta(&s); !ok {
				return false
			}
		case is(k, "message"), is(k, "content_block"), is(k, "usage"), is(k, "error"):
			return false
		default:
			s.skip(0)
		}
		return true
	})
	if !ok || !s.end() {
		return false
	}
	t, _ := plainString(typ)
	switch string(t) {
	case "content_block_delta":
		m.r.counted += counted
		return true
	case "ping":
		return counted == 0
	}
	return false
}

// scanMessagesDelta reads a delta of text or thinking: its tokens.
func scanMessagesDelta(s *jsonScan) (counted int64, ok bool) {
	var seen members
	ok = s.object(func(k []byte) bool {
		switch {
		case is(k, "type"):
			seen.once(s, 1)
			if v := s.value(); len(v) == 0 || v[0] != '"' {
				return false
			}
		case is(k, "text"):
			seen.once(s, 2)
			counted += scanDeltaTokens(s.value())
		case is(k, "thinking"):
			seen.once(s, 4)
			counted += scanDeltaTokens(s.value())
		case is(k, "partial_json"):
			return false
		default:
			s.skip(0)
		}
		return true
	})
	return counted, ok
}
