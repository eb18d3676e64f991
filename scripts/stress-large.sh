#!/usr/bin/env bash
# The large stress runs of tests/stress.rs (ignored by default): 10 million events over 100 000
# objects with 64 handlers, and 2 million JSON events of mixed sizes. Prints each run's report
# line and the wall time. Usage: scripts/stress-large.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
time cargo test --release --test stress -- --ignored --nocapture --test-threads 1 "$@"
