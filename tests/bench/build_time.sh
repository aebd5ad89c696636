#!/usr/bin/env bash
# Build time of a crate generated with humus-build against the same crate
# generated with plain tonic-prost-build (fed by protox, as a build without
# a system protoc does), for the same .proto files: Debian's grpc-proto set
# (grpc/testing/test.proto and its imports, health, reflection, channelz,
# helloworld).
#
# Each timed build is a clean build of that crate alone, dependencies
# already built: compile its build.rs, run it, compile the generated code.
# Runs alternate between the two crates; the figure is the median.
#
#   tests/bench/build_time.sh [runs]      (default 5 runs per crate)
#
# The first run builds the dependencies once into
# target/bench-codegen/target (a few minutes on two cores).
set -euo pipefail

runs="${1:-5}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$repo/target/bench-codegen"
protos="/usr/share/grpc-proto"
[ -f "$protos/grpc/testing/test.proto" ] || {
  echo "install Debian's grpc-proto package first" >&2
  exit 1
}

mkdir -p "$work/humus-gen/src" "$work/tonic-gen/src"
cat >"$work/Cargo.toml" <<EOF
[workspace]
resolver = "3"
members = ["humus-gen", "tonic-gen"]
EOF
[ -f "$work/Cargo.lock" ] || cp "$repo/Cargo.lock" "$work/Cargo.lock"

files='&[
        "grpc/testing/test.proto",
        "grpc/health/v1/health.proto",
        "grpc/reflection/v1/reflection.proto",
        "grpc/channelz/v1/channelz.proto",
        "grpc/examples/helloworld.proto",
    ]'
lib='#![allow(missing_docs, clippy::all)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/all.rs"));
}'

cat >"$work/humus-gen/Cargo.toml" <<EOF
[package]
name = "humus-gen"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
humus = { path = "$repo/runtime" }
tonic = { version = "0.14", default-features = false, features = ["transport", "codegen", "router", "server", "channel"] }
tonic-prost = "0.14"
prost = "0.14"
prost-types = "0.14"

[build-dependencies]
humus-build = { path = "$repo/build-support" }
EOF
cat >"$work/humus-gen/build.rs" <<EOF
fn main() -> Result<(), humus_build::Error> {
    humus_build::configure()
        .include_file("all.rs")
        .compile_protos($files, &["$protos"])
}
EOF
echo "$lib" >"$work/humus-gen/src/lib.rs"

cat >"$work/tonic-gen/Cargo.toml" <<EOF
[package]
name = "tonic-gen"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
humus = { path = "$repo/runtime" }
tonic = { version = "0.14", default-features = false, features = ["transport", "codegen", "router", "server", "channel"] }
tonic-prost = "0.14"
prost = "0.14"
prost-types = "0.14"

[build-dependencies]
protox = "0.10"
tonic-prost-build = "0.14"
EOF
cat >"$work/tonic-gen/build.rs" <<EOF
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile($files, &["$protos"])?;
    tonic_prost_build::configure()
        .include_file("all.rs")
        .compile_fds(fds)?;
    Ok(())
}
EOF
echo "$lib" >"$work/tonic-gen/src/lib.rs"

cd "$work"
export CARGO_TARGET_DIR="$work/target" CARGO_TERM_COLOR=never
echo "warming up (dependencies)..." >&2
cargo build --offline -q -p humus-gen -p tonic-gen

# Prints "wall cpu" seconds of a clean build of crate $1 (cpu: user + sys
# of cargo and every rustc and build script it ran; less sensitive than the
# wall clock to other work on the machine).
time_build() {
  cargo clean --offline -q -p "$1"
  /usr/bin/time -f "%e %U %S" -o "$work/time.txt" cargo build --offline -q -p "$1"
  awk '{printf "%.3f %.3f\n", $1, $2 + $3}' "$work/time.txt"
}

humus_wall=() humus_cpu=() tonic_wall=() tonic_cpu=()
for _ in $(seq "$runs"); do
  read -r wall cpu < <(time_build tonic-gen)
  tonic_wall+=("$wall") tonic_cpu+=("$cpu")
  read -r wall cpu < <(time_build humus-gen)
  humus_wall+=("$wall") humus_cpu+=("$cpu")
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
report() {
  local what=$1 tonic humus
  shift
  tonic=$(median $1)
  humus=$(median $2)
  printf '%-4s median: tonic-prost-build %.2f s, humus-build %.2f s, ratio %.3f\n' \
    "$what" "$tonic" "$humus" "$(echo "$humus / $tonic" | bc -l)"
}
echo "tonic-prost-build wall (s): ${tonic_wall[*]}"
echo "humus-build wall (s):       ${humus_wall[*]}"
echo "tonic-prost-build cpu (s):  ${tonic_cpu[*]}"
echo "humus-build cpu (s):        ${humus_cpu[*]}"
report wall "${tonic_wall[*]}" "${humus_wall[*]}"
report cpu "${tonic_cpu[*]}" "${humus_cpu[*]}"
