// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hermeskill/hermeskilld/internal/config"
)

// The id supervise gives an agent from its command reads as the agent's
// name: its script, module or program, through the programs that only
// start another; inline code is named after its interpreter.
func TestDeriveID(t *testing.T) {
	for _, tc := range []struct{ cmd, want string }{
		// A program, and a script of an interpreter.
		{"./bot", "bot"},
		{"/opt/agents/bin/research-bot --model gpt-4.1", "research-bot"},
		{"./run.sh", "run"},
		{"python3 agent.py", "agent"},
		{"python agent.py --turns 5", "agent"},
		{"/usr/bin/python3.12 -u /srv/bots/support_bot.py", "support_bot"},
		{"python3 -X dev -W error agent.py", "agent"},
		{"python3 -Wignore -uB agent.py", "agent"},
		{"python3 -m research.bot --fast", "research.bot"},
		{"python3 -mhttp.server 8000", "http.server"},
		{"python3 -um mybot", "mybot"},
		{"pypy3 agent.py", "agent"},
		{"node a.mjs", "a"},
		{"node --enable-source-maps dist/index.js", "index"},
		{"node -r dotenv/config agent.js", "agent"},
		{"node --import tsx ./src/agent.ts", "agent"},
		{"node --env-file=.env --max-old-space-size=4096 server.js", "server"},
		{"nodejs bot.js", "bot"},
		{"tsx agent.ts", "agent"},
		{"tsx watch src/agent.ts", "agent"},
		{"ts-node -P tsconfig.json agent.ts", "agent"},
		{"deno run -A agent.ts", "agent"},
		{"deno run --allow-net --allow-env=OPENAI_API_KEY -c deno.json main.ts", "main"},
		{"deno task research", "research"},
		{"deno agent.ts", "agent"},
		{"bun agent.ts", "agent"},
		{"bun run src/agent.ts", "agent"},
		{"bun x tsx agent.ts", "agent"},
		{"ruby -Ilib bot.rb", "bot"},
		{"perl -MJSON -I lib crawler.pl", "crawler"},
		{"php -d memory_limit=1G worker.php", "worker"},
		{"php -f worker.php", "worker"},
		{"bash run-agent.sh", "run-agent"},
		{"bash -x ./scripts/agent.sh", "agent"},
		{"bash -euo pipefail ./agent.sh", "agent"},
		{"fish agent.fish", "agent"},
		{"java -jar target/research-bot-1.2.jar", "research-bot-1.2"},
		{"java -Xmx2g -cp lib/* com.acme.agents.ResearchBot", "ResearchBot"},
		{"java -m bots/com.acme.Bot", "Bot"},
		{"java Agent.java", "Agent"},
		{"go run ./cmd/bot", "bot"},
		{"go run -tags netgo main.go", "main"},

		// Inline code: the interpreter's name, never a slug of the code.
		{`python3 -c "import agent; agent.main()"`, "python3"},
		{"python3 -uc print(1)", "python3"},
		{"/usr/bin/python3.12 -c pass", "python3"},
		{"python3 -", "python3"},
		{"python3", "python3"},
		{`node -e "require('./a')"`, "node"},
		{"node --eval=1", "node"},
		{"node -p 1+1", "node"},
		{"bash -c 'exec python3 agent.py'", "bash"},
		{"sh -c 'while :; do sleep 1; done'", "sh"},
		{"bash -lc 'cd /app && ./bot'", "bash"},
		{"bash -o pipefail -c true", "bash"},
		{"/bin/sh -ec true", "sh"},
		{"bash -s", "bash"},
		{"ruby -e 'puts 1'", "ruby"},
		{"perl -e 'print 1'", "perl"},
		{"php -r 'echo 1;'", "php"},
		{"deno eval 'console.log(1)'", "deno"},
		{"fish -c 'echo hi'", "fish"},

		// Through env, its options and assignments.
		{"env X=1 node a.mjs", "a"},
		{"env -i PATH=/usr/bin HOME=/tmp python3 agent.py", "agent"},
		{"/usr/bin/env -u OPENAI_API_KEY -C /srv/app OPENAI_AGENTS_DISABLE_TRACING=1 python3 -m bot", "bot"},
		{"env --unset=FOO --chdir=/app ./bot", "bot"},
		{"env -- ./bot", "bot"},
		{"env -S 'python3 -u' agent.py", "agent"},
		{"env '-S python3 -u' agent.py", "agent"},
		{"env -iS'node --no-warnings' a.js", "a"},
		{"env X=1 bash -c 'echo $X'", "bash"},
		{"env X=1", "env"},
		{"env", "env"},

		// Through runners.
		{"npx tsx agent.ts", "agent"},
		{"npx -y tsx ./src/agent.ts", "agent"},
		{"npx --yes ts-node agent.ts", "agent"},
		{"npx @acme/research-agent@1.4.0 --topic x", "research-agent"},
		{"npx -p typescript -p tsx tsx agent.ts", "agent"},
		{"npx -c 'tsx agent.ts'", "npx"},
		{"npm exec -- tsx agent.ts", "agent"},
		{"npm run agent", "agent"},
		{"npm run --workspace bots research", "research"},
		{"npm start", "npm"},
		{"pnpm exec tsx agent.ts", "agent"},
		{"pnpm dlx tsx agent.ts", "agent"},
		{"pnpm run research", "research"},
		{"pnpm --filter bots tsx agent.ts", "agent"},
		{"yarn tsx agent.ts", "agent"},
		{"yarn run agent", "agent"},
		{"yarn dlx tsx agent.ts", "agent"},
		{"bunx tsx agent.ts", "agent"},
		{"uv run agent.py", "agent"},
		{"uv run python agent.py", "agent"},
		{"uv run --with openai-agents --python 3.12 agent.py", "agent"},
		{"uv run --with=rich -p 3.12 python -u agent.py", "agent"},
		{"uv run -m research.bot", "research.bot"},
		{"uv --directory /srv/app run agent.py", "agent"},
		{"uv run -- python -c 'print(1)'", "python"},
		{"uv pip install x", "uv"},
		{"uvx --from research-agent==2.0 research-agent --once", "research-agent"},
		{"uvx llm-bot@latest", "llm-bot"},
		{"uv tool run llm-bot", "llm-bot"},
		{"poetry run python -m bot", "bot"},
		{"poetry -C /srv/app run python agent.py", "agent"},
		{"pipenv run python agent.py", "agent"},
		{"pdm run agent.py", "agent"},
		{"pixi run -e cuda python train_agent.py", "train_agent"},
		{"conda run -n agents --no-capture-output python agent.py", "agent"},
		{"micromamba run -n agents python agent.py", "agent"},

		// Through programs that change a setting, and nested.
		{"timeout 1h ./bot", "bot"},
		{"timeout -k 10s -s INT 600 python3 agent.py", "agent"},
		{"timeout --preserve-status 60 node a.mjs", "a"},
		{"nice -n 10 python3 agent.py", "agent"},
		{"nice -10 ./bot", "bot"},
		{"nohup ./bot", "bot"},
		{"ionice -c 3 python3 agent.py", "agent"},
		{"chrt -b 0 ./bot", "bot"},
		{"taskset -c 0-3 python3 agent.py", "agent"},
		{"stdbuf -oL -eL python3 agent.py", "agent"},
		{"stdbuf -o L python3 agent.py", "agent"},
		{"setsid -w ./bot", "bot"},
		{"time -v ./bot", "bot"},
		{"tini -- python3 agent.py", "agent"},
		{"dumb-init --single-child -- node a.mjs", "a"},
		{"sudo -u bot -E python3 agent.py", "agent"},
		{"sudo -u bot OPENAI_AGENTS_DISABLE_TRACING=1 env -i npx tsx agent.ts", "agent"},
		{"doas -u bot ./bot", "bot"},
		{"nice -n 5 timeout 1h env X=1 uv run --with rich python -m research.bot", "research.bot"},

		// Whatever the words, a valid id.
		{"'./my agent!'", "my-agent"},
		{"python3 ./.hidden.py", "hidden"},
		{"python3 " + strings.Repeat("x", 80) + ".py", strings.Repeat("x", 48)},
		{"./...", "agent"},
		{"go run .", "go"},
		{"timeout 10", "timeout"},
		{"npx", "npx"},
	} {
		got := deriveID(shellWords(t, tc.cmd))
		assert.Equal(t, tc.want, got, "%s", tc.cmd)
		a := config.DefaultAgent()
		a.ID, a.Command = got, []string{"x"}
		assert.NoError(t, a.Validate(true), "%s: %q is a valid id", tc.cmd, got)
	}
}

