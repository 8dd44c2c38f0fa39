// Command proxyload is the load generator of the proxy benchmark
// (bench/proxy.sh): closed-loop streaming chat clients against one URL for a
// fixed time, measuring requests per second, time to the first streamed token
// and the CPU the target processes spent.
//
//	proxyload run --url http://127.0.0.1:18001 --streams 200 --duration 10s --pids 1234 --label engine
//	proxyload table runs.ndjson
//
// run prints one JSON line per measurement; table reads such lines and prints
// the medians of each label side by side, with the TTFT each label adds over
// the baseline label (the engine called directly), paired run by run.
//
// Each of the --streams clients sends one request, reads its stream to the
// end (past [DONE] to the end of the body, so that its connection carries
// the next request), and sends the next at once. TTFT is the time from sending a request to
// reading the first SSE event with non-empty delta content. Requests that
// end in the measured window (after --warmup) count; those still running at
// the end are cancelled and not counted. CPU is utime+stime from
// /proc/PID/stat of every --pids process, read at the start and the end of
// the measured window, in clock ticks of 10 ms (Linux's USER_HZ of 100).
//
// It is a separate program, not a stargate subcommand, because it is a
// benchmark tool: the product binary carries no benchmark-only commands.
package main
