// Package engine models one GPU worker of an LLM inference engine: continuous
// batching with a sequence limit and a KV-token budget, chunked prefill, a
// prefix cache of finished sessions kept inside the KV budget, and preemption
// with recompute when the KV budget runs out.
//
// The cost of one engine step is
//
//	step = base + per_decode_seq * decoding_sequences + per_prefill_token * prefill_tokens
//
// with the constants of a Profile (see HalfProfile and FullProfile).
//
// # Scheduling, step by step
//
// At the start of every step the worker, in this order:
//
//  1. makes KV room for one new token per running sequence, preempting the most
//     recently admitted sequence (recompute: it returns to the head of the
//     waiting queue and later prefills its prompt and the tokens it had already
//     generated) while there is not enough room even with the prefix cache empty;
//  2. gives each decoding sequence one token of the step's token budget
//     (Profile.PrefillChunk, like vLLM's max_num_batched_tokens; default 2048);
//  3. gives the rest of the budget to sequences still prefilling, oldest first;
//  4. admits waiting sequences first come first served while a sequence slot is
//     free, the whole prompt fits in KV (the prefix cache is evicted, least
//     recently used first, to make room) and budget is left. A sequence whose
//     session has a cache entry on this worker adopts it and prefills only the
//     tokens beyond it (at least one token is always computed, as in vLLM).
//
// # Block cache
//
// A request that carries block hash ids (Request.BlockHashes, one id per
// BlockSize prompt tokens, as in the Mooncake traces) uses the block cache
// instead of its session's entry. At admission it takes the longest run of
// cached blocks that starts its prompt (stopping at the first id not cached,
// or after a cached block shorter than its own); those blocks are pinned:
// they leave the LRU list and count once in the KV in use however many
// running sequences share them, and cannot be evicted until the last of them
// ends. A finished request's prompt blocks enter the cache (output tokens are
// not cached: no later prompt can name them), last block first, so that the
// first block is the most recent and a chain is evicted from its tail. Blocks
// and session entries share one LRU list inside the one KV budget. A block
// becomes shareable when its request finishes, not as soon as it is computed.
//
// # Host tier
//
// A profile with HostKVTokens > 0 gives the worker a second cache tier in
// host memory (host.go), as vLLM's KV offloading, LMCache, SGLang's HiCache
// and Mooncake's store do: entries the GPU's LRU list evicts move there
// (its own LRU list, HostKVTokens in size) instead of being dropped; a
// block match and a session lookup go on into it; what a sequence takes
// from it moves back into GPU memory at admission, and the admitting step
// lasts the transfer longer (tokens over HostKVLoadTokensPerS). Events and
// Totals count the host's share of the cached tokens (HostTokens). The
// built-in half-host and full-host profiles enable it; half and full do not.
//
// A step that completes a sequence's prefill also produces its next output token
// (the first token, unless the sequence is recomputing after a preemption). A
// finished sequence's prompt and output become its session's cache entry.
//
// # Runs
//
// Steps that change nothing but token counts (every running sequence decoding,
// nobody admissible) are identical, so the worker plans them as one run of k
// steps that ends when the first sequence finishes or KV would overflow. A
// Submit or Cancel in the middle of a run cuts it at the end of the step in
// progress, so the result is the same as stepping one at a time; runs only
// save the simulator events. Options.MaxStepsPerRun = 1 turns them off.
//
// Time is a time.Duration since an arbitrary origin, passed in by the caller.
// A Worker is not safe for concurrent use.
package engine
