package prefix

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// Live prompts are cut into blocks of text before hashing: the router does
// not tokenize, so a block is ChunkChars bytes of the rendered prompt, about
// ChunkTokens tokens at CharsPerToken (the project's stand-in tokenizer,
// openai.CountTokens, counts four bytes a token). A chunk stands for
// ChunkTokens/EngineBlockTokens engine blocks (vLLM's default KV block is
// 16 tokens): two prompts that share their first k chunks share about their
// first 4k engine blocks. Chunks coarser than engine blocks keep the index
// four times smaller and lose at most one chunk of a match (under 64 tokens).
const (
	CharsPerToken     = 4
	EngineBlockTokens = 16
	ChunkTokens       = 4 * EngineBlockTokens
	ChunkChars        = CharsPerToken * ChunkTokens
)

// Chunker hashes a prompt given in pieces (a chat's messages, rendered in
// order) into chained block hashes: block i's hash covers block i's bytes
// and block i-1's hash, so it names the whole prefix up to it. Only whole
// chunks make blocks, as an engine caches only full blocks. The zero value
// is not ready: use NewChunker.
type Chunker struct {
	size   int
	prev   uint64
	buf    []byte
	blocks []uint64
	d      *xxhash.Digest
}

// NewChunker returns a chunker cutting blocks of size bytes (ChunkChars if
// size < 1).
func NewChunker(size int) *Chunker {
	if size < 1 {
		size = ChunkChars
	}
	return &Chunker{size: size, buf: make([]byte, 0, size), d: xxhash.New()}
}

// Reset empties the chunker for another prompt, keeping its buffers.
func (c *Chunker) Reset() {
	c.prev, c.buf, c.blocks = 0, c.buf[:0], c.blocks[:0]
}

// WriteString appends s to the prompt.
func (c *Chunker) WriteString(s string) {
	for len(s) > 0 {
		n := min(c.size-len(c.buf), len(s))
		c.buf = append(c.buf, s[:n]...)
		s = s[n:]
		if len(c.buf) == c.size {
			c.flush()
		}
	}
}

func (c *Chunker) flush() {
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], c.prev)
	c.d.Reset()
	_, _ = c.d.Write(p[:])
	_, _ = c.d.Write(c.buf)
	c.prev = c.d.Sum64()
	c.blocks = append(c.blocks, c.prev)
	c.buf = c.buf[:0]
}

// Blocks returns the hashes of the whole blocks written so far; the slice
// is the chunker's own until the next Reset.
func (c *Chunker) Blocks() []uint64 { return c.blocks }

// HashText returns the chained block hashes of text in chunks of size
// bytes (ChunkChars if size < 1).
func HashText(text string, size int) []uint64 {
	c := NewChunker(size)
	c.WriteString(text)
	return c.Blocks()
}
