"""Built-in actions: enqueue, allocate, backfill, preempt, reclaim (registered by `factory`)."""
