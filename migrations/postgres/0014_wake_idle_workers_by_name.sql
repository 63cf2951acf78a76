-- Work announcements that wake only as many idle workers as the new work
-- needs, by name, instead of every listening worker (see the function's
-- comment). `idle_listening`: whether the worker heard announcements when
-- it last marked itself idle, so that naming it can wake it.
ALTER TABLE workers ADD COLUMN idle_listening boolean NOT NULL DEFAULT false;

-- The payload of a work announcement for `p_tasks` tasks just queued:
-- `wake:` and the ids of `p_tasks` + 1 idle workers that listen, whose
-- idle marks it takes, or '' (every listening worker wakes) when the fleet
-- has no more such idle workers than that, or the tasks are many.
--
-- Every idle worker woke at each announcement before, and all but one
-- found nothing: a single job submitted to 64 idle one-slot workers cost
-- 65 claims. Named, the job wakes two (one spare, in case one of them has
-- died since it marked itself idle). A mark is taken once: a named worker
-- that has since started working or stopped is never named again until it
-- marks itself idle anew, and one that found nothing marks itself again.
--
-- Marks are taken with SKIP LOCKED (a heartbeat or another announcement
-- holding a worker's row passes it over), the most recent first: the
-- likeliest to still be idle and listening. Workers that hear no
-- announcement (through a transaction-mode pool) mark themselves without
-- `idle_listening` and are never named; workers of an older release never
-- set it either, and wake at any payload but `idle:`.
CREATE OR REPLACE FUNCTION mcq_wake(p_tasks bigint)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET jit = off
AS $$
DECLARE
    named uuid[];
BEGIN
IF p_tasks < 1 OR p_tasks > 63 THEN
    RETURN '';
END IF;
SELECT array_agg(f.id) INTO named FROM (
    SELECT w.id FROM workers w
    WHERE w.idle_since IS NOT NULL AND w.idle_listening
    ORDER BY w.idle_since DESC
    LIMIT p_tasks + 1
    FOR UPDATE SKIP LOCKED
) f;
IF coalesce(cardinality(named), 0) <= p_tasks THEN
    RETURN '';
END IF;
UPDATE workers SET idle_since = NULL WHERE id = ANY(named);
RETURN 'wake:' || array_to_string(named, ',');
END
$$;
