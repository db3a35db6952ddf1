// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"bufio"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hermeskill/hermeskilld/internal/certs"
	"github.com/hermeskill/hermeskilld/internal/heartbeat"
	"github.com/hermeskill/hermeskilld/internal/supervisor"
	"github.com/hermeskill/hermeskilld/internal/symptoms"
)

var alertsT0 = time.Date(2026, 12, 2, 10, 15, 3, 0, time.UTC)

// The alert rules shipped in docs/alerts, and their promtool unit tests.
var (
	alertsDir  = filepath.Join("..", "..", "docs", "alerts")
	rulesFile  = "hermeskilld-rules.yaml"
	rulesTests = "hermeskilld-rules.test.yaml"
)

// requirePromtool finds promtool. Without it the test is skipped, saying
// why, unless HK_REQUIRE_PROMTOOL=1 (CI sets it: .ci/run installs the
// Debian package prometheus, which ships /usr/bin/promtool), where it
// fails.
func requirePromtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("HK_REQUIRE_PROMTOOL") == "1" {
		t.Fatalf("HK_REQUIRE_PROMTOOL=1 and promtool is not on PATH (%v): install it (Debian: apt-get install prometheus)", err)
	}
	t.Skipf("promtool is not on PATH (%v): install it (Debian: apt-get install prometheus) to check the alert rules; HK_REQUIRE_PROMTOOL=1 makes its absence a failure", err)
	return ""
}

// promtool checks the rules (syntax, PromQL, templates) and runs their
// unit tests: every rule fires on the input series it is meant for, at
// the time it should, with its labels and annotations, and not on the
// others.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := requirePromtool(t)
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTests}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = alertsDir // the tests name the rules file relative to themselves
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// exposition is what one scrape exports: each family's type, and the
// label names and values of its samples.
type exposition struct {
	types  map[string]string              // family -> counter, gauge, histogram, …
	labels map[string]map[string][]string // sample name -> label -> values seen
}

var (
	typeLine   = regexp.MustCompile(`^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$`)
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrapeEverything brings every hermeskill_* series into existence (agents
// in every state the rules name, kills of each kind, a slow kill, the
// outbox) and scrapes Handler, as Prometheus would.
func scrapeEverything(t *testing.T) exposition {
	t.Helper()
	m := New(Options{})
	m.SetSource(func() []AgentSample {
		var s []AgentSample
		for _, state := range []string{"running", "backoff", "failed", "invalid", "quarantined"} {
			s = append(s, AgentSample{ID: "a-" + state, State: state, Heartbeats: 3,
				Heartbeat: heartbeat.StatsSnapshot{Forged: 1}, Progress: 2, Tokens: 10, CostUSD: 0.5,
				Metered: true, MeteredTokens: 12, MeteredCostUSD: 0.6, LastHeartbeat: alertsT0})
		}
		return s
	})
	kill := func(agent, check, trigger, reached, mode string, took time.Duration) *certs.Certificate {
		return &certs.Certificate{Schema: certs.Schema, CertID: certs.NewID(), AgentID: agent, Mode: mode,
			TriggeredAt: alertsT0, TerminatedAt: alertsT0.Add(took), TriggerType: trigger, TriggerCheck: check,
			Escalation: certs.Escalation{Reached: reached}}
	}
	for _, ev := range []supervisor.Event{
		{Type: supervisor.EventSymptom, AgentID: "a-running", Symptom: &symptoms.Symptom{At: alertsT0, Check: symptoms.Memory, Severity: symptoms.Terminal}},
		{Type: supervisor.EventCertificate, AgentID: "a-running", Cert: kill("a-running", "memory", certs.TriggerAuto, certs.ReachedSigkill, certs.ModeEnforce, 25*time.Second)},
		{Type: supervisor.EventCertificate, AgentID: "a-failed", Cert: kill("a-failed", "external", certs.TriggerExternal, certs.ReachedNone, certs.ModeEnforce, 0)},
		{Type: supervisor.EventCertFailed, AgentID: "a-backoff", Cert: kill("a-backoff", "cost", certs.TriggerAuto, certs.ReachedNone, certs.ModeShadow, 0)},
	} {
		m.Observe(ev)
	}
	m.SetOutbox(1, 1, 1, 1)
	m.SetOutboxRejected(1)
	m.SetAuditSource(func() (uint64, uint64) { return 1, 1 })

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	x := exposition{types: map[string]string{}, labels: map[string]map[string][]string{}}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if m := typeLine.FindStringSubmatch(line); m != nil {
			x.types[m[1]] = m[2]
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ls := x.labels[m[1]]
		if ls == nil {
			ls = map[string][]string{}
			x.labels[m[1]] = ls
		}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			ls[p[1]] = append(ls[p[1]], p[2])
		}
	}
	require.NoError(t, sc.Err())
	return x
}

// sampleNames are the names a PromQL selector may use for family name of
// type typ: the family's own, and for a histogram or a summary its
// _bucket, _sum and _count.
func sampleNames(name, typ string) []string {
	switch typ {
	case "histogram":
		return []string{name + "_bucket", name + "_sum", name + "_count"}
	case "summary":
		return []string{name, name + "_sum", name + "_count"}
	}
	return []string{name}
}

// ruleExprs are the expressions of the rules file, by alert name.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(alertsDir, rulesFile))
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &f))
	out := map[string]string{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out[r.Alert+r.Record] = r.Expr
		}
	}
	require.NotEmpty(t, out)
	return out
}

