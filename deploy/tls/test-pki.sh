#!/usr/bin/env bash
# Makes a test CA and one certificate per service (engine, gateway, router)
# in DIR (default: pki), with their identities as URI SANs
# (spiffe://stargate/ROLE/NAME, docs/tls.md), valid for 127.0.0.1 and
# localhost, and an HMAC key file. For trying TLS on one machine, not for
# production.
set -euo pipefail
dir=${1:-pki}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -keyout ca-key.pem -out ca.pem -subj "/CN=stargate test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
for svc in "engine e1" "gateway gw-a" "router r1"; do
  set -- $svc
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$1-key.pem" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 90 -out "$1.pem" \
    -extfile <(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,URI:spiffe://stargate/%s/%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\n' "$1" "$2") 2>/dev/null
done
printf 'router r1 %s\ngateway g1 %s\noperator o1 %s\n' "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" > hmac.key
echo "wrote $(pwd): ca.pem, {engine,gateway,router}.pem and -key.pem, hmac.key"
