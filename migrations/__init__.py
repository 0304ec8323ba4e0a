"""Alembic migrations for the job table (a package so `tts-jobs db upgrade` finds them when installed)."""
