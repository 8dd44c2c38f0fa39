package gatewayd

import (
	"errors"
	"net/http"

	"github.com/stargate-llm/stargate/serve/wire"
)

// otherReplica reports whether a stats push was refused by a router replica
// other than the one it was signed for, and that replica's name. Stats are
// signed for one replica ("router/ID"), so that a captured message cannot
// be replayed to another; the gateway learns the replica behind an address
// from its answers (it names itself in X-Stargate-Router), so its first
// message, and the first after the address reaches another replica, is
// refused once and sent again, signed for the replica that answered.
func otherReplica(err error, signedFor string) (string, bool) {
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusUnauthorized || se.router == signedFor || !wire.ValidID(se.router) {
		return "", false
	}
	return se.router, true
}
