#!/usr/bin/env bash
# Runs every fuzz target for a fixed time each and prints a table of exec counts.
#
#   fuzz/run.sh [SECONDS]        # default 60 s per target
#
# Works on the stable toolchain: cargo-fuzz passes nightly-only flags, which RUSTC_BOOTSTRAP=1
# lets a stable rustc accept. Installs cargo-fuzz (crates.io, --locked) if it is missing.
# Environment:
#   FUZZ_TARGET_DIR   cargo target dir of the fuzz build (default: fuzz/target)
#   FUZZ_SANITIZER    none (default) or address: our code is `forbid(unsafe_code)`, so the
#                     fuzz build uses coverage + debug assertions (overflow checks) without ASan
#   FUZZ_GEN_SEEDS=1  regenerate fuzz/corpus/* from ../shared/fixtures first (a plain release
#                     build of the fuzz crate's seed generator)
#   FUZZ_TARGETS      space-separated subset of targets
# Corpora: fuzz/corpus/<target> (generated, grows, not committed) plus the committed seeds in
# fuzz/seeds/<target>. Crashes land in fuzz/artifacts/<target>; the script exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
export RUSTC_BOOTSTRAP=1
export CARGO_TERM_COLOR=never
target_dir="${FUZZ_TARGET_DIR:-fuzz/target}"
sanitizer="${FUZZ_SANITIZER:-none}"
flags=(-s "$sanitizer" --debug-assertions --target-dir "$target_dir")

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

# Every fuzz_targets/*.rs (cargo fuzz list would include the seed generator).
targets="${FUZZ_TARGETS:-$(cd fuzz/fuzz_targets && ls -- *.rs | sed "s/\.rs$//")}"

if [[ "${FUZZ_GEN_SEEDS:-0}" == 1 ]]; then
  echo "== generating seed corpora from ../shared/fixtures"
  CARGO_TARGET_DIR="$target_dir" cargo run --release --manifest-path fuzz/Cargo.toml \
    --features gen --bin gen_seeds
fi

echo "== cargo fuzz build (${flags[*]})"
start=$(date +%s)
cargo fuzz build "${flags[@]}"
echo "build: $(( $(date +%s) - start )) s"

logs=$(mktemp -d)
failed=()
for t in $targets; do
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  echo "== $t: ${secs} s"
  dict=()
  case "$t" in json_object | watch_json | list_json) dict=(-dict=fuzz/json.dict) ;; esac
  if ! cargo fuzz run "${flags[@]}" "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
      -max_total_time="$secs" -timeout=10 -print_final_stats=1 "${dict[@]}" \
      >"$logs/$t.log" 2>&1; then
    failed+=("$t")
    tail -n 40 "$logs/$t.log"
  fi
done

printf '\n%-16s %12s %10s %8s %s\n' target execs exec/s corpus result
for t in $targets; do
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$logs/$t.log" | grep -o '[0-9]*$' || true)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$logs/$t.log" | grep -o '[0-9]*$' || true)
  corpus=$(find "fuzz/corpus/$t" -type f | wc -l)
  result=ok
  for f in "${failed[@]}"; do [[ "$f" == "$t" ]] && result="CRASH (see fuzz/artifacts/$t, log $logs/$t.log)"; done
  printf '%-16s %12s %10s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
[[ ${#failed[@]} -eq 0 ]]
