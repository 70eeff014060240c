// InstallCrashHandler: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT, writes
// "<program>: fatal signal N" and a symbolised backtrace to stderr, then
// re-raises the signal so the exit status and core dump are unchanged. A
// crash inside LibTorch or a vendor library is then diagnosable from the
// job's log alone (GPU hosts often have no debugger).
#ifndef QUANTD_WORKER_COMMON_CRASH_HANDLER_H_
#define QUANTD_WORKER_COMMON_CRASH_HANDLER_H_

namespace quantd {

// `program` must outlive the process (a string literal).
void InstallCrashHandler(const char* program);

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_CRASH_HANDLER_H_
