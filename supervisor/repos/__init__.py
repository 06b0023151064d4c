"""Repositories and agents' worktrees (docs/repositories.md): the manager, git, siblings."""

from supervisor.repos.manager import GcReport, Repos, Wall

__all__ = ["GcReport", "Repos", "Wall"]
