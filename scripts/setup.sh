#!/usr/bin/env bash
# Set up everything ktrial needs on a fresh Debian machine (run as root for the
# Debian packages; the rest works as any user):
#   - Debian packages: iproute2/iptables (namespaces, partitions), stress-ng (memory
#     balloon), a JDK and Maven (Kafka brokers from Maven Central), procps, chromium
#     (headless check of the HTML report), docker.io and debootstrap (the docker
#     backend builds its image locally), openssh-server (sshd for the test hosts of
#     the ssh backend; the daemon is not started)
#   - the Python environment in .venv with ktrial installed editable
#   - the Kafka jars from Maven Central into ~/.cache/ktrial/kafka/<version>/lib
#   - the Toxiproxy server from the Go module proxy into ~/.cache/ktrial/bin
# Idempotent: every step is skipped when its result is already present.
#
# Quiet: it prints one progress line per step. What the tools say (apt, pip, Maven, Go)
# goes to .setup.log; when a step fails, the log's tail is shown with the step's name.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
LOG="$here/.setup.log"
: >"$LOG"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
# step NAME CMD...: run CMD with its output in the log; on failure show the log's tail.
step() {
  local name=$1
  shift
  printf '\n=== %s: %s\n' "$name" "$*" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    log "FAILED: $name (last lines of $LOG below)"
    tail -n 40 "$LOG" >&2
    exit 1
  fi
}

# 1. Debian packages
need_pkgs=()
command -v ip >/dev/null || need_pkgs+=(iproute2)
command -v iptables >/dev/null || need_pkgs+=(iptables)
command -v stress-ng >/dev/null || need_pkgs+=(stress-ng)
command -v java >/dev/null || need_pkgs+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_pkgs+=(maven)
command -v pgrep >/dev/null || need_pkgs+=(procps)
command -v chromium >/dev/null || need_pkgs+=(chromium)  # report screenshot test
command -v go >/dev/null || [ -x /usr/local/go/bin/go ] || need_pkgs+=(golang-go)
command -v dockerd >/dev/null || need_pkgs+=(docker.io)        # --cluster docker
command -v debootstrap >/dev/null || need_pkgs+=(debootstrap)  # its locally built image
[ -x /usr/sbin/sshd ] || need_pkgs+=(openssh-server)            # the SSH backend's test hosts
python3 -c 'import venv, ensurepip' 2>/dev/null || need_pkgs+=(python3-venv)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  log "installing Debian packages: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  step "apt-get update" $SUDO apt-get update -qq
  step "apt-get install" env DEBIAN_FRONTEND=noninteractive \
    $SUDO apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}"
fi

# 2. Python environment
if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  step "python3 -m venv" python3 -m venv .venv
fi
# Reinstall when pyproject.toml changed since the last install (new dependencies).
stamp=.venv/.ktrial-pyproject.sha256
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] \
   || ! .venv/bin/python -c 'import ktrial, confluent_kafka, hypothesis' 2>/dev/null; then
  log "installing ktrial and its dependencies into .venv"
  step "pip upgrade" .venv/bin/pip install -q -U pip
  step "pip install" .venv/bin/pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi

# 3. Kafka jars (Maven Central)
step "Kafka jars from Maven Central" .venv/bin/ktrial cluster install
log "$(tail -n 1 "$LOG")"

# 4. Toxiproxy server (Go module proxy)
toxi="${KTRIAL_CACHE:-$HOME/.cache/ktrial}/bin/toxiproxy-server"
if [ ! -x "$toxi" ]; then
  log "building Toxiproxy from the Go module proxy"
  export PATH="$PATH:/usr/local/go/bin"
  tmp=$(mktemp -d)
  step "go install toxiproxy" env GOBIN="$tmp" go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.12.0
  mkdir -p "$(dirname "$toxi")"
  mv "$tmp/server" "$toxi"
  rm -rf "$tmp"
fi
# 5. kfake (franz-go's in-memory Kafka, `--cluster kfake`): systems/kfake built with Go,
# rebuilt only when its sources change (their hash is kept beside the binary)
kfake="${KTRIAL_CACHE:-$HOME/.cache/ktrial}/bin/ktrial-kfake"
kfake_want=$(cat systems/kfake/go.mod systems/kfake/go.sum systems/kfake/*.go | sha256sum | cut -d' ' -f1)
if [ ! -x "$kfake" ] || [ "$(cat "$kfake.sha256" 2>/dev/null)" != "$kfake_want" ]; then
  log "building kfake (systems/kfake) from the Go module proxy"
  mkdir -p "$(dirname "$kfake")"
  step "go build kfake" env PATH="$PATH:/usr/local/go/bin" \
    sh -c 'cd systems/kfake && go build -o "$1.tmp" . && mv "$1.tmp" "$1"' sh "$kfake"
  echo "$kfake_want" >"$kfake.sha256"
fi
# 6. Driver workers (docs/drivers.md) and the load generator (workers/loadgen,
# docs/load.md): workers/<name> built with Go into workers/bin/ktrial-<name>
# (gitignored), rebuilt only when its sources change (their hash is kept beside it)
for src in workers/*/; do
  [ -f "${src}go.mod" ] || continue
  name=$(basename "$src")
  bin="workers/bin/ktrial-$name"
  want=$(cat "$src"go.mod "$src"go.sum "$src"*.go | sha256sum | cut -d' ' -f1)
  if [ ! -x "$bin" ] || [ "$(cat "$bin.sha256" 2>/dev/null)" != "$want" ]; then
    log "building ktrial-$name ($src) from the Go module proxy"
    mkdir -p workers/bin
    step "go build $name worker" env PATH="$PATH:/usr/local/go/bin" \
      sh -c 'cd "$1" && go build -o "$2.tmp" . && mv "$2.tmp" "$2"' sh "$src" "$here/$bin"
    echo "$want" >"$bin.sha256"
  fi
done
# 7. The Java driver worker (workers/java, docs/drivers.md): built with Maven from Maven
# Central into workers/bin/java (gitignored) plus its launcher workers/bin/ktrial-java,
# again only when its sources change
java_want=$(cat workers/java/pom.xml workers/java/ktrial-java.sh $(find workers/java/src -name '*.java' | sort) | sha256sum | cut -d' ' -f1)
if [ ! -x workers/bin/ktrial-java ] || [ "$(cat workers/bin/ktrial-java.sha256 2>/dev/null)" != "$java_want" ]; then
  log "building ktrial-java (workers/java) with Maven"
  step "mvn package java worker" sh -c 'cd workers/java && mvn -q -B package'
  # a class-data-sharing archive of the classes a worker loads: a faster JVM start. The
  # jar's absolute path, as the launcher gives it: the JVM uses the archive only when the
  # class path matches the recorded one (a relative one matched only from this folder)
  rm -f workers/bin/java/ktrial-java.jsa
  step "java worker CDS archive" java -XX:ArchiveClassesAtExit=workers/bin/java/ktrial-java.jsa \
    -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -jar "$here/workers/bin/java/ktrial-java.jar" --train
  install -m 755 workers/java/ktrial-java.sh workers/bin/ktrial-java
  echo "$java_want" >workers/bin/ktrial-java.sha256
fi
log "ready (tool output: $LOG)"
