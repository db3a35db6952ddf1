package procsup

import "time"

// SetFreezeWait bounds the autopsy's freeze (tests force a timeout).
func (t *Tree) SetFreezeWait(d time.Duration) { t.freezeWait = d }
