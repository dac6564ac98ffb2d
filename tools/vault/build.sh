#!/usr/bin/env bash
# Build the HashiCorp Vault server the OpenBao backend's integration tests run
# against (`vault server -dev` on loopback), from the Go module proxy alone.
#
# OpenBao's own server module is not on the proxy; Vault v1.21.4 is the API
# OpenBao forked from (AppRole, ACL policies, KV v2 and response wrapping are
# the same). Vault v1.21.4 names a github.com/hashicorp/vault/sdk revision the
# proxy does not serve, so this assembles an equivalent sdk locally:
#   sdk@v0.21.0, with framework/backend.go's ActivationFunc changed back to
#   func(context.Context, *logical.Request) error, and
#   helper/keysutil/lock_manager.go taken from sdk@v0.25.1,
# then builds Vault in a throwaway wrapper module that replaces the sdk with
# that directory and github.com/99designs/keyring with github.com/Jeffail/keyring.
#
# Output: $VAULT_TOOLS_DIR/bin/vault (default var/tools/vault/bin/vault, under
# the git-ignored var/). Skipped when the binary and its recipe stamp are
# already there. The sdk copy and the wrapper module live in
# $VAULT_TOOLS_DIR/src and are never committed.
#
# The build runs at GOFLAGS=-p=1 under nice so a shared 2-core machine stays
# usable; override VAULT_BUILD_P to use more cores.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)

GO=${GO:-go}
VAULT_VERSION=v1.21.4
SDK_BASE=v0.21.0
SDK_KEYSUTIL=v0.25.1
KEYRING_REPLACE=github.com/Jeffail/keyring@v1.2.3
TOOLS_DIR=${VAULT_TOOLS_DIR:-$ROOT/var/tools/vault}
BIN=$TOOLS_DIR/bin/vault
STAMP=$TOOLS_DIR/bin/vault.recipe
RECIPE="vault=$VAULT_VERSION sdk=$SDK_BASE+ActivationFunc-2arg+keysutil/lock_manager.go@$SDK_KEYSUTIL keyring=$KEYRING_REPLACE flags=-trimpath,-s,-w"

if [[ -x $BIN && -f $STAMP && "$(cat "$STAMP")" == "$RECIPE" ]]; then
  echo "vault: $BIN present ($VAULT_VERSION); not rebuilding"
  exit 0
fi

export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -p=${VAULT_BUILD_P:-1}"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}

SRC=$TOOLS_DIR/src
rm -rf "$SRC"
mkdir -p "$SRC" "$TOOLS_DIR/bin"

# moddir MODULE@VERSION prints the module's directory in the module cache,
# downloading it through the proxy when missing.
moddir() {
  local json dir
  json=$("$GO" mod download -json "$1")
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  if [[ -z $dir || ! -d $dir ]]; then
    echo "vault: go mod download $1 gave no directory:" >&2
    printf '%s\n' "$json" >&2
    exit 1
  fi
  printf '%s\n' "$dir"
}

echo "vault: assembling github.com/hashicorp/vault/sdk from $SDK_BASE (+ keysutil/lock_manager.go from $SDK_KEYSUTIL)"
base=$(moddir "github.com/hashicorp/vault/sdk@$SDK_BASE")
keys=$(moddir "github.com/hashicorp/vault/sdk@$SDK_KEYSUTIL")
cp -R "$base" "$SRC/sdk"
chmod -R u+w "$SRC/sdk"
cp "$keys/helper/keysutil/lock_manager.go" "$SRC/sdk/helper/keysutil/lock_manager.go"
chmod u+w "$SRC/sdk/helper/keysutil/lock_manager.go"

be=$SRC/sdk/framework/backend.go
old='ActivationFunc func(context.Context, \*logical.Request, string) error'
new='ActivationFunc func(context.Context, *logical.Request) error'
if ! grep -q "$old" "$be"; then
  echo "vault: $be has no 3-argument ActivationFunc to revert; the sdk at $SDK_BASE is not the expected one" >&2
  exit 1
fi
sed -i "s/$old/$new/" "$be"
grep -q "ActivationFunc func(context.Context, \*logical.Request) error" "$be"

echo "vault: wrapper module in $SRC/wrap"
mkdir -p "$SRC/wrap"
cd "$SRC/wrap"
cat > go.mod <<MOD
module registrar-otel.local/vaultbuild

go 1.25

replace github.com/hashicorp/vault/sdk => $SRC/sdk

replace github.com/99designs/keyring => ${KEYRING_REPLACE%@*} ${KEYRING_REPLACE#*@}
MOD
cat > tools.go <<'GO'
//go:build tools

package vaultbuild

import _ "github.com/hashicorp/vault"
GO

echo "vault: go get github.com/hashicorp/vault@$VAULT_VERSION (fills the module cache on a fresh machine)"
nice -n 10 "$GO" get "github.com/hashicorp/vault@$VAULT_VERSION"
echo "vault: go build (GOFLAGS=$GOFLAGS; ~10 min cold on 2 cores, under a minute warm)"
nice -n 10 "$GO" build -trimpath -ldflags='-s -w' -o "$BIN.tmp" github.com/hashicorp/vault
mv -f "$BIN.tmp" "$BIN"
printf '%s\n' "$RECIPE" > "$STAMP"
"$BIN" version
echo "vault: built $BIN"
