# Switchboard: the supervisor plus the claude CLI bundled in the claude-agent-sdk wheel.
#
#   docker build -t switchboard .
#   docker run -d --name switchboard -v switchboard-data:/data -p 8080:8080 \
#       --security-opt seccomp=deploy/seccomp-sandbox.json \
#       --security-opt apparmor=unconfined --security-opt systempaths=unconfined \
#       -e ANTHROPIC_API_KEY=... --stop-timeout 45 switchboard
#
# The security options let bubblewrap build each agent's sandbox inside the container: the
# seccomp profile is Docker's default plus the namespace and mount calls bubblewrap makes (no
# capability is added); without them Switchboard refuses to start agents and says why
# (`switchboard doctor`), unless SWITCHBOARD_ALLOW_UNISOLATED_AGENTS=true.
#
# BASE_IMAGE: any Debian bookworm image. Where no image registry is reachable (CI),
# deploy/ci/base-image builds one locally with debootstrap.
# See deploy/README.md for compose, systemd, Cloud Run and how stop/kill behave in a container.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# python3: Debian's 3.11; tini: PID 1 that forwards SIGTERM and reaps every orphan; bubblewrap:
# each agent's sandbox; git, ripgrep, curl, procps and bash: the shell agents work in;
# ca-certificates: TLS to the Anthropic and chat APIs.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv tini bubblewrap git ripgrep curl procps ca-certificates \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/switchboard/bin:$PATH

RUN groupadd --system --gid 10001 switchboard \
    && useradd --system --uid 10001 --gid switchboard --create-home \
        --home-dir /home/switchboard --shell /bin/bash switchboard \
    && mkdir -p /data \
    && chown switchboard:switchboard /data

WORKDIR /src
COPY pyproject.toml README.md ./
COPY deploy/constraints.txt ./deploy/constraints.txt
COPY bot ./bot
COPY commands ./commands
COPY store ./store
COPY supervisor ./supervisor
# Runtime dependencies only (no test extras), claude-agent-sdk pinned by deploy/constraints.txt:
# its wheel brings the claude CLI binary, linked onto PATH for `claude auth login`.
# EXTRAS: optional runtime extras, e.g. `postgresql` (psycopg) for workers on a shared
# PostgreSQL database (deploy/docker-compose.scale-out.yml; docs/postgresql.md).
ARG EXTRAS=""
RUN python3 -m venv /opt/switchboard \
    && pip install --no-compile -c deploy/constraints.txt ".${EXTRAS:+[$EXTRAS]}" \
    && ln -s "$(python -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("claude_agent_sdk").origin).parent / "_bundled" / "claude")')" \
        /usr/local/bin/claude \
    && claude --version \
    && switchboard --help >/dev/null \
    && rm -rf /src

# Everything Switchboard keeps (database, workspaces, launcher, log) lives in SWITCHBOARD_HOME.
# CLAUDE_CONFIG_DIR on the same volume keeps the CLI's login and its session transcripts, so
# agents resume their sessions after the container is replaced.
ENV SWITCHBOARD_HOME=/data \
    CLAUDE_CONFIG_DIR=/data/claude \
    PORT=8080 \
    SWITCHBOARD_HTTP_HOST=0.0.0.0
VOLUME ["/data"]
WORKDIR /data
USER 10001:10001
EXPOSE 8080

# /healthz answers while the supervisor's event loop does; `switchboard status --check` is the
# fallback when the listener is off (PORT empty).
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["/bin/sh", "-c", "if [ -n \"$PORT\" ]; then curl -fsS -o /dev/null http://127.0.0.1:$PORT/healthz; else switchboard status --check; fi"]

# SIGTERM drains running turns for SWITCHBOARD_SHUTDOWN_GRACE_S (default 30 s), then kills
# each agent (SIGTERM, SWITCHBOARD_KILL_GRACE_S, SIGKILL): give `docker stop` at least 45 s.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["switchboard", "run", "--headless"]
