"""Bash command lines read the way bash would, to list every command a line may run."""

from supervisor.guard.shell.analysis import analyse
from supervisor.guard.shell.parser import canonical, parse
from supervisor.guard.shell.patterns import (
    Stage,
    arg_forms,
    downstream,
    match_anywhere,
    match_prefix,
)
from supervisor.guard.shell.risky import git_config_writes
from supervisor.guard.shell.segments import Analysis, Kind, Segment
from supervisor.guard.shell.state import normpath
from supervisor.guard.shell.syntax import Script, ShellParseError

__all__ = [
    "Analysis",
    "Kind",
    "Script",
    "Segment",
    "ShellParseError",
    "Stage",
    "analyse",
    "arg_forms",
    "canonical",
    "downstream",
    "git_config_writes",
    "match_anywhere",
    "match_prefix",
    "normpath",
    "parse",
]
