package client_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/hermeskill/hermeskilld/pkg/client"
)

// An agent reports to its supervisor, and stops when told to. Here the
// example plays hermeskilld too; a real agent calls client.FromEnv().
func Example() {
	dir, _ := os.MkdirTemp("", "hk")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "agent.sock")
	supervisor, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer supervisor.Close()

	c, err := client.New(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := c.Context(context.Background())
	c.Ready()
	c.Progress(1)
	_ = c.ToolCall("web_search", map[string]any{"q": "a<b", "n": 1})

	buf := make([]byte, 8<<10)
	var agent *net.UnixAddr
	for range 3 {
		n, from, _ := supervisor.ReadFromUnix(buf)
		agent = from
		fmt.Printf("%q\n", buf[:n])
	}

	// hermeskilld decides the agent must stop.
	stop := "STOP=1\nCHECK=tool_loop\nREASON=same call 5 times\nGRACE_USEC=10000000"
	_, _ = supervisor.WriteToUnix([]byte(stop), agent)
	<-ctx.Done()
	fmt.Println(context.Cause(ctx))

	// Output:
	// "READY=1"
	// "PROGRESS=1"
	// "TOOL=web_search\nTOOL_ARGS_SHA256=6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb"
	// hermeskilld stop: tool_loop: same call 5 times
}

func ExampleArgsHash() {
	sum, _ := client.ArgsHash(map[string]any{"q": "a<b", "n": 1})
	fmt.Println(sum)
	// Output: 6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb
}
