package router

import (
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/prefix"
)

// promptBlocks are the chained block hashes of a prompt rendered as text
// (a chat's messages in order, "role:text\n" each), in chunks of
// prefix.ChunkChars bytes: about one engine block each (see docs/prefix.md).
// Only the prefix policy reads them, so other policies skip the hashing.
func (s *Server) promptBlocks(rendered string) []uint64 {
	if s.cfg.Policy != policy.PrefixName {
		return nil
	}
	return prefix.HashText(rendered, prefix.ChunkChars)
}

// liveBlockTokens is the tokens a live block stands for.
const liveBlockTokens = prefix.ChunkTokens
