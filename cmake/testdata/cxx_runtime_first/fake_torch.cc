// A stand-in for a pip LibTorch: it exports a libstdc++ function under
// libstdc++'s own name, with a result no real call gives.
#include <cstdint>
#include <filesystem>
#include <system_error>

int fake_torch_version() { return 211; }

namespace std::filesystem {
uintmax_t remove_all(const path&, error_code& ec) {
  ec.clear();
  return 424242;
}
}  // namespace std::filesystem
