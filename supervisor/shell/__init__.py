"""Bash command lines read the way bash would, to list every command a line may run."""

from supervisor.shell.analysis import analyse
from supervisor.shell.parser import canonical, parse
from supervisor.shell.patterns import Stage, arg_forms, downstream, match_anywhere, match_prefix
from supervisor.shell.risky import git_config_writes
from supervisor.shell.segments import Analysis, Kind, Segment
from supervisor.shell.state import normpath
from supervisor.shell.syntax import Script, ShellParseError

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
