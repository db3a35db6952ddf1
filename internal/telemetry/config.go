// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Settings are what hermeskilld's own configuration says of the export
// (the daemon file's telemetry section, supervise's --otlp-endpoint);
// what they leave unset the OTEL_* environment variables say.
type Settings struct {
	// Endpoint is the OTLP/HTTP base URL: logs go to Endpoint/v1/logs,
	// spans to Endpoint/v1/traces. It replaces every endpoint the
	// environment names.
	Endpoint string
	// Headers are sent with every export request, over the environment's.
	Headers map[string]string
	// Timeout bounds one export request (with its retries); 0: the
	// environment's OTEL_EXPORTER_OTLP_TIMEOUT, else 10s.
	Timeout time.Duration
	// ShutdownTimeout bounds the export of what is still queued when
	// hermeskilld exits; 0: DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// DefaultShutdownTimeout is how long an exiting hermeskilld waits for
// what it has not exported yet: never long, so that a collector that is
// down or slow delays no exit by more than this.
const DefaultShutdownTimeout = time.Second

const defaultTimeout = 10 * time.Second

// Config is the resolved export: an empty URL turns its signal off.
type Config struct {
	LogsURL, TracesURL         string
	LogsHeaders, TracesHeaders map[string]string
	Timeout, ShutdownTimeout   time.Duration
	Gzip                       bool
	TLS                        *tls.Config // nil: the system's roots
}

// On reports whether anything is exported.
func (c Config) On() bool { return c.LogsURL != "" || c.TracesURL != "" }

// ErrConfig is wrapped by every error of Resolve.
var ErrConfig = errors.New("telemetry")

// Resolve resolves s and the environment (getenv; os.Getenv when nil)
// into the export's configuration, the OpenTelemetry SDKs' way: the OTLP
// endpoint from OTEL_EXPORTER_OTLP_ENDPOINT (…/v1/logs, …/v1/traces
// appended) or the signal's own OTEL_EXPORTER_OTLP_LOGS_ENDPOINT /
// _TRACES_ENDPOINT (as is), headers from OTEL_EXPORTER_OTLP_HEADERS and
// the signal's _HEADERS (key=value,…, values URL-encoded), the timeout
// (milliseconds), gzip compression and a CA certificate file from their
// variables; OTEL_SDK_DISABLED=true, or OTEL_LOGS_EXPORTER /
// OTEL_TRACES_EXPORTER=none, turns the export (or that signal) off. Only
// the http/protobuf protocol is spoken: another OTEL_EXPORTER_OTLP_PROTOCOL
// is an error, as is a malformed value of any of these. With no endpoint
// anywhere, Config.On is false and nothing is exported.
//
// Errors wrap ErrConfig and name the variable or setting.
func Resolve(s Settings, getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	base := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	baseVar := "OTEL_EXPORTER_OTLP_ENDPOINT"
	if s.Endpoint != "" {
		base, baseVar = s.Endpoint, "endpoint"
	}
	if base != "" {
		if err := checkURL(base); err != nil {
			return c, fmt.Errorf("%w: %s: %w", ErrConfig, baseVar, err)
		}
	}
	common, err := headers(getenv, "OTEL_EXPORTER_OTLP_HEADERS")
	if err != nil {
		return c, err
	}
	for _, sig := range []struct {
		name, path string
		url        *string
		hdr        *map[string]string
	}{{"LOGS", "v1/logs", &c.LogsURL, &c.LogsHeaders}, {"TRACES", "v1/traces", &c.TracesURL, &c.TracesHeaders}} {
		switch v := strings.TrimSpace(getenv("OTEL_" + sig.name + "_EXPORTER")); v {
		case "", "otlp":
		case "none":
			continue
		default:
			return c, fmt.Errorf("%w: OTEL_%s_EXPORTER=%s: hermeskilld exports only otlp (or none)", ErrConfig, sig.name, v)
		}
		if err := protocol(getenv, "OTEL_EXPORTER_OTLP_"+sig.name+"_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); err != nil {
			return c, err
		}
		u, name := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_"+sig.name+"_ENDPOINT")), "OTEL_EXPORTER_OTLP_"+sig.name+"_ENDPOINT"
		if s.Endpoint != "" || u == "" {
			u, name = "", baseVar
			if base != "" {
				u = strings.TrimSuffix(base, "/") + "/" + sig.path
			}
		}
		if u == "" {
			continue
		}
		if err := checkURL(u); err != nil {
			return c, fmt.Errorf("%w: %s: %w", ErrConfig, name, err)
		}
		own, err := headers(getenv, "OTEL_EXPORTER_OTLP_"+sig.name+"_HEADERS")
		if err != nil {
			return c, err
		}
		h := map[string]string{}
		for _, m := range []map[string]string{common, own, s.Headers} {
			for k, v := range m {
				h[k] = v
			}
		}
		*sig.url, *sig.hdr = u, h
	}
	if !c.On() {
		return c, nil
	}
	c.Timeout, c.ShutdownTimeout = s.Timeout, s.ShutdownTimeout
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TIMEOUT")); v != "" {
			ms, err := strconv.Atoi(v)
			if err != nil || ms <= 0 {
				return c, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_TIMEOUT=%s: must be a number of milliseconds above 0", ErrConfig, v)
			}
			c.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	switch v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_COMPRESSION")); v {
	case "", "none":
	case "gzip":
		c.Gzip = true
	default:
		return c, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_COMPRESSION=%s: must be gzip or none", ErrConfig, v)
	}
	if f := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_CERTIFICATE")); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return c, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_CERTIFICATE: %w", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return c, fmt.Errorf("%w: OTEL_EXPORTER_OTLP_CERTIFICATE: %s holds no PEM certificate", ErrConfig, f)
		}
		c.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return c, nil
}

// CheckEndpoint reports whether u can be an OTLP/HTTP endpoint: an
// absolute http or https URL without credentials, a query or a fragment.
func CheckEndpoint(u string) error { return checkURL(u) }

func checkURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("%q must be an absolute http(s) URL such as http://localhost:4318", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q must not have credentials, a query or a fragment (send credentials as headers)", s)
	}
	return nil
}

// protocol refuses a protocol other than http/protobuf.
func protocol(getenv func(string) string, names ...string) error {
	for _, n := range names {
		switch v := strings.TrimSpace(getenv(n)); v {
		case "":
			continue
		case "http/protobuf":
			return nil
		default:
			return fmt.Errorf("%w: %s=%s: hermeskilld exports OTLP over http/protobuf only (a collector's OTLP/HTTP receiver, port 4318)", ErrConfig, n, v)
		}
	}
	return nil
}

// headers parses a headers variable: key=value pairs separated by commas,
// the values URL-encoded (the OpenTelemetry environment's W3C Baggage
// format, without properties).
func headers(getenv func(string) string, name string) (map[string]string, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return nil, nil
	}
	h := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: %s: %q is not key=value", ErrConfig, name, strings.TrimSpace(kv))
		}
		dec, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the value of %s is not URL-encoded", ErrConfig, name, k)
		}
		h[k] = dec
	}
	return h, nil
}
