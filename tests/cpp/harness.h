// The C++ tests' harness, shared by every tests/cpp/*_test.cpp: CHECK, named test cases, the failure count, and
// small text helpers. Header-only; the globals are inline variables, so a test executable built from several
// .cpp files (lowering_test) shares one count.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>

inline int g_failures = 0;          // failed CHECKs (and unexpected exceptions) so far
inline std::string g_only;          // non-empty: test() runs only the cases whose name contains it
inline bool g_print_passes = true;  // false: test() prints failing cases only

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                                 \
    }                                                                               \
  } while (0)

// Runs one named case: an exception out of it is a failure; prints [PASS]/[FAIL] with the name.
inline void test(const std::string& name, const std::function<void()>& fn) {
  if (!g_only.empty() && name.find(g_only) == std::string::npos) return;
  int before = g_failures;
  try {
    fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[%s] unexpected exception: %s\n", name.c_str(), e.what());
    ++g_failures;
  }
  if (g_failures != before) std::printf("[FAIL] %s\n", name.c_str());
  else if (g_print_passes) std::printf("[PASS] %s\n", name.c_str());
  std::fflush(stdout);
}

inline bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

// Occurrences of `sub` in `s` (overlapping ones counted).
inline size_t count(const std::string& s, const std::string& sub) {
  size_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + 1)) ++n;
  return n;
}
