// Package workload generates traffic, seeded: the routing study's growing
// multi-turn sessions, the SLO matrix's workload classes, and readers of
// recorded traces.
//
// A session has a system prompt (4,000 tokens by default) and a number of
// turns drawn uniformly from [TurnsMin, TurnsMax] (5-40). Each turn adds a user
// message of [UserTokensMin, UserTokensMax] tokens (200-2,000) and asks for
// [OutputTokensMin, OutputTokensMax] output tokens (128-256), so the prompt of
// turn k is the system prompt plus every earlier user message and output plus
// turn k's user message. Between turns the user thinks for an exponential time
// with mean ThinkTimeMean (5 s), starting when the previous turn ends.
//
// Sessions arrive as a Poisson process at nominal_rps / mean_turns, where
// mean_turns = (TurnsMin + TurnsMax) / 2, so that the nominal rate is the
// request rate if turns were instant; slow turns lower the offered rate, as
// they do for real users.
//
// Every session draws from its own generator seeded by (seed, session id), so
// a session's turns do not depend on how other sessions interleave.
//
// # CDF workloads and traces
//
// A CDF workload (Synthetic) draws each request's total tokens from a CDF
// of points [tokens, fraction], uniformly inside each interval (ParseCDF
// reads the JSON form), splits the total into input and output (80/20 by
// default), gives it a category (prose, code, rag: 60/25/15 by default; a
// label the planner reports by) and an arrival time from a Poisson process
// or, with a burstiness b != 1, a renewal process of gamma gaps of squared
// coefficient of variation b. ReadMooncake and ReadAzure read recorded
// traces, TraceCDF turns a trace into a CDF and Retime scales a trace to
// another mean rate.
//
// # Workload classes
//
// A Class is an open loop: its Stream sends requests on a schedule fixed by
// the rate alone (evenly spaced, not Poisson, like a constant-rate load
// generator), whatever the fleet does with them. The eight classes of the
// SLO matrix (Classes) are baseline_mixed, rapid_shift, code_heavy,
// adversarial_spike, multiturn, rag_multidoc, long_context and very_long;
// each has a Doc string with its shapes and pace, three TTFT SLO tiers, and
// the mean prompt and output tokens a capacity planner needs. A prompt of
// "512 +/- 200" tokens is uniform on [312, 712]. Session classes start their
// sessions evenly at rate/turns and pace the turns by a fixed gap, and
// sessions are already under way at time zero, so the request rate holds
// from the first second. A conversation's turn is never sent before the
// previous one has ended (Request.Follows): a user reads the answer first.
// So the rate holds while turns end within the gap, and falls below it,
// as it does for real users, when they do not.
package workload
