#!/usr/bin/env bash
# Fetches Apache Kafka's jars from Maven Central, once, and prints the
# directory that holds them:
#
#   bench/kafka/fetch.sh                 the broker: org.apache.kafka:kafka_2.13
#                                        and what it needs at run time, plus the
#                                        log4j2 binding the binary distribution
#                                        ships (pom.xml beside this script), into
#                                        $STRAND_BENCH_CACHE/kafka-$KAFKA_VERSION/lib
#   bench/kafka/fetch.sh mirror-maker    MirrorMaker 2: connect-mirror and
#                                        connect-mirror-client with their run-time
#                                        dependencies (mirror-maker.xml), into
#                                        $STRAND_BENCH_CACHE/mirror-maker-$MIRROR_MAKER_VERSION/lib
#
# (default cache ~/.cache/strand-bench). bench/run.sh and .ci/run (for the
# tests of strand's tools against a real Kafka) use it.
#
# MIRROR_MAKER_VERSION defaults to 4.3.1, not the broker's 4.4.0: Maven
# Central answers "not found" for connect-mirror 4.4.0 (and 4.3.2). A 4.3
# MirrorMaker talks to 4.4 brokers through the ordinary protocol.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${STRAND_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strand-bench}
case "${1:-broker}" in
broker)
	version=${KAFKA_VERSION:-4.4.0}
	pom="$here/pom.xml" property=kafka.version what="Apache Kafka $version's broker jars"
	lib="$cache/kafka-$version/lib"
	;;
mirror-maker)
	version=${MIRROR_MAKER_VERSION:-4.3.1}
	pom="$here/mirror-maker.xml" property=mirror.version what="Apache Kafka $version's MirrorMaker 2"
	lib="$cache/mirror-maker-$version/lib"
	;;
*)
	echo "usage: $0 [broker|mirror-maker]" >&2
	exit 2
	;;
esac

if [ ! -f "$lib/.complete" ]; then
	command -v mvn >/dev/null || {
		echo "$0: mvn not found (apt-get install maven)" >&2
		exit 1
	}
	echo "fetching $what from Maven Central into $lib" >&2
	mkdir -p "$(dirname "$lib")"
	rm -rf "$lib.partial"
	# (Maven 3.8 prints colour resets even in batch mode: strip them.)
	mvn -q -B -Dstyle.color=never -f "$pom" -D"$property=$version" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.partial" 2>&1 |
		sed 's/\x1b\[[0-9;]*m//g' >&2
	rm -rf "$lib"
	mv "$lib.partial" "$lib"
	ls "$lib" >"$lib/.complete"
fi
echo "$lib"
