"""`switchboard demo`: the whole flow in a minute with no key: the real claude CLI on a
scripted loopback model (model.py), driven by the operator's commands (tour.py)."""

from bot.demo.tour import cmd_demo

__all__ = ["cmd_demo"]
