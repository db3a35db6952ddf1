// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// Command empty does nothing: the floor of a Go program's start and exit,
// built by make bench-compare from this file.
package main

func main() {}
