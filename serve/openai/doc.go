// Package openai holds what the live services share about the OpenAI API
// (Stargate): the request fields they read, the documented token count, the
// session key, and answers and errors in OpenAI's shape.
//
// Tokens are counted without a tokenizer, deterministically: a text of n
// bytes is (n+3)/4 tokens, and each chat message adds 4 tokens for its role
// and framing. The session key is the X-Session-ID header, else the body's
// "user", else a hash of the first two messages (a growing conversation keeps
// its first messages), so the router, the gateway and the mock engine agree
// on which requests share a prefix.
package openai
