// Package prefix is the router's approximate picture of which prompt blocks
// each backend holds in its prefix cache: a deterministic core (no I/O, no
// clock: time comes in as an argument) shared by the live router and the
// simulator through the prefix placement policy (policy.Prefix).
//
// A prompt is a list of block hashes, each naming its whole prefix (a
// chained hash, as vLLM's prefix caching keys its blocks; the Mooncake
// traces' hash ids have the same property), so two prompts share their
// first k blocks exactly when their lists share their first k ids. The
// Index records, per backend, the blocks of the prompts sent there
// (Insert) and answers, for a new prompt, how many of its leading blocks
// each backend holds (Match).
//
// The picture is an approximation of the engines' caches, by design:
//
//   - A block counts as cached from the moment its prompt is sent, not from
//     when the engine finishes the prefill, and the index never learns of
//     an engine's own evictions: it ages blocks itself.
//   - Each backend holds at most its capacity in blocks (SetCapacity), evicted
//     least recently used first. A prompt's blocks are touched from the last
//     to the first, so its first block is the most recent and a chain is
//     evicted from its tail, as vLLM frees a sequence's blocks and as
//     engine.Worker does. The engine shares its KV budget between running
//     sequences and the cache, so the capacity given should be what is left
//     for the cache under typical load, not the whole KV budget.
//   - An optional maximum age (New) drops blocks not touched for that long,
//     for engines whose caches are flushed or restarted.
//
// Memory is bounded: each held (block, backend) pair costs one node of
// NodeBytes plus its share of a hash map entry (about BytesPerBlock in all),
// and a backend never holds more nodes than its capacity. A block is
// indexed once by hash with the small set of backends that hold it chained
// behind it (as SGLang's cache-aware router and llm-d's prefix scorer keep a
// block-to-servers index), so Match costs the prompt's matched length times
// the number of backends holding each matched block, not the fleet size.
//
// An Index is not safe for concurrent use.
package prefix
