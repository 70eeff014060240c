#include "worker/common/crash_handler.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>

namespace quantd {
namespace {

const char* g_program = "quantd";

void WriteString(const char* s) {
  ssize_t ignored = write(STDERR_FILENO, s, strlen(s));
  (void)ignored;
}

// Only async-signal-safe calls (write, backtrace_symbols_fd), then the
// default action.
void OnFatalSignal(int sig) {
  char number[12];
  int n = 0;
  for (int v = sig; v > 0 && n < 10; v /= 10) number[n++] = static_cast<char>('0' + v % 10);
  char text[12];
  for (int i = 0; i < n; ++i) text[i] = number[n - 1 - i];
  text[n] = '\0';
  WriteString(g_program);
  WriteString(": fatal signal ");
  WriteString(text);
  WriteString(" (");
  WriteString(strsignal(sig));
  WriteString("); backtrace:\n");
  void* frames[64];
  const int depth = backtrace(frames, 64);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void InstallCrashHandler(const char* program) {
  g_program = program;
  // backtrace() loads libgcc on first use, which is not safe inside the
  // handler: warm it up now.
  void* warm[1];
  backtrace(warm, 1);
  struct sigaction sa = {};
  sa.sa_handler = OnFatalSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace quantd
