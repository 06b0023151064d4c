"""The Telegram front end: `adapter` (the kit's ChatAdapter over the Bot API), `render` (a Reply
as Telegram HTML), `front` (python-telegram-bot in our loop, polling or webhook, kept up),
`settings` (what of the settings it reads). Import the module you need: this one is light, so
the composition root can read `settings` without loading python-telegram-bot."""

import os

# Before python-telegram-bot is first imported, by any module of this package: RetryAfter's
# retry_after as a timedelta (the int form is deprecated and warns on every 429).
os.environ.setdefault("PTB_TIMEDELTA", "true")
