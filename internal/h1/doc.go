// Package h1 is a small HTTP/1.1 client for the gateway's engine leg, used
// only when asked for (gateway.Config.EngineTransport h1, stargate gateway
// --engine-transport h1; net/http is the default): it sends one request on
// a pooled keep-alive connection and hands each read of the answer to the
// caller, all in the caller's goroutine.
//
// It exists for the cost of a streamed answer, whose events arrive a few
// hundred bytes at a time, one engine step apart. net/http's Transport
// reads each connection in a goroutine of its own and, like every Read on a
// Go socket, tries the socket before it waits for it: after each event it
// makes a read that finds nothing. This client reads the way an event loop
// does (nginx's, for one). A read that fills less than the buffer offered
// has drained the socket, so the next one waits for the poller to say there
// is more instead of trying first. Waiting inside one syscall.RawConn.Read
// keeps the poller's readiness between reads, so no wake-up is lost. Its
// reads and writes are package rawio's, without the scheduler's system-call
// bookkeeping. BENCHMARKS.md ("Proxy path") has what that saves.
//
// What it speaks: plain HTTP/1.1 over TCP, one request at a time per
// connection (no pipelining), a body sent with Content-Length, and answers
// framed by chunked transfer coding, Content-Length or the end of the
// connection; interim 1xx answers are skipped. Anything else an engine
// sends (another transfer coding, oversized or malformed headers) is an
// error that names what was wrong. FuzzAgainstNetHTTP holds it to
// net/http's reading of the same answers (status, fields, body, and which
// answers are errors); its two deliberate differences are chunks in an
// HTTP/1.0 answer, which this client decodes, and trailers, which it drops.
//
// A connection goes back to the pool only after its answer has been read to
// the end and the engine did not ask to close it. Before a kept connection
// is used again, a peek (recv with MSG_PEEK) checks that the engine has
// neither closed it nor written to it meanwhile; uvicorn, which serves vLLM
// and SGLang, closes idle connections after 5 s. A request is sent once
// more on a new connection only if a kept one failed before the request
// was written whole: one written whole and then lost may be running on the
// engine, and is reported, not resent (net/http does not resend a POST
// either).
//
// The socket calls are package rawio's. Where rawio is not supported (not
// a Unix system) the gateway refuses EngineTransport h1.
package h1
