"""Reservation writes: `leases` (create/confirm, update, cancel, lifecycle ticks), `queue` (on-demand queue,
instance requests), `spot` (preemption), `notify` (outbox and delivery), `windows` (time-window parsing)."""
