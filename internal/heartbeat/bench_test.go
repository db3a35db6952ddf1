// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package heartbeat_test

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermeskill/hermeskilld/internal/heartbeat"
)

// BenchmarkIngest measures the whole receive path: a sender goroutine
// writes b.N datagrams "WATCHDOG=1\nPROGRESS=n" through a real socket; the
// reader authenticates (a map lookup behind the verdict cache), parses and
// delivers them; this goroutine drains C().
func BenchmarkIngest(b *testing.B) {
	members := map[int]heartbeat.Verdict{os.Getpid(): heartbeat.Member}
	var mu sync.Mutex
	auth := heartbeat.AuthFunc(func(pid int) heartbeat.Verdict {
		mu.Lock()
		defer mu.Unlock()
		if v, ok := members[pid]; ok {
			return v
		}
		return heartbeat.NotMember
	})
	s := listen(b, auth, 0)
	snd := newSender(b, s.Path())

	b.ReportAllocs()
	b.ResetTimer()
	sendErr := make(chan error, 1)
	go func() {
		buf := make([]byte, 0, 64)
		for i := range b.N {
			buf = strconv.AppendInt(append(buf[:0], "WATCHDOG=1\nPROGRESS="...), int64(i), 10)
			if err := unix.Send(snd.fd, buf, 0); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()

	// Drain until every datagram is accounted for: delivered here, or
	// dropped by the reader (overflow, if this consumer fell behind).
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var got uint64
	for {
		select {
		case r := <-s.C():
			heartbeat.Free(r)
			got++
			if got < uint64(b.N) {
				continue
			}
		case <-tick.C:
		}
		if st := s.Stats(); st.Received == uint64(b.N) && got == st.Accepted {
			break
		}
	}
	b.StopTimer()
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
	st := s.Stats()
	if st.Dropped() != st.Overflow {
		b.Fatalf("unexpected drops: %+v", st)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "dgrams/s")
	b.ReportMetric(float64(st.Accepted)/b.Elapsed().Seconds(), "delivered/s")
	b.ReportMetric(float64(st.Overflow)/float64(b.N), "overflow/op")
}
