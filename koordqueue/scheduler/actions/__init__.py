"""Built-in actions: enqueue, allocate, backfill, preempt, reclaim, shuffle (see `factory`)."""
