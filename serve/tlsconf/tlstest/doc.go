// Package tlstest makes certificates for tests: a CA and leaves signed by
// it naming a Stargate identity, written as PEM files to a test's directory.
// Nothing here is for production; keys are ECDSA P-256 drawn at test time.
package tlstest
