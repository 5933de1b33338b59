"""The base classes of the compiler's user errors (bad expressions, schedules, layouts)."""

from .expr import TEError
from .ir import IRError
from .loop_nest import ScheduleError

#: Base classes of the compiler's user errors (bad expressions, schedules, layouts).
CompilerError = (TEError, ScheduleError, IRError)
