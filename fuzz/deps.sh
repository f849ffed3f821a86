#!/bin/sh
# deps.sh — installs, only when missing, what the checks of fuzz/module.mk
# need beyond 'make deps': "fuzzer" (clang and its libFuzzer runtime, for
# 'make fuzz') or "valgrind" (for 'make check-valgrind'). So 'make check'
# stays lean. Usage: fuzz/deps.sh fuzzer|valgrind
set -eu

s_fuzzer_ok () {
    printf 'int LLVMFuzzerTestOneInput (const char *d, unsigned long n) { (void) d; return (int) n * 0; }\n' |
        clang -x c -fsanitize=fuzzer,address,undefined -o /dev/null - >/dev/null 2>&1
}

case "${1:-}" in
fuzzer)
    s_fuzzer_ok && exit 0
    # Debian's clang recommends the runtime (libclang-rt-N-dev) without
    # depending on it: name it, for the clang version installed.
    command -v clang >/dev/null 2>&1 || packages="clang" ;;
valgrind)
    command -v valgrind >/dev/null 2>&1 && exit 0
    packages="valgrind" ;;
*)
    echo "usage: fuzz/deps.sh fuzzer|valgrind" >&2
    exit 2 ;;
esac

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "fuzz/deps.sh: run as root to install $1" >&2; exit 1; }
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
install () {
    echo "fuzz/deps.sh: installing $*"
    $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null ||
        { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends "$@" >/dev/null; }
}
[ -n "${packages:-}" ] && install $packages
if [ "$1" = fuzzer ]; then
    install "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
    s_fuzzer_ok || { echo "fuzz/deps.sh: clang cannot build a libFuzzer harness" >&2; exit 1; }
fi
