"""Options that make a read-only looking program run another program or write a file: git's."""

from __future__ import annotations

from collections.abc import Sequence

# git options (before the subcommand) that take a value in the next word
_GIT_VALUED = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                         "--super-prefix", "--exec-path", "--list-cmds"})
# Before the subcommand: configuration (core.pager, diff.external, alias.*, core.fsmonitor...),
# where git finds its own programs, and the pager.
_GIT_GLOBAL = {
    "-c": "git -c sets configuration, which can name programs git runs (core.pager, "
          "diff.external, core.fsmonitor)",
    "--config-env": "git --config-env sets configuration, which can name programs git runs",
    "--exec-path": "git --exec-path chooses where git finds the programs it runs",
    "-p": "git -p runs a pager",
    "--paginate": "git --paginate runs a pager",
}
# Anywhere after the subcommand (long options; git accepts unique abbreviations).
_GIT_LONG = {
    "--ext-diff": "runs the external diff program (diff.external, GIT_EXTERNAL_DIFF)",
    "--textconv": "runs textconv filters named in configuration",
    "--output": "writes its output to a file",
    "--exec": "runs a command",
    "--upload-pack": "runs the given program as upload-pack",
    "--receive-pack": "runs the given program as receive-pack",
    "--extcmd": "runs the given diff command",
    "--open-files-in-pager": "runs the given pager",
    "--template": "copies hooks from a template directory",
    "--tool": "runs a diff or merge tool",
}
# Short options that do the same, per subcommand.
_GIT_SHORT = {
    "o": ({"log", "show", "diff", "whatchanged", "format-patch", "range-diff"}, "--output"),
    "O": ({"grep"}, "--open-files-in-pager"),
    "x": ({"rebase"}, "--exec"),
    "u": ({"clone", "archive"}, "--upload-pack"),
    "t": ({"difftool", "mergetool"}, "--tool"),
}
_GIT_SHORT_VALUED = frozenset("SGLnUMCBlOIXDRAbc")
_GIT_RUNS = {("submodule", "foreach"), ("bisect", "run")}


def git_subcommand(args: Sequence[str]) -> int:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if args[i] in _GIT_VALUED else 1
    return i


def git_problems(args: Sequence[str]) -> list[str]:
    """Why a git command must be asked about even where a rule allows it ('git log -p')."""
    found = []
    sub = git_subcommand(args)
    for a in args[:sub]:
        key = a.split("=", 1)[0]
        if key in _GIT_GLOBAL:
            found.append(_GIT_GLOBAL[key])
    name = args[sub] if sub < len(args) else ""
    rest = args[sub + 1:]
    for a in rest:
        if a == "--":
            break
        key = a.split("=", 1)[0]
        if key.startswith("--") and len(key) > 3:
            # an exact name or an abbreviation (git accepts unique ones: --ext for --ext-diff)
            hit = next((opt for opt in _GIT_LONG if opt.startswith(key)), None)
            hit = "--output" if key.startswith("--output-directory") else hit
            if hit is not None:
                found.append(f"git {name} {hit} {_GIT_LONG[hit]}")
        elif key.startswith("-") and not key.startswith("--"):
            for ch in key[1:]:
                subs, long = _GIT_SHORT.get(ch, (set(), ""))
                if name in subs:
                    found.append(f"git {name} -{ch} {_GIT_LONG[long]}")
                if ch in _GIT_SHORT_VALUED:  # the rest of the word is its value: -Sfoo
                    break
    if rest and (name, rest[0]) in _GIT_RUNS:
        found.append(f"git {name} {rest[0]} runs a command")
    return list(dict.fromkeys(found))


_CONFIG_WRITES = frozenset({"--add", "--unset", "--unset-all", "--replace-all", "--rename-section",
                            "--remove-section", "--edit", "-e", "set", "unset", "rename-section",
                            "remove-section", "edit"})
_CONFIG_READS = frozenset({"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l",
                           "get", "list"})
_CONFIG_VALUED = frozenset({"--file", "-f", "--blob", "--type", "--default", "--comment",
                            "--value"})


def git_config_writes(args: Sequence[str]) -> bool:
    """Whether a git command is 'git config' setting something (git config k v, --add...)."""
    sub = git_subcommand(args)
    if sub >= len(args) or args[sub] != "config":
        return False
    rest, positional, i = args[sub + 1:], 0, 0
    while i < len(rest):
        key = rest[i].split("=", 1)[0]
        if key in _CONFIG_WRITES:
            return True
        if key in _CONFIG_READS:
            return False
        if key in _CONFIG_VALUED and "=" not in rest[i]:
            i += 1
        elif not key.startswith("-"):
            positional += 1
        i += 1
    return positional != 1  # git config NAME reads it; NAME VALUE (or nothing we know) sets it
