// Removes a two-entry folder with std::filesystem::remove_all, its only
// call into libstdc++'s filesystem operations (so that a static libstdc++
// has no other reason to pull that code in). Exit status: 0 when libstdc++'s
// function ran (2 entries removed), 3 when the call bound to fake_torch's
// copy, 1 otherwise.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int fake_torch_version();

int main() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/cxx_runtime_first_" + std::to_string(getpid());
  if (mkdir(dir.c_str(), 0700) != 0 || mkdir((dir + "/entry").c_str(), 0700) != 0) return 1;
  std::error_code ec;
  const std::uintmax_t removed = std::filesystem::remove_all(dir, ec);
  std::printf("fake_torch %d; remove_all removed %ju\n", fake_torch_version(), removed);
  struct stat st;
  const bool gone = stat(dir.c_str(), &st) != 0;
  if (!gone) {
    rmdir((dir + "/entry").c_str());
    rmdir(dir.c_str());
  }
  if (removed == 424242) {
    std::printf("the call bound to fake_torch's copy\n");
    return 3;
  }
  return removed == 2 && gone ? 0 : 1;
}
