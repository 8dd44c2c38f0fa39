// Command stargate routes LLM inference requests across a fleet of backends
// and simulates fleets to prove a policy before it ships. Run
// `stargate --help` for the subcommands.
package main
