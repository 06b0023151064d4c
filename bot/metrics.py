"""/metrics: the supervisor's counts (supervisor.api's StatsView), each front end's link and
outbox, and the event loop's lag, in the Prometheus text format, from a registry of our own."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.kit.links import Link, LinkState
from supervisor.api import GatewayView, StatsView

PREFIX = "switchboard_"


@dataclass(frozen=True, slots=True)
class LinkSample:
    platform: str
    state: LinkState
    outbox_depth: int
    rate_limited: int
    unavailable: int
    last_ack_s: float | None

    @classmethod
    def of(cls, link: Link) -> LinkSample:
        s = link.stats
        return cls(link.platform, link.state, link.outbox_depth, s.rate_limited, s.unavailable,
                   s.last_ack_s)


@dataclass(frozen=True, slots=True)
class Sample:
    """Everything one scrape shows, taken at once (the collector itself never awaits)."""

    stats: StatsView
    links: tuple[LinkSample, ...]
    loop_lag_s: float


def _gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))


def _counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, doc, labels=list(labels))


def supervisor_families(stats: StatsView) -> Iterator[Metric]:
    agents = _gauge("agents", "Agents by state (ended ones too).", ("state",))
    for state, n in stats.agents:
        agents.add_metric([state], n)
    yield agents
    turns = _counter("turns", "Turns that ended, by outcome.", ("outcome",))
    for outcome, n in stats.turns:
        turns.add_metric([outcome], n)
    yield turns
    cost = _counter("cost_usd", "Spend in US dollars, by agent and model.",
                    ("agent", "agent_id", "model"))
    for cell in stats.costs:
        cost.add_metric([cell.agent, cell.agent_id, cell.model], cell.cost_usd)
    yield cost
    yield GaugeMetricFamily(PREFIX + "escalations_open", "Open questions and permission "
                            "requests.", value=stats.open_escalations)
    yield GaugeMetricFamily(PREFIX + "escalation_oldest_age_seconds", "Age of the oldest open "
                            "escalation (0 when none is open).",
                            value=stats.oldest_escalation_age_s)
    yield GaugeMetricFamily(PREFIX + "kill_switch_engaged", "1 while the kill switch has "
                            "Switchboard halted.", value=1 if stats.halted else 0)
    yield GaugeMetricFamily(PREFIX + "bus_depth", "Messages waiting on the agent bus.",
                            value=stats.bus_depth)
    runs = _counter("schedule_runs", "Scheduled runs, by outcome.", ("outcome",))
    for outcome, n in stats.schedule_runs:
        runs.add_metric([outcome], n)
    yield runs
    if stats.gateway is not None:
        yield from gateway_families(stats.gateway)


def gateway_families(gw: GatewayView) -> Iterator[Metric]:
    """The model gateway (docs/gateway.md): requests by outcome, tokens, cost, streams."""
    yield GaugeMetricFamily(PREFIX + "gateway_active", "1 while agents reach the model "
                            "through the gateway (the key stays in the supervisor).",
                            value=1 if gw.active else 0)
    yield CounterMetricFamily(PREFIX + "gateway_refused_unknown_token", "Model requests "
                              "refused for a token that is not, or no longer, valid.",
                              value=gw.refused_unknown)
    labels = ("agent", "agent_id")
    requests = _counter("gateway_requests", "Model requests at the gateway, by agent and "
                        "outcome (ok, refused_rate, refused_budget, refused_halted, revoked, "
                        "upstream_error, upstream_<status>).", (*labels, "outcome"))
    tokens = _counter("gateway_tokens", "Tokens in the responses the gateway forwarded, by "
                      "kind (input, output, cache_read, cache_write).", (*labels, "kind"))
    cost = _counter("gateway_cost_usd", "What the forwarded responses cost at list prices.",
                    labels)
    streams = _gauge("gateway_streams", "Model responses in flight.", labels)
    for agent_id, c in gw.agents:
        ids = [c.name, agent_id]
        for outcome, n in sorted(c.requests.items()):
            requests.add_metric([*ids, outcome], n)
        for kind, n in (("input", c.input_tokens), ("output", c.output_tokens),
                        ("cache_read", c.cache_read_tokens),
                        ("cache_write", c.cache_write_tokens)):
            tokens.add_metric([*ids, kind], n)
        cost.add_metric(ids, c.cost_usd)
        streams.add_metric(ids, c.streams)
    yield from (requests, tokens, cost, streams)


def link_families(links: tuple[LinkSample, ...]) -> Iterator[Metric]:
    up = _gauge("frontend_connected", "1 while the front end is connected to its platform.",
                ("frontend",))
    ready = _gauge("frontend_ready", "1 while the front end is connected, retrying or on standby.",
                   ("frontend",))
    depth = _gauge("chat_outbox_depth", "Chat calls queued or being sent.", ("frontend",))
    limited = _counter("chat_rate_limited", "The platform's 429s, each waited out.",
                       ("frontend",))
    unavailable = _counter("chat_unavailable", "Chat calls that failed for a timeout, a 5xx "
                           "or a refused connection, each retried.", ("frontend",))
    ack = _gauge("chat_ack_seconds", "How long the platform took to answer the last chat "
                 "call.", ("frontend",))
    for link in links:
        labels = [link.platform]
        up.add_metric(labels, 1 if link.state == LinkState.CONNECTED else 0)
        ready.add_metric(labels, 1 if link.state.ready else 0)
        depth.add_metric(labels, link.outbox_depth)
        limited.add_metric(labels, link.rate_limited)
        unavailable.add_metric(labels, link.unavailable)
        if link.last_ack_s is not None:
            ack.add_metric(labels, link.last_ack_s)
    yield from (up, ready, depth, limited, unavailable, ack)


class _SampleCollector(Collector):
    def __init__(self) -> None:
        self.sample: Sample | None = None

    def describe(self) -> list[Metric]:
        return []  # nothing to check at registration: the families come with each sample

    def collect(self) -> Iterator[Metric]:
        sample = self.sample
        if sample is None:
            return
        yield from supervisor_families(sample.stats)
        yield from link_families(sample.links)
        yield GaugeMetricFamily(PREFIX + "event_loop_lag_seconds", "How late the event loop "
                                "ran a timer, at the last measurement.", value=sample.loop_lag_s)


class Metrics:
    """A registry of our own (not prometheus_client's global one, which would also carry
    whatever a library registers there), rendered from one sample per scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._collector = _SampleCollector()
        self.registry.register(self._collector)

    def render(self, sample: Sample) -> bytes:
        # No await between setting the sample and rendering it: scrapes cannot interleave.
        self._collector.sample = sample
        return generate_latest(self.registry)


__all__ = ["LinkSample", "Metrics", "Sample"]
