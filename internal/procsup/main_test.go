// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package procsup_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/hermeskill/hermeskilld/internal/procsup"
	"github.com/hermeskill/hermeskilld/internal/testchild"
)

var rt *procsup.Runtime

func TestMain(m *testing.M) {
	testchild.Main()
	var err error
	rt, err = procsup.NewRuntime(procsup.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rt.Close()
	os.Exit(code)
}
