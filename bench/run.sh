#!/usr/bin/env bash
# Strand against Apache Kafka on this machine, in one run.
#
#   bench/run.sh [full|quick|smoke] [more `strand-bench suite` flags]
#   bench/run.sh mirror [more `strand-bench mirror` flags]
#
# Fetches Apache Kafka's broker (org.apache.kafka:kafka_2.13 and everything
# it needs at run time, plus the log4j2 binding the binary distribution
# ships) from Maven Central with `mvn dependency:copy-dependencies`, once:
# the jars are cached in $STRAND_BENCH_CACHE (default ~/.cache/strand-bench),
# Maven's own downloads in ~/.m2. Builds strand and strand-bench from this work tree into the
# cache (never into the repository), then runs `strand-bench suite`, which
# formats a single-node KRaft Kafka (combined controller+broker) in a
# temporary directory, starts it and Strand in turn on free loopback ports,
# runs workloads (a)-(g) against each, alternating over several rounds, and
# writes results.md and results.json (default: bench/results/<time>-<mode>/).
# The mirror mode also fetches MirrorMaker 2 (connect-mirror and its
# dependencies) and runs `strand-bench mirror`: Strand's cluster link beside
# MirrorMaker 2, both mirroring one Kafka broker.
#
# Environment: KAFKA_VERSION (default 4.4.0), MIRROR_MAKER_VERSION (default
# 4.3.1, see kafka/fetch.sh), STRAND_BENCH_CACHE, JAVA (default: java on
# PATH; Kafka 4.x needs Java 17 or later).
set -euo pipefail

mode=${1:-full}
[ $# -gt 0 ] && shift
case "$mode" in
full | quick | smoke | mirror) ;;
*)
	echo "usage: $0 [full|quick|smoke] [strand-bench suite flags]" >&2
	echo "       $0 mirror [strand-bench mirror flags]" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
kafka_version=${KAFKA_VERSION:-4.4.0}
cache=${STRAND_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strand-bench}
java=${JAVA:-java}

if [ "$mode" != smoke ]; then
	for tool in "$java" mvn; do
		command -v "$tool" >/dev/null || {
			echo "$0: $tool not found (Kafka needs a JDK 17+ and Maven: apt-get install openjdk-17-jdk-headless maven)" >&2
			exit 1
		}
	done
	lib=$(KAFKA_VERSION="$kafka_version" STRAND_BENCH_CACHE="$cache" "$root/bench/kafka/fetch.sh")
	kafka_flags=(--kafka-lib "$lib" --kafka-version "$kafka_version" --java "$java")
	if [ "$mode" = mirror ]; then
		mm2_version=${MIRROR_MAKER_VERSION:-4.3.1}
		mm2_lib=$(MIRROR_MAKER_VERSION="$mm2_version" STRAND_BENCH_CACHE="$cache" "$root/bench/kafka/fetch.sh" mirror-maker)
		kafka_flags+=(--mm2-lib "$mm2_lib" --mm2-version "$mm2_version")
	fi
else
	kafka_flags=()
fi

mkdir -p "$cache/bin"
(cd "$root" && go build -o "$cache/bin/strand" ./cmd/strand && go build -o "$cache/bin/strand-bench" ./bench/cmd/strand-bench)

cd "$root"
if [ "$mode" = mirror ]; then
	exec "$cache/bin/strand-bench" mirror "${kafka_flags[@]}" "$@"
fi
exec "$cache/bin/strand-bench" suite --mode "$mode" "${kafka_flags[@]}" "$@"
