// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

package outbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run's exit line about the control plane, case by case.
func TestSummaryString(t *testing.T) {
	full := errors.New("outbox full")
	for _, tc := range []struct {
		name string
		s    *Summary
		want string
	}{
		{"none", nil, ""},
		{"nothing happened", &Summary{}, ""},
		{"delivered", &Summary{Own: 1, OwnDelivered: 1}, "certificate delivered to the control plane"},
		{"queued", &Summary{Own: 1, OwnPending: 1, Pending: 3},
			"certificate queued for the control plane (3 undelivered, will be retried by the next run using /s)"},
		{"shadow, mixed", &Summary{Own: 3, OwnDelivered: 1, OwnPending: 1, OwnParked: 1, Pending: 1},
			"3 certificates for the control plane: 1 delivered, 1 queued (1 undelivered, will be retried by the next run using /s), 1 refused; refused by the control plane: see /s/outbox/parked"},
		{"not queued", &Summary{NotQueued: []error{full}}, "certificate not queued for the control plane (outbox full); only in the certificates directory"},
		{"earlier delivered", &Summary{Own: 1, OwnDelivered: 1, EarlierDelivered: 2},
			"certificate delivered to the control plane; 2 certificates of earlier runs delivered to the control plane"},
		{"earlier still queued", &Summary{Pending: 1},
			"1 certificate of an earlier run still queued for the control plane (1 undelivered, will be retried by the next run using /s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.s != nil {
				tc.s.StateDir, tc.s.OutboxDir = "/s", "/s/outbox"
			}
			require.Equal(t, tc.want, tc.s.String())
			require.False(t, strings.Contains(tc.s.String(), "\n"))
		})
	}
}
