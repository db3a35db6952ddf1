package client

import (
	"context"
	"time"
)

const (
	defaultBeatInterval = time.Second
	minBeatInterval     = time.Millisecond
)

// Heartbeat sends a heartbeat now and then every interval until ctx ends or
// the client is closed. An interval of 0 means a third of WATCHDOG_USEC, or 1s
// when it is unset. Run it in its own goroutine:
//
//	go c.Heartbeat(ctx, 0)
//
// The no-op client returns at once.
func (c *Client) Heartbeat(ctx context.Context, interval time.Duration) {
	if !c.supervised {
		return
	}
	if interval <= 0 {
		interval = c.beatInterval()
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		c.Beat()
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-ticker.C:
		}
	}
}

// beatInterval is the default heartbeat interval: a third of the timeout, so
// that one late or dropped beat does not kill the agent.
func (c *Client) beatInterval() time.Duration {
	if c.watchdog <= 0 {
		return defaultBeatInterval
	}
	return max(c.watchdog/3, minBeatInterval)
}
