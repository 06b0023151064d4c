"""The Telegram front end."""
