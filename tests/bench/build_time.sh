#!/usr/bin/env bash
# Build time of a crate generated with humus-build against the same crate
# generated with plain tonic-prost-build (fed by protox, as a build without
# a system protoc does), for the same .proto files: Debian's grpc-proto set
# (grpc/testing/test.proto and its imports, health, reflection, channelz,
# helloworld), or with `googleapis` a googleapis subset (the folders of
# build-support/tests/googleapis.rs: 166 services, 1433 methods) from npm's
# google-proto-files unpacked at target/google-proto-files/package (as
# .ci/run does).
#
# Each timed build is a clean build of that crate alone, dependencies
# already built: compile its build.rs, run it, compile the generated code.
# Runs alternate between the two crates; the figure is the median.
#
#   tests/bench/build_time.sh [runs] [grpc-proto|googleapis]
#                                  (default 5 runs per crate, grpc-proto)
#
# The first run builds the dependencies once into
# target/bench-codegen/target (a few minutes on two cores). The googleapis
# set takes minutes per build: too long for CI, which runs
# build-support/tests/googleapis.rs over it instead (generation only).
set -euo pipefail

runs="${1:-5}"
set_name="${2:-grpc-proto}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
work="$repo/target/bench-codegen"
[ "$set_name" = grpc-proto ] || work="$work-$set_name"
# One target folder for both sets: the dependencies are built once.
target="$repo/target/bench-codegen/target"

mkdir -p "$work/humus-gen/src" "$work/tonic-gen/src"
cat >"$work/Cargo.toml" <<EOF
[workspace]
resolver = "3"
members = ["humus-gen", "tonic-gen"]
EOF
[ -f "$work/Cargo.lock" ] || cp "$repo/Cargo.lock" "$work/Cargo.lock"

case "$set_name" in
grpc-proto)
  protos="/usr/share/grpc-proto"
  [ -f "$protos/grpc/testing/test.proto" ] || {
    echo "install Debian's grpc-proto package first" >&2
    exit 1
  }
  files='&[
        "grpc/testing/test.proto",
        "grpc/health/v1/health.proto",
        "grpc/reflection/v1/reflection.proto",
        "grpc/channelz/v1/channelz.proto",
        "grpc/examples/helloworld.proto",
    ]'
  ;;
googleapis)
  tree="${HUMUS_GOOGLEAPIS:-$repo/target/google-proto-files/package}"
  [ -f "$tree/google/longrunning/operations.proto" ] || {
    echo "unpack npm's google-proto-files at $tree first (see .ci/run)" >&2
    exit 1
  }
  # The tree's google/protobuf is newer than protox's parser reads; the
  # well-known types come from protox (and prost-types) instead.
  protos="$work/include"
  mkdir -p "$protos/google"
  for entry in "$tree"/google/*; do
    [ "$(basename "$entry")" = protobuf ] || ln -sfn "$entry" "$protos/google/"
  done
  # The folders of build-support/tests/googleapis.rs.
  files="&["
  for folder in google/cloud/compute/v1 google/longrunning google/iam/v1 \
    google/pubsub/v1 google/spanner/v1 google/firestore/v1 google/bigtable/v2 \
    google/bigtable/admin/v2 google/logging/v2 google/cloud/kms/v1 \
    google/cloud/secretmanager/v1 google/storage/v2 google/cloud/tasks/v2 \
    google/cloud/dialogflow/v2; do
    for file in "$protos/$folder"/*.proto; do
      files="$files\"${file#"$protos"/}\", "
    done
  done
  files="$files]"
  ;;
*)
  echo "unknown set $set_name: grpc-proto or googleapis" >&2
  exit 1
  ;;
esac
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
export CARGO_TARGET_DIR="$target" CARGO_TERM_COLOR=never
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
