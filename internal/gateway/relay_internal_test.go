// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataLog is a meter that keeps each event's data and drops those equal
// to drop.
type dataLog struct {
	got  []string
	drop string
}

func (d *dataLog) event(data []byte) bool {
	d.got = append(d.got, string(data))
	return string(data) == d.drop
}

func (d *dataLog) result() reading { return reading{} }

func (d *dataLog) progress() reading { return reading{} }

func (d *dataLog) ending(cutUsage) []byte { return nil }

// countingFlusher counts the flushes the relay asks for.
type countingFlusher struct {
	*httptest.ResponseRecorder
	flushes int
}

func (c *countingFlusher) Flush() { c.flushes++ }

// pump copies rl to w as the gateway's reverse proxy does (FlushInterval
// -1, 32 KiB buffers): each read written, then flushed.
func pump(w http.ResponseWriter, rl *relay) error { return pumpBuf(w, rl, 32<<10) }

// pumpBuf is pump through a copy buffer of size bytes: the relay reads
// the upstream into it.
func pumpBuf(w http.ResponseWriter, rl *relay, size int) error {
	buf := make([]byte, size)
	rc := http.NewResponseController(w)
	for {
		n, err := rl.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func runRelay(t *testing.T, src io.Reader, maxEvent int, meter streamMeter) (*countingFlusher, *relay, error) {
	t.Helper()
	w := &countingFlusher{ResponseRecorder: httptest.NewRecorder()}
	rl := &relay{src: pieceReader{src, 16}, maxEvent: maxEvent, meter: meter}
	err := pump(w, rl)
	return w, rl, err
}

// pieceReader reads at most n bytes at a time: an upstream whose events
// come in pieces.
type pieceReader struct {
	r io.Reader
	n int
}

func (p pieceReader) Read(b []byte) (int, error) {
	if len(b) > p.n {
		b = b[:p.n]
	}
	return p.r.Read(b)
}

func TestRelayEvents(t *testing.T) {
	long := strings.Repeat("x", 100) // longer than the 16-byte reads
	stream := ": keep-alive\n\n" +
		"event: a\r\ndata: one\r\n\r\n" +
		"data: " + long + "\n\n" +
		"data: two\ndata: lines\n\n" +
		"data: secret\n\n" +
		"data:nospace\n\n" +
		"data: last without blank line"
	d := &dataLog{drop: "secret"}
	w, rl, err := runRelay(t, strings.NewReader(stream), 1<<10, d)
	require.NoError(t, err)
	assert.Equal(t, []string{"one", long, "two\nlines", "secret", "nospace", "last without blank line"}, d.got)
	assert.Equal(t, strings.Replace(stream, "data: secret\n\n", "", 1), w.Body.String(), "everything but the dropped event, byte for byte")
	assert.Equal(t, 6, w.flushes, "one flush per forwarded event")
	assert.False(t, rl.skipped)
}

func TestRelayEventOverItsBound(t *testing.T) {
	big := "data: " + strings.Repeat("y", 200) + "\n\n"
	stream := "data: a\n\n" + big + "data: b\n\n"
	d := &dataLog{}
	w, rl, err := runRelay(t, strings.NewReader(stream), 64, d)
	require.NoError(t, err)
	assert.Equal(t, stream, w.Body.String(), "forwarded as it came")
	assert.Equal(t, []string{"a", "b"}, d.got, "not read")
	assert.True(t, rl.skipped)
}

func TestRelayBrokenUpstreamDropsHalfAnEvent(t *testing.T) {
	broken := errors.New("connection reset")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: {\"half"), errReader{broken})
	d := &dataLog{}
	w, _, err := runRelay(t, src, 1<<10, d)
	assert.ErrorIs(t, err, broken)
	assert.Equal(t, "data: a\n\n", w.Body.String())
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestRelayAgentGone(t *testing.T) {
	w := failingWriter{httptest.NewRecorder()}
	aw := &agentWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: time.Minute}
	rl := &relay{src: strings.NewReader("data: a\n\n"), maxEvent: 1 << 10}
	var ae *agentError
	assert.ErrorAs(t, pump(aw, rl), &ae)
	assert.ErrorAs(t, aw.err, &ae, "the agent's writer keeps the failure for the record")
}

type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestRelayCoalescesWhatCameTogether: the events of one upstream read go
// out in one Read (one write, one flush), and a Read with an event in hand
// never waits for the upstream's next bytes; the rest of an event that
// came in part is awaited, as before.
func TestRelayCoalescesWhatCameTogether(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	d := &dataLog{}
	rl := &relay{src: pr, maxEvent: 1 << 10, meter: d}
	reads := make(chan string)
	go func() {
		defer close(reads)
		buf := make([]byte, 32<<10)
		for {
			n, err := rl.Read(buf)
			if n > 0 {
				reads <- string(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	write := func(s string) {
		t.Helper()
		_, err := io.WriteString(pw, s)
		require.NoError(t, err)
	}
	write("data: a\n\n: keep-alive\n\ndata: b\n\ndata: c")
	assert.Equal(t, "data: a\n\n: keep-alive\n\ndata: b\n\n", <-reads, "three events read together, the fourth not awaited")
	write("\n\n")
	assert.Equal(t, "data: c\n\n", <-reads)
	write("data: d\n\n")
	assert.Equal(t, "data: d\n\n", <-reads, "one event alone is not held")
	require.NoError(t, pw.Close())
	_, more := <-reads
	assert.False(t, more)
	assert.Equal(t, []string{"a", "b", "c", "d"}, d.got)
}

// TestStreamCopyBuffer: the reverse proxy copies a stream through a
// buffer of streamBufs (held while the stream is open), any other body
// through one of copyBufs; each goes back to its own pool.
func TestStreamCopyBuffer(t *testing.T) {
	stream := exchangeBufs{&exchange{body: &meteredBody{relay: &relay{}}}}
	plain := exchangeBufs{&exchange{body: &meteredBody{}}}
	b := stream.Get()
	assert.Len(t, b, relayBufSize)
	stream.Put(b)
	c := plain.Get()
	assert.Len(t, c, 32<<10)
	plain.Put(c)
	assert.Len(t, exchangeBufs{&exchange{}}.Get(), 32<<10, "no response yet: not a stream")
}
