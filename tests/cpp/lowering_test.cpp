// Tests for the lowering rules (csrc/lowering/rules): every rule is lowered for representative argument types and
// dtypes and the program is compiled and run on the PJRT plugin named by $TORCH_TPU_PJRT_PLUGIN; a set of calls is
// also checked against host-computed numbers. Torch-free and self-contained (no gtest).
//
// Every registered rule must be lowered by some case here: a rule no case reaches fails the test unless
// kNotLowered lists it with the reason. New rules get a row in kCases (coverageCases, lowering_test_cases.cpp) or
// a sweep in compileSweep (lowering_test_sweep.cpp); numeric checks: lowering_test_numeric.cpp; shared helpers:
// lowering_test_util.h. One executable: the cases run once, in the order main() calls the parts.
//
//   lowering_test            run everything
//   lowering_test --numeric  only the numeric checks (no coverage requirement)
//   lowering_test --list     print the registered rule names
//   LOWERING_TEST_PRINT=1    print every program
//   LOWERING_TEST_ONLY=str   run only the cases whose name contains str (no coverage requirement)
#include <map>
#include <string>

#include "lowering_test_util.h"

// Rules this test does not lower, each with the reason (where else it is tested). A rule that no case lowers and
// that is not listed here fails the test, and so does a listed rule that a case does lower.
static const std::map<std::string, std::string> kNotLowered = {
};

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--list") {
    for (const std::string& n : registry().names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  std::string plugin = runtime::Client::pluginPathFromEnv();
  if (plugin.empty()) {
    std::fprintf(stderr, "TORCH_TPU_PJRT_PLUGIN is not set\n");
    return 1;
  }
  runtime::Client::init(plugin);
  g_print = std::getenv("LOWERING_TEST_PRINT") != nullptr;
  if (const char* only = std::getenv("LOWERING_TEST_ONLY")) g_only = only;
  g_print_passes = false;  // thousands of cases: failures only
  bool numeric_only = argc > 1 && std::string(argv[1]) == "--numeric";
  numericTests();
  groupedMMTests();
  complexLinalgTests();
  if (!numeric_only) {
    compileSweep();
    coverageCases();
  }
  // Every registered rule is lowered by some case, or listed in kNotLowered with its reason.
  if (!numeric_only && g_only.empty()) {
    std::vector<std::string> missing;
    for (const std::string& n : registry().names())
      if (!g_covered.count(n) && !kNotLowered.count(n)) missing.push_back(n);
    if (!missing.empty()) {
      std::printf("[FAIL] rules no case lowers (%zu): add a row to kCases or list them in kNotLowered with the reason:",
                  missing.size());
      for (auto& n : missing) std::printf(" %s", n.c_str());
      std::printf("\n");
      g_failures += int(missing.size());
    }
    for (const auto& [n, why] : kNotLowered) {
      if (!registry().find(n)) {
        std::printf("[FAIL] kNotLowered lists %s, which has no rule\n", n.c_str());
        ++g_failures;
      } else if (g_covered.count(n)) {
        std::printf("[FAIL] kNotLowered lists %s, which a case lowers: remove it from the list\n", n.c_str());
        ++g_failures;
      }
    }
  }
  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("ALL PASSED (%zu rules exercised)\n", g_covered.size());
  return 0;
}
