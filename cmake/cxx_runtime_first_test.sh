#!/bin/bash
# The C++ runtime comes first in every CMake-built binary's lookup order
# (cmake/QuantdBazel.cmake, _quantd_cxx_runtime_first): builds
# testdata/cxx_runtime_first, whose binary calls std::filesystem::remove_all
# next to a stand-in LibTorch that exports its own copy, with two toolchains:
#   as-needed - the system g++ with -Wl,--as-needed (Ubuntu's default);
#   static    - a g++ that has only libstdc++.a (the GPU image's /opt/gcc),
#               emulated by a wrapper that links -static-libstdc++ and finds
#               no shared libstdc++.
# Each must call libstdc++'s function, and each must bind to the stand-in's
# copy when the runtime-first option is replaced by a no-op (the control that
# shows the test reproduces the crash's mechanism).
set -u
SRC="${TEST_SRCDIR}/quantd/cmake/testdata/cxx_runtime_first"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
command -v cmake >/dev/null || { echo "FAIL: cmake not installed (tools/install_deps.sh)"; exit 1; }
cat >"$TMP/g++-static-runtime" <<'SH'
#!/bin/sh
for a in "$@"; do
  [ "$a" = "-print-file-name=libstdc++.so" ] && { echo libstdc++.so; exit 0; }
done
exec g++ -static-libstdc++ "$@"
SH
chmod +x "$TMP/g++-static-runtime"

fail=0
# build_and_run name expected-exit cmake-args...
build_and_run() {
  local name="$1" want="$2"; shift 2
  local dir="$TMP/$name"
  rm -rf "$dir"
  if ! cmake -S "$SRC" -B "$dir" "$@" >"$dir.log" 2>&1 ||
     ! cmake --build "$dir" >>"$dir.log" 2>&1; then
    echo "FAIL $name: build failed"; tail -20 "$dir.log"; fail=1; return
  fi
  "$dir/remove_all_main" >"$dir.out" 2>&1
  local got=$?
  if [ "$got" = "$want" ]; then
    echo "ok   $name: exit $got ($(tail -1 "$dir.out"))"
  else
    echo "FAIL $name: exit $got, want $want"; cat "$dir.out"
    readelf -d "$dir/remove_all_main" | grep NEEDED
    fail=1
  fi
}
no_fix="-DQUANTD_CXX_RUNTIME_FIRST=-Wl,--as-needed"
build_and_run as-needed 0 -DCMAKE_CXX_COMPILER=g++ "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed"
build_and_run as-needed-control 3 -DCMAKE_CXX_COMPILER=g++ "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--as-needed" "$no_fix"
build_and_run static 0 "-DCMAKE_CXX_COMPILER=$TMP/g++-static-runtime"
build_and_run static-control 3 "-DCMAKE_CXX_COMPILER=$TMP/g++-static-runtime" "$no_fix"
grep -h "links libstdc++ statically" "$TMP/static.log" || { echo "FAIL static: the static toolchain was not detected"; fail=1; }
[ "$fail" = 0 ] && echo PASS
exit "$fail"
