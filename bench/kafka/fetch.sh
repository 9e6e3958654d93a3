#!/usr/bin/env bash
# Fetches Apache Kafka's broker jars (org.apache.kafka:kafka_2.13 and what it
# needs at run time, plus the log4j2 binding the binary distribution ships)
# from Maven Central with pom.xml beside this script, once, and prints the
# directory that holds them: $STRAND_BENCH_CACHE/kafka-$KAFKA_VERSION/lib
# (default ~/.cache/strand-bench/kafka-4.4.0/lib). bench/run.sh and .ci/run
# (for the tests of strand's tools against a real Kafka) use it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kafka_version=${KAFKA_VERSION:-4.4.0}
cache=${STRAND_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strand-bench}
lib="$cache/kafka-$kafka_version/lib"

if [ ! -f "$lib/.complete" ]; then
	command -v mvn >/dev/null || {
		echo "$0: mvn not found (apt-get install maven)" >&2
		exit 1
	}
	echo "fetching Apache Kafka $kafka_version's broker jars from Maven Central into $lib" >&2
	mkdir -p "$(dirname "$lib")"
	rm -rf "$lib.partial"
	# (Maven 3.8 prints colour resets even in batch mode: strip them.)
	mvn -q -B -Dstyle.color=never -f "$here/pom.xml" -Dkafka.version="$kafka_version" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.partial" 2>&1 |
		sed 's/\x1b\[[0-9;]*m//g' >&2
	rm -rf "$lib"
	mv "$lib.partial" "$lib"
	ls "$lib" >"$lib/.complete"
fi
echo "$lib"
