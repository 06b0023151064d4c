"""Errors raised by the supervisor. The command dispatcher turns each into operator text.

    SupervisorError                root
    ├── ConfigError                bad configuration (file, environment)
    ├── UnknownAgent(ref)          no agent by that name or id
    ├── AgentExists(name)          a live agent already has that name
    ├── InvalidRequest             a request the supervisor refuses (bad cwd, bad name, bad state)
    ├── AgentNotRunning(name, state)  the action needs a live agent
    ├── ShuttingDown               the supervisor no longer takes work
    └── AgentFailed(exit_code, stderr_tail)  the CLI process failed
"""

from __future__ import annotations


class SupervisorError(Exception):
    """Root of the supervisor's exceptions."""


class ConfigError(SupervisorError):
    pass


class UnknownAgent(SupervisorError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"no agent named or numbered {ref!r}")
        self.ref = ref


class AgentExists(SupervisorError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an agent named {name!r} is already running")
        self.name = name


class InvalidRequest(SupervisorError):
    pass


class AgentNotRunning(SupervisorError):
    def __init__(self, name: str, state: str, action: str) -> None:
        super().__init__(f"cannot {action} agent {name!r}: it is {state}")
        self.name = name
        self.state = state
        self.action = action


class ShuttingDown(SupervisorError):
    def __init__(self) -> None:
        super().__init__("the supervisor is shutting down and takes no new work")


class AgentFailed(SupervisorError):
    def __init__(self, exit_code: int | None, stderr_tail: str, message: str = "") -> None:
        text = message or f"the claude process exited with code {exit_code}"
        if stderr_tail:
            text += f"; stderr: {stderr_tail}"
        super().__init__(text)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
