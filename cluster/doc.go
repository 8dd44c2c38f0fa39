// Package cluster models one backend: N engine workers (one per GPU) and the
// in-backend worker picker. The picker keeps a session on the worker that holds
// its prefix cache unless that worker has no free sequence slot (among
// workers caching equally much, such as a system prompt all of them hold, the
// least loaded), and otherwise sends it to the least-loaded worker (fewest
// running plus waiting sequences, then least KV in use, then lowest index).
//
// A Backend is not safe for concurrent use; time is passed in by the caller.
package cluster
