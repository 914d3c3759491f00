"""Settings shared by every test directory.

Hypothesis's per-example deadline (200 ms by default) is a timing assertion: on a loaded
2-core machine (the e2e control plane, a parallel run) an example that is slow for no fault
of the code fails as Flaky or DeadlineExceeded. Timing lives in bench/, not in unit tests,
so the deadline is off everywhere; each test's example count is unchanged.
"""

from hypothesis import settings

settings.register_profile("koordqueue", deadline=None)
settings.load_profile("koordqueue")
