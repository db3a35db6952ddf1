// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/hermeskill/hermeskilld/internal/gateway"
)

// serveProxyArg is the first argument that makes the harness's own binary
// the proxy under test (row group 7): a process of its own, so that its
// CPU and memory are its own.
const serveProxyArg = "serve-proxy"

// benchPrices prices the model the harness asks for: the gateway meters
// and costs every request, as it does for a priced model.
const benchPrices = "models:\n  gpt-4.1-mini: {input: 0.40, output: 1.60, cached_input: 0.10}\n"

// maxBenchConns bounds the proxies' connections: above any count the
// harness opens.
const maxBenchConns = 16384

// serveProxy runs "serve-proxy bare|gateway UPSTREAM [profile]": a bare
// httputil.ReverseProxy on the gateway's upstream transport, or the
// gateway with metering on, in front of the fake upstream at UPSTREAM
// (its API under /v1). It prints "ready BASE_URL KEY" (the URL the agent
// sends /chat/completions to, the key it sends) and serves until its
// stdin closes. Each line of stdin is a question (proxyCommand).
func serveProxy(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 3 && args[2] == "profile" {
		// Every allocation sampled, from the start: the heap profiles
		// then count each stream's bytes exactly.
		runtime.MemProfileRate = 1
		args = args[:2]
	}
	if len(args) != 2 || args[0] != "bare" && args[0] != "gateway" {
		return errors.New("usage: serve-proxy bare|gateway UPSTREAM [profile]")
	}
	target, err := url.Parse(args[1])
	if err != nil {
		return err
	}
	cfg := gateway.Config{Upstreams: []gateway.Upstream{{Name: "openai", URL: args[1] + "/v1", Style: gateway.OpenAI}},
		Log: zap.NewNop(), MaxConns: maxBenchConns, MaxConnsPerUser: maxBenchConns}
	var base, key string
	var stop func()
	switch args[0] {
	case "bare":
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		rp := &httputil.ReverseProxy{Transport: bareTransport(), Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.URL.Path = "/v1" + r.In.URL.Path
		}}
		srv := &http.Server{Handler: rp}
		go func() { _ = srv.Serve(ln) }()
		base, key, stop = "http://"+ln.Addr().String(), "bench", func() { _ = srv.Close() }
	default:
		prices, err := gateway.ParsePrices([]byte(benchPrices), "bench prices")
		if err != nil {
			return err
		}
		cfg.Prices = prices
		gw, err := gateway.New(cfg)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- gw.Serve(ctx) }()
		gr := gw.Grant("bench", discardRecords{})
		for _, kv := range gr.Env() {
			switch k, v, _ := strings.Cut(kv, "="); k {
			case "OPENAI_BASE_URL":
				base = v
			case "OPENAI_API_KEY":
				key = v
			}
		}
		stop = func() { gr.Close(); cancel(); <-served; _ = gw.Close() }
	}
	defer stop()
	if base == "" || key == "" {
		return errors.New("the gateway's grant gave no OpenAI base URL or key")
	}
	fmt.Fprintf(stdout, "ready %s %s\n", base, key)
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		fmt.Fprintln(stdout, proxyCommand(sc.Text()))
	}
	return nil
}

// proxyCommand answers one line of the harness, in one line:
//
//	mem         "mem HEAP STACKS GOROUTINES": after a GC, the bytes of heap
//	            in use and of goroutine stacks, and the goroutines
//	heap PATH   "heap": a heap profile written to PATH (go tool pprof)
//
// Both collect garbage first: the harness asks after it read the RSS.
func proxyCommand(line string) string {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "mem":
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return fmt.Sprintf("mem %d %d %d", ms.HeapInuse, ms.StackInuse, runtime.NumGoroutine())
	case "heap":
		runtime.GC()
		f, err := os.Create(arg)
		if err != nil {
			return "error " + oneLine(err.Error())
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "error " + oneLine(err.Error())
		}
		return "heap"
	}
	return fmt.Sprintf("error unknown command %q", cmd)
}

// bareTransport is the bare proxy's client of the upstream, set as the
// gateway's is (its pool at the gateway's default: its connection bound).
func bareTransport() *http.Transport {
	return &http.Transport{
		DialContext:            (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		ResponseHeaderTimeout:  gateway.DefaultUpstreamHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           maxBenchConns,
		MaxIdleConnsPerHost:    maxBenchConns,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// discardRecords is the grant's observer: the records are not the
// benchmark's.
type discardRecords struct{}

func (discardRecords) Request(gateway.Record) {}

// maybeServeProxy runs serveProxy and exits when the process was started
// as the proxy under test; it returns otherwise.
func maybeServeProxy() {
	if len(os.Args) < 2 || os.Args[1] != serveProxyArg {
		return
	}
	if err := serveProxy(os.Args[2:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchcompare serve-proxy:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
