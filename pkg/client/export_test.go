package client

import "time"

// SetClock replaces the clock that paces reconnects.
func SetClock(c *Client, now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// BeatInterval returns the interval Heartbeat uses when given 0.
func BeatInterval(c *Client) time.Duration { return c.beatInterval() }
