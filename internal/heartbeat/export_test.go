package heartbeat

// Internal limits, for the external tests.
const (
	QueueLen = queueLen
	MaxText  = maxText
)
