// Where the tests find the modules make_test_modules.py builds
// (the :test_modules genrule's output directory in the runfiles).
#ifndef QUANTD_WORKER_TORCHSCRIPT_TESTDATA_TEST_MODULES_H_
#define QUANTD_WORKER_TORCHSCRIPT_TESTDATA_TEST_MODULES_H_

#include <cstdlib>
#include <string>

namespace quantd::torchscript {

inline std::string TestModule(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/" + std::getenv("TEST_WORKSPACE") +
         "/worker/torchscript/testdata/modules/" + name;
}

}  // namespace quantd::torchscript

#endif  // QUANTD_WORKER_TORCHSCRIPT_TESTDATA_TEST_MODULES_H_
