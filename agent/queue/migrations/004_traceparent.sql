-- The W3C trace context the core pushed with an action, given to the kind's
-- command as $TRACEPARENT (docs/architecture.md, "Traces"). Empty when
-- tracing is off, and for an action a core of an earlier release pushed.
-- Not content.
ALTER TABLE actions ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
