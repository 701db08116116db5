"""tpu failures of cpu-passing tests in PyTorch's test files that tools/torch_suite.py --check accepts.

KNOWN_FAILURES maps "<file>::<Class>::<test>" (device parts of class and test names written DEV, as the report
prints them; a key may be a shell pattern) to (category, reason). Categories: wrong-result, missing-check, error,
other (tools/torch_suite.py). Classes of silent wrong results and missing checks being fixed in C++ are listed with
their class so the list can be regenerated once they land.
"""

KNOWN_FAILURES = {
}
