-- Plan the claim once per session, not on every call.
--
-- PL/pgSQL keeps a statement's plan for the session only when the plan
-- cache prefers the generic plan. For the claim it did not: the generic
-- plan's estimate (claim size unknown) came out above the custom plans'
-- average, so every call planned the statement again. Planning that
-- statement cost more than running it for a small claim: in `pgbench`,
-- one-task claims against a 100,000-task queue took 1.39 and 1.47 ms with
-- custom plans against 0.62 and 0.76 ms with the generic plan, and a
-- claim plus a completion used 1.72 and 1.82 ms of PostgreSQL CPU per job
-- against 0.94 and 1.09 ms (docs/queue-perf.md, session 5). The generic
-- plan is the same ordered walk of the queued-tasks index: the settings
-- of 0003 pin it whatever the statistics say, and
-- crates/mcq-queue/tests/conformance/claim_plan.rs checks both kinds.
ALTER FUNCTION mcq_claim(uuid, bigint, double precision)
    SET plan_cache_mode = force_generic_plan;
