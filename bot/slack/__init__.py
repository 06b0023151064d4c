"""The Slack front end."""
