// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Style is an upstream's API dialect: its paths, its authentication
// header, its error format and where its responses carry usage and tool
// calls.
type Style string

// The styles.
const (
	OpenAI    Style = "openai"
	Anthropic Style = "anthropic"
)

// Upstream is one model provider the agents may reach, served under /Name/.
type Upstream struct {
	Name  string // a path segment: letters, digits, '-' and '_'
	URL   string // where /Name/REST goes: URL + "/REST"; https, or http on loopback
	Style Style
	// KeyFile holds the provider key (LoadKey); empty: requests go without
	// a key (a local model server).
	KeyFile string
	// Key is the key itself, when it is not in a file: the handle of the
	// parent run's grant, for a gateway that forwards through its parent's
	// (ParentFromEnv). KeyFile wins.
	Key string
}

// ParseUpstream parses the flag form "NAME=URL" or
// "NAME=URL,style=openai|anthropic". The style may be left out when NAME
// is "openai" or "anthropic": it is the name's. The URL must be https, or
// http to a loopback address (the key would otherwise cross the network in
// clear), with no user, query or fragment; a trailing slash is dropped.
func ParseUpstream(s string) (Upstream, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return Upstream{}, fmt.Errorf("llm upstream %q: want NAME=URL or NAME=URL,style=openai|anthropic", s)
	}
	u := Upstream{Name: name}
	rawURL, opt, hasOpt := strings.Cut(rest, ",")
	u.URL = rawURL
	if hasOpt {
		key, val, _ := strings.Cut(opt, "=")
		if key != "style" {
			return Upstream{}, fmt.Errorf("llm upstream %q: unknown option %q (want style=openai|anthropic)", s, opt)
		}
		u.Style = Style(val)
	} else if Style(name) == OpenAI || Style(name) == Anthropic {
		u.Style = Style(name)
	}
	if err := u.validate(); err != nil {
		return Upstream{}, fmt.Errorf("llm upstream %q: %w", s, err)
	}
	u.URL = strings.TrimSuffix(u.URL, "/")
	return u, nil
}

// validate checks what ParseUpstream checks, for an Upstream built by hand.
func (u Upstream) validate() error {
	if !validName(u.Name) {
		return fmt.Errorf("name %q: want letters, digits, '-' or '_'", u.Name)
	}
	switch u.Style {
	case OpenAI, Anthropic:
	case "":
		return fmt.Errorf("no style: add style=openai or style=anthropic")
	default:
		return fmt.Errorf("style %q: want openai or anthropic", u.Style)
	}
	p, err := url.Parse(u.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	switch {
	case p.Host == "":
		return fmt.Errorf("url %q: no host", u.URL)
	case p.User != nil, p.RawQuery != "", p.Fragment != "":
		return fmt.Errorf("url %q: a user, query or fragment is not allowed", u.URL)
	case p.Scheme == "https":
	case p.Scheme == "http" && loopbackHost(p.Hostname()):
	case p.Scheme == "http":
		return fmt.Errorf("url %q: http only to a loopback address (use https)", u.URL)
	default:
		return fmt.Errorf("url %q: want https", u.URL)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
		if !ok {
			return false
		}
	}
	return true
}

// loopbackHost reports whether host is "localhost" or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// endpoint is what a path of an upstream's API is, for metering.
type endpoint uint8

const (
	epOther      endpoint = iota // listed models, counted tokens: nothing spent
	epChat                       // OpenAI chat completions
	epResponses                  // OpenAI Responses API
	epEmbeddings                 // OpenAI embeddings
	epMessages                   // Anthropic messages
)

// route is one allowed path of a style's API.
type route struct {
	method string
	path   string // relative to the upstream's URL; a trailing "/*" is one ID segment
	ep     endpoint
}

// routes are the only paths that pass, per style.
var routes = map[Style][]route{
	OpenAI: {
		{http.MethodPost, "chat/completions", epChat},
		{http.MethodPost, "responses", epResponses},
		{http.MethodPost, "embeddings", epEmbeddings},
		{http.MethodGet, "models", epOther},
		{http.MethodGet, "models/*", epOther},
	},
	Anthropic: {
		{http.MethodPost, "v1/messages", epMessages},
		{http.MethodPost, "v1/messages/count_tokens", epOther},
		{http.MethodGet, "v1/models", epOther},
		{http.MethodGet, "v1/models/*", epOther},
	},
}

// match finds the route of path (escaped, without the /NAME/ prefix) for
// style. found is false for a path not in the API; ok is false when the
// path is found but not with this method.
func match(style Style, method, path string) (r route, found, ok bool) {
	for _, r := range routes[style] {
		if !pathMatches(r.path, path) {
			continue
		}
		found = true
		if r.method == method {
			return r, true, true
		}
	}
	return route{}, found, false
}

func pathMatches(pattern, path string) bool {
	prefix, isID := strings.CutSuffix(pattern, "/*")
	if !isID {
		return path == pattern
	}
	id, ok := strings.CutPrefix(path, prefix+"/")
	return ok && validID(id)
}

// validID accepts a model ID as the providers write them ("gpt-4.1",
// "ft:gpt-4o-mini:org::abc", "claude-sonnet-4-20250514"): nothing that
// could change the path (no '/', '%', "..").
func validID(s string) bool {
	if s == "" || len(s) > 256 || strings.Contains(s, "..") {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		if !ok {
			return false
		}
	}
	return true
}
