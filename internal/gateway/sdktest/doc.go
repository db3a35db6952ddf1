// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Package sdktest checks the LLM gateway against the official Go SDKs of
// the providers, openai-go and anthropic-sdk-go, configured only by the
// environment the gateway gives an agent.
//
// sdk_test.go drives a gateway in the test process: that the SDKs'
// requests reach the upstream with the real key, that what they stream is
// metered, and that a revocation reaches them as their own errors.
//
// agents_test.go runs the real `hermeskilld supervise`, built from this
// repository, in front of a fake of both providers (provider_test.go), with
// an agent built from testdata/agent: a program on the SDKs alone, which
// reads OPENAI_BASE_URL/OPENAI_API_KEY or ANTHROPIC_BASE_URL/
// ANTHROPIC_API_KEY as the SDKs do by default and contains nothing of
// hermeskill's. The budgets and the tool-loop check kill it on what the
// gateway read on the wire; the certificate, the audit log, the agent's
// own report and the provider's record of every request are checked.
//
// node_test.go does the same with the TypeScript SDKs npm serves (openai,
// @openai/agents, ai + @ai-sdk/openai): the agent is
// test/agents/node/agent.mjs, its packages pinned by that directory's
// package-lock.json and installed by `npm ci --prefix test/agents/node`.
//
// It is a module of its own so that the SDKs are never dependencies of
// hermeskilld: run its tests from this directory with go test ./... (make
// test does).
package sdktest
