// Package plan is the analytical side of capacity planning: M/G/c queueing
// with a numerically stable Erlang C and Kimura's two-moment approximation of
// the waiting-time tail. (The planner commands, profiles and DES verification
// build on it.)
//
// # The formulas
//
// With arrival rate lambda, mean service time 1/mu on each of c servers and
// offered load a = lambda/mu Erlangs (utilization rho = a/c < 1):
//
//	Erlang B:  B(0) = 1,  B(k) = a B(k-1) / (k + a B(k-1))
//	Erlang C:  C(c, a) = c B(c) / (c - a (1 - B(c)))      (P(wait > 0), M/M/c)
//
// The recursion stays in [0, 1] for any c, where the textbook sum of
// a^k/k! overflows past c of about 170.
//
// For general service times with squared coefficient of variation cs2,
// Kimura's approximation keeps M/M/c's probability of waiting and scales the
// exponential decay of the wait by 2 / (1 + cs2):
//
//	P(W > t) ~ C(c, a) exp(-theta t),   theta = 2 (c mu - lambda) / (1 + cs2)
//	E[W]     ~ C(c, a) / theta
//	W_q      = ln(C(c, a) / (1 - q)) / theta   if C(c, a) > 1 - q, else 0
//
// cs2 = 1 gives M/M/c exactly; cs2 = 0 (deterministic service) halves the
// M/M/c wait, as the Pollaczek-Khinchine formula does for c = 1.
//
// Size picks the fewest servers whose P99 wait meets a target and whose
// utilization stays under a cap (0.85 by default).
package plan
