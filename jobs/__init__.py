"""Orchestration: the CLI, the Celery app and tasks, the use cases and the settings."""
