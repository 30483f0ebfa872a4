#!/usr/bin/env bash
# Makes throw-away TLS material for the deploy tests, with openssl, in DIR:
#   ca.crt ca.key              a test CA
#   tls.crt tls.key            one certificate for every meshrt daemon and client (server and client
#                              use), signed by the CA, naming the DNS names and IPs given
#   other-ca.crt               an unrelated CA (to test that a wrong CA is refused)
#   other.crt other.key        a certificate signed by the unrelated CA
# Usage: launch_make_certs.sh DIR SAN...   (SAN: DNS:name or IP:address)
# Private keys never leave DIR; they live only as long as the test.
set -euo pipefail
dir=$1
shift
[ "$#" -gt 0 ] || { echo "usage: $0 DIR SAN..." >&2; exit 2; }
sans=$(IFS=,; echo "$*")
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # ca NAME PREFIX
  key "$2.key"
  openssl req -x509 -new -key "$2.key" -out "$2.crt" -days 2 -subj "/CN=$1" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}
leaf() {  # leaf CA_PREFIX PREFIX CN
  key "$2.key"
  openssl req -new -key "$2.key" -out "$2.csr" -subj "/CN=$3"
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' \
    "$sans" >"$2.ext"
  openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -days 2 \
    -extfile "$2.ext" -out "$2.crt" 2>/dev/null
  rm -f "$2.csr" "$2.ext"
}
ca "meshrt test CA" ca
leaf ca tls "meshrt"
ca "unrelated test CA" other-ca
leaf other-ca other "meshrt"
chmod 600 ./*.key
