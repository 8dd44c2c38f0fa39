// Package workload generates the routing study's traffic: growing multi-turn
// sessions, seeded.
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
package workload