var (
	// ourName is any identifier that starts like one of our series, so
	// that a misspelt prefix (hermeskilld_…) is caught as well.
	ourName = regexp.MustCompile(`\bhermeskill[a-zA-Z0-9_:]*`)
	// selector is one of our series with its label matchers.
	selector = regexp.MustCompile(`\b(hermeskill[a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
)

// Every series the rules select is one hermeskilld exports, by its exact
// name, with the labels the rules match on, and with the values they ask
// for equal: a rule on a name that does not exist never fires, and
// promtool cannot know (its tests make up their input series).
func TestAlertRulesUseExportedSeries(t *testing.T) {
	x := scrapeEverything(t)
	exported := map[string]bool{}
	for fam, typ := range x.types {
		for _, n := range sampleNames(fam, typ) {
			exported[n] = true
		}
	}
	require.True(t, exported["hermeskill_kill_seconds_bucket"], "the scrape has the histogram: %v", x.types)

	exprs := ruleExprs(t)
	used := map[string]bool{}
	for alert, expr := range exprs {
		for _, name := range ourName.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
			used[name] = true
			require.True(t, exported[name], "alert %s uses %s, which hermeskilld does not export (it exports %v)", alert, name, slices.Sorted(maps.Keys(exported)))
		}
		for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
			name, labels := sel[1], x.labels[sel[1]]
			for _, mt := range matcher.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := mt[1], mt[2], mt[3]
				values, ok := labels[label]
				require.True(t, ok, "alert %s matches %s on label %q, which it does not have (it has %v)", alert, name, label, slices.Sorted(maps.Keys(labels)))
				if op == "=" {
					require.Contains(t, values, value, "alert %s matches %s{%s=%q}: not a value hermeskilld exports", alert, name, label, value)
				}
			}
		}
	}
	// The guard guards: the rules use the series the alerts are about.
	for _, name := range []string{"hermeskill_agent_kills_total", "hermeskill_agents", "hermeskill_agent_cost_usd",
		"hermeskill_agent_last_heartbeat_timestamp_seconds", "hermeskill_kill_seconds_bucket"} {
		require.True(t, used[name], "no rule uses %s", name)
	}
}

// docs/metrics.md's table of the alerts names every rule of the file, and
// no other.
func TestAlertRulesDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	require.NoError(t, err)
	i := strings.Index(string(data), "## Alert rules")
	require.GreaterOrEqual(t, i, 0, "docs/metrics.md has no section ## Alert rules")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Hermeskill[A-Za-z]+)`").FindAllStringSubmatch(string(data[i:]), -1) {
		documented[m[1]] = true
	}
	rules := ruleExprs(t)
	require.Equal(t, slices.Sorted(maps.Keys(rules)), slices.Sorted(maps.Keys(documented)))
}
