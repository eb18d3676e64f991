#!/usr/bin/env bash
# Builds every Go program under interop/ (one module per directory with a go.mod) into
# interop/bin/<dir>. Go's module and build caches make a repeat run take seconds; a cold one
# (kube-apiserver from the k8s.io/kubernetes module) about 10 minutes on 2 cores.
# Usage: interop/build.sh [name ...]   (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$here/bin"
if [ $# -eq 0 ]; then
  set -- $(cd "$here" && for d in */go.mod; do dirname "$d"; done)
fi
for name in "$@"; do
  start=$(date +%s)
  (cd "$here/$name" && go build -o "$here/bin/$name" .)
  echo "interop/bin/$name built in $(( $(date +%s) - start )) s"
done
