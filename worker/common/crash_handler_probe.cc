// Crashes on purpose (a null write) after installing the crash handler, for
// crash_handler_test.sh.
#include "worker/common/crash_handler.h"

#include <cstdio>

// Exported (not in an anonymous namespace) so -rdynamic puts it in the
// dynamic symbol table that backtrace_symbols_fd reads.
__attribute__((noinline)) void CrashInAFunctionWithAName(volatile int* p) { *p = 42; }

int main() {
  quantd::InstallCrashHandler("crash_handler_probe");
  std::fprintf(stderr, "about to crash\n");
  CrashInAFunctionWithAName(nullptr);
  return 0;
}
