"""What the retries across a leader election go by: whether a target that answered 503 may
still be there, and what each attempt got (for the debug log and the final error)."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from .._errors import (
    JetStreamError,
    NoRespondersError,
    PermissionDeniedError,
    RequestTimeoutError,
)

__all__ = ["Tries", "probe"]


async def probe(still_there: Callable[[], Awaitable[bool]]) -> bool:
    """Whether a target that answered 503 may still be there (keep retrying): only a definite
    answer that it is gone says no."""
    try:
        return await still_there()
    except (NoRespondersError, RequestTimeoutError):
        return True  # the meta leader is being elected too: keep waiting
    except PermissionDeniedError:
        return True  # a least-privilege user may not look: wait for the deadline
    except JetStreamError:
        return False


class Tries:
    """What each attempt of one retried request got: for the debug log and the final error."""

    def __init__(self, what: str) -> None:
        self._what = what or "request"
        self._outcomes: list[str] = []

    def __len__(self) -> int:
        return len(self._outcomes)

    @property
    def last(self) -> str:
        return self._outcomes[-1]

    def note(self, error: JetStreamError) -> None:
        if isinstance(error, RequestTimeoutError):
            self._outcomes.append("timeout")
        elif isinstance(error, NoRespondersError):
            self._outcomes.append("503 no responders")
        else:
            self._outcomes.append(f"unavailable ({error.err_code or error.code})")

    def explain(self, error: JetStreamError, elapsed: float) -> None:
        """Make the final ``error`` (kept: same class and codes) say what the retries got when
        there were any: ``no reply within 20.3s (5 attempts: 503 no responders x2, timeout x3)``."""
        if len(self._outcomes) > 1:
            error.description = (
                f"{self._what}: {_HEADLINES.get(self.last, 'unavailable')} within "
                f"{math.floor(elapsed * 10) / 10:.1f}s "  # never more than it waited
                f"({len(self._outcomes)} attempts: {self._summary()})"
            )
            error.args = (error.description,)

    def _summary(self) -> str:
        runs: list[tuple[str, int]] = []
        for outcome in self._outcomes:
            if runs and runs[-1][0] == outcome:
                runs[-1] = (outcome, runs[-1][1] + 1)
            else:
                runs.append((outcome, 1))
        return ", ".join(o if n == 1 else f"{o} x{n}" for o, n in runs)


_HEADLINES = {"timeout": "no reply", "503 no responders": "no responders"}
