// The tests' main: doctest's, plus one rule. ctest runs every case on its own by name
// (doctest_discover_tests, --test-case=<name>), and a name that matches no case would pass
// with nothing run: CMake splits a name at ';' into two such entries, and 32 cases once
// went unrun that way. A run (not a query such as --list-test-cases) in which no test
// case passed the filters therefore fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

int g_cases_run = -1;  // test cases that passed the filters in the last run; -1: no run

struct RunCounter : doctest::IReporter {
  explicit RunCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_cases_run = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("run_counter", 1, RunCounter);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failures = context.run();
  if (context.shouldExit() || failures != 0) return failures;
  if (g_cases_run == 0) {
    std::fprintf(stderr, "no test case matched the filters: nothing was tested (a test name "
                         "with ';' is split by CMake; name cases without it)\n");
    return 1;
  }
  return 0;
}
