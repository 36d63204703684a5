#!/bin/sh
# Makes a throw-away PKI for the TLS tests in directory $1 (created): a CA
# (ca.pem), a server certificate for localhost/127.0.0.1 (server.pem,
# server.key), a client certificate (client.pem, client.key), both signed by
# the CA, and an unrelated CA (other_ca.pem) plus a client and a server
# certificate it signed (other_client.*, other_server.*: certificate rotation
# tests). P-256 keys, valid two days.
# Needs openssl (tools/setup.sh). Never use these files for anything else.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
leaf() {  # name ca subject extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "$3" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
    -out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca "/CN=hub test CA"
ca other_ca "/CN=hub other test CA"
leaf server ca "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
leaf client ca "/CN=hub test client" "extendedKeyUsage=clientAuth"
leaf other_client other_ca "/CN=hub other client" "extendedKeyUsage=clientAuth"
leaf other_server other_ca "/CN=localhost" "subjectAltName=DNS:localhost,IP:127.0.0.1
extendedKeyUsage=serverAuth"
