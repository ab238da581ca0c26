#!/usr/bin/env bash
# kafka-cli.sh runs one of Apache Kafka's command-line tools against the
# local broker, by the name of its script in Kafka's distribution:
#
#   localstack/kafka/kafka-cli.sh topics --create --topic orders --partitions 4
#   localstack/kafka/kafka-cli.sh console-producer --topic orders
#   localstack/kafka/kafka-cli.sh console-consumer --topic orders.dlt --from-beginning --property print.headers=true
#   localstack/kafka/kafka-cli.sh consumer-groups --describe --group sluice-worker
#   localstack/kafka/kafka-cli.sh get-offsets --topic orders
#
# --bootstrap-server defaults to $SLUICE_KAFKA_BROKERS, else 127.0.0.1:9092.
# The jars (localstack/kafka/tools/pom.xml, the broker's version) are in
# .cache/kafka-tools; `localstack/stack/up.sh kafka` fetches them, and so
# does the first run of this script.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
libs=$root/.cache/kafka-tools
pom=$root/localstack/kafka/tools/pom.xml

usage() {
	sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	echo "tools: topics console-producer console-consumer consumer-groups get-offsets"
}

[[ $# -ge 1 ]] || {
	usage >&2
	exit 2
}
case $1 in
topics) class=org.apache.kafka.tools.TopicCommand ;;
console-producer) class=org.apache.kafka.tools.ConsoleProducer ;;
console-consumer) class=org.apache.kafka.tools.consumer.ConsoleConsumer ;;
consumer-groups) class=org.apache.kafka.tools.consumer.group.ConsumerGroupCommand ;;
get-offsets) class=org.apache.kafka.tools.GetOffsetShell ;;
-h | --help | help)
	usage
	exit 0
	;;
*)
	echo "kafka-cli.sh: unknown tool '$1'" >&2
	usage >&2
	exit 2
	;;
esac
shift

sum=$(sha256sum "$pom" | cut -d' ' -f1)
if [[ ! -f $libs/.pom.sha256 || $(<"$libs/.pom.sha256") != "$sum" ]]; then
	echo "kafka-cli.sh: fetching Kafka's tools with Maven into $libs" >&2
	rm -rf "$libs.tmp"
	mvn -q -B -Dstyle.color=never -f "$pom" dependency:copy-dependencies -DoutputDirectory="$libs.tmp" >&2
	echo "$sum" >"$libs.tmp/.pom.sha256"
	rm -rf "$libs"
	mv "$libs.tmp" "$libs"
fi

args=("$@")
if [[ " $* " != *" --bootstrap-server "* ]]; then
	args=(--bootstrap-server "${SLUICE_KAFKA_BROKERS:-127.0.0.1:9092}" "${args[@]}")
fi
exec java -Xmx256m -Dlog4j2.configurationFile="$root/localstack/kafka/tools/log4j2.properties" \
	-cp "$libs/*" "$class" "${args[@]}"
