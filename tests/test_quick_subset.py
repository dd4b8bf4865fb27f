"""The quick subset: `pytest -m "not slow"` leaves out every test that starts a process (conftest.py refuses one in a
test not marked slow) and every test marked slow by the suite's timing."""

import subprocess
import sys

import pytest


def test_a_quick_test_that_starts_a_process_fails_naming_itself():
    with pytest.raises(AssertionError, match=r"test_a_quick_test_that_starts_a_process_fails_naming_itself starts a "
                                             r"process .*marked @pytest.mark.slow"):
        subprocess.run([sys.executable, "-c", "pass"])


@pytest.mark.slow
def test_a_slow_test_starts_its_processes():
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True).stdout == "42\n"
