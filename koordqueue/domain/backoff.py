"""One exponential back-off schedule, with the parameters each retry loop needs.

Three loops wait after failures: an API call retried a few times (`kube.api.with_retries`),
a list/watch reconnecting for as long as it takes (`kube.informer`), and a unit that failed
downstream waiting to be offered again (`job_extension.backoff_delay`, Koord-Queue's unit
back-off). They differ in how long and how often they try, not in how the wait grows: base,
doubling per failure, an optional cap and jitter.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """`base * 2**failures` seconds, at most `cap`, then ± `jitter` (a fraction) at random."""

    base: float
    cap: float = math.inf
    jitter: float = 0.0

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after `failures` earlier failures (0: the first wait is `base`)."""
        seconds = min(self.base * 2 ** min(max(failures, 0), 64), self.cap)
        if self.jitter:
            seconds *= 1 + (rng or random.Random()).uniform(-self.jitter, self.jitter)
        return float(seconds)
