#!/usr/bin/env bash
# Builds the Java module with the JDK and Debian's JUnit 5 (no Maven, no registry) into build/,
# and runs its tests with the JUnit console launcher.
#
#   clients/java/build.sh                 compiles build/apns-mock-client.jar (the JDK only, plus
#                                         JUnit 5's API for io.apnsmock.junit5)
#   clients/java/build.sh test [ARGS]     then compiles and runs the tests; ARGS go to the console
#                                         launcher (e.g. --exclude-tag container: only the tests
#                                         that need no container engine)
#
# The container tests start apns-mock's image (APNS_MOCK_IMAGE, default apns-mock:local) through
# the engine they find: DOCKER_HOST, else /var/run/docker.sock, else podman's rootful or rootless
# socket. Needs a JDK ≥ 17 and, for the tests and the extension, Debian's junit5 (the JUnit jars
# come from /usr/share/java, or JUNIT_JARS, a classpath).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/build
junit=${JUNIT_JARS:-/usr/share/java/junit-platform-console-standalone.jar:/usr/share/java/opentest4j.jar}
for jar in ${junit//:/ }; do
    [ -f "$jar" ] || { echo "clients/java/build.sh: no $jar: install Debian's junit5 (apt-get install junit5) or set JUNIT_JARS" >&2; exit 1; }
done
command -v javac >/dev/null || { echo "clients/java/build.sh: no javac: install a JDK ≥ 17 (apt-get install openjdk-17-jdk-headless)" >&2; exit 1; }

rm -rf "$out/classes" "$out/test-classes"
mkdir -p "$out/classes" "$out/test-classes"
find "$here/src/main/java" -name '*.java' >"$out/sources.txt"
javac --release 17 -Xlint:all,-serial -Werror -encoding UTF-8 -cp "$junit" -d "$out/classes" @"$out/sources.txt"
jar --create --file "$out/apns-mock-client.jar" -C "$out/classes" .
echo "clients/java/build.sh: built $out/apns-mock-client.jar" >&2

[ "${1:-}" = test ] || exit 0
shift
find "$here/src/test/java" -name '*.java' >"$out/test-sources.txt"
javac --release 17 -encoding UTF-8 -cp "$out/classes:$junit" -d "$out/test-classes" @"$out/test-sources.txt"
log=$out/test-output.txt
status=0
java -jar "${junit%%:*}" -cp "$out/classes:$out/test-classes:$junit" --scan-classpath "$out/test-classes" \
    --disable-banner --details=tree --disable-ansi-colors "$@" 2>&1 | tee "$log" || status=$?
passed=$(sed -n 's/^\[ *\([0-9]*\) tests successful *\]$/\1/p' "$log")
failed=$(sed -n 's/^\[ *\([0-9]*\) tests failed *\]$/\1/p' "$log")
skipped=$(sed -n 's/^\[ *\([0-9]*\) tests skipped *\]$/\1/p' "$log")
echo "java: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
exit $status
