"""Persistence: the job table (SQLAlchemy), its migrations, and the artifact files on disk."""
