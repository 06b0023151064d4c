"""Every error the supervisor raises. Each says what went wrong (`what`) and what the operator
can do about it (`fix`), so the command dispatcher turns any of them into text in one place.

    SupervisorError(message, what, fix)   root; `usage` set: the request's form was wrong
    ├── ConfigError                       bad configuration (file, environment)
    ├── InvalidRequest                    a request refused for its form or values (usage)
    │                                     (commands.base.UsageError, bad arguments, is one)
    │   └── BadSchedule(message, fix)     a schedule's expression, words or zone is wrong
    ├── UnknownAgent(ref)                 no agent by that name or id
    ├── AgentExists(name)                 a live agent already has that name
    ├── AgentNotRunning(name, state, action)  the action needs an agent in another state
    ├── UnknownEscalation(esc_id)         no question or request by that id
    ├── AlreadyAnswered(row)              someone answered first (who, via, verdict)
    ├── UnknownOperator(who)              no operator platform:user_id
    ├── Halted(halt)                      the kill switch is on (who, via)
    ├── LimitExceeded(limit, fix)         a guardrail refused (fleet size, rate, memory ...)
    ├── ShuttingDown                      the supervisor no longer takes work
    ├── StoreFailed(cause)                the state database failed underneath
    ├── StorageTrouble(what, fix)         storage is known broken: new work is refused
    ├── AgentFailed(exit_code, stderr_tail)  the CLI process failed
    ├── UnknownRepo(name)                 no registered repository by that name
    ├── RepoFailed(what, detail)          a git operation on a repository failed
    ├── ResumeFailed(name, reason)        its session could not be resumed (resume failed)
    ├── FileRefused(what, fix)            a file sent to or from an agent was refused (too
    │                                     big, a name or path that leaves the workspace)
    └── SignInRefused(what, fix)          a web sign-in link, session or API token does not
                                          work (unknown, used, expired, revoked)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from store.escalations import EscalationRow


class SupervisorError(Exception):
    """Root of the supervisor's exceptions. `str()` is the technical message (logs, the
    model); `what` is the sentence for the operator and `fix` the next step, if any."""

    usage: ClassVar[bool] = False  # the request's form was wrong: show how it should look

    def __init__(self, message: str, *, what: str | None = None, fix: str = "") -> None:
        super().__init__(message)
        self.what = message if what is None else what
        self.fix = fix


class ConfigError(SupervisorError):
    def __init__(self, message: str) -> None:
        super().__init__(message, what=f"Configuration problem: {message}.",
                         fix="Run `switchboard doctor`.")


class InvalidRequest(SupervisorError):
    """Refused for its form or values; `what` is the reason and the front end adds the usage."""

    usage: ClassVar[bool] = True

    def __init__(self, message: str) -> None:
        super().__init__(message)


class BadSchedule(InvalidRequest):
    """A schedule's time (cron expression, plain words, time zone) is wrong: what, and how
    to say it instead (shown as what and fix, not with the command's usage line)."""

    usage: ClassVar[bool] = False

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


class UnknownAgent(SupervisorError):
    def __init__(self, ref: str) -> None:
        super().__init__(f"no agent named or numbered {ref!r}",
                         what=f"There is no agent {ref!r}.",
                         fix="Send /agents all to see every agent's name and id.")
        self.ref = ref


class AgentExists(SupervisorError):
    def __init__(self, name: str) -> None:
        super().__init__(f"an agent named {name!r} is already running",
                         what=f"An agent named {name!r} is already running.",
                         fix=f"Pick another name, or /kill {name} first.")
        self.name = name


class AgentNotRunning(SupervisorError):
    def __init__(self, name: str, state: str, action: str) -> None:
        super().__init__(f"cannot {action} agent {name!r}: it is {state}",
                         what=f"Cannot {action} {name}: it is {state}.",
                         fix=f"Send /status {name} to see what it is doing.")
        self.name = name
        self.state = state
        self.action = action


class UnknownEscalation(SupervisorError):
    def __init__(self, esc_id: str) -> None:
        super().__init__(f"no escalation with id {esc_id!r}",
                         what=f"There is no request or question {esc_id!r}.",
                         fix="Send /pending to see what is waiting, with ids.")
        self.esc_id = esc_id


class AlreadyAnswered(SupervisorError):
    def __init__(self, row: EscalationRow) -> None:
        who = row.answered_by or "someone"
        via = f" via {row.answered_via}" if row.answered_via else ""
        verdict = (row.answer or {}).get("decision", row.status)
        message = f"{row.id} was already {row.status} by {who}{via} ({verdict})"
        super().__init__(message, what=f"Too late: {message}.", fix="Nothing was changed.")
        self.row = row


class UnknownOperator(SupervisorError):
    def __init__(self, who: str) -> None:
        super().__init__(f"no operator {who}", what=f"{who} is not an operator.",
                         fix="Send /operators to list them.")
        self.who = who


class Halted(SupervisorError):
    def __init__(self, halt: dict[str, object]) -> None:
        who = halt.get("by", "someone")
        via = halt.get("via", "?")
        message = f"the kill switch is on (triggered by {who} via {via}): nothing new runs"
        super().__init__(message, what=f"Refused: {message}.",
                         fix="An admin can send /killswitch off confirm once it is safe.")
        self.halt = halt


class LimitExceeded(SupervisorError):
    """A guardrail refused: `limit` says what tripped, `fix` what the operator can do."""

    def __init__(self, limit: str, fix: str = "") -> None:
        super().__init__(limit + (f" {fix}" if fix else ""),
                         what=f"Refused by a guardrail: {limit}", fix=fix)
        self.limit = limit


class ShuttingDown(SupervisorError):
    def __init__(self) -> None:
        super().__init__("the supervisor is shutting down and takes no new work",
                         what="Switchboard is shutting down and takes no new work.",
                         fix="Wait for it to restart, then try again.")


class StoreFailed(SupervisorError):
    """The store raised underneath a supervisor call; `cause` is the store's own error."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause), what=f"The state database failed: {cause}.",
                         fix="Check free disk space and `switchboard doctor`; nothing was "
                             "changed.")
        self.cause = cause


class StorageTrouble(SupervisorError):
    """Storage is known to be broken (disk full, read-only, the database file deleted or
    replaced): new work is refused rather than acknowledged and lost."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"storage trouble: {what}", what=f"Not done: {what}", fix=fix)


class AgentFailed(SupervisorError):
    def __init__(self, exit_code: int | None, stderr_tail: str, message: str = "") -> None:
        text = message or f"the claude process exited with code {exit_code}"
        if stderr_tail:
            text += f"; stderr: {stderr_tail}"
        super().__init__(text)
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail


class UnknownRepo(SupervisorError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no repository named {name!r}",
                         what=f"There is no repository {name!r}.",
                         fix="Send /repo list to see them, or /repo add <name> <url> first.")
        self.name = name


class RepoFailed(SupervisorError):
    """A git operation failed; `detail` is git's own words (never a credential)."""

    def __init__(self, what: str, detail: str = "", fix: str = "") -> None:
        super().__init__(f"{what}: {detail}" if detail else what,
                         what=f"{what}." + (f" git said: {detail[-500:]}" if detail else ""),
                         fix=fix)
        self.detail = detail


class ResumeFailed(SupervisorError):
    """An agent's Claude session could not be resumed: the transcript is neither on disk nor in
    the bucket. Deterministic, so nothing retries it; the operator chooses what happens."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"the session of agent {name!r} cannot be resumed: {reason}",
                         what=f"{name}'s session could not be resumed: {reason}.",
                         fix="Answer its question (/pending) to start it fresh with a summary "
                             f"of its work, or /kill {name}.")
        self.name = name
        self.reason = reason


class FileRefused(SupervisorError):
    """A file into or out of an agent's workspace was refused: too big, a name with a path in
    it, a path outside the workspace or through a symbolic link. Nothing was written or sent."""

    def __init__(self, what: str, fix: str = "") -> None:
        super().__init__(what, what=what, fix=fix)


class SignInRefused(SupervisorError):
    """A sign-in link, browser session or API token that does not work: `what` says which
    way (used, expired, revoked), `fix` how to get a new one. Never carries the secret."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what, what=what, fix=fix)
