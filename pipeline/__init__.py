"""Pure processing stages: book file -> chapters -> sentences -> batches -> audio -> audiobook.

Nothing here knows about the database or Celery; heavy imports (torch, ChatTTS) live only in
``pipeline.engine`` and are imported lazily.
"""