// Nothing makes deriveID fail or loop: nested splits end, odd words give
// an id.
func TestDeriveIDBounded(t *testing.T) {
	argv := []string{"env"}
	for range 50 {
		argv = append(argv, "-S", "env")
	}
	assert.NotEmpty(t, deriveID(argv))
	for _, argv := range [][]string{{""}, {"-"}, {"--"}, {"env", "-S"}, {"env", "-u"}, {"python3", "-m"}, {"java", "-jar"},
		{"npx", "@"}, {"uvx", "=="}, {"timeout"}, {"env", "-S", ""}, {"sudo", "--"}} {
		assert.NotEmpty(t, deriveID(argv), "%q", argv)
	}
}

// shellWords splits a command line as a POSIX shell would, for the quoting
// these tests use: single and double quotes, no expansions.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// supervise without --id gives the agent the derived id: inline shell
// code started through env with an assignment is "sh", a script "bot".
func TestSuperviseUsesDerivedID(t *testing.T) {
	bot := writeTestFile(t, t.TempDir(), "bot.sh", `echo "$HERMESKILL_AGENT_ID"`)
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"env", "X=1", "/bin/sh", "-c", `echo "$HERMESKILL_AGENT_ID"`}, "sh"},
		{[]string{"env", "-u", "NOPE", "nice", "-n", "1", "/bin/sh", bot}, "bot"},
	} {
		r := hk(t, append([]string{"supervise", "--certs-dir", t.TempDir(), "--"}, tc.argv...)...)
		assert.Equal(t, 0, r.code)
		assert.Equal(t, tc.want+"\n", r.stdout, "%q", tc.argv)
	}
}
