"""The contracts between the framework and its plugins and actions.

Plugins only register callbacks in `on_session_open`; they never drive the session. Actions
drive the session through the extension-point dispatchers and statements.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, ClassVar, Final

if TYPE_CHECKING:
    from koordqueue.scheduler.framework.session import Session


class ExtensionPoint(StrEnum):
    """Where plugins hook in; the value is the YAML switch that turns the hook off.

    A StrEnum so that dispatcher lookups hash at C speed.
    """

    JOB_ORDER = "enableJobOrder"
    QUEUE_ORDER = "enableQueueOrder"
    TASK_ORDER = "enableTaskOrder"
    PRE_PREDICATE = "enablePrePredicate"
    PREDICATE = "enablePredicate"
    NODE_ORDER = "enableNodeOrder"
    BEST_NODE = "enableBestNode"
    JOB_READY = "enableJobReady"
    JOB_PIPELINED = "enableJobPipelined"
    JOB_VALID = "enableJobValid"
    JOB_ENQUEUEABLE = "enableJobEnqueued"
    PREEMPTABLE = "enablePreemptable"
    RECLAIMABLE = "enableReclaimable"
    VICTIM_TASKS = "enableVictim"
    ALLOCATABLE = "enableAllocatable"
    OVERUSED = "enableOverused"
    JOB_STARVING = "enableJobStarving"
    PREEMPTIVE = "enablePreemptive"
    HIERARCHY = "enableHierarchy"
    HYPERNODE_ORDER = "enableHyperNodeOrder"
    HYPERNODE_GRADIENT = "enableHyperNodeGradient"

    @property
    def switch(self) -> str:
        """The YAML key; pre-predicate shares the predicate switch (as in Volcano)."""
        return "enablePredicate" if self is ExtensionPoint.PRE_PREDICATE else self.value

    @property
    def default_enabled(self) -> bool:
        """Unset switches mean enabled, except hierarchy (SPEC 3.6)."""
        return self is not ExtensionPoint.HIERARCHY


KNOWN_SWITCHES: Final = frozenset(p.switch for p in ExtensionPoint) | {"enableNamespaceOrder"}


class Vote(int, Enum):
    """Answers of vote-style extension points (pipelined, enqueueable)."""

    REJECT = -1
    ABSTAIN = 0
    PERMIT = 1


@dataclass(frozen=True, slots=True)
class ValidateResult:
    """Why a job is not valid (job-valid extension point)."""

    reason: str
    message: str


class Arguments(Mapping[str, object]):
    """A plugin's `arguments` map with typed getters that fall back to defaults on bad input."""

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, object] | None = None) -> None:
        self._raw: dict[str, object] = dict(raw or {})

    def __getitem__(self, key: str) -> object:
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._raw.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._raw) == dict(other)

    def get_float(self, key: str, default: float) -> float:
        """A number argument; strings like "1.5" are accepted."""
        value = self._raw.get(key)
        if not isinstance(value, int | float | str) or isinstance(value, bool):
            return default
        try:
            return float(value)
        except ValueError:
            return default

    def get_int(self, key: str, default: int) -> int:
        """An integer argument."""
        return int(self.get_float(key, default))

    def get_bool(self, key: str, default: bool) -> bool:
        """A boolean argument ("true"/"false" strings accepted)."""
        value = self._raw.get(key)
        if isinstance(value, bool):
            return value
        if isinstance(value, str):
            return value.strip().lower() == "true"
        return default

    def get_str(self, key: str, default: str) -> str:
        """A string argument."""
        value = self._raw.get(key)
        return default if value is None else str(value)


class Plugin(ABC):
    """A scheduler plugin: built from its arguments, registers callbacks per session."""

    name: str = ""
    quiet: ClassVar[bool] = False
    """True when the plugin's job-valid and close answers on a job depend on that job alone:
    a session over an indexed snapshot may then answer the jobs it does not write from its
    memo (`quiet.py`). Read off the plugin's own class, never a base's: a subclass that
    changes those answers must not inherit the promise."""

    def __init__(self, arguments: Arguments | None = None) -> None:
        self.arguments = arguments if arguments is not None else Arguments()

    @abstractmethod
    def on_session_open(self, session: Session) -> None:
        """Build per-session state and register callbacks on `session`."""

    def on_session_close(self, session: Session) -> None:  # noqa: B027 - optional hook
        """Publish per-session results (conditions, metrics); default: nothing."""


PluginBuilder = Callable[[Arguments], Plugin]


class Action(ABC):
    """One step of a session (enqueue, allocate, ...)."""

    name: str = ""
    quiet: ClassVar[bool] = False
    """True when, on a job it does not write, the action only asks job-valid (see
    `Plugin.quiet`; read off the action's own class)."""
    scans_valid: ClassVar[bool] = False
    """True when the action records the job-valid message of every job it scans."""

    @abstractmethod
    def execute(self, session: Session) -> None:
        """Run the action against the session state."""
