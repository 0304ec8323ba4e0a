"""The cluster: the Celery app and its thin tasks, the messages between stages, the Redis
transport, worker processes and how they start, Flower, and the reconciler's sweep."""
