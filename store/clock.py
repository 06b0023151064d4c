"""The store's time source: a `Now` callable stamps every row, the system clock unless injected.

store/ cannot import supervisor/ (imports point bot -> commands -> supervisor -> store), so it
has this seam of its own: the composition root passes the supervisor clock's `now` here."""

from __future__ import annotations

import time
from collections.abc import Callable

Now = Callable[[], float]  # epoch seconds

# The one place in store/ that reads the system time: the default of every `now`.
system_now: Now = time.time
