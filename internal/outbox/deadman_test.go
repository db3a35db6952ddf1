// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// The dead-man's switch trips once per outage however long it lasts, not
// before after has passed without contact, and is armed again by the
// next contact.
func TestDeadmanTripsOncePerOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 450 * time.Millisecond
		var mu sync.Mutex
		var tripped []time.Duration
		m := newDeadman(after, func(unreachable time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			tripped = append(tripped, unreachable)
		})
		trips := func() []time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return append([]time.Duration(nil), tripped...)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.run(ctx)

		// Contact every 100ms for a while: never tripped.
		for range 20 {
			time.Sleep(100 * time.Millisecond)
			m.contact()
		}
		synctest.Wait()
		assert.Empty(t, trips(), "tripped while the control plane answered")

		// Gone: tripped once within a check period (45ms) of after.
		time.Sleep(after - time.Millisecond)
		synctest.Wait()
		assert.Empty(t, trips(), "tripped before fail_closed_after")
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if ts := trips(); assert.Len(t, ts, 1) {
			assert.GreaterOrEqual(t, ts[0], after)
			assert.Less(t, ts[0], after+50*time.Millisecond)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		assert.Len(t, trips(), 1, "tripped more than once in one outage")

		// Back, then gone again: a second outage, a second trip.
		m.contact()
		time.Sleep(after + 50*time.Millisecond)
		synctest.Wait()
		assert.Len(t, trips(), 2, "not armed again by the contact after an outage")
	})
}
