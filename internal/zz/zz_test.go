package zz

import (
	"testing"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"go.yaml.in/yaml/v3"
	"golang.org/x/sys/unix"
)

func TestX(t *testing.T) {
	_ = fsnotify.Create
	_ = prometheus.NewRegistry()
	_ = cobra.Command{}
	_ = goleak.VerifyNone
	_ = zaptest.NewLogger(t)
	_ = yaml.Node{}
	_ = unix.Getpid()
	require.True(t, true)
}
