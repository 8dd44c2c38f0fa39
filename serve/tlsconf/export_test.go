package tlsconf

import "time"

// SetClock replaces the reloader's clock (tests); the last look at the
// files is now.
func (r *Reloader) SetClock(now func() time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.now, r.lastCheck = now, now()
}
