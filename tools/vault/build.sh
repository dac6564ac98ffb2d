#!/usr/bin/env bash
# Build the Vault server the OpenBao backend's integration tests run against
# (internal/testing/vaulttest starts it on loopback), from the Go module proxy
# alone.
#
#   tools/vault/build.sh         the small test server (make vault):
#                                var/tools/vault/bin/vault
#   tools/vault/build.sh full    the full HashiCorp Vault binary (make vault-full):
#                                var/tools/vault/bin/vault-full
#
# The small server is tools/vault/main.go, its own module (tools/vault/go.mod
# and go.sum, committed, so a fresh clone resolves no module graph): Vault
# v1.21.4's core, HTTP API, token store, ACL policies, identity store,
# response wrapping, sys/ (init, seal, unseal), raft and in-memory storage,
# and the AppRole and KV plugins, without the CLI, the UI, the cloud and
# database plugins and the builtin plugin registry. Cold (a fresh clone,
# empty build and module caches) on an idle 2-core machine it took 4 min 41 s
# (516 CPU-seconds, 2.8 GB of modules downloaded); the full binary (365 MB)
# about 22 minutes.
#
# OpenBao's own server module is not on the proxy; Vault v1.21.4 is the API
# OpenBao forked from (AppRole, ACL policies, KV v2 and response wrapping are
# the same). Vault v1.21.4 names a github.com/hashicorp/vault/sdk revision the
# proxy does not serve, so this assembles an equivalent sdk locally:
#   sdk@v0.21.0, with framework/backend.go's ActivationFunc changed back to
#   func(context.Context, *logical.Request) error, and
#   helper/keysutil/lock_manager.go taken from sdk@v0.25.1,
# in var/tools/vault/src/sdk (never committed); tools/vault/go.mod replaces
# the sdk with that directory by a relative path, and the full build's
# throwaway wrapper module (var/tools/vault/src/wrap) does too, replacing also
# github.com/99designs/keyring with github.com/Jeffail/keyring.
#
# Skipped when the binary and its recipe stamp (bin/vault.recipe,
# bin/vault-full.recipe) are already there; the small server's recipe names
# a hash of main.go, go.mod and go.sum, so an edit (or a full binary left at
# bin/vault by an older `make vault`) is rebuilt.
#
# The build uses both cores (-p=2; VAULT_BUILD_P overrides) at nice
# ${VAULT_NICE:-0}; on a shared machine, VAULT_NICE=10 VAULT_BUILD_P=1 keeps
# it usable.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$(pwd)

MODE=${1:-small}
case $MODE in
small | full) ;;
*)
  echo "vault: unknown mode $MODE (small or full)" >&2
  exit 2
  ;;
esac

GO=${GO:-go}
VAULT_VERSION=v1.21.4
SDK_BASE=v0.21.0
SDK_KEYSUTIL=v0.25.1
KEYRING_REPLACE=github.com/Jeffail/keyring@v1.2.3
# The sdk directory is fixed: tools/vault/go.mod names it by a relative path.
TOOLS_DIR=$ROOT/var/tools/vault
SRC=$TOOLS_DIR/src
SDK_RECIPE="sdk=$SDK_BASE+ActivationFunc-2arg+keysutil/lock_manager.go@$SDK_KEYSUTIL"
if [[ $MODE == small ]]; then
  BIN=$TOOLS_DIR/bin/vault
  STAMP=$TOOLS_DIR/bin/vault.recipe
  src_hash=$(cat tools/vault/main.go tools/vault/go.mod tools/vault/go.sum | sha256sum | cut -c1-16)
  RECIPE="server=small vault=$VAULT_VERSION $SDK_RECIPE src=$src_hash flags=-trimpath,-s,-w"
else
  BIN=$TOOLS_DIR/bin/vault-full
  STAMP=$TOOLS_DIR/bin/vault-full.recipe
  RECIPE="server=full vault=$VAULT_VERSION $SDK_RECIPE keyring=$KEYRING_REPLACE flags=-trimpath,-s,-w"
fi

if [[ -x $BIN && -f $STAMP && "$(cat "$STAMP")" == "$RECIPE" ]]; then
  echo "vault: $BIN present ($MODE, $VAULT_VERSION); not rebuilding"
  exit 0
fi

start=$(date +%s)
export GOWORK=off
export GOFLAGS="${GOFLAGS:-} -p=${VAULT_BUILD_P:-2}"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
NICE=(nice -n "${VAULT_NICE:-0}")

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

if [[ -f $SRC/sdk.recipe && "$(cat "$SRC/sdk.recipe")" == "$SDK_RECIPE" && -d $SRC/sdk ]]; then
  echo "vault: $SRC/sdk present ($SDK_RECIPE)"
else
  echo "vault: assembling github.com/hashicorp/vault/sdk from $SDK_BASE (+ keysutil/lock_manager.go from $SDK_KEYSUTIL)"
  rm -rf "$SRC/sdk" "$SRC/sdk.recipe"
  base=$(cd "$SRC" && moddir "github.com/hashicorp/vault/sdk@$SDK_BASE")
  keys=$(cd "$SRC" && moddir "github.com/hashicorp/vault/sdk@$SDK_KEYSUTIL")
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
  printf '%s\n' "$SDK_RECIPE" >"$SRC/sdk.recipe"
fi

if [[ $MODE == small ]]; then
  echo "vault: go build tools/vault (the small test server; GOFLAGS=$GOFLAGS; under 5 min cold on 2 idle cores, seconds warm)"
  (cd tools/vault && "${NICE[@]}" "$GO" build -mod=readonly -trimpath -ldflags='-s -w' -o "$BIN.tmp" .)
else
  echo "vault: wrapper module in $SRC/wrap"
  rm -rf "$SRC/wrap"
  mkdir -p "$SRC/wrap"
  cd "$SRC/wrap"
  cat >go.mod <<MOD
module registrar-otel.local/vaultbuild

go 1.25

replace github.com/hashicorp/vault/sdk => $SRC/sdk

replace github.com/99designs/keyring => ${KEYRING_REPLACE%@*} ${KEYRING_REPLACE#*@}
MOD
  cat >tools.go <<'GO'
//go:build tools

package vaultbuild

import _ "github.com/hashicorp/vault"
GO

  echo "vault: go get github.com/hashicorp/vault@$VAULT_VERSION (fills the module cache on a fresh machine)"
  "${NICE[@]}" "$GO" get "github.com/hashicorp/vault@$VAULT_VERSION"
  echo "vault: go build github.com/hashicorp/vault (GOFLAGS=$GOFLAGS; about 22 min cold on 2 idle cores)"
  "${NICE[@]}" "$GO" build -trimpath -ldflags='-s -w' -o "$BIN.tmp" github.com/hashicorp/vault
  cd "$ROOT"
fi
mv -f "$BIN.tmp" "$BIN"
printf '%s\n' "$RECIPE" >"$STAMP"
"$BIN" version
echo "vault: built $BIN ($MODE) in $(($(date +%s) - start)) s"
