"""The Slack front end. Imports point one way, so there is no cycle (pyproject.toml's contract):
`front` (slack-bolt in our loop, kept up) → `events` (Slack's events as the kit's messages and
taps) → `views` (App Home, agent sessions, modals) → `adapter` (the kit's ChatAdapter) →
`render` (Block Kit) → `base` (routes, timestamps, one Web API call, the sanitiser);
`settings` is what it reads of the settings. This module is light, so the composition root
can read `settings` without loading slack-bolt."""
