// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Flush cuts a backoff short: after a failure the sender would wait about
// an hour; Flush has it try at once, and returns once it is delivered.
func TestFlushCutsTheBackoffAndWaitsForDelivery(t *testing.T) {
	cp := newControlPlane(t, func(_ *http.Request, attempt int) int {
		if attempt == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusCreated
	})
	opts := testOptions(t, cp, t.TempDir())
	opts.MinBackoff, opts.MaxBackoff = time.Hour, time.Hour
	o := open(t, opts)
	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)
	require.Eventually(t, func() bool { return o.Stats().Failures == 1 }, wait, time.Millisecond, "the first attempt failed")

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	began := time.Now()
	st := o.Flush(ctx)
	assert.Less(t, time.Since(began), wait/2, "no backoff of an hour was waited")
	assert.Equal(t, Stats{Delivered: 1, Failures: 1}, st)
	assert.Equal(t, 1, cp.acceptedOf(c.CertID))
	assert.False(t, o.IsPending(c.CertID))
	assert.False(t, o.IsParked(c.CertID))
}

// A Flush bounded by its context leaves what is not delivered on disk,
// pending, for the next Open; with nothing pending, or after Close, it
// returns at once.
func TestFlushIsBounded(t *testing.T) {
	cp := newControlPlane(t, func(*http.Request, int) int { return http.StatusServiceUnavailable })
	dir := t.TempDir()
	o := open(t, testOptions(t, cp, dir))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	assert.Equal(t, Stats{}, o.Flush(ctx), "nothing pending: at once")
	cancel()

	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st := o.Flush(ctx)
	assert.Equal(t, 1, st.Pending)
	assert.Positive(t, st.Failures)
	assert.True(t, o.IsPending(c.CertID))
	assert.Len(t, pendingFiles(t, dir), 1)

	done := make(chan Stats)
	go func() { done <- o.Flush(context.Background()) }()
	require.NoError(t, o.Close())
	select {
	case st := <-done:
		assert.Equal(t, 1, st.Pending, "Close ends a Flush; the item stays")
	case <-time.After(wait):
		require.Fail(t, "Flush did not return after Close")
	}
}

func TestIsParked(t *testing.T) {
	cp := newControlPlane(t, func(*http.Request, int) int { return http.StatusUnprocessableEntity })
	o := open(t, testOptions(t, cp, t.TempDir()))
	c := testCert("bot")
	require.NoError(t, o.Enqueue(c, nil))
	run(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	assert.Equal(t, 1, o.Flush(ctx).Parked)
	assert.True(t, o.IsParked(c.CertID))
	assert.False(t, o.IsPending(c.CertID))
	assert.False(t, o.IsParked("../x"))
}

func TestCheckTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), mode))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	require.NoError(t, checkTokenFile(write("ok", "s3cret\n", 0o600)))
	require.NoError(t, checkTokenFile(write("ro", "s3cret", 0o400)))
	for _, mode := range []os.FileMode{0o640, 0o604, 0o620, 0o644} {
		p := write("exposed", "s3cret", mode)
		err := checkTokenFile(p)
		require.ErrorIs(t, err, ErrTokenExposed, "%04o", mode)
		require.NotContains(t, err.Error(), "s3cret")
	}
	require.ErrorContains(t, checkTokenFile(write("empty", " \n", 0o600)), "is empty")
	require.ErrorContains(t, checkTokenFile(dir), "not a regular file")
	require.ErrorIs(t, checkTokenFile(filepath.Join(dir, "missing")), os.ErrNotExist)
}
