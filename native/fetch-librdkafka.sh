#!/usr/bin/env bash
# Make DEST: rdkafka-sys 4.10.0 (crates.io) with its bundled librdkafka 2.12.1 replaced by librdkafka 2.15.1,
# taken from the npm package @confluentinc/kafka-javascript@1.10.1 (deps/librdkafka). Both archives are checked by sha256.
# Why: librdkafka before 2.13.2 moves a consumer's position past error events too (librdkafka issue #4844), and the
# newest rdkafka-sys bundles 2.12.1; no package registry reachable from the build serves 2.16's source (the
# version confluent-kafka's wheel has), npm serves 2.15.1. native/Cargo.toml patches rdkafka-sys with DEST.
set -euo pipefail
DEST=${1:?usage: prepare-rdkafka-sys.sh DEST}
CRATE=rdkafka-sys-4.10.0+2.12.1
CRATE_SHA256=e234cf318915c1059d4921ef7f75616b5219b10b46e9f3a511a15eb4b56a3f77   # = Cargo.lock's checksum
NPM_PKG=@confluentinc/kafka-javascript@1.10.1
NPM_TGZ=confluentinc-kafka-javascript-1.10.1.tgz
NPM_SHA256=ada7d703bb1d3237e2292bfabf438d663b6160c9f1ac2a2406b5dc4257c81b66
LIBRDKAFKA=2.15.1
[ -f "$DEST/.librdkafka-$LIBRDKAFKA" ] && exit 0
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
curl -fsSL --retry 3 -o "$WORK/$CRATE.crate" "https://static.crates.io/crates/rdkafka-sys/$CRATE.crate"
(cd "$WORK" && npm pack --silent "$NPM_PKG" >/dev/null)
echo "$CRATE_SHA256  $WORK/$CRATE.crate" | sha256sum -c --quiet
echo "$NPM_SHA256  $WORK/$NPM_TGZ" | sha256sum -c --quiet
tar -xzf "$WORK/$CRATE.crate" -C "$WORK"
tar -xzf "$WORK/$NPM_TGZ" -C "$WORK" package/deps/librdkafka
grep -q "define RD_KAFKA_VERSION 0x020f01ff" "$WORK/package/deps/librdkafka/src/rdkafka.h"
rm -rf "$WORK/$CRATE/librdkafka"
mv "$WORK/package/deps/librdkafka" "$WORK/$CRATE/librdkafka"
# The +metadata names the bundled librdkafka (rdkafka-sys's own tests/version_check.rs compares the two).
sed -i "s/^version = \"4.10.0+2.12.1\"/version = \"4.10.0+$LIBRDKAFKA\"/" "$WORK/$CRATE/Cargo.toml"
rm -rf "$DEST"; mkdir -p "$(dirname "$DEST")"; mv "$WORK/$CRATE" "$DEST"
touch "$DEST/.librdkafka-$LIBRDKAFKA"
