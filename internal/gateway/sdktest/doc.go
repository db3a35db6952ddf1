// Package sdktest checks the gateway against the official Go SDKs of the
// providers, openai-go and anthropic-sdk-go, configured only by the
// environment a grant gives (Grant.Env): that their requests reach the
// upstream with the real key, that what they stream is metered, and that a
// revocation reaches them as their own errors.
//
// It is a module of its own so that the SDKs are never dependencies of
// hermeskilld: run its tests from this directory with go test ./...
package sdktest
