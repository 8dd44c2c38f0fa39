package policy

// ErrorBlind is implemented by policies whose picks never read
// View.ErrorRate: a router need not decay every backend's error rate to the
// present (O(n)) before each of their picks. A policy that does not say so
// gets current error rates.
type ErrorBlind interface {
	ErrorBlind()
}

var (
	_ ErrorBlind = (*RoundRobin)(nil)
	_ ErrorBlind = (*Random)(nil)
	_ ErrorBlind = LeastRequest{}
	_ ErrorBlind = (*PowerOfTwo)(nil)
	_ ErrorBlind = (*WaW)(nil)
	_ ErrorBlind = (*PulsarWaW)(nil)
	_ ErrorBlind = (*Prefix)(nil)
)

// ErrorBlind implements ErrorBlind: the prefix index and pulsar-waw's
// ranking, its fallback, read no error rate.
func (*Prefix) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (*RoundRobin) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (*Random) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (LeastRequest) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (*PowerOfTwo) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (*WaW) ErrorBlind() {}

// ErrorBlind implements ErrorBlind.
func (*PulsarWaW) ErrorBlind() {}
