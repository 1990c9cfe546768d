"""chime's topic names (Go: schema.Topics)."""

DEFAULT_PREFIX = "chime."
"""Put in front of every topic name; several installations can share a cluster."""

HEADER_COMMAND = "chime-command"
"""The header naming a command's kind ("upsert", "cancel", ...) on job-commands."""


def job_commands(prefix: str = "") -> str:
    """The topic the scheduler reads job commands from."""
    return (prefix or DEFAULT_PREFIX) + "job-commands"
