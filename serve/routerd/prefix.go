package routerd

import (
	"context"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/prefix"
)

// promptBlocks are the chained block hashes of a prompt rendered as text
// (a chat's messages in order, "role:text\n" each), in chunks of
// prefix.ChunkChars bytes: about prefix.ChunkTokens tokens each (see
// docs/prefix.md). Only the prefix policy reads them, so other policies
// skip the hashing.
func (s *Server) promptBlocks(rendered string) []uint64 {
	if s.cfg.Policy != policy.PrefixName {
		return nil
	}
	return prefix.HashText(rendered, prefix.ChunkChars)
}

// blocksKey carries a request's block hashes from route to every decide
// of its attempts.
type blocksKey struct{}

// withBlocks returns ctx carrying blocks (ctx itself for none).
func withBlocks(ctx context.Context, blocks []uint64) context.Context {
	if len(blocks) == 0 {
		return ctx
	}
	return context.WithValue(ctx, blocksKey{}, blocks)
}

// blocksOf is the block hashes ctx carries and the tokens each stands for
// (nil and 0 for none).
func blocksOf(ctx context.Context) ([]uint64, int) {
	if b, ok := ctx.Value(blocksKey{}).([]uint64); ok {
		return b, prefix.ChunkTokens
	}
	return nil, 0
}
