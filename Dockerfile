# Switchboard: the supervisor plus the claude CLI bundled in the claude-agent-sdk wheel.
#
#   docker build -t switchboard .
#   docker run -d --name switchboard -v switchboard-data:/data \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined \
#       -e ANTHROPIC_API_KEY=... --stop-timeout 45 switchboard
#
# The three --security-opt let bubblewrap build each agent's sandbox inside the container (user
# and pid namespaces, a fresh /proc); without them Switchboard refuses to start agents and says
# why (`switchboard doctor`), unless SWITCHBOARD_ALLOW_UNISOLATED_AGENTS=true.
#
# See deploy/README.md for compose, systemd and how stop/kill behave in a container.
FROM python:3.11-slim

# tini: PID 1 that forwards SIGTERM to Switchboard and reaps every orphan in the container.
# git: for agents' work and repositories; procps: ps/kill for agents' shell commands and debugging;
# ca-certificates: TLS to the Anthropic API and the chat APIs; bubblewrap: each agent's sandbox.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini git procps ca-certificates bubblewrap \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN groupadd --system --gid 10001 switchboard \
    && useradd --system --uid 10001 --gid switchboard --create-home \
        --home-dir /home/switchboard --shell /bin/bash switchboard \
    && mkdir -p /data \
    && chown switchboard:switchboard /data

WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY commands ./commands
COPY store ./store
COPY supervisor ./supervisor
# A regular (non-editable) install; the claude-agent-sdk wheel brings the claude CLI binary.
# The symlink puts that CLI on PATH for `claude auth login` / `claude --version` in the container;
# Switchboard itself finds the bundled binary without it.
RUN pip install . \
    && ln -s "$(python -c 'import claude_agent_sdk, pathlib; print(pathlib.Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude")')" \
        /usr/local/bin/claude \
    && claude --version \
    && switchboard --help >/dev/null \
    && rm -rf /src

# Everything Switchboard keeps (database, workspaces, launcher, log) lives in SWITCHBOARD_HOME.
# CLAUDE_CONFIG_DIR on the same volume keeps the CLI's login and its session transcripts, so
# agents resume their sessions (resume=<session_id>) after the container is replaced.
ENV SWITCHBOARD_HOME=/data \
    CLAUDE_CONFIG_DIR=/data/claude
VOLUME ["/data"]
WORKDIR /data
USER switchboard

# `switchboard status --check` exits 0 while the supervisor holds the data directory's lock,
# 1 if not. (Not `status | grep -q`: grep stops reading at the first match, and status then
# wrote into a closed pipe every 30 s.)
HEALTHCHECK --interval=30s --timeout=15s --start-period=30s --retries=3 \
    CMD switchboard status --check

# SIGTERM drains running turns for SWITCHBOARD_SHUTDOWN_GRACE_S (default 30 s), then kills
# each agent (SIGTERM, SWITCHBOARD_KILL_GRACE_S, SIGKILL): give `docker stop` at least 45 s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["switchboard", "run", "--headless"]
